#pragma once
#include "rlx/lir.h"

namespace rlx {
// plan-memory: liveness per buffer, in-place reuse for elementwise kernels whose input dies there,
// then first-fit offsets in one arena (64-byte aligned). Fills offset/def/last/arena_bytes.
void plan_memory(LirProgram& p);
}  // namespace rlx
