// VJP rules of the sparse (CSR) ops. The pattern (col_indices, row_ptr) is integer and gets no
// cotangent; values and dense operands do. Solves use the implicit adjoint: for op(A) x = b,
// λ = op(A)⁻ᵀ ḡ (one more solve of the same kind, transposed), b̄ = λ and Ā = -λ xᵀ on A's pattern.
#include "autodiff/autodiff.h"

namespace rlx::ad {

using Vs = std::vector<ValueId>;

namespace {


Attrs shape_of(const Node& n) { return {{"shape", attr_ints(n, "shape")}}; }

ValueId sddmm(Builder& b, const Node& n, ValueId u, ValueId v, ValueId col, ValueId rp) {
  return b.op1(OpKind::SparseSddmm, {u, v, col, rp}, shape_of(n));
}

// y = op(A) x (matvec or matmul): Ā = ḡ xᵀ (or x ḡᵀ for Aᵀ) on the pattern, x̄ = op(A)ᵀ ḡ.
}  // namespace

Vs vjp_sparse_matvec(Builder& b, const Node& n, const Vs& x, const Vs&, const Vs& g) {
  const bool t = attr_int(n, "transpose") != 0;
  ValueId dv = t ? sddmm(b, n, x[3], g[0], x[1], x[2]) : sddmm(b, n, g[0], x[3], x[1], x[2]);
  Attrs at = shape_of(n);
  at["transpose"] = int64_t{!t};
  ValueId dx = b.op1(n.op, {x[0], x[1], x[2], g[0]}, at);
  return {dv, -1, -1, dx};
}

Vs vjp_sparse_add_dense(Builder& b, const Node& n, const Vs& x, const Vs&, const Vs& g) {
  return {b.op1(OpKind::SparseSample, {g[0], x[1], x[2]}, shape_of(n)), -1, -1, g[0]};
}

// Aᵀ's values are a permutation of A's; transposing the cotangent back (on Aᵀ's pattern) undoes
// it, because A's columns are sorted in each row (sparse_transpose requires canonical input).
Vs vjp_sparse_transpose(Builder& b, const Node& n, const Vs& x, const Vs& y, const Vs& g) {
  const auto& sh = attr_ints(n, "shape");
  Attrs at = {{"shape", std::vector<int64_t>{sh[1], sh[0]}}};
  return {b.op(OpKind::SparseTranspose, {g[0], y[1], y[2]}, at)[0], -1, -1};
}

// s_p = U[i] · V[j] at stored (i, j): Ū = S V, V̄ = Sᵀ U with S the CSR of the cotangent.
Vs vjp_sparse_sddmm(Builder& b, const Node& n, const Vs& x, const Vs&, const Vs& g) {
  const bool mat = b.shape(x[0]).size() == 2;
  const OpKind k = mat ? OpKind::SparseMatMul : OpKind::SparseMatVec;
  Attrs at = shape_of(n);
  at["transpose"] = int64_t{0};
  ValueId du = b.op1(k, {g[0], x[2], x[3], x[1]}, at);
  at["transpose"] = int64_t{1};
  ValueId dv = b.op1(k, {g[0], x[2], x[3], x[0]}, at);
  return {du, dv, -1, -1};
}

Vs vjp_sparse_sample(Builder& b, const Node& n, const Vs& x, const Vs&, const Vs& g) {
  ValueId z = b.broadcast_in_dim(b.scalar(0, b.graph().type(x[0]).dtype), b.shape(x[0]), {});
  return {b.op1(OpKind::SparseAddDense, {g[0], x[1], x[2], z}, shape_of(n)), -1, -1};
}

// x = op(A)⁻¹ b (cg, bicgstab, solve). The iteration-count and residual outputs carry no gradient.
Vs vjp_sparse_solve(Builder& b, const Node& n, const Vs& x, const Vs& y, const Vs& g) {
  const bool t = attr_int(n, "transpose") != 0;
  Attrs at = n.attrs;
  at["transpose"] = int64_t{!t};
  ValueId lam = b.op(n.op, {x[0], x[1], x[2], g[0]}, at)[0];
  ValueId dv = t ? sddmm(b, n, y[0], lam, x[1], x[2]) : sddmm(b, n, lam, y[0], x[1], x[2]);
  Vs r = {b.unary(OpKind::Neg, dv), -1, -1, lam};
  if (x.size() > 4) r.push_back(-1);  // x0 only starts the iteration
  return r;
}

}  // namespace rlx::ad
