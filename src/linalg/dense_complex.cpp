// Complex reference factorizations (dense_complex.h): dense.cpp's algorithms over complex<double>.
#include "linalg/dense_complex.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "linalg/dense_scalar.h"

namespace rlx::linalg {

namespace {

constexpr double kEps = std::numeric_limits<double>::epsilon();

// Rotation (c, s) with t = sign(z) / (|z| + sqrt(1 + z²)): the smaller of the two angles.
void rotation(double z, double* c, double* s) {
  double t = (z >= 0 ? 1.0 : -1.0) / (std::abs(z) + std::sqrt(1.0 + z * z));
  *c = 1.0 / std::sqrt(1.0 + t * t);
  *s = t * *c;
}

// Columns p, q of x (rows r, leading dim ld) rotated by the real (c, s).
void rotate_cols(Cx* x, int64_t rows, int64_t ld, int64_t p, int64_t q, double c, double s) {
  for (int64_t i = 0; i < rows; ++i) {
    Cx a = x[i * ld + p], b = x[i * ld + q];
    x[i * ld + p] = c * a - s * b;
    x[i * ld + q] = s * a + c * b;
  }
}

// Makes each column j < k of u (m x k) have its largest-magnitude entry real and positive; row j
// of vh (k x n) takes the opposite phase so that u diag(s) vh is unchanged.
void normalize_phases(Cx* u, int64_t m, int64_t k, Cx* vh, int64_t n) {
  for (int64_t j = 0; j < k; ++j) {
    int64_t best = 0;
    for (int64_t i = 1; i < m; ++i)
      if (std::abs(u[i * k + j]) > std::abs(u[best * k + j])) best = i;
    double mag = std::abs(u[best * k + j]);
    if (mag == 0) continue;
    Cx ph = u[best * k + j] / mag;  // u_j ← u_j conj(ph), vh_j ← ph vh_j
    for (int64_t i = 0; i < m; ++i) u[i * k + j] *= std::conj(ph);
    u[best * k + j] = mag;
    if (vh)
      for (int64_t c = 0; c < n; ++c) vh[j * n + c] *= ph;
  }
}

}  // namespace

int cholesky(Cx* a, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    double d = a[j * n + j].real();
    for (int64_t k = 0; k < j; ++k) d -= std::norm(a[j * n + k]);
    if (!(d > 0)) return static_cast<int>(j + 1);
    double l = std::sqrt(d);
    a[j * n + j] = l;
    for (int64_t i = j + 1; i < n; ++i) {
      Cx v = a[i * n + j];
      for (int64_t k = 0; k < j; ++k) v -= a[i * n + k] * std::conj(a[j * n + k]);
      a[i * n + j] = v / l;
    }
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) a[i * n + j] = 0;
  return 0;
}

void trsm_left(const Cx* a, int64_t n, Cx* b, int64_t k, bool lower, bool trans, bool conj, bool unit) {
  detail::trsm_left(a, n, b, k, lower, trans, conj, unit);
}

int lu(Cx* a, int64_t m, int64_t n, int32_t* pivots) { return detail::lu(a, m, n, pivots); }

void qr(const Cx* a, int64_t m, int64_t n, bool full, Cx* q, Cx* r_out) {
  CMat r(a, a + m * n);
  int64_t k = std::min(m, n), kq = full ? m : k;
  CMat v(m * k, Cx(0));
  std::vector<Cx> tau(k, Cx(0));
  for (int64_t j = 0; j < k; ++j) {
    Cx alpha = r[j * n + j];
    double xn = 0;
    for (int64_t i = j + 1; i < m; ++i) xn = std::hypot(xn, std::abs(r[i * n + j]));
    v[j * k + j] = 1;
    if (xn == 0 && alpha.imag() == 0) continue;  // H = I, as LAPACK's zlarfg
    double beta = -std::copysign(std::hypot(std::abs(alpha), xn), alpha.real());
    tau[j] = Cx((beta - alpha.real()) / beta, -alpha.imag() / beta);
    Cx sc = 1.0 / (alpha - beta);
    for (int64_t i = j + 1; i < m; ++i) v[i * k + j] = r[i * n + j] * sc;
    // R ← Hᴴ R with H = I - tau v vᴴ (geqrf applies the conjugate reflectors; A = H_0 ... H_{k-1} R).
    for (int64_t c = j; c < n; ++c) {
      Cx d = 0;
      for (int64_t i = j; i < m; ++i) d += std::conj(v[i * k + j]) * r[i * n + c];
      d *= std::conj(tau[j]);
      for (int64_t i = j; i < m; ++i) r[i * n + c] -= d * v[i * k + j];
    }
    r[j * n + j] = beta;
    for (int64_t i = j + 1; i < m; ++i) r[i * n + j] = 0;
  }
  std::fill(q, q + m * kq, Cx(0));
  for (int64_t i = 0; i < kq; ++i) q[i * kq + i] = 1;
  for (int64_t j = k - 1; j >= 0; --j) {
    if (tau[j] == Cx(0)) continue;
    for (int64_t c = 0; c < kq; ++c) {
      Cx d = 0;
      for (int64_t i = j; i < m; ++i) d += std::conj(v[i * k + j]) * q[i * kq + c];
      d *= tau[j];
      for (int64_t i = j; i < m; ++i) q[i * kq + c] -= d * v[i * k + j];
    }
  }
  for (int64_t i = 0; i < kq; ++i)
    for (int64_t c = 0; c < n; ++c) r_out[i * n + c] = i < m ? r[i * n + c] : Cx(0);
}

void eigh(const Cx* a, int64_t n, double* w, Cx* v_out) {
  CMat s(n * n), v(n * n, Cx(0));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) s[i * n + j] = 0.5 * (a[i * n + j] + std::conj(a[j * n + i]));
  for (int64_t i = 0; i < n; ++i) v[i * n + i] = 1;
  for (int sweep = 0; sweep < 100; ++sweep) {
    bool rotated = false;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) {
        double r = std::abs(s[p * n + q]);
        if (r == 0) continue;
        if (r <= kEps * 1e-3 * std::sqrt(std::abs(s[p * n + p].real() * s[q * n + q].real()))) {
          s[p * n + q] = s[q * n + p] = 0;
          continue;
        }
        rotated = true;
        // S ← Dᴴ S D, V ← V D with D = diag(1, d) at (p, q), d = conj(phase of S_pq): S_pq becomes r.
        Cx d = std::conj(s[p * n + q]) / r;
        for (int64_t k = 0; k < n; ++k) s[k * n + q] *= d;
        for (int64_t k = 0; k < n; ++k) s[q * n + k] *= std::conj(d);
        for (int64_t k = 0; k < n; ++k) v[k * n + q] *= d;
        s[p * n + q] = s[q * n + p] = r;
        double c, sn;
        rotation((s[q * n + q].real() - s[p * n + p].real()) / (2 * r), &c, &sn);
        rotate_cols(s.data(), n, n, p, q, c, sn);
        for (int64_t k = 0; k < n; ++k) {  // rows: Gᵀ S (G real)
          Cx pk = s[p * n + k], qk = s[q * n + k];
          s[p * n + k] = c * pk - sn * qk;
          s[q * n + k] = sn * pk + c * qk;
        }
        rotate_cols(v.data(), n, n, p, q, c, sn);
      }
    if (!rotated) break;
  }
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return s[x * n + x].real() < s[y * n + y].real(); });
  for (int64_t j = 0; j < n; ++j) {
    w[j] = s[order[j] * n + order[j]].real();
    for (int64_t i = 0; i < n; ++i) v_out[i * n + j] = v[i * n + order[j]];
  }
  normalize_phases(v_out, n, n, nullptr, 0);
}

namespace {

// One-sided Jacobi on the columns of a (m x n, m >= n): u (m x n), s (n), vh (n x n).
void svd_tall(const Cx* a, int64_t m, int64_t n, Cx* u, double* s, Cx* vh) {
  CMat w(a, a + m * n), v(n * n, Cx(0));
  for (int64_t i = 0; i < n; ++i) v[i * n + i] = 1;
  for (int sweep = 0; sweep < 100; ++sweep) {
    bool rotated = false;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) {
        double al = 0, be = 0;
        Cx ga = 0;
        for (int64_t i = 0; i < m; ++i) {
          Cx x = w[i * n + p], y = w[i * n + q];
          al += std::norm(x);
          be += std::norm(y);
          ga += std::conj(x) * y;
        }
        double g = std::abs(ga);
        if (g == 0 || g <= kEps * 1e-1 * std::sqrt(al * be)) continue;
        rotated = true;
        Cx d = std::conj(ga) / g;  // column q times d makes the pair's inner product real
        for (int64_t i = 0; i < m; ++i) w[i * n + q] *= d;
        for (int64_t i = 0; i < n; ++i) v[i * n + q] *= d;
        double c, sn;
        rotation((be - al) / (2 * g), &c, &sn);
        rotate_cols(w.data(), m, n, p, q, c, sn);
        rotate_cols(v.data(), n, n, p, q, c, sn);
      }
    if (!rotated) break;
  }
  std::vector<double> norm(n);
  for (int64_t j = 0; j < n; ++j) {
    double t = 0;
    for (int64_t i = 0; i < m; ++i) t = std::hypot(t, std::abs(w[i * n + j]));
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
    for (int64_t c = 0; c < n; ++c) vh[j * n + c] = std::conj(v[c * n + o]);
    if (norm[o] > tiny && norm[o] > 0) {
      for (int64_t i = 0; i < m; ++i) u[i * n + j] = w[i * n + o] / norm[o];
      done[j] = true;
    }
  }
  // Columns of u for (numerically) zero singular values: unit vectors orthogonalized against the rest.
  for (int64_t j = 0; j < n; ++j) {
    if (done[j]) continue;
    for (int64_t e = 0; e < m; ++e) {
      CMat x(m, Cx(0));
      x[e] = 1;
      for (int pass = 0; pass < 2; ++pass)
        for (int64_t c = 0; c < n; ++c) {
          if (!done[c]) continue;
          Cx d = 0;
          for (int64_t i = 0; i < m; ++i) d += std::conj(u[i * n + c]) * x[i];
          for (int64_t i = 0; i < m; ++i) x[i] -= d * u[i * n + c];
        }
      double t = 0;
      for (Cx xi : x) t = std::hypot(t, std::abs(xi));
      if (t < 0.5) continue;
      for (int64_t i = 0; i < m; ++i) u[i * n + j] = x[i] / t;
      done[j] = true;
      break;
    }
  }
}

}  // namespace

void svd(const Cx* a, int64_t m, int64_t n, Cx* u, double* s, Cx* vh) {
  int64_t k = std::min(m, n);
  if (m >= n) {
    svd_tall(a, m, n, u, s, vh);
  } else {
    CMat ah(n * m), u2(n * m), vh2(m * m);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) ah[j * m + i] = std::conj(a[i * n + j]);
    svd_tall(ah.data(), n, m, u2.data(), s, vh2.data());
    // A = (Aᴴ)ᴴ = vh2ᴴ S u2ᴴ
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < k; ++j) u[i * k + j] = std::conj(vh2[j * m + i]);
    for (int64_t j = 0; j < k; ++j)
      for (int64_t c = 0; c < n; ++c) vh[j * n + c] = std::conj(u2[c * m + j]);
  }
  normalize_phases(u, m, k, vh, n);
}

}  // namespace rlx::linalg
