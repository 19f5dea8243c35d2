// Elementwise reductions of host buffers, for the in-process transport (MPI reduces itself).
#pragma once
#include <cstdint>

#include "dist/communicator.h"

namespace rlx::dist {

// acc[i] = op(acc[i], x[i]) for `count` elements of `dt` (numeric dtypes; c64: sum only).
void reduce_into(void* acc, const void* x, int64_t count, DType dt, ReduceOp op);

}  // namespace rlx::dist
