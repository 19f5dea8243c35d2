// Reference evaluation of the linear-algebra ops: each matrix of the batch is widened to float64,
// factored by dense.cpp, and rounded once into the output dtype.
#include <cmath>
#include <limits>

#include "linalg/dense.h"
#include "linalg/linalg.h"

namespace rlx::linalg {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Mat load(const Tensor& t, int64_t b, int64_t size) {
  Mat m(size);
  for (int64_t i = 0; i < size; ++i) m[i] = t.get(b * size + i);
  return m;
}
void store(Tensor& t, int64_t b, const double* v, int64_t size) {
  for (int64_t i = 0; i < size; ++i) t.set(b * size + i, v[i]);
}
int64_t rows(const Tensor& t) { return t.shape()[t.rank() - 2]; }
int64_t cols(const Tensor& t) { return t.shape().back(); }

Tensor alloc(const ValueType& t) { return Tensor(t.dtype, static_dims(t.shape)); }

double eps_of(DType t) { return t == DType::f32 ? 1.1920928955078125e-07 : std::numeric_limits<double>::epsilon(); }

}  // namespace

int64_t batch_count(const Tensor& t) {
  int64_t b = 1;
  for (int64_t i = 0; i + 2 < t.rank(); ++i) b *= t.shape()[i];
  return b;
}

std::vector<Tensor> reference_eval(const Node& n, const std::vector<Tensor>& in, const std::vector<ValueType>& ot) {
  if (in[0].dtype() == DType::c64) return reference_eval_complex(n, in, ot);
  std::vector<Tensor> out;
  for (auto& t : ot) out.push_back(alloc(t));
  const Tensor& A = in[0];
  int64_t nb = batch_count(A), m = rows(A), nc = cols(A), sz = m * nc;
  for (int64_t b = 0; b < nb; ++b) {
    Mat a = load(A, b, sz);
    switch (n.op) {
      case OpKind::Cholesky: {
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j <= i; ++j) a[i * m + j] = 0.5 * (a[i * m + j] + a[j * m + i]);
        int info = cholesky(a.data(), m);
        if (info) std::fill(a.begin(), a.end(), kNaN);
        store(out[0], b, a.data(), sz);
        out[1].set(b, info);
        break;
      }
      case OpKind::TriangularSolve: {
        bool left = attr_int(n, "left_side"), lower = attr_int(n, "lower"), tr = attr_int(n, "transpose_a"),
             unit = attr_int(n, "unit_diagonal");
        const Tensor& B = in[1];
        int64_t br = rows(B), bc = cols(B);
        Mat x = load(B, b, br * bc);
        if (left) {
          trsm_left(a.data(), m, x.data(), bc, lower, tr, unit);
        } else {  // X op(A) = B  <=>  op(A)ᵀ Xᵀ = Bᵀ
          Mat xt(bc * br);
          for (int64_t i = 0; i < br; ++i)
            for (int64_t j = 0; j < bc; ++j) xt[j * br + i] = x[i * bc + j];
          trsm_left(a.data(), m, xt.data(), br, lower, !tr, unit);
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
        Mat q(m * kq), r(kq * nc);
        qr(a.data(), m, nc, full, q.data(), r.data());
        store(out[0], b, q.data(), m * kq);
        store(out[1], b, r.data(), kq * nc);
        break;
      }
      case OpKind::Eigh: {
        Mat w(m), v(sz);
        eigh(a.data(), m, w.data(), v.data());
        store(out[0], b, w.data(), m);
        store(out[1], b, v.data(), sz);
        break;
      }
      case OpKind::Svd: {
        int64_t k = std::min(m, nc);
        Mat u(m * k), s(k), vh(k * nc);
        svd(a.data(), m, nc, u.data(), s.data(), vh.data());
        store(out[0], b, u.data(), m * k);
        store(out[1], b, s.data(), k);
        store(out[2], b, vh.data(), k * nc);
        break;
      }
      case OpKind::Solve:
      case OpKind::Inv: {
        int64_t k = n.op == OpKind::Inv ? m : cols(in[1]);
        Mat x(m * k, 0.0);
        if (n.op == OpKind::Inv)
          for (int64_t i = 0; i < m; ++i) x[i * m + i] = 1;
        else
          x = load(in[1], b, m * k);
        std::vector<int32_t> piv(m);
        if (lu(a.data(), m, m, piv.data())) {
          std::fill(x.begin(), x.end(), kNaN);  // singular: NaN, as documented
        } else {
          for (int64_t i = 0; i < m; ++i)
            if (piv[i] != i)
              for (int64_t c = 0; c < k; ++c) std::swap(x[i * k + c], x[piv[i] * k + c]);
          trsm_left(a.data(), m, x.data(), k, true, false, true);
          trsm_left(a.data(), m, x.data(), k, false, false, false);
        }
        store(out[0], b, x.data(), m * k);
        break;
      }
      case OpKind::Det:
      case OpKind::Slogdet: {
        std::vector<int32_t> piv(m);
        lu(a.data(), m, m, piv.data());
        double sign = 1, logabs = 0, det = 1;
        for (int64_t i = 0; i < m; ++i) {
          double d = a[i * m + i];
          if (piv[i] != i) sign = -sign;
          sign *= d > 0 ? 1 : (d < 0 ? -1 : 0);
          logabs += std::log(std::abs(d));
          det *= d;
        }
        if (n.op == OpKind::Det) {
          for (int64_t i = 0; i < m; ++i)
            if (piv[i] != i) det = -det;
          out[0].set(b, det);
        } else {
          if (sign == 0) logabs = -std::numeric_limits<double>::infinity();
          out[0].set(b, sign);
          out[1].set(b, logabs);
        }
        break;
      }
      case OpKind::Lstsq: {
        const Tensor& B = in[1];
        int64_t k = std::min(m, nc), nr = cols(B);
        Mat u(m * k), s(k), vh(k * nc), bb = load(B, b, m * nr);
        svd(a.data(), m, nc, u.data(), s.data(), vh.data());
        double rc = attr_float(n, "rcond");
        if (rc < 0) rc = eps_of(A.dtype()) * static_cast<double>(std::max(m, nc));
        double cut = rc * (k ? s[0] : 0);
        int rank = 0;
        Mat y(k * nr, 0.0), x(nc * nr, 0.0);
        for (int64_t i = 0; i < k; ++i) {
          if (!(s[i] > cut)) continue;
          ++rank;
          for (int64_t c = 0; c < nr; ++c) {
            double d = 0;
            for (int64_t r = 0; r < m; ++r) d += u[r * k + i] * bb[r * nr + c];
            y[i * nr + c] = d / s[i];
          }
        }
        for (int64_t j = 0; j < nc; ++j)
          for (int64_t c = 0; c < nr; ++c) {
            double d = 0;
            for (int64_t i = 0; i < k; ++i) d += vh[i * nc + j] * y[i * nr + c];
            x[j * nr + c] = d;
          }
        store(out[0], b, x.data(), nc * nr);
        out[1].set(b, rank);
        store(out[2], b, s.data(), k);
        break;
      }
      case OpKind::MatrixExp: {
        Mat e(sz);
        matrix_exp(a.data(), m, e.data());
        store(out[0], b, e.data(), sz);
        break;
      }
      default: fail("[reference] ", op_name(n.op), " is not a linear-algebra op");
    }
  }
  return out;
}

}  // namespace rlx::linalg
