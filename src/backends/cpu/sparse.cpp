// The cpu kernels of the sparse (CSR) ops: the shared evaluation (src/sparse/eval_impl.h) run on
// the cpu thread pool: row-parallel SpMV/SpMM/SDDMM, and solvers whose vector updates and dot
// products are split over the pool (dot products in fixed blocks, so results do not depend on the
// thread count). Transposed products (a scatter) and IC(0) triangular solves run serially.
#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "sparse/eval_impl.h"

namespace rlx::cpu {

namespace {

struct PoolPar {
  template <class F>
  void operator()(int64_t n, int64_t grain, F&& f) const {
    if (n <= 0) return;
    parallel_for(n, grain, [&](int64_t a, int64_t b) { f(a, b); });
  }
};

void sparse_kernel(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  std::vector<ValueType> ot;
  for (auto& o : out) ot.push_back(ValueType{o.dtype(), to_shape(o.shape())});
  sparse::eval_sparse_with(PoolPar{}, n, in, ot, &out);  // writes into the output buffers
}

}  // namespace

KernelFn find_sparse_kernel(OpKind op) { return sparse::is_sparse_op(op) ? &sparse_kernel : nullptr; }

}  // namespace rlx::cpu
