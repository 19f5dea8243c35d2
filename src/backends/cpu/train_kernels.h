// Native cpu kernels the training step needs (train_kernels.cpp): f32
// reductions / broadcast_in_dim / argmax, and the row kernel of the row-regions pass. Hooks: generic.cpp's find_kernel falls back to
// find_train_kernel for ops it has no entry for. (Fused bodies
// mixing f32 with bool/i32/i64 run on fused.cpp's typed evaluator, fused_kernel_typed.)
#pragma once
#include <memory>
#include <vector>

#include "backends/cpu/kernels.h"
#include "lir/rewrite/rows.h"

namespace rlx::cpu {

// reduce_sum/reduce_max/reduce_min (f32), argmax/argmin (f32), broadcast_in_dim (any dtype);
// nullptr for the rest. The kernels fall back to generic_kernel on layouts they do not cover.
KernelFn find_train_kernel(OpKind op, DType dt);
// Row-fused kernels: the row-regions LIR pass (src/lir/rewrite/rows.cpp) gathers row-wise
// kernels over one [R, C] into a generated kernel with attrs cpu_rows = R, cpu_cols = C. rows_kernel
// runs such a body over blocks of whole rows (rows split over the pool), intermediates in
// per-thread scratch; elementwise math is fused.cpp's evaluator loops and reductions are
// reduce_rows_f32 / argreduce_rows_f32 below, so results are bitwise those of the unfused kernels
// on the evaluator (the JIT's exp/tanh differ by <= 2 ulp). rows_plan_ok says whether rows_kernel
// covers a body (the backend's answer to the pass).
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
