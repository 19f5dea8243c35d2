// Float64 reference factorizations (dense.h). Straightforward unblocked algorithms chosen for
// accuracy: Jacobi methods for eigh/SVD (high relative accuracy), Householder QR whose reflector
// signs follow LAPACK's (so Q and R agree with numpy's), partial-pivoting LU.
#include "linalg/dense.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "linalg/dense_scalar.h"

namespace rlx::linalg {

namespace {

constexpr double kEps = std::numeric_limits<double>::epsilon();

void matmul(const double* a, const double* b, double* c, int64_t n) {
  std::fill(c, c + n * n, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < n; ++k) {
      double aik = a[i * n + k];
      for (int64_t j = 0; j < n; ++j) c[i * n + j] += aik * b[k * n + j];
    }
}

// Rotation (c, s) with t = sign(z) / (|z| + sqrt(1 + z²)): the smaller of the two angles.
void rotation(double z, double* c, double* s) {
  double t = (z >= 0 ? 1.0 : -1.0) / (std::abs(z) + std::sqrt(1.0 + z * z));
  *c = 1.0 / std::sqrt(1.0 + t * t);
  *s = t * *c;
}

}  // namespace

int cholesky(double* a, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    double d = a[j * n + j];
    for (int64_t k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
    if (!(d > 0)) return static_cast<int>(j + 1);
    double l = std::sqrt(d);
    a[j * n + j] = l;
    for (int64_t i = j + 1; i < n; ++i) {
      double v = a[i * n + j];
      for (int64_t k = 0; k < j; ++k) v -= a[i * n + k] * a[j * n + k];
      a[i * n + j] = v / l;
    }
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) a[i * n + j] = 0;
  return 0;
}

void trsm_left(const double* a, int64_t n, double* b, int64_t k, bool lower, bool trans, bool unit) {
  detail::trsm_left(a, n, b, k, lower, trans, false, unit);
}

int lu(double* a, int64_t m, int64_t n, int32_t* pivots) { return detail::lu(a, m, n, pivots); }

void pivots_to_perm(const int32_t* pivots, int64_t k, int64_t m, int32_t* perm) {
  std::iota(perm, perm + m, 0);
  for (int64_t i = 0; i < k; ++i) std::swap(perm[i], perm[pivots[i]]);
}

void qr(const double* a, int64_t m, int64_t n, bool full, double* q, double* r_out) {
  Mat r(a, a + m * n);
  int64_t k = std::min(m, n), kq = full ? m : k;
  Mat v(m * k, 0.0);
  std::vector<double> tau(k, 0.0);
  for (int64_t j = 0; j < k; ++j) {
    double alpha = r[j * n + j], xn = 0;
    for (int64_t i = j + 1; i < m; ++i) xn = std::hypot(xn, r[i * n + j]);
    v[j * k + j] = 1;
    if (xn == 0) continue;  // H = I, as LAPACK's dlarfg
    double beta = -std::copysign(std::hypot(alpha, xn), alpha);
    tau[j] = (beta - alpha) / beta;
    double sc = 1.0 / (alpha - beta);
    for (int64_t i = j + 1; i < m; ++i) v[i * k + j] = r[i * n + j] * sc;
    for (int64_t c = j; c < n; ++c) {
      double d = 0;
      for (int64_t i = j; i < m; ++i) d += v[i * k + j] * r[i * n + c];
      d *= tau[j];
      for (int64_t i = j; i < m; ++i) r[i * n + c] -= d * v[i * k + j];
    }
    r[j * n + j] = beta;
    for (int64_t i = j + 1; i < m; ++i) r[i * n + j] = 0;
  }
  // Q = H_0 H_1 ... H_{k-1} applied to the first kq columns of I.
  std::fill(q, q + m * kq, 0.0);
  for (int64_t i = 0; i < kq; ++i) q[i * kq + i] = 1;
  for (int64_t j = k - 1; j >= 0; --j) {
    if (tau[j] == 0) continue;
    for (int64_t c = 0; c < kq; ++c) {
      double d = 0;
      for (int64_t i = j; i < m; ++i) d += v[i * k + j] * q[i * kq + c];
      d *= tau[j];
      for (int64_t i = j; i < m; ++i) q[i * kq + c] -= d * v[i * k + j];
    }
  }
  for (int64_t i = 0; i < kq; ++i)
    for (int64_t c = 0; c < n; ++c) r_out[i * n + c] = i < m ? r[i * n + c] : 0.0;
}

void normalize_signs(double* u, int64_t m, int64_t k, double* vh, int64_t n) {
  for (int64_t j = 0; j < k; ++j) {
    int64_t best = 0;
    for (int64_t i = 1; i < m; ++i)
      if (std::abs(u[i * k + j]) > std::abs(u[best * k + j])) best = i;
    if (u[best * k + j] >= 0) continue;
    for (int64_t i = 0; i < m; ++i) u[i * k + j] = -u[i * k + j];
    if (vh)
      for (int64_t c = 0; c < n; ++c) vh[j * n + c] = -vh[j * n + c];
  }
}

void eigh(const double* a, int64_t n, double* w, double* v_out) {
  Mat s(n * n), v(n * n, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) s[i * n + j] = 0.5 * (a[i * n + j] + a[j * n + i]);
  for (int64_t i = 0; i < n; ++i) v[i * n + i] = 1;
  for (int sweep = 0; sweep < 100; ++sweep) {
    bool rotated = false;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) {
        double apq = s[p * n + q];
        if (apq == 0) continue;
        if (std::abs(apq) <= kEps * 1e-3 * std::sqrt(std::abs(s[p * n + p] * s[q * n + q]))) {
          s[p * n + q] = s[q * n + p] = 0;
          continue;
        }
        rotated = true;
        double c, sn;
        rotation((s[q * n + q] - s[p * n + p]) / (2 * apq), &c, &sn);
        for (int64_t k = 0; k < n; ++k) {
          double kp = s[k * n + p], kq = s[k * n + q];
          s[k * n + p] = c * kp - sn * kq;
          s[k * n + q] = sn * kp + c * kq;
        }
        for (int64_t k = 0; k < n; ++k) {
          double pk = s[p * n + k], qk = s[q * n + k];
          s[p * n + k] = c * pk - sn * qk;
          s[q * n + k] = sn * pk + c * qk;
        }
        for (int64_t k = 0; k < n; ++k) {
          double kp = v[k * n + p], kq = v[k * n + q];
          v[k * n + p] = c * kp - sn * kq;
          v[k * n + q] = sn * kp + c * kq;
        }
      }
    if (!rotated) break;
  }
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return s[x * n + x] < s[y * n + y]; });
  for (int64_t j = 0; j < n; ++j) {
    w[j] = s[order[j] * n + order[j]];
    for (int64_t i = 0; i < n; ++i) v_out[i * n + j] = v[i * n + order[j]];
  }
  normalize_signs(v_out, n, n, nullptr, 0);
}

namespace {

// One-sided Jacobi on the columns of a (m x n, m >= n): u (m x n), s (n), vh (n x n).
void svd_tall(const double* a, int64_t m, int64_t n, double* u, double* s, double* vh) {
  Mat w(a, a + m * n), v(n * n, 0.0);
  for (int64_t i = 0; i < n; ++i) v[i * n + i] = 1;
  for (int sweep = 0; sweep < 100; ++sweep) {
    bool rotated = false;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) {
        double al = 0, be = 0, ga = 0;
        for (int64_t i = 0; i < m; ++i) {
          double x = w[i * n + p], y = w[i * n + q];
          al += x * x;
          be += y * y;
          ga += x * y;
        }
        if (ga == 0 || std::abs(ga) <= kEps * 1e-1 * std::sqrt(al * be)) continue;
        rotated = true;
        double c, sn;
        rotation((be - al) / (2 * ga), &c, &sn);
        for (int64_t i = 0; i < m; ++i) {
          double x = w[i * n + p], y = w[i * n + q];
          w[i * n + p] = c * x - sn * y;
          w[i * n + q] = sn * x + c * y;
        }
        for (int64_t i = 0; i < n; ++i) {
          double x = v[i * n + p], y = v[i * n + q];
          v[i * n + p] = c * x - sn * y;
          v[i * n + q] = sn * x + c * y;
        }
      }
    if (!rotated) break;
  }
  std::vector<double> norm(n);
  for (int64_t j = 0; j < n; ++j) {
    double t = 0;
    for (int64_t i = 0; i < m; ++i) t = std::hypot(t, w[i * n + j]);
    norm[j] = t;
  }
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return norm[x] > norm[y]; });
  double smax = n ? norm[order[0]] : 0, tiny = smax * kEps * static_cast<double>(m) * 1e-3;
  std::vector<bool> done(n, false);
  for (int64_t j = 0; j < n; ++j) {
    int64_t o = order[j];
    s[j] = norm[o];
    for (int64_t c = 0; c < n; ++c) vh[j * n + c] = v[c * n + o];
    if (norm[o] > tiny && norm[o] > 0) {
      for (int64_t i = 0; i < m; ++i) u[i * n + j] = w[i * n + o] / norm[o];
      done[j] = true;
    }
  }
  // Columns of u for (numerically) zero singular values: unit vectors orthogonalized against the rest.
  for (int64_t j = 0; j < n; ++j) {
    if (done[j]) continue;
    for (int64_t e = 0; e < m; ++e) {
      std::vector<double> x(m, 0.0);
      x[e] = 1;
      for (int pass = 0; pass < 2; ++pass)
        for (int64_t c = 0; c < n; ++c) {
          if (!done[c]) continue;
          double d = 0;
          for (int64_t i = 0; i < m; ++i) d += u[i * n + c] * x[i];
          for (int64_t i = 0; i < m; ++i) x[i] -= d * u[i * n + c];
        }
      double t = 0;
      for (double xi : x) t = std::hypot(t, xi);
      if (t < 0.5) continue;
      for (int64_t i = 0; i < m; ++i) u[i * n + j] = x[i] / t;
      done[j] = true;
      break;
    }
  }
}

}  // namespace

void svd(const double* a, int64_t m, int64_t n, double* u, double* s, double* vh) {
  int64_t k = std::min(m, n);
  if (m >= n) {
    svd_tall(a, m, n, u, s, vh);
  } else {
    Mat at(n * m), u2(n * m), vh2(m * m);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) at[j * m + i] = a[i * n + j];
    svd_tall(at.data(), n, m, u2.data(), s, vh2.data());
    // A = (Aᵀ)ᵀ = vh2ᵀ S u2ᵀ
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < k; ++j) u[i * k + j] = vh2[j * m + i];
    for (int64_t j = 0; j < k; ++j)
      for (int64_t c = 0; c < n; ++c) vh[j * n + c] = u2[c * m + j];
  }
  normalize_signs(u, m, k, vh, n);
}

void matrix_exp(const double* a, int64_t n, double* out) {
  static const int kDeg[] = {3, 5, 7, 9, 13};
  static const double kTheta[] = {1.495585217958292e-2, 2.539398330063230e-1, 9.504178996162932e-1,
                                  2.097847961257068e0, 5.371920351148152e0};  // Higham (2005), double
  double norm1 = 0;
  for (int64_t j = 0; j < n; ++j) {
    double c = 0;
    for (int64_t i = 0; i < n; ++i) c += std::abs(a[i * n + j]);
    norm1 = std::max(norm1, c);
  }
  if (!std::isfinite(norm1)) {
    std::fill(out, out + n * n, std::numeric_limits<double>::quiet_NaN());
    return;
  }
  int deg = 13, sq = 0;
  for (int t = 0; t < 5; ++t)
    if (norm1 <= kTheta[t]) {
      deg = kDeg[t];
      break;
    }
  if (deg == 13 && norm1 > kTheta[4]) sq = static_cast<int>(std::ceil(std::log2(norm1 / kTheta[4])));
  Mat x(a, a + n * n);
  double scale = std::ldexp(1.0, -sq);
  for (auto& e : x) e *= scale;
  // Pade coefficients c_j = (2m-j)! m! / ((2m)! j! (m-j)!), by their ratio.
  std::vector<double> c(deg + 1);
  c[0] = 1;
  for (int j = 1; j <= deg; ++j) c[j] = c[j - 1] * (deg - j + 1) / (static_cast<double>(j) * (2 * deg - j + 1));
  Mat p(n * n, 0.0), tmp(n * n), U(n * n, 0.0), V(n * n, 0.0);
  for (int64_t i = 0; i < n; ++i) p[i * n + i] = 1;
  for (int j = 0; j <= deg; ++j) {
    if (j > 0) {
      matmul(p.data(), x.data(), tmp.data(), n);
      p.swap(tmp);
    }
    Mat& dst = (j % 2) ? U : V;
    for (int64_t e = 0; e < n * n; ++e) dst[e] += c[j] * p[e];
  }
  Mat num(n * n), den(n * n);
  for (int64_t e = 0; e < n * n; ++e) {
    num[e] = V[e] + U[e];
    den[e] = V[e] - U[e];
  }
  std::vector<int32_t> piv(n), perm(n);
  lu(den.data(), n, n, piv.data());
  pivots_to_perm(piv.data(), n, n, perm.data());
  Mat r(n * n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) r[i * n + j] = num[perm[i] * n + j];
  trsm_left(den.data(), n, r.data(), n, true, false, true);
  trsm_left(den.data(), n, r.data(), n, false, false, false);
  for (int s = 0; s < sq; ++s) {
    matmul(r.data(), r.data(), tmp.data(), n);
    r.swap(tmp);
  }
  std::copy(r.begin(), r.end(), out);
}

}  // namespace rlx::linalg
