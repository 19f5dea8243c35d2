// Reference evaluation of the linear-algebra ops on c64: each matrix widened to complex<double>,
// factored by dense_complex.cpp, rounded once into the outputs. Real-valued outputs (eigh's w, svd's
// S, slogdet's log|det|) are f32; the error policy is the real one (src/linalg/reference.cpp).
#include <cmath>
#include <limits>

#include "linalg/dense.h"
#include "linalg/dense_complex.h"
#include "linalg/linalg.h"

namespace rlx::linalg {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
const Cx kCNaN(kNaN, kNaN);

CMat load(const Tensor& t, int64_t b, int64_t size) {
  CMat m(size);
  for (int64_t i = 0; i < size; ++i) m[i] = t.getc(b * size + i);
  return m;
}
void store(Tensor& t, int64_t b, const Cx* v, int64_t size) {
  for (int64_t i = 0; i < size; ++i) t.setc(b * size + i, v[i]);
}
void store_real(Tensor& t, int64_t b, const double* v, int64_t size) {
  for (int64_t i = 0; i < size; ++i) t.set(b * size + i, v[i]);
}
int64_t rows(const Tensor& t) { return t.shape()[t.rank() - 2]; }
int64_t cols(const Tensor& t) { return t.shape().back(); }

// X (n x k) of A X = B for one packed LU with its pivots (B's rows swapped in place first).
void lu_solve(const CMat& lu, const std::vector<int32_t>& piv, int64_t n, CMat& x, int64_t k) {
  for (int64_t i = 0; i < n; ++i)
    if (piv[i] != i)
      for (int64_t c = 0; c < k; ++c) std::swap(x[i * k + c], x[piv[i] * k + c]);
  trsm_left(lu.data(), n, x.data(), k, true, false, false, true);
  trsm_left(lu.data(), n, x.data(), k, false, false, false, false);
}

}  // namespace

std::vector<Tensor> reference_eval_complex(const Node& n, const std::vector<Tensor>& in,
                                           const std::vector<ValueType>& ot) {
  std::vector<Tensor> out;
  for (auto& t : ot) out.emplace_back(t.dtype, static_dims(t.shape));
  const Tensor& A = in[0];
  int64_t nb = batch_count(A), m = rows(A), nc = cols(A), sz = m * nc;
  for (int64_t b = 0; b < nb; ++b) {
    CMat a = load(A, b, sz);
    switch (n.op) {
      case OpKind::Cholesky: {
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j <= i; ++j) a[i * m + j] = 0.5 * (a[i * m + j] + std::conj(a[j * m + i]));
        int info = cholesky(a.data(), m);
        if (info) std::fill(a.begin(), a.end(), kCNaN);
        store(out[0], b, a.data(), sz);
        out[1].set(b, info);
        break;
      }
      case OpKind::TriangularSolve: {
        bool left = attr_int(n, "left_side"), lower = attr_int(n, "lower"), tr = attr_int(n, "transpose_a"),
             cj = attr_int(n, "conjugate_a"), unit = attr_int(n, "unit_diagonal");
        const Tensor& B = in[1];
        int64_t br = rows(B), bc = cols(B);
        CMat x = load(B, b, br * bc);
        if (left) {
          trsm_left(a.data(), m, x.data(), bc, lower, tr, cj, unit);
        } else {  // X op(A) = B  <=>  op(A)ᵀ Xᵀ = Bᵀ (a plain transpose: conjugation stays with A)
          CMat xt(bc * br);
          for (int64_t i = 0; i < br; ++i)
            for (int64_t j = 0; j < bc; ++j) xt[j * br + i] = x[i * bc + j];
          trsm_left(a.data(), m, xt.data(), br, lower, !tr, cj, unit);
          for (int64_t i = 0; i < br; ++i)
            for (int64_t j = 0; j < bc; ++j) x[i * bc + j] = xt[j * br + i];
        }
        store(out[0], b, x.data(), br * bc);
        break;
      }
      case OpKind::Lu: {
        int64_t k = std::min(m, nc);
        std::vector<int32_t> piv(k), perm(m);
        int info = lu(a.data(), m, nc, piv.data());
        pivots_to_perm(piv.data(), k, m, perm.data());
        store(out[0], b, a.data(), sz);
        for (int64_t i = 0; i < k; ++i) out[1].set(b * k + i, piv[i]);
        for (int64_t i = 0; i < m; ++i) out[2].set(b * m + i, perm[i]);
        out[3].set(b, info);
        break;
      }
      case OpKind::Qr: {
        bool full = attr_int(n, "full_matrices");
        int64_t kq = full ? m : std::min(m, nc);
        CMat q(m * kq), r(kq * nc);
        qr(a.data(), m, nc, full, q.data(), r.data());
        store(out[0], b, q.data(), m * kq);
        store(out[1], b, r.data(), kq * nc);
        break;
      }
      case OpKind::Eigh: {
        std::vector<double> w(m);
        CMat v(sz);
        eigh(a.data(), m, w.data(), v.data());
        store_real(out[0], b, w.data(), m);
        store(out[1], b, v.data(), sz);
        break;
      }
      case OpKind::Svd: {
        int64_t k = std::min(m, nc);
        CMat u(m * k), vh(k * nc);
        std::vector<double> s(k);
        svd(a.data(), m, nc, u.data(), s.data(), vh.data());
        store(out[0], b, u.data(), m * k);
        store_real(out[1], b, s.data(), k);
        store(out[2], b, vh.data(), k * nc);
        break;
      }
      case OpKind::Solve:
      case OpKind::Inv: {
        int64_t k = n.op == OpKind::Inv ? m : cols(in[1]);
        CMat x(m * k, Cx(0));
        if (n.op == OpKind::Inv)
          for (int64_t i = 0; i < m; ++i) x[i * m + i] = 1;
        else
          x = load(in[1], b, m * k);
        std::vector<int32_t> piv(m);
        if (lu(a.data(), m, m, piv.data())) std::fill(x.begin(), x.end(), kCNaN);  // singular
        else lu_solve(a, piv, m, x, k);
        store(out[0], b, x.data(), m * k);
        break;
      }
      case OpKind::Det:
      case OpKind::Slogdet: {
        std::vector<int32_t> piv(m);
        lu(a.data(), m, m, piv.data());
        Cx det = 1, sign = 1;
        double logabs = 0;
        for (int64_t i = 0; i < m; ++i) {
          Cx d = a[i * m + i];
          double ad = std::abs(d);
          if (piv[i] != i) sign = -sign, det = -det;
          sign = ad > 0 ? sign * (d / ad) : Cx(0);
          logabs += std::log(ad);
          det *= d;
        }
        if (n.op == OpKind::Det) {
          out[0].setc(b, det);
        } else {
          if (sign == Cx(0)) logabs = -std::numeric_limits<double>::infinity();
          out[0].setc(b, sign);
          out[1].set(b, logabs);
        }
        break;
      }
      default: fail("[reference] ", op_name(n.op), " has no c64 form (f32/f64 only)");
    }
  }
  return out;
}

}  // namespace rlx::linalg
