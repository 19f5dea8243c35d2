// Evaluation of the sparse ops over Tensors, templated on the parallel-for `Par` (SerialPar in the
// reference interpreter, the cpu pool in src/backends/cpu/sparse.cpp). Inputs are checked here
// (pattern structure, index ranges), so bad CSR input is an error, never an out-of-bounds read.
#pragma once
#include <string>
#include <vector>

#include "rlx/graph.h"
#include "rlx/tensor.h"
#include "sparse/direct.h"
#include "sparse/kernels.h"

namespace rlx::sparse {

inline std::string where_sparse(const Node& n) { return "[sparse] " + std::string(op_name(n.op)); }

// The pattern check split over row blocks (the message comes from the serial check_pattern,
// run again only when a block failed).
template <class I, class Par>
std::string check_pattern_par(const Par& par, int64_t rows, int64_t cols, int64_t nnz, const I* col, const I* rp,
                              bool sorted) {
  if (rp[0] != 0 || static_cast<int64_t>(rp[rows]) != nnz) return check_pattern(rows, cols, nnz, col, rp, sorted);
  constexpr int64_t kRows = 16384;
  const int64_t nb = (rows + kRows - 1) / kRows;
  std::vector<char> bad(std::max<int64_t>(nb, 1), 0);
  par(nb, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t r0 = blk * kRows, r1 = std::min(rows, r0 + kRows);
      bool ok = true;
      for (int64_t i = r0; i < r1 && ok; ++i) {
        if (rp[i] > rp[i + 1] || rp[i + 1] > nnz) {
          ok = false;
          break;
        }
        for (I k = rp[i]; k < rp[i + 1]; ++k) {
          ok &= col[k] >= 0 && col[k] < cols;
          if (sorted && k > rp[i]) ok &= col[k] > col[k - 1];
        }
      }
      bad[blk] = !ok;
    }
  });
  for (char b : bad)
    if (b) return check_pattern(rows, cols, nnz, col, rp, sorted);
  return "";
}

template <class T, class I, class Par>
CsrView<T, I> view(const Par& par, const Node& n, const Tensor* values, const Tensor& col, const Tensor& rp,
                   bool sorted) {
  const auto& sh = attr_ints(n, "shape");
  CsrView<T, I> a{sh[0], sh[1], values ? values->data<T>() : nullptr, col.data<I>(), rp.data<I>()};
  std::string e = check_pattern_par(par, a.rows, a.cols, col.numel(), a.col, a.rp, sorted);
  RLX_CHECK(e.empty(), where_sparse(n), ": ", e);
  return a;
}

// `dst`: preallocated outputs to write into (the cpu kernel's arena views), else fresh tensors.
template <class T, class I, class Par>
std::vector<Tensor> eval_typed(const Par& par, const Node& n, const std::vector<Tensor>& in,
                               const std::vector<ValueType>& ot, std::vector<Tensor>* dst) {
  auto alloc = [&](size_t i) {
    if (dst) return (*dst)[i];
    std::vector<int64_t> s;
    for (auto& d : ot[i].shape) s.push_back(d.v);
    return Tensor(ot[i].dtype, s);
  };
  const bool tr = n.op == OpKind::SparseMatVec || n.op == OpKind::SparseMatMul || n.op == OpKind::SparseCg ||
                          n.op == OpKind::SparseBicgstab || n.op == OpKind::SparseSolve
                      ? attr_int(n, "transpose") != 0
                      : false;
  switch (n.op) {
    case OpKind::SparseMatVec: {
      auto a = view<T, I>(par, n, &in[0], in[1], in[2], false);
      Tensor y = alloc(0);
      if (tr) spmv_t(a, in[3].data<T>(), y.data<T>());
      else spmv(par, a, in[3].data<T>(), y.data<T>());
      return {y};
    }
    case OpKind::SparseMatMul: {
      auto a = view<T, I>(par, n, &in[0], in[1], in[2], false);
      Tensor y = alloc(0);
      const int64_t k = in[3].shape()[1];
      if (tr) spmm_t(a, in[3].data<T>(), k, y.data<T>());
      else spmm(par, a, in[3].data<T>(), k, y.data<T>());
      return {y};
    }
    case OpKind::SparseAddDense: {
      auto a = view<T, I>(par, n, &in[0], in[1], in[2], false);
      Tensor y = alloc(0);
      std::copy(in[3].data<T>(), in[3].data<T>() + in[3].numel(), y.data<T>());
      T* d = y.data<T>();
      for (int64_t i = 0; i < a.rows; ++i)
        for (I k = a.rp[i]; k < a.rp[i + 1]; ++k) d[i * a.cols + a.col[k]] += a.val[k];
      return {y};
    }
    case OpKind::SparseTranspose: {  // canonical input: its VJP relies on sorted columns
      auto a = view<T, I>(par, n, &in[0], in[1], in[2], true);
      Tensor v = alloc(0), c = alloc(1), p = alloc(2);
      transpose(a, v.data<T>(), c.data<I>(), p.data<I>());
      return {v, c, p};
    }
    case OpKind::SparseSddmm: {
      auto a = view<T, I>(par, n, nullptr, in[2], in[3], false);
      const int64_t k = in[0].rank() == 2 ? in[0].shape()[1] : 1;
      const T *u = in[0].data<T>(), *v = in[1].data<T>();
      Tensor o = alloc(0);
      T* out = o.data<T>();
      par(a.rows, 1024, [&](int64_t r0, int64_t r1) {
        for (int64_t i = r0; i < r1; ++i)
          for (I p = a.rp[i]; p < a.rp[i + 1]; ++p) {
            const T* ui = u + i * k;
            const T* vj = v + static_cast<int64_t>(a.col[p]) * k;
            T s = 0;
            for (int64_t j = 0; j < k; ++j) s += ui[j] * vj[j];
            out[p] = s;
          }
      });
      return {o};
    }
    case OpKind::SparseSample: {
      auto a = view<T, I>(par, n, nullptr, in[1], in[2], false);
      const T* d = in[0].data<T>();
      Tensor o = alloc(0);
      T* out = o.data<T>();
      for (int64_t i = 0; i < a.rows; ++i)
        for (I p = a.rp[i]; p < a.rp[i + 1]; ++p) out[p] = d[i * a.cols + a.col[p]];
      return {o};
    }
    case OpKind::SparseCg:
    case OpKind::SparseBicgstab: {
      auto a0 = view<T, I>(par, n, &in[0], in[1], in[2], true);
      // The transposed system: build Aᵀ once (CG's A is symmetric, so it equals A there).
      std::vector<T> tv;
      std::vector<I> tc, tp;
      CsrView<T, I> a = a0;
      if (tr && n.op == OpKind::SparseBicgstab) {
        tv.resize(a0.nnz());
        tc.resize(a0.nnz());
        tp.resize(a0.cols + 1);
        transpose(a0, tv.data(), tc.data(), tp.data());
        a = CsrView<T, I>{a0.cols, a0.rows, tv.data(), tc.data(), tp.data()};
      }
      Tensor x = alloc(0);
      if (in.size() > 4) std::copy(in[4].data<T>(), in[4].data<T>() + in[4].numel(), x.data<T>());
      else std::fill(x.data<T>(), x.data<T>() + x.numel(), T(0));
      Precond<T, I> m;
      std::string e = m.setup(attr_str(n, "precond"), a);
      RLX_CHECK(e.empty(), where_sparse(n), ": ", e);
      int64_t maxiter = attr_int(n, "maxiter");
      if (maxiter <= 0) maxiter = 10 * std::max<int64_t>(a.rows, 1);
      const double tol = attr_float(n, "tol"), atol = attr_float(n, "atol");
      SolveStats st = n.op == OpKind::SparseCg ? cg(par, a, in[3].data<T>(), x.data<T>(), tol, atol, maxiter, m)
                                               : bicgstab(par, a, in[3].data<T>(), x.data<T>(), tol, atol, maxiter, m);
      Tensor it = alloc(1), res = alloc(2);
      it.data<int64_t>()[0] = st.iterations;
      res.data<T>()[0] = static_cast<T>(st.residual);
      return {x, it, res};
    }
    case OpKind::SparseSolve: {
      auto a = view<T, I>(par, n, &in[0], in[1], in[2], false);
      const int64_t nz = a.nnz(), k = in[3].rank() == 2 ? in[3].shape()[1] : 1;
      std::vector<int64_t> rp(a.rp, a.rp + a.rows + 1), ci(a.col, a.col + nz);
      std::vector<double> v(a.val, a.val + nz), b(in[3].data<T>(), in[3].data<T>() + a.rows * k), x(a.rows * k);
      std::string e = direct_solve(attr_str(n, "method"), a.rows, rp.data(), ci.data(), v.data(), b.data(), k,
                                   x.data(), tr);
      RLX_CHECK(e.empty(), where_sparse(n), ": ", e);
      Tensor o = alloc(0);
      std::copy(x.begin(), x.end(), o.data<T>());
      return {o};
    }
    default: fail(where_sparse(n), ": not a sparse op");
  }
}

template <class Par>
std::vector<Tensor> eval_sparse_with(const Par& par, const Node& n, const std::vector<Tensor>& in,
                                     const std::vector<ValueType>& ot, std::vector<Tensor>* dst = nullptr) {
  // The index dtype comes from col_indices (input 1, or 2 for sddmm); the value dtype from output 0.
  const Tensor& ci = n.op == OpKind::SparseSddmm ? in[2] : in[1];
  const DType vt = ot[0].dtype, it = ci.dtype();
  RLX_CHECK(vt == DType::f32 || vt == DType::f64, where_sparse(n), ": values must be f32 or f64");
  RLX_CHECK(it == DType::i32 || it == DType::i64, where_sparse(n), ": indices must be i32 or i64");
  if (vt == DType::f32)
    return it == DType::i32 ? eval_typed<float, int32_t>(par, n, in, ot, dst) : eval_typed<float, int64_t>(par, n, in, ot, dst);
  return it == DType::i32 ? eval_typed<double, int32_t>(par, n, in, ot, dst) : eval_typed<double, int64_t>(par, n, in, ot, dst);
}

bool is_sparse_op(OpKind k);

}  // namespace rlx::sparse
