// VJP rules of the dense linear-algebra ops, the formulas JAX differentiates with (reverse mode of
// its JVP rules). Rules emit MIR (dot_general, transpose, the linear-algebra ops themselves), so the
// backward graph is differentiable again and runs wherever the forward ops run.
#include "autodiff/autodiff.h"

namespace rlx::ad {

namespace {

using Ints = std::vector<int64_t>;
using Vs = std::vector<ValueId>;

Ints dims_of(Builder& b, ValueId v) {
  RLX_CHECK(is_static(b.shape(v)), "[autodiff] linear algebra needs static shapes, got ", shape_str(b.shape(v)));
  return static_dims(b.shape(v));
}
int64_t rank_of(Builder& b, ValueId v) { return static_cast<int64_t>(dims_of(b, v).size()); }
Shape to_shape(const Ints& d) { return Shape(d.begin(), d.end()); }
Ints upto(int64_t n) {
  Ints r;
  for (int64_t i = 0; i < n; ++i) r.push_back(i);
  return r;
}

// Batched x @ y over the leading dims (both rank r >= 2, same batch).
ValueId mm(Builder& b, ValueId x, ValueId y) {
  int64_t r = rank_of(b, x);
  Ints bd = upto(r - 2);
  return b.dot_general(x, y, bd, bd, {r - 1}, {r - 2});
}
ValueId mT(Builder& b, ValueId x) {
  int64_t r = rank_of(b, x);
  Ints p = upto(r);
  std::swap(p[r - 1], p[r - 2]);
  return b.transpose(x, p);
}
ValueId scal(Builder& b, double v, ValueId like) { return b.scalar(v, b.dtype(like)); }
ValueId neg(Builder& b, ValueId x) { return b.unary(OpKind::Neg, x); }
ValueId sym(Builder& b, ValueId x) { return b.mul(scal(b, 0.5, x), b.add(x, mT(b, x))); }

// A constant [n, n] pattern (f(i, j)) broadcast to the shape of `like` [..., n, n].
template <class F>
ValueId pattern(Builder& b, ValueId like, F f) {
  Ints d = dims_of(b, like);
  int64_t r = static_cast<int64_t>(d.size()), n = d[r - 1];
  Tensor t(b.dtype(like), {n, n});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) t.set(i * n + j, f(i, j));
  return b.broadcast_in_dim(b.constant(t), b.shape(like), {r - 2, r - 1});
}
ValueId eye_like(Builder& b, ValueId like) {
  return pattern(b, like, [](int64_t i, int64_t j) { return i == j ? 1.0 : 0.0; });
}
// The triangle an op reads: lower (or upper), diagonal weighted by `diag`.
ValueId tri_mask(Builder& b, ValueId like, bool lower, double diag) {
  return pattern(b, like, [&](int64_t i, int64_t j) { return i == j ? diag : ((lower ? i > j : i < j) ? 1.0 : 0.0); });
}
// v [..., k] broadcast along a new axis at `axis` (r - 1: rows repeat v; r - 2: columns repeat v) of `like`.
ValueId spread(Builder& b, ValueId v, ValueId like, int64_t keep_axis) {
  int64_t r = rank_of(b, like);
  Ints bd = upto(r - 2);
  bd.push_back(keep_axis);
  return b.broadcast_in_dim(v, b.shape(like), bd);
}
// A scalar-per-matrix [...] broadcast over [..., n, n].
ValueId per_matrix(Builder& b, ValueId s, ValueId like) {
  return b.broadcast_in_dim(s, b.shape(like), upto(rank_of(b, like) - 2));
}

// The rules are the real ones (transposes, not conjugate transposes); complex inputs are refused.
void real_only(Builder& b, ValueId a, const char* op) {
  RLX_CHECK(b.dtype(a) != DType::c64, "[autodiff] ", op, ": gradients of complex (c64) linear algebra are not supported");
}

ValueId tri_solve(Builder& b, ValueId a, ValueId x, bool left, bool lower, bool trans, bool unit) {
  return b.op(OpKind::TriangularSolve, {a, x},
              {{"left_side", int64_t{left}}, {"lower", int64_t{lower}}, {"transpose_a", int64_t{trans}},
               {"unit_diagonal", int64_t{unit}}})[0];
}

}  // namespace

Vs vjp_cholesky(Builder& b, const Node&, const Vs& x, const Vs& y, const Vs& g) {
  real_only(b, x[0], "cholesky");
  if (g[0] < 0) return {-1};
  ValueId L = y[0];
  ValueId P = b.mul(mm(b, mT(b, L), g[0]), tri_mask(b, L, true, 0.5));  // Φ(Lᵀ Ḡ)
  ValueId S = tri_solve(b, L, tri_solve(b, L, P, true, true, true, false), false, true, false, false);  // L⁻ᵀ P L⁻¹
  return {sym(b, S)};  // the op factors (A+Aᵀ)/2
}

Vs vjp_triangular_solve(Builder& b, const Node& n, const Vs& x, const Vs& y, const Vs& g) {
  real_only(b, x[0], "triangular_solve");
  if (g[0] < 0) return {-1, -1};
  bool left = attr_int(n, "left_side"), lower = attr_int(n, "lower"), tr = attr_int(n, "transpose_a"),
       unit = attr_int(n, "unit_diagonal");
  ValueId A = x[0], X = y[0];
  ValueId gB = tri_solve(b, A, g[0], left, lower, !tr, unit);
  ValueId gA = left ? (tr ? mm(b, X, mT(b, gB)) : mm(b, gB, mT(b, X))) : (tr ? mm(b, mT(b, gB), X) : mm(b, mT(b, X), gB));
  gA = b.mul(neg(b, gA), tri_mask(b, A, lower, unit ? 0.0 : 1.0));
  return {gA, gB};
}

Vs vjp_solve(Builder& b, const Node&, const Vs& x, const Vs& y, const Vs& g) {
  real_only(b, x[0], "solve");
  if (g[0] < 0) return {-1, -1};
  ValueId gB = b.op(OpKind::Solve, {mT(b, x[0]), g[0]})[0];
  return {neg(b, mm(b, gB, mT(b, y[0]))), gB};
}

Vs vjp_inv(Builder& b, const Node&, const Vs& x, const Vs& y, const Vs& g) {
  real_only(b, x[0], "inv");
  if (g[0] < 0) return {-1};
  ValueId yt = mT(b, y[0]);
  return {neg(b, mm(b, mm(b, yt, g[0]), yt))};
}

Vs vjp_det(Builder& b, const Node&, const Vs& x, const Vs& y, const Vs& g) {
  real_only(b, x[0], "det");
  if (g[0] < 0) return {-1};
  ValueId invT = mT(b, b.op(OpKind::Inv, {x[0]})[0]);
  return {b.mul(per_matrix(b, b.mul(g[0], y[0]), x[0]), invT)};
}

Vs vjp_slogdet(Builder& b, const Node&, const Vs& x, const Vs&, const Vs& g) {
  real_only(b, x[0], "slogdet");
  if (g[1] < 0) return {-1};  // the sign is piecewise constant
  ValueId invT = mT(b, b.op(OpKind::Inv, {x[0]})[0]);
  return {b.mul(per_matrix(b, g[1], x[0]), invT)};
}

// A = V diag(w) Vᵀ: Ā = V (diag(w̄) + F ∘ (Vᵀ V̄)) Vᵀ, F_ij = 1 / (w_j - w_i) off the diagonal.
Vs vjp_eigh(Builder& b, const Node&, const Vs& x, const Vs& y, const Vs& g) {
  real_only(b, x[0], "eigh");
  if (g[0] < 0 && g[1] < 0) return {-1};
  ValueId w = y[0], V = y[1];
  int64_t r = rank_of(b, V);
  ValueId eye = eye_like(b, V);
  ValueId inner = -1;
  if (g[0] >= 0) inner = b.mul(spread(b, g[0], V, r - 1), eye);
  if (g[1] >= 0) {
    ValueId D = b.sub(spread(b, w, V, r - 1), spread(b, w, V, r - 2));  // D_ij = w_j - w_i
    ValueId F = b.div(b.sub(scal(b, 1, V), eye), b.add(D, eye));
    ValueId t = b.mul(F, mm(b, mT(b, V), g[1]));
    inner = inner < 0 ? t : b.add(inner, t);
  }
  return {sym(b, mm(b, mm(b, V, inner), mT(b, V)))};
}

ValueId zeros(Builder& b, ValueId like) { return b.broadcast_in_dim(scal(b, 0, like), b.shape(like), {}); }

// Reduced QR with m >= n (R square): with M = QᵀQ̄ - R̄Rᵀ and C = tril₋₁(M - Mᵀ) - M,
// Ā = (Q̄ + Q C) R⁻ᵀ (the transpose of JAX's qr_jvp_rule).
Vs vjp_qr(Builder& b, const Node& n, const Vs& x, const Vs& y, const Vs& g) {
  real_only(b, x[0], "qr");
  if (g[0] < 0 && g[1] < 0) return {-1};
  Ints d = dims_of(b, x[0]);
  int64_t m = d[d.size() - 2], nn = d.back();
  RLX_CHECK(m >= nn && (!attr_int(n, "full_matrices") || m == nn),
            "[autodiff] qr: the gradient needs m >= n and the reduced form (got ", m, "x", nn, ")");
  ValueId Q = y[0], R = y[1];
  ValueId gQ = g[0] >= 0 ? g[0] : zeros(b, Q), gR = g[1] >= 0 ? g[1] : zeros(b, R);
  ValueId M = b.sub(mm(b, mT(b, Q), gQ), mm(b, gR, mT(b, R)));
  ValueId C = b.sub(b.mul(b.sub(M, mT(b, M)), tri_mask(b, M, true, 0.0)), M);
  ValueId Y = b.add(gQ, mm(b, Q, C));
  return {tri_solve(b, R, Y, false, false, true, false)};  // Y R⁻ᵀ
}

// Thin SVD A = U diag(s) Vᵀ (the transpose of JAX's svd_jvp_rule, real case):
// G = diag(s̄) + (F∘UᵀŪ + (F∘UᵀŪ)ᵀ)∘s_j + (F∘VᵀV̄ + (F∘VᵀV̄)ᵀ)∘s_i with F_ij = 1/(s_j² - s_i²),
// Ā = U G Vᵀ + (I - UUᵀ)(Ū/s) Vᵀ (m > n) + U ((I - VVᵀ)(V̄/s))ᵀ (n > m).
Vs vjp_svd(Builder& b, const Node&, const Vs& x, const Vs& y, const Vs& g) {
  real_only(b, x[0], "svd");
  if (g[0] < 0 && g[1] < 0 && g[2] < 0) return {-1};
  ValueId U = y[0], s = y[1], V = mT(b, y[2]);
  Ints d = dims_of(b, x[0]);
  int64_t m = d[d.size() - 2], nn = d.back();
  ValueId kk = mm(b, mT(b, U), U);  // [.., k, k], only its shape is used below
  int64_t r = rank_of(b, kk);
  ValueId eye = eye_like(b, kk);
  ValueId sj = spread(b, s, kk, r - 1), si = spread(b, s, kk, r - 2);
  ValueId G = g[1] >= 0 ? b.mul(spread(b, g[1], kk, r - 1), eye) : zeros(b, kk);
  ValueId F = -1;
  if (g[0] >= 0 || g[2] >= 0) {
    ValueId diff = b.mul(b.add(sj, si), b.sub(sj, si));
    F = b.div(b.sub(scal(b, 1, kk), eye), b.add(diff, eye));
  }
  ValueId gV = g[2] >= 0 ? mT(b, g[2]) : -1;
  if (g[0] >= 0) {
    ValueId A1 = b.mul(F, mm(b, mT(b, U), g[0]));
    G = b.add(G, b.mul(b.add(A1, mT(b, A1)), sj));
  }
  if (g[2] >= 0) {
    ValueId A2 = b.mul(F, mm(b, mT(b, V), gV));
    G = b.add(G, b.mul(b.add(A2, mT(b, A2)), si));
  }
  ValueId gA = mm(b, mm(b, U, G), mT(b, V));
  if (m > nn && g[0] >= 0) {
    ValueId us = b.div(g[0], spread(b, s, g[0], r - 1));
    ValueId proj = b.sub(us, mm(b, U, mm(b, mT(b, U), us)));
    gA = b.add(gA, mm(b, proj, mT(b, V)));
  }
  if (nn > m && g[2] >= 0) {
    ValueId vs = b.div(gV, spread(b, s, gV, r - 1));
    ValueId proj = b.sub(vs, mm(b, V, mm(b, mT(b, V), vs)));
    gA = b.add(gA, mm(b, U, mT(b, proj)));
  }
  return {gA};
}

// Square A[perm] = L U (L unit lower, U upper, packed in one matrix). The JVP JAX uses,
// dLU = L tril₋₁(X) + triu(X) U with X = L⁻¹ dA[perm] U⁻¹, transposed: X̄ = tril₋₁(Lᵀ LŪ) + triu(LŪ Uᵀ),
// Ā = Pᵀ L⁻ᵀ X̄ U⁻ᵀ with P the permutation matrix of `perm`. Pivots, permutation and info carry no
// gradient (piecewise constant).
Vs vjp_lu(Builder& b, const Node&, const Vs& x, const Vs& y, const Vs& g) {
  real_only(b, x[0], "lu");
  if (g[0] < 0) return {-1};
  Ints d = dims_of(b, x[0]);
  int64_t r = static_cast<int64_t>(d.size()), m = d[r - 2], nn = d[r - 1];
  RLX_CHECK(m == nn, "[autodiff] lu: the gradient needs a square matrix (got ", m, "x", nn, ")");
  ValueId LU = y[0], gLU = g[0];
  ValueId L = b.add(b.mul(LU, tri_mask(b, LU, true, 0.0)), eye_like(b, LU));
  ValueId U = b.mul(LU, tri_mask(b, LU, false, 1.0));
  ValueId gX = b.add(b.mul(mm(b, mT(b, L), gLU), tri_mask(b, LU, true, 0.0)),
                     b.mul(mm(b, gLU, mT(b, U)), tri_mask(b, LU, false, 1.0)));
  ValueId gY = tri_solve(b, LU, tri_solve(b, LU, gX, true, true, true, true), false, false, true, false);
  // P[i, j] = (perm[i] == j); Ā = Pᵀ Ȳ.
  Shape sq = b.shape(LU);
  ValueId cols = b.op1(OpKind::Iota, {}, {{"shape", sq}, {"dim", r - 1}, {"dtype", DType::i32}});
  ValueId P = b.convert(b.op1(OpKind::Eq, {spread(b, y[2], LU, r - 2), cols}), b.dtype(LU));
  return {mm(b, mT(b, P), gY)};
}

// Minimum-norm X = A⁺ B, differentiated through the pseudo-inverse (constant rank; JAX's pinv JVP,
// dA⁺ = -A⁺ dA A⁺ + A⁺A⁺ᵀ dAᵀ (I - AA⁺) + (I - A⁺A) dAᵀ A⁺ᵀA⁺, transposed and contracted with B):
// B̄ = A⁺ᵀ X̄, Ā = -B̄ Xᵀ + (B - AX)(A⁺B̄)ᵀ + (A⁺ᵀX)(X̄ - AᵀB̄)ᵀ. A⁺ is lstsq(A, I) with the node's rcond.
Vs vjp_lstsq(Builder& b, const Node& n, const Vs& x, const Vs& y, const Vs& g) {
  real_only(b, x[0], "lstsq");
  if (g[0] < 0) return {-1, -1};  // rank and singular values: rank is constant, S has its own rule (svd)
  ValueId A = x[0], B = x[1], X = y[0], gX = g[0];
  Ints d = dims_of(b, A);
  int64_t r = static_cast<int64_t>(d.size()), m = d[r - 2];
  Ints dm = d;
  dm[r - 1] = m;
  Tensor I(b.dtype(A), {m, m});
  for (int64_t i = 0; i < m; ++i) I.set(i * m + i, 1.0);
  ValueId Im = b.broadcast_in_dim(b.constant(I), to_shape(dm), {r - 2, r - 1});
  ValueId P = b.op(OpKind::Lstsq, {A, Im}, {{"rcond", attr_float(n, "rcond")}})[0];  // A⁺ [..., n, m]
  ValueId PT = mT(b, P);
  ValueId gB = mm(b, PT, gX);
  ValueId res = b.sub(B, mm(b, A, X));
  ValueId gA = neg(b, mm(b, gB, mT(b, X)));
  gA = b.add(gA, mm(b, res, mT(b, mm(b, P, gB))));
  gA = b.add(gA, mm(b, mm(b, PT, X), mT(b, b.sub(gX, mm(b, mT(b, A), gB)))));
  return {gA, gB};
}

// The adjoint of the Fréchet derivative of exp at A is the Fréchet derivative at Aᵀ, read (as JAX's
// expm JVP does) from the upper-right block of exp([[Aᵀ, Ḡ], [0, Aᵀ]]).
Vs vjp_matrix_exp(Builder& b, const Node&, const Vs& x, const Vs&, const Vs& g) {
  real_only(b, x[0], "matrix_exp");
  if (g[0] < 0) return {-1};
  Ints d = dims_of(b, x[0]);
  int64_t r = static_cast<int64_t>(d.size()), nn = d[r - 1];
  ValueId AT = mT(b, x[0]);
  ValueId top = b.op1(OpKind::Concatenate, {AT, g[0]}, {{"axis", r - 1}});
  ValueId bot = b.op1(OpKind::Concatenate, {zeros(b, AT), AT}, {{"axis", r - 1}});
  ValueId big = b.op1(OpKind::Concatenate, {top, bot}, {{"axis", r - 2}});
  ValueId E = b.op(OpKind::MatrixExp, {big})[0];
  Ints lo(r, 0), hi = d;
  lo[r - 1] = nn;
  hi[r - 1] = 2 * nn;
  return {b.op1(OpKind::Slice, {E}, {{"start", lo}, {"limit", hi}})};
}

}  // namespace rlx::ad
