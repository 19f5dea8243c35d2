// [issue 6 training] Native cpu kernels the training step needs (train_kernels.cpp): f32
// reductions / broadcast_in_dim / argmax, and the schedule rewrite that fuses the step's
// elementwise tails into GEMM epilogues. Hooks: generic.cpp's find_kernel falls back to
// find_train_kernel for ops it has no entry for; executable.cpp runs fuse_train_lir. (Fused bodies
// mixing f32 with bool/i32/i64 run on fused.cpp's typed evaluator, fused_kernel_typed.)
#pragma once
#include <vector>

#include "backends/cpu/kernels.h"

namespace rlx::cpu {

// reduce_sum/reduce_max/reduce_min (f32), argmax/argmin (f32), broadcast_in_dim (any dtype);
// nullptr for the rest. The kernels fall back to generic_kernel on layouts they do not cover.
KernelFn find_train_kernel(OpKind op, DType dt);
// cpu-only training rewrites of a lowered schedule (run by the executable after fuse_cpu_lir):
// a 2-D f32 dot_general whose only reader is the next elementwise step takes that step into its
// GEMM epilogue (gemm.cpp, train_gemm): bias add (+ ReLU) after X·W, ReLU's backward mask
// select(h > 0, dH·Wᵀ, 0), and the plain SGD update W - lr·(Xᵀ·dH) written straight into the
// new weight. Re-plans memory when it changed anything. RLX_CPU_FUSE=0 turns it off (with the rest).
void fuse_train_lir(LirProgram& p);

}  // namespace rlx::cpu
