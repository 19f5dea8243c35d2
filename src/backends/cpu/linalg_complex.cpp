// cpu kernels of the linear-algebra ops on c64 through LAPACKE's single-precision complex routines
// (cpotrf, cblas_ctrsm, cgesv, cgetrf, cheevd, cgesdd, cgeqrf + cungqr) in LAPACKE's row-major
// interface. Results follow the complex reference (src/linalg/dense_complex.h): the same error
// policy (NaN + info), R's real diagonal as LAPACK's, eigenvector / singular-vector columns with
// their largest-magnitude entry made real positive. Without LAPACKE, c64 runs the reference
// (the generic kernel).
#include "backends/cpu/kernels.h"

#if defined(RLX_HAVE_LAPACKE)
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <vector>

#define lapack_complex_float std::complex<float>
#define lapack_complex_double std::complex<double>
#include <cblas.h>
#include <lapacke.h>

#include "backends/cpu/linalg_batch.h"
#include "backends/cpu/parallel.h"


namespace rlx::cpu {

namespace {

using C = std::complex<float>;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
const C kCNaN(kNaN, kNaN);

using linalg_batch::batch_of;
using linalg_batch::cols;
using linalg_batch::rows;

std::vector<C>& scratch(size_t n) {
  thread_local std::vector<C> s;
  if (s.size() < n) s.resize(n);
  return s;
}

// Columns of u (m x k): largest-magnitude entry made real positive; rows of vh (k x n) follow.
void normalize_phases(C* u, int64_t m, int64_t k, C* vh, int64_t n) {
  for (int64_t j = 0; j < k; ++j) {
    int64_t best = 0;
    for (int64_t i = 1; i < m; ++i)
      if (std::abs(u[i * k + j]) > std::abs(u[best * k + j])) best = i;
    float mag = std::abs(u[best * k + j]);
    if (mag == 0) continue;
    C ph = u[best * k + j] / mag;
    for (int64_t i = 0; i < m; ++i) u[i * k + j] *= std::conj(ph);
    u[best * k + j] = mag;
    if (vh)
      for (int64_t c = 0; c < n; ++c) vh[j * n + c] *= ph;
  }
}

void cholesky_c(const Node&, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const C* A = in[0].data<C>();
  int64_t n = rows(in[0]), nb = batch_of(in[0]);
  linalg_batch::for_batch(nb, n, [&](int64_t b) {
    const C* a = A + b * n * n;
    C* l = out[0].data<C>() + b * n * n;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) l[i * n + j] = j <= i ? 0.5f * (a[i * n + j] + std::conj(a[j * n + i])) : C(0);
    int r = LAPACKE_cpotrf(LAPACK_ROW_MAJOR, 'L', static_cast<int>(n), l, static_cast<int>(n));
    out[1].data<int32_t>()[b] = r;
    if (r) std::fill(l, l + n * n, kCNaN);
  });
}

void triangular_solve_c(const Node& nd, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  bool left = attr_int(nd, "left_side"), lower = attr_int(nd, "lower"), tr = attr_int(nd, "transpose_a"),
       cj = attr_int(nd, "conjugate_a"), unit = attr_int(nd, "unit_diagonal");
  int64_t n = rows(in[0]), nb = batch_of(in[0]), br = rows(in[1]), bc = cols(in[1]);
  C* X = out[0].data<C>();
  if (X != in[1].data<C>()) std::memcpy(X, in[1].data<C>(), in[1].nbytes());
  const C one(1);
  linalg_batch::for_batch(nb, n, [&](int64_t b) {
    const C* a = in[0].data<C>() + b * n * n;
    if (cj && !tr) {  // conj(A): BLAS has Aᴴ but not conj(A) alone
      C* s = scratch(n * n).data();
      for (int64_t i = 0; i < n * n; ++i) s[i] = std::conj(a[i]);
      a = s;
    }
    CBLAS_TRANSPOSE t = !tr ? CblasNoTrans : (cj ? CblasConjTrans : CblasTrans);
    cblas_ctrsm(CblasRowMajor, left ? CblasLeft : CblasRight, lower ? CblasLower : CblasUpper, t,
                unit ? CblasUnit : CblasNonUnit, static_cast<int>(br), static_cast<int>(bc), &one, a,
                static_cast<int>(n), X + b * br * bc, static_cast<int>(bc));
  });
}

void solve_c(const Node& nd, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  bool inv = nd.op == OpKind::Inv;
  int64_t n = rows(in[0]), nb = batch_of(in[0]), k = inv ? n : cols(in[1]);
  linalg_batch::for_batch(nb, n, [&](int64_t b) {
    C* s = scratch(n * n).data();
    std::copy(in[0].data<C>() + b * n * n, in[0].data<C>() + (b + 1) * n * n, s);
    C* x = out[0].data<C>() + b * n * k;
    if (inv) {
      std::fill(x, x + n * n, C(0));
      for (int64_t i = 0; i < n; ++i) x[i * n + i] = 1;
    } else {
      std::copy(in[1].data<C>() + b * n * k, in[1].data<C>() + (b + 1) * n * k, x);
    }
    std::vector<int> piv(n);
    int r = LAPACKE_cgesv(LAPACK_ROW_MAJOR, static_cast<int>(n), static_cast<int>(k), s, static_cast<int>(n),
                          piv.data(), x, static_cast<int>(k));
    if (r) std::fill(x, x + n * k, kCNaN);
  });
}

void det_c(const Node& nd, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  bool slog = nd.op == OpKind::Slogdet;
  int64_t n = rows(in[0]), nb = batch_of(in[0]);
  linalg_batch::for_batch(nb, n, [&](int64_t b) {
    C* s = scratch(n * n).data();
    std::copy(in[0].data<C>() + b * n * n, in[0].data<C>() + (b + 1) * n * n, s);
    std::vector<int> piv(n);
    LAPACKE_cgetrf(LAPACK_ROW_MAJOR, static_cast<int>(n), static_cast<int>(n), s, static_cast<int>(n), piv.data());
    std::complex<double> det = 1, sign = 1;
    double logabs = 0;
    for (int64_t i = 0; i < n; ++i) {
      std::complex<double> d = s[i * n + i];
      double ad = std::abs(d);
      if (piv[i] - 1 != i) sign = -sign, det = -det;
      sign = ad > 0 ? sign * (d / ad) : 0.0;
      logabs += std::log(ad);
      det *= d;
    }
    if (!slog) {
      out[0].data<C>()[b] = C(det);
    } else {
      out[0].data<C>()[b] = C(sign);
      out[1].data<float>()[b] = sign == 0.0 ? -std::numeric_limits<float>::infinity() : static_cast<float>(logabs);
    }
  });
}

void eigh_c(const Node&, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  int64_t n = rows(in[0]), nb = batch_of(in[0]);
  linalg_batch::for_batch(nb, n, [&](int64_t b) {
    const C* a = in[0].data<C>() + b * n * n;
    C* v = out[1].data<C>() + b * n * n;
    float* w = out[0].data<float>() + b * n;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) v[i * n + j] = 0.5f * (a[i * n + j] + std::conj(a[j * n + i]));
    if (LAPACKE_cheevd(LAPACK_ROW_MAJOR, 'V', 'L', static_cast<int>(n), v, static_cast<int>(n), w)) {
      std::fill(w, w + n, kNaN);
      std::fill(v, v + n * n, kCNaN);
      return;
    }
    normalize_phases(v, n, n, nullptr, 0);
  });
}

void svd_c(const Node&, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  int64_t m = rows(in[0]), n = cols(in[0]), k = std::min(m, n), nb = batch_of(in[0]);
  linalg_batch::for_batch(nb, std::max(m, n), [&](int64_t b) {
    C* s = scratch(m * n).data();
    std::copy(in[0].data<C>() + b * m * n, in[0].data<C>() + (b + 1) * m * n, s);
    C *u = out[0].data<C>() + b * m * k, *vh = out[2].data<C>() + b * k * n;
    float* sv = out[1].data<float>() + b * k;
    if (LAPACKE_cgesdd(LAPACK_ROW_MAJOR, 'S', static_cast<int>(m), static_cast<int>(n), s, static_cast<int>(n), sv,
                       u, static_cast<int>(k), vh, static_cast<int>(n))) {
      std::fill(u, u + m * k, kCNaN);
      std::fill(sv, sv + k, kNaN);
      std::fill(vh, vh + k * n, kCNaN);
      return;
    }
    normalize_phases(u, m, k, vh, n);
  });
}

void qr_c(const Node& nd, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  bool full = attr_int(nd, "full_matrices");
  int64_t m = rows(in[0]), n = cols(in[0]), k = std::min(m, n), kq = full ? m : k, nb = batch_of(in[0]);
  int64_t qc = std::max(n, kq);  // columns of the work matrix: A's, or Q's when wider
  linalg_batch::for_batch(nb, std::max(m, n), [&](int64_t b) {
    std::vector<C> w(m * qc, C(0)), tau(k);
    const C* a = in[0].data<C>() + b * m * n;
    for (int64_t i = 0; i < m; ++i) std::copy(a + i * n, a + (i + 1) * n, w.data() + i * qc);
    LAPACKE_cgeqrf(LAPACK_ROW_MAJOR, static_cast<int>(m), static_cast<int>(n), w.data(), static_cast<int>(qc), tau.data());
    C *q = out[0].data<C>() + b * m * kq, *r = out[1].data<C>() + b * kq * n;
    for (int64_t i = 0; i < kq; ++i)
      for (int64_t j = 0; j < n; ++j) r[i * n + j] = (j >= i && i < m) ? w[i * qc + j] : C(0);
    LAPACKE_cungqr(LAPACK_ROW_MAJOR, static_cast<int>(m), static_cast<int>(kq), static_cast<int>(k), w.data(),
                   static_cast<int>(qc), tau.data());
    for (int64_t i = 0; i < m; ++i) std::copy(w.data() + i * qc, w.data() + i * qc + kq, q + i * kq);
  });
}

}  // namespace

KernelFn find_linalg_kernel_c64(OpKind op) {
  switch (op) {
    case OpKind::Cholesky: return &cholesky_c;
    case OpKind::TriangularSolve: return &triangular_solve_c;
    case OpKind::Solve:
    case OpKind::Inv: return &solve_c;
    case OpKind::Det:
    case OpKind::Slogdet: return &det_c;
    case OpKind::Eigh: return &eigh_c;
    case OpKind::Svd: return &svd_c;
    case OpKind::Qr: return &qr_c;
    default: return nullptr;  // lu: the reference (getrf's pivots as ours, no faster path needed)
  }
}

}  // namespace rlx::cpu

#else

namespace rlx::cpu {
KernelFn find_linalg_kernel_c64(OpKind) { return nullptr; }  // the complex reference runs instead
}  // namespace rlx::cpu

#endif
