// The cpu kernels of the sparse (CSR) ops: the shared evaluation (src/sparse/eval_impl.h) run on
// the cpu thread pool: row-parallel SpMV/SpMM/SDDMM, and solvers whose vector updates and dot
// products are split over the pool (dot products in fixed blocks, so results do not depend on the
// thread count). Transposed products (a scatter) and IC(0) triangular solves run serially.
#include <cstring>

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
  auto res = sparse::eval_sparse_with(PoolPar{}, n, in, ot);
  for (size_t i = 0; i < out.size(); ++i) {
    RLX_CHECK(res[i].nbytes() == out[i].nbytes(), "[cpu] ", op_name(n.op), ": output ", i, " size mismatch");
    if (out[i].nbytes()) std::memcpy(out[i].raw(), res[i].raw(), out[i].nbytes());
  }
}

}  // namespace

KernelFn find_sparse_kernel(OpKind op) { return sparse::is_sparse_op(op) ? &sparse_kernel : nullptr; }

}  // namespace rlx::cpu
