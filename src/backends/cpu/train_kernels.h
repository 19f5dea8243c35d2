// [issue 6 training] Native cpu kernels the training step needs (train_kernels.cpp): a typed
// evaluator for fused bodies that mix f32 with bool/i32/i64 (compare, select, convert, logic, as
// in ReLU's backward or the one-hot of a loss), and f32 reductions / broadcast_in_dim / argmax.
// Hooks: fused.cpp tries fused_kernel_mixed before the chunked reference evaluator; generic.cpp's
// find_kernel falls back to find_train_kernel for ops it has no entry for.
#pragma once
#include <vector>

#include "backends/cpu/kernels.h"

namespace rlx::cpu {

// Evaluates `body` into `out` when every value is f32/bool/i32/i64 and every op is supported;
// returns false (having written nothing) otherwise.
bool fused_kernel_mixed(const Graph& body, const std::vector<Tensor>& in, Tensor& out);
// reduce_sum/reduce_max/reduce_min (f32), argmax/argmin (f32), broadcast_in_dim (any dtype);
// nullptr for the rest. The kernels fall back to generic_kernel on layouts they do not cover.
KernelFn find_train_kernel(OpKind op, DType dt);

}  // namespace rlx::cpu
