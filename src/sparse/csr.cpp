// The Csr/Coo types: validation, conversions, transpose and the graph-building helpers.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "rlx/error.h"
#include "rlx/sparse.h"

namespace rlx::sparse {

namespace {

int64_t idx(const Tensor& t, int64_t i) { return t.get_int(i); }

Tensor index_tensor(DType dt, const std::vector<int64_t>& v) {
  Tensor t(dt, {static_cast<int64_t>(v.size())});
  if (dt == DType::i32) {
    auto* p = t.data<int32_t>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<int32_t>(v[i]);
  } else {
    auto* p = t.data<int64_t>();
    std::copy(v.begin(), v.end(), p);
  }
  return t;
}

void check_index_dtype(DType dt) {
  RLX_CHECK(dt == DType::i32 || dt == DType::i64, "[sparse] index dtype must be i32 or i64, got ", dtype_name(dt));
}
void check_value_dtype(DType dt) {
  RLX_CHECK(dt == DType::f32 || dt == DType::f64, "[sparse] values dtype must be f32 or f64, got ", dtype_name(dt));
}

}  // namespace

void Csr::validate(bool require_sorted) const {
  RLX_CHECK(rows >= 0 && cols >= 0, "[sparse] negative shape [", rows, ", ", cols, "]");
  RLX_CHECK(values.defined() && col_indices.defined() && row_ptr.defined(), "[sparse] CSR has an undefined component");
  check_value_dtype(values.dtype());
  check_index_dtype(col_indices.dtype());
  RLX_CHECK(row_ptr.dtype() == col_indices.dtype(), "[sparse] row_ptr is ", dtype_name(row_ptr.dtype()),
            " but col_indices is ", dtype_name(col_indices.dtype()));
  RLX_CHECK(values.rank() == 1 && col_indices.rank() == 1 && row_ptr.rank() == 1, "[sparse] CSR components must be 1-D");
  RLX_CHECK(row_ptr.numel() == rows + 1, "[sparse] row_ptr has ", row_ptr.numel(), " entries, expected rows + 1 = ",
            rows + 1);
  RLX_CHECK(values.numel() == col_indices.numel(), "[sparse] ", values.numel(), " values but ", col_indices.numel(),
            " column indices");
  const int64_t nz = values.numel();
  RLX_CHECK(idx(row_ptr, 0) == 0, "[sparse] row_ptr[0] is ", idx(row_ptr, 0), ", expected 0");
  RLX_CHECK(idx(row_ptr, rows) == nz, "[sparse] row_ptr[", rows, "] is ", idx(row_ptr, rows), ", expected nnz = ", nz);
  for (int64_t i = 0; i < rows; ++i) {
    int64_t a = idx(row_ptr, i), e = idx(row_ptr, i + 1);
    RLX_CHECK(a <= e, "[sparse] row_ptr decreases at row ", i, " (", a, " > ", e, ")");
    for (int64_t k = a; k < e; ++k) {
      int64_t c = idx(col_indices, k);
      RLX_CHECK(c >= 0 && c < cols, "[sparse] column index ", c, " at entry ", k, " (row ", i, ") is out of range [0, ",
                cols, ")");
      if (require_sorted && k > a)
        RLX_CHECK(c > idx(col_indices, k - 1), "[sparse] row ", i, ": columns not strictly increasing at entry ", k,
                  " (", idx(col_indices, k - 1), " then ", c, "); sum duplicates / sort first");
    }
  }
}

Tensor Csr::to_dense() const {
  validate(false);
  Tensor d(dtype(), {rows, cols});
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t k = idx(row_ptr, i); k < idx(row_ptr, i + 1); ++k) {
      int64_t o = i * cols + idx(col_indices, k);
      d.set(o, d.get(o) + values.get(k));
    }
  return d;
}

Csr Csr::transpose() const {
  validate(false);
  const int64_t nz = nnz();
  std::vector<int64_t> cnt(cols + 1, 0), pos;
  for (int64_t k = 0; k < nz; ++k) ++cnt[idx(col_indices, k) + 1];
  std::partial_sum(cnt.begin(), cnt.end(), cnt.begin());
  pos.assign(cnt.begin(), cnt.end() - 1);
  std::vector<int64_t> ci(nz);
  Csr t;
  t.rows = cols;
  t.cols = rows;
  t.values = Tensor(dtype(), {nz});
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t k = idx(row_ptr, i); k < idx(row_ptr, i + 1); ++k) {
      int64_t p = pos[idx(col_indices, k)]++;
      ci[p] = i;
      t.values.set(p, values.get(k));
    }
  t.col_indices = index_tensor(index_dtype(), ci);
  t.row_ptr = index_tensor(index_dtype(), cnt);
  return t;
}

Csr Csr::astype(DType vdt, DType idt) const {
  check_value_dtype(vdt);
  check_index_dtype(idt);
  Csr o;
  o.rows = rows;
  o.cols = cols;
  o.values = Tensor(vdt, {nnz()});
  for (int64_t k = 0; k < nnz(); ++k) o.values.set(k, values.get(k));
  std::vector<int64_t> ci(nnz()), rp(rows + 1);
  for (int64_t k = 0; k < nnz(); ++k) ci[k] = idx(col_indices, k);
  for (int64_t i = 0; i <= rows; ++i) rp[i] = idx(row_ptr, i);
  if (idt == DType::i32)
    RLX_CHECK(nnz() <= INT32_MAX && cols <= INT32_MAX, "[sparse] ", nnz(), " entries do not fit i32 indices");
  o.col_indices = index_tensor(idt, ci);
  o.row_ptr = index_tensor(idt, rp);
  return o;
}

Csr Csr::from_dense(const Tensor& d, DType idt) {
  RLX_CHECK(d.rank() == 2, "[sparse] from_dense needs a 2-D tensor, got rank ", d.rank());
  Coo c;
  c.rows = d.shape()[0];
  c.cols = d.shape()[1];
  for (int64_t i = 0; i < c.rows; ++i)
    for (int64_t j = 0; j < c.cols; ++j)
      if (double v = d.get(i * c.cols + j); v != 0) c.add(i, j, v);
  return c.to_csr(d.dtype(), idt);
}

Csr Coo::to_csr(DType vdt, DType idt) const {
  check_value_dtype(vdt);
  check_index_dtype(idt);
  RLX_CHECK(rows >= 0 && cols >= 0, "[sparse] negative shape [", rows, ", ", cols, "]");
  RLX_CHECK(row.size() == col.size() && col.size() == val.size(), "[sparse] COO arrays differ in length");
  const int64_t n = static_cast<int64_t>(row.size());
  for (int64_t k = 0; k < n; ++k)
    RLX_CHECK(row[k] >= 0 && row[k] < rows && col[k] >= 0 && col[k] < cols, "[sparse] COO entry ", k, " (", row[k],
              ", ", col[k], ") is outside [", rows, ", ", cols, "]");
  // Counting sort by row, then sort each row by column and sum duplicates.
  std::vector<int64_t> start(rows + 1, 0), order(n);
  for (int64_t k = 0; k < n; ++k) ++start[row[k] + 1];
  std::partial_sum(start.begin(), start.end(), start.begin());
  std::vector<int64_t> fill(start.begin(), start.end() - 1);
  for (int64_t k = 0; k < n; ++k) order[fill[row[k]]++] = k;
  std::vector<int64_t> rp(rows + 1, 0), ci;
  std::vector<double> vv;
  ci.reserve(n);
  vv.reserve(n);
  for (int64_t i = 0; i < rows; ++i) {
    auto b = order.begin() + start[i], e = order.begin() + start[i + 1];
    std::sort(b, e, [&](int64_t x, int64_t y) { return col[x] < col[y] || (col[x] == col[y] && x < y); });
    for (auto it = b; it != e; ++it) {
      if (!ci.empty() && static_cast<int64_t>(ci.size()) > rp[i] && ci.back() == col[*it]) vv.back() += val[*it];
      else {
        ci.push_back(col[*it]);
        vv.push_back(val[*it]);
      }
    }
    rp[i + 1] = static_cast<int64_t>(ci.size());
  }
  if (idt == DType::i32)
    RLX_CHECK(static_cast<int64_t>(ci.size()) <= INT32_MAX && cols <= INT32_MAX, "[sparse] ", ci.size(),
              " entries do not fit i32 indices; use i64");
  Csr a;
  a.rows = rows;
  a.cols = cols;
  a.values = Tensor(vdt, {static_cast<int64_t>(vv.size())});
  if (vdt == DType::f64) std::copy(vv.begin(), vv.end(), a.values.data<double>());
  else
    for (size_t k = 0; k < vv.size(); ++k) a.values.data<float>()[k] = static_cast<float>(vv[k]);
  a.col_indices = index_tensor(idt, ci);
  a.row_ptr = index_tensor(idt, rp);
  return a;
}

// ---- graph helpers ----------------------------------------------------------------------------------

namespace {
Attrs shape_attrs(const CsrValues& a) { return {{"shape", std::vector<int64_t>{a.rows, a.cols}}}; }
SolveOut iterative(Builder& b, OpKind k, const CsrValues& a, ValueId rhs, double tol, int64_t maxiter,
                   const std::string& pc) {
  Attrs at = shape_attrs(a);
  at["tol"] = tol;
  at["maxiter"] = maxiter;
  at["precond"] = pc;
  auto o = b.op(k, {a.values, a.col, a.row_ptr, rhs}, at);
  return {o[0], o[1], o[2]};
}
}  // namespace

ValueId matvec(Builder& b, const CsrValues& a, ValueId x, bool t) {
  Attrs at = shape_attrs(a);
  at["transpose"] = int64_t{t};
  return b.op1(OpKind::SparseMatVec, {a.values, a.col, a.row_ptr, x}, at);
}
ValueId matmul(Builder& b, const CsrValues& a, ValueId x, bool t) {
  Attrs at = shape_attrs(a);
  at["transpose"] = int64_t{t};
  return b.op1(OpKind::SparseMatMul, {a.values, a.col, a.row_ptr, x}, at);
}
SolveOut cg(Builder& b, const CsrValues& a, ValueId rhs, double tol, int64_t maxiter, const std::string& pc) {
  return iterative(b, OpKind::SparseCg, a, rhs, tol, maxiter, pc);
}
SolveOut bicgstab(Builder& b, const CsrValues& a, ValueId rhs, double tol, int64_t maxiter, const std::string& pc) {
  return iterative(b, OpKind::SparseBicgstab, a, rhs, tol, maxiter, pc);
}
ValueId solve(Builder& b, const CsrValues& a, ValueId rhs, const std::string& method) {
  Attrs at = shape_attrs(a);
  at["method"] = method;
  return b.op1(OpKind::SparseSolve, {a.values, a.col, a.row_ptr, rhs}, at);
}

Coo poisson2d(int64_t m) {
  Coo c;
  c.rows = c.cols = m * m;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < m; ++j) {
      int64_t r = i * m + j;
      c.add(r, r, 4);
      if (i > 0) c.add(r, r - m, -1);
      if (i + 1 < m) c.add(r, r + m, -1);
      if (j > 0) c.add(r, r - 1, -1);
      if (j + 1 < m) c.add(r, r + 1, -1);
    }
  return c;
}

}  // namespace rlx::sparse
