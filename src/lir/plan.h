#pragma once
#include <vector>

#include "rlx/lir.h"

namespace rlx {
// plan-memory: liveness per buffer, in-place reuse for elementwise kernels whose input dies there,
// then first-fit offsets in one arena (64-byte aligned). Fills offset/def/last/arena_bytes.
void plan_memory(LirProgram& p);
// Removes the kernels marked in `dead` (indexed like p.kernels), keeping the schedule order. The
// backends' LIR rewrites mark the kernels they fold away and compact once; buffers are not re-planned
// here (call plan_memory when the rewriting is done).
void erase_kernels(LirProgram& p, const std::vector<bool>& dead);
}  // namespace rlx
