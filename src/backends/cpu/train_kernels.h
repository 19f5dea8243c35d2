// Native cpu kernels the training step needs (train_kernels.cpp): f32
// reductions / broadcast_in_dim / argmax, and the schedule rewrite that fuses the step's
// elementwise tails into GEMM epilogues. Hooks: generic.cpp's find_kernel falls back to
// find_train_kernel for ops it has no entry for; executable.cpp runs fuse_train_lir. (Fused bodies
// mixing f32 with bool/i32/i64 run on fused.cpp's typed evaluator, fused_kernel_typed.)
#pragma once
#include <memory>
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
// new weight. Then a bias gradient reduce_sum(dH, axis 0) whose dH is also the B
// operand of a GEMM contracted over dH's rows (dW = hᵀ·dH) becomes that GEMM's second output (attr
// cpu_colsum; gemm_f32 sums while packing B, bitwise the reduce kernel's order; RLX_CPU_BIASGRAD=0 off).
// Re-plans memory when it changed anything. RLX_CPU_FUSE=0 turns it off (with the rest).
void fuse_train_lir(LirProgram& p);

// Row-fused kernels. fuse_rows_lir (run by fuse_train_lir; RLX_CPU_ROWS=0 turns it
// off) gathers the row-wise kernels over one [R, C] shape that follow a reduction over the last axis
// (softmax, log-softmax, cross-entropy and its backward, argmax accuracy, LayerNorm-style rows) into one
// generated kernel with attrs cpu_rows = R, cpu_cols = C and a multi-output body of reduce_* / argmax /
// broadcast_in_dim / reshape / elementwise nodes. rows_kernel runs such a body over blocks of whole rows
// (rows split over the pool), intermediates in per-thread scratch; elementwise math is fused.cpp's
// evaluator loops and reductions are reduce_rows_f32 / argreduce_rows_f32 below, so results are bitwise
// those of the unfused kernels on the evaluator (the JIT's exp/tanh differ by <= 2 ulp). An earlier row
// kernel whose result only members read joins too (the region runs where the seed ran).
// rows_plan_ok says whether rows_kernel covers a body.
void fuse_rows_lir(LirProgram& p);
// A value's shape class in a row region over [R, C] (the rewrite and the executor share it): Full
// [R, C], Row [R] / [R, 1], Col [C] / [1, C], Scalar (one element); None otherwise.
enum class RowShape : uint8_t { Full, Row, Col, Scalar, None };
RowShape row_shape(const Shape& s, int64_t R, int64_t C);
// rows_prepare builds rows_kernel's plan for a body once (null: not covered; the executable keeps it
// per kernel); rows_kernel runs it, or the reference interpreter for a null plan or unexpected dtypes.
struct RowPlan;
std::shared_ptr<const RowPlan> rows_prepare(const Graph& body, int64_t R, int64_t C);
bool rows_plan_ok(const Graph& body, int64_t R, int64_t C);
void rows_kernel(const RowPlan* plan, const Graph& body, int64_t R, int64_t C, const std::vector<Tensor>& in,
                 std::vector<Tensor>& out);
// y[r] = reduction (0 sum, 1 max, 2 min; NaN propagates) of row r of x[rows, n], in the fixed order the
// reduce_sum/max/min kernels use (8 lanes, then the tail), so every caller gets the same bits.
void reduce_rows_f32(int kind, const float* x, int64_t rows, int64_t n, float* y);
// y[r] = index of the first maximum (max) / minimum of row r; the first NaN wins.
void argreduce_rows_f32(bool max, const float* x, int64_t rows, int64_t n, int64_t* y);

}  // namespace rlx::cpu
