// cpu kernels of the linear-algebra ops: small matrices (n <= 32) through our own batched kernels
// (linalg_small.cpp), larger ones through LAPACKE/OpenBLAS, column-major calls on our row-major
// data chosen so most need no transpose (potrf 'U' of Aᵀ is Lᵀ; getrf of Aᵀ has A's determinant and
// getri gives (A⁻¹)ᵀ; gesdd of Aᵀ swaps the roles of U and Vᵀ). Batches split over the pool; a single
// large matrix lets OpenBLAS use every thread for that call. Error policy as the reference
// (src/linalg/linalg.h): NaN values + info, never a throw.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/linalg_batch.h"
#include "backends/cpu/linalg_small.h"
#include "backends/cpu/parallel.h"

#if defined(RLX_HAVE_LAPACKE)
#include <cblas.h>
#include <lapacke.h>
#endif

namespace rlx::cpu {

namespace {

using linalg_batch::batch_of;
using linalg_batch::cols;
using linalg_batch::for_batch;
using linalg_batch::rows;

template <class T>
constexpr T nan_v() {
  return std::numeric_limits<T>::quiet_NaN();
}

template <class T>
std::vector<T>& scratch(size_t n) {
  thread_local std::vector<T> s;
  if (s.size() < n) s.resize(n);
  return s;
}

// (A+Aᵀ)/2's lower triangle into l (row-major n x n); upper left as is (the factorization ignores it).
template <class T>
void sym_lower(const T* a, T* l, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j <= i; ++j) l[i * n + j] = T(0.5) * (a[i * n + j] + a[j * n + i]);
}

#if defined(RLX_HAVE_LAPACKE)
// Overloads so one template body calls the f32 or f64 routine.
inline int potrf(float* a, int n) { return LAPACKE_spotrf_work(LAPACK_COL_MAJOR, 'U', n, a, n); }
inline int potrf(double* a, int n) { return LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'U', n, a, n); }
inline int getrf(float* a, int m, int n, int* p) { return LAPACKE_sgetrf_work(LAPACK_COL_MAJOR, m, n, a, m, p); }
inline int getrf(double* a, int m, int n, int* p) { return LAPACKE_dgetrf_work(LAPACK_COL_MAJOR, m, n, a, m, p); }
inline int getri(float* a, int n, const int* p) { return LAPACKE_sgetri(LAPACK_COL_MAJOR, n, a, n, p); }
inline int getri(double* a, int n, const int* p) { return LAPACKE_dgetri(LAPACK_COL_MAJOR, n, a, n, p); }
inline int gesv(float* a, int n, int* p, float* b, int k) { return LAPACKE_sgesv_work(LAPACK_ROW_MAJOR, n, k, a, n, p, b, k); }
inline int gesv(double* a, int n, int* p, double* b, int k) { return LAPACKE_dgesv_work(LAPACK_ROW_MAJOR, n, k, a, n, p, b, k); }
inline int syevd(float* a, int n, float* w) { return LAPACKE_ssyevd(LAPACK_COL_MAJOR, 'V', 'U', n, a, n, w); }
inline int syevd(double* a, int n, double* w) { return LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'U', n, a, n, w); }
inline int gesdd(float* a, int m, int n, float* s, float* u, float* vt) {
  int k = std::min(m, n);
  return LAPACKE_sgesdd(LAPACK_COL_MAJOR, 'S', m, n, a, m, s, u, m, vt, k);
}
inline int gesdd(double* a, int m, int n, double* s, double* u, double* vt) {
  int k = std::min(m, n);
  return LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'S', m, n, a, m, s, u, m, vt, k);
}
inline int geqrf(float* a, int m, int n, float* tau) { return LAPACKE_sgeqrf(LAPACK_COL_MAJOR, m, n, a, m, tau); }
inline int geqrf(double* a, int m, int n, double* tau) { return LAPACKE_dgeqrf(LAPACK_COL_MAJOR, m, n, a, m, tau); }
inline int orgqr(float* a, int m, int n, int k, const float* tau) { return LAPACKE_sorgqr(LAPACK_COL_MAJOR, m, n, k, a, m, tau); }
inline int orgqr(double* a, int m, int n, int k, const double* tau) { return LAPACKE_dorgqr(LAPACK_COL_MAJOR, m, n, k, a, m, tau); }
inline void trsm(bool left, bool lower, bool trans, bool unit, int m, int n, const float* a, float* b) {
  cblas_strsm(CblasRowMajor, left ? CblasLeft : CblasRight, lower ? CblasLower : CblasUpper, trans ? CblasTrans : CblasNoTrans,
              unit ? CblasUnit : CblasNonUnit, m, n, 1.0f, a, left ? m : n, b, n);
}
inline void trsm(bool left, bool lower, bool trans, bool unit, int m, int n, const double* a, double* b) {
  cblas_dtrsm(CblasRowMajor, left ? CblasLeft : CblasRight, lower ? CblasLower : CblasUpper, trans ? CblasTrans : CblasNoTrans,
              unit ? CblasUnit : CblasNonUnit, m, n, 1.0, a, left ? m : n, b, n);
}
#endif

// Signs eigenvector/singular-vector columns of u (m x k) as the reference does (dense.h).
template <class T>
void sign_columns(T* u, int64_t m, int64_t k, T* vh, int64_t n) {
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

template <class T>
void transpose_into(const T* a, int64_t r, int64_t c, T* out) {  // a r x c row-major -> out c x r
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) out[j * r + i] = a[i * c + j];
}

template <class T>
void cholesky_k(const Node&, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const T* A = in[0].data<T>();
  T* L = out[0].data<T>();
  int32_t* info = out[1].data<int32_t>();
  int64_t n = rows(in[0]), nb = batch_of(in[0]);
  for_batch(nb, n, [&](int64_t b) {
    T* l = L + b * n * n;
    sym_lower(A + b * n * n, l, n);
    int r;
#if defined(RLX_HAVE_LAPACKE)
    if (n > small::kSmallN) {
      r = potrf(l, static_cast<int>(n));
      for (int64_t i = 0; i < n; ++i) std::fill(l + i * n + i + 1, l + (i + 1) * n, T(0));
    } else
#endif
      r = small::cholesky(l, n);
    info[b] = r;
    if (r) std::fill(l, l + n * n, nan_v<T>());
  });
}

template <class T>
void triangular_solve_k(const Node& nd, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  bool left = attr_int(nd, "left_side"), lower = attr_int(nd, "lower"), tr = attr_int(nd, "transpose_a"),
       unit = attr_int(nd, "unit_diagonal");
  const T* A = in[0].data<T>();
  T* X = out[0].data<T>();
  int64_t n = rows(in[0]), nb = batch_of(in[0]), br = rows(in[1]), bc = cols(in[1]);
  if (X != in[1].data<T>()) std::memcpy(X, in[1].data<T>(), in[1].nbytes());
  for_batch(nb, n, [&](int64_t b) {
    const T* a = A + b * n * n;
    T* x = X + b * br * bc;
#if defined(RLX_HAVE_LAPACKE)
    if (n > small::kSmallN || !left) return trsm(left, lower, tr, unit, static_cast<int>(br), static_cast<int>(bc), a, x);
#endif
    if (left) return small::trsm_left(a, n, x, bc, lower, tr, unit);
    // right side without BLAS: X op(A) = B  <=>  op(A)ᵀ Xᵀ = Bᵀ
    auto& t = scratch<T>(br * bc);
    transpose_into(x, br, bc, t.data());
    small::trsm_left(a, n, t.data(), br, lower, !tr, unit);
    transpose_into(t.data(), bc, br, x);
  });
}

// solve and inv: LU with partial pivoting, NaN for an exactly singular matrix.
template <class T>
void solve_k(const Node& nd, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  bool inv = nd.op == OpKind::Inv;
  const T* A = in[0].data<T>();
  T* X = out[0].data<T>();
  int64_t n = rows(in[0]), nb = batch_of(in[0]), k = inv ? n : cols(in[1]);
  for_batch(nb, n, [&](int64_t b) {
    T* x = X + b * n * k;
    auto& s = scratch<T>(n * n);
    thread_local std::vector<int32_t> piv;
    piv.resize(n);
    std::copy(A + b * n * n, A + (b + 1) * n * n, s.data());
    if (inv) {
      std::fill(x, x + n * n, T(0));
      for (int64_t i = 0; i < n; ++i) x[i * n + i] = 1;
    } else {
      std::copy(in[1].data<T>() + b * n * k, in[1].data<T>() + (b + 1) * n * k, x);
    }
    int r;
#if defined(RLX_HAVE_LAPACKE)
    if (n > small::kSmallN) {
      r = gesv(s.data(), static_cast<int>(n), piv.data(), x, static_cast<int>(k));
    } else
#endif
    {
      r = small::lu(s.data(), n, piv.data());
      if (!r) small::lu_solve(s.data(), piv.data(), n, x, k);
    }
    if (r) std::fill(x, x + n * k, nan_v<T>());
  });
}

template <class T>
void det_k(const Node& nd, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  bool slog = nd.op == OpKind::Slogdet;
  const T* A = in[0].data<T>();
  int64_t n = rows(in[0]), nb = batch_of(in[0]);
  for_batch(nb, n, [&](int64_t b) {
    auto& s = scratch<T>(n * n);
    thread_local std::vector<int32_t> piv;
    piv.resize(n);
    std::copy(A + b * n * n, A + (b + 1) * n * n, s.data());
    bool one_based = false;
#if defined(RLX_HAVE_LAPACKE)
    if (n > small::kSmallN) {
      getrf(s.data(), static_cast<int>(n), static_cast<int>(n), piv.data());  // of Aᵀ: same determinant
      one_based = true;
    } else
#endif
      small::lu(s.data(), n, piv.data());
    double sign = 1, logabs = 0, det = 1;
    for (int64_t i = 0; i < n; ++i) {
      double d = s[i * n + i];
      if (piv[i] - (one_based ? 1 : 0) != i) sign = -sign, det = -det;
      sign *= d > 0 ? 1 : (d < 0 ? -1 : 0);
      logabs += std::log(std::abs(d));
      det *= d;
    }
    if (!slog) {
      out[0].data<T>()[b] = static_cast<T>(det);
    } else {
      out[0].data<T>()[b] = static_cast<T>(sign);
      out[1].data<T>()[b] = sign == 0 ? -std::numeric_limits<T>::infinity() : static_cast<T>(logabs);
    }
  });
}

constexpr int64_t kEighJacobiN = 16;

template <class T>
void eigh_k(const Node&, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const T* A = in[0].data<T>();
  T *W = out[0].data<T>(), *V = out[1].data<T>();
  int64_t n = rows(in[0]), nb = batch_of(in[0]);
  for_batch(nb, n, [&](int64_t b) {
    const T* a = A + b * n * n;
    T *w = W + b * n, *v = V + b * n * n;
    auto& s = scratch<T>(n * n);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) s[i * n + j] = T(0.5) * (a[i * n + j] + a[j * n + i]);
#if defined(RLX_HAVE_LAPACKE)
    // Cyclic Jacobi costs ~n³ per sweep; past n = 16 syevd's tridiagonal reduction wins.
    if (n > kEighJacobiN) {
      if (syevd(s.data(), static_cast<int>(n), w)) {
        std::fill(w, w + n, nan_v<T>());
        std::fill(v, v + n * n, nan_v<T>());
        return;
      }
      transpose_into(s.data(), n, n, v);  // column-major eigenvectors -> row-major columns
      sign_columns(v, n, n, static_cast<T*>(nullptr), 0);
      return;
    }
#endif
    small::eigh(s.data(), n, w, v);
  });
}

#if defined(RLX_HAVE_LAPACKE)
template <class T>
void svd_k(const Node&, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const T* A = in[0].data<T>();
  int64_t m = rows(in[0]), n = cols(in[0]), k = std::min(m, n), nb = batch_of(in[0]);
  for_batch(nb, std::max(m, n), [&](int64_t b) {
    auto& s = scratch<T>(m * n);
    std::copy(A + b * m * n, A + (b + 1) * m * n, s.data());
    T *u = out[0].data<T>() + b * m * k, *sv = out[1].data<T>() + b * k, *vh = out[2].data<T>() + b * k * n;
    // Column-major, s holds Aᵀ (n x m) = U' S V'ᵀ: V'ᵀ's buffer is A's U, U''s buffer is A's Vh.
    if (gesdd(s.data(), static_cast<int>(n), static_cast<int>(m), sv, vh, u)) {
      std::fill(u, u + m * k, nan_v<T>());
      std::fill(sv, sv + k, nan_v<T>());
      std::fill(vh, vh + k * n, nan_v<T>());
      return;
    }
    sign_columns(u, m, k, vh, n);
  });
}

template <class T>
void qr_k(const Node& nd, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  bool full = attr_int(nd, "full_matrices");
  const T* A = in[0].data<T>();
  int64_t m = rows(in[0]), n = cols(in[0]), k = std::min(m, n), kq = full ? m : k, nb = batch_of(in[0]);
  for_batch(nb, std::max(m, n), [&](int64_t b) {
    int64_t qc = std::max(n, kq);
    auto& s = scratch<T>(m * qc + k);
    T *cm = s.data(), *tau = s.data() + m * qc;
    transpose_into(A + b * m * n, m, n, cm);  // column-major A (m x n, ld m)
    geqrf(cm, static_cast<int>(m), static_cast<int>(n), tau);
    T *q = out[0].data<T>() + b * m * kq, *r = out[1].data<T>() + b * kq * n;
    for (int64_t i = 0; i < kq; ++i)
      for (int64_t j = 0; j < n; ++j) r[i * n + j] = (j >= i && i < m) ? cm[j * m + i] : T(0);
    orgqr(cm, static_cast<int>(m), static_cast<int>(kq), static_cast<int>(k), tau);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < kq; ++j) q[i * kq + j] = cm[j * m + i];
  });
}
#endif

template <template <class> class K>
KernelFn typed(DType dt) {
  if (dt == DType::f32) return &K<float>::run;
  if (dt == DType::f64) return &K<double>::run;
  return nullptr;
}
#define RLX_KERNEL(name)                                                                     \
  template <class T>                                                                         \
  struct name##_s {                                                                          \
    static void run(const Node& n, const std::vector<Tensor>& i, std::vector<Tensor>& o) { \
      name<T>(n, i, o);                                                                      \
    }                                                                                        \
  };
RLX_KERNEL(cholesky_k)
RLX_KERNEL(triangular_solve_k)
RLX_KERNEL(solve_k)
RLX_KERNEL(det_k)
RLX_KERNEL(eigh_k)
#if defined(RLX_HAVE_LAPACKE)
RLX_KERNEL(svd_k)
RLX_KERNEL(qr_k)
#endif
#undef RLX_KERNEL

}  // namespace

KernelFn find_linalg_kernel_c64(OpKind op);  // linalg_complex.cpp

// lu, lstsq and matrix_exp (and svd/qr without LAPACKE) run the generic kernel: the float64 reference;
// c64 ops without a LAPACKE kernel run the complex reference.
KernelFn find_linalg_kernel(OpKind op, DType dt) {
  if (dt == DType::c64) return find_linalg_kernel_c64(op);
  switch (op) {
    case OpKind::Cholesky: return typed<cholesky_k_s>(dt);
    case OpKind::TriangularSolve: return typed<triangular_solve_k_s>(dt);
    case OpKind::Solve:
    case OpKind::Inv: return typed<solve_k_s>(dt);
    case OpKind::Det:
    case OpKind::Slogdet: return typed<det_k_s>(dt);
    case OpKind::Eigh: return typed<eigh_k_s>(dt);
#if defined(RLX_HAVE_LAPACKE)
    case OpKind::Svd: return typed<svd_k_s>(dt);
    case OpKind::Qr: return typed<qr_k_s>(dt);
#endif
    default: return nullptr;
  }
}

}  // namespace rlx::cpu
