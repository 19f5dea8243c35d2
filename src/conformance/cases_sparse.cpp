// Conformance cases of the sparse ops: a 3x3-grid Laplacian pattern (SPD, n = 9) with seeded values
// perturbing it, i32 indices, f32/f64 values.
#include <cmath>

#include "rlx/builder.h"
#include "rlx/conformance.h"
#include "rlx/sparse.h"

namespace rlx {

bool build_sparse_case(OpKind op, DType dt, ConformanceCase* out) {
  if (op_name(op).substr(0, 7) != "sparse_") return false;
  if (dt != DType::f32 && dt != DType::f64) return false;
  sparse::Coo c;
  c.rows = c.cols = 9;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      int64_t r = i * 3 + j;
      c.add(r, r, 4.0 + 0.1 * static_cast<double>(r % 4));
      if (i > 0) c.add(r, r - 3, -1);
      if (i + 1 < 3) c.add(r, r + 3, -1);
      if (j > 0) c.add(r, r - 1, -1);
      if (j + 1 < 3) c.add(r, r + 1, -1);
    }
  sparse::Csr a = c.to_csr(dt, DType::i32);
  ConformanceCase cc;
  cc.op = op;
  cc.dtype = dt;
  Builder b(cc.graph);
  auto input = [&](const char* name, Tensor t) {
    ValueId v = b.input(name, t.dtype(), to_shape(t.shape()));
    cc.inputs.push_back(std::move(t));
    return v;
  };
  auto dense = [&](const char* name, std::vector<int64_t> shape, double f) {
    Tensor t(dt, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, std::sin(f * static_cast<double>(i + 1)));
    return input(name, t);
  };
  Attrs sh = {{"shape", std::vector<int64_t>{9, 9}}};
  std::vector<ValueId> outs;
  if (op == OpKind::SparseSddmm || op == OpKind::SparseSample) {
    ValueId u = op == OpKind::SparseSddmm ? dense("u", {9, 2}, 0.7) : dense("d", {9, 9}, 0.3);
    ValueId v = op == OpKind::SparseSddmm ? dense("v", {9, 2}, 0.4) : -1;
    ValueId ci = input("col", a.col_indices), rp = input("row_ptr", a.row_ptr);
    outs = b.op(op, v >= 0 ? std::vector<ValueId>{u, v, ci, rp} : std::vector<ValueId>{u, ci, rp}, sh);
  } else {
    ValueId vals = input("values", a.values), ci = input("col", a.col_indices), rp = input("row_ptr", a.row_ptr);
    std::vector<ValueId> ins = {vals, ci, rp};
    if (op == OpKind::SparseMatMul) ins.push_back(dense("x", {9, 3}, 0.5));
    else if (op == OpKind::SparseAddDense) ins.push_back(dense("d", {9, 9}, 0.2));
    else if (op != OpKind::SparseTranspose) ins.push_back(dense("x", {9}, 0.9));
    if (op == OpKind::SparseCg || op == OpKind::SparseBicgstab) {
      sh["tol"] = dt == DType::f64 ? 1e-12 : 1e-6;
      outs = {b.op(op, ins, sh)[0]};  // x (the iteration count may differ by one across devices)
    } else {
      outs = b.op(op, ins, sh);
    }
  }
  for (auto o : outs) b.output(o);
  *out = std::move(cc);
  return true;
}

}  // namespace rlx
