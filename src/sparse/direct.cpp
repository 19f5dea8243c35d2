// sparse_solve's direct solvers. Our CSR arrays are, read as CSC, the matrix Aᵀ, so every library
// call below solves with the transposed form to get A X = B (and the plain form for Aᵀ X = B).
#include "sparse/direct.h"

#include <cmath>
#include <limits>

#include "rlx/sparse.h"

#ifdef RLX_HAVE_SUITESPARSE
#include <cholmod.h>
#include <klu.h>
#include <umfpack.h>
#endif

namespace rlx::sparse {

namespace {

// Column-major copy of row-major B [n, k] (what the libraries take), and back.
std::vector<double> to_colmajor(const double* b, int64_t n, int64_t k) {
  std::vector<double> c(n * k);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j) c[j * n + i] = b[i * k + j];
  return c;
}
void from_colmajor(const double* c, int64_t n, int64_t k, double* x) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j) x[i * k + j] = c[j * n + i];
}

// Gaussian elimination with partial pivoting on the dense matrix (small n: the reference oracle).
std::string dense_solve(int64_t n, const int64_t* rp, const int64_t* col, const double* val, const double* b,
                        int64_t k, double* x, bool transpose) {
  if (n > 8192) return "method dense is limited to n <= 8192 (got " + std::to_string(n) + ")";
  std::vector<double> a(n * n, 0.0), r(b, b + n * k);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = rp[i]; p < rp[i + 1]; ++p) {
      int64_t j = col[p];
      (transpose ? a[j * n + i] : a[i * n + j]) += val[p];
    }
  for (int64_t c = 0; c < n; ++c) {
    int64_t piv = c;
    for (int64_t i = c + 1; i < n; ++i)
      if (std::fabs(a[i * n + c]) > std::fabs(a[piv * n + c])) piv = i;
    if (a[piv * n + c] == 0) return "matrix is singular (zero pivot in column " + std::to_string(c) + ")";
    if (piv != c) {
      for (int64_t j = 0; j < n; ++j) std::swap(a[c * n + j], a[piv * n + j]);
      for (int64_t j = 0; j < k; ++j) std::swap(r[c * k + j], r[piv * k + j]);
    }
    for (int64_t i = c + 1; i < n; ++i) {
      double f = a[i * n + c] / a[c * n + c];
      if (f == 0) continue;
      for (int64_t j = c; j < n; ++j) a[i * n + j] -= f * a[c * n + j];
      for (int64_t j = 0; j < k; ++j) r[i * k + j] -= f * r[c * k + j];
    }
  }
  for (int64_t c = n - 1; c >= 0; --c)
    for (int64_t j = 0; j < k; ++j) {
      double s = r[c * k + j];
      for (int64_t q = c + 1; q < n; ++q) s -= a[c * n + q] * x[q * k + j];
      x[c * k + j] = s / a[c * n + c];
    }
  return "";
}

#ifdef RLX_HAVE_SUITESPARSE
using SSL = SuiteSparse_long;
static_assert(sizeof(SSL) == sizeof(int64_t), "SuiteSparse_long must be 64-bit");

std::string klu(int64_t n, const int64_t* rp, const int64_t* col, const double* val, const double* b, int64_t k,
                double* x, bool transpose) {
  klu_l_common c;
  klu_l_defaults(&c);
  auto* ap = const_cast<SSL*>(reinterpret_cast<const SSL*>(rp));
  auto* ai = const_cast<SSL*>(reinterpret_cast<const SSL*>(col));
  klu_l_symbolic* s = klu_l_analyze(n, ap, ai, &c);
  if (!s) return "klu: analyze failed (status " + std::to_string(c.status) + ")";
  klu_l_numeric* f = klu_l_factor(ap, ai, const_cast<double*>(val), s, &c);
  std::string err;
  if (!f || c.status == KLU_SINGULAR) err = "klu: matrix is singular";
  else {
    std::vector<double> bc = to_colmajor(b, n, k);
    int ok = transpose ? klu_l_solve(s, f, n, k, bc.data(), &c) : klu_l_tsolve(s, f, n, k, bc.data(), &c);
    if (!ok) err = "klu: solve failed (status " + std::to_string(c.status) + ")";
    else from_colmajor(bc.data(), n, k, x);
  }
  if (f) klu_l_free_numeric(&f, &c);
  klu_l_free_symbolic(&s, &c);
  return err;
}

std::string umfpack(int64_t n, const int64_t* rp, const int64_t* col, const double* val, const double* b, int64_t k,
                    double* x, bool transpose) {
  double control[UMFPACK_CONTROL], info[UMFPACK_INFO];
  umfpack_dl_defaults(control);
  const auto* ap = reinterpret_cast<const SSL*>(rp);
  const auto* ai = reinterpret_cast<const SSL*>(col);
  void *sym = nullptr, *num = nullptr;
  SSL st = umfpack_dl_symbolic(n, n, ap, ai, val, &sym, control, info);
  if (st != UMFPACK_OK) return "umfpack: symbolic failed (status " + std::to_string(st) + ")";
  st = umfpack_dl_numeric(ap, ai, val, sym, &num, control, info);
  umfpack_dl_free_symbolic(&sym);
  if (st == UMFPACK_WARNING_singular_matrix) {
    umfpack_dl_free_numeric(&num);
    return "umfpack: matrix is singular";
  }
  if (st != UMFPACK_OK) return "umfpack: numeric failed (status " + std::to_string(st) + ")";
  std::vector<double> bc = to_colmajor(b, n, k), xc(n * k);
  std::string err;
  for (int64_t j = 0; j < k && err.empty(); ++j) {
    st = umfpack_dl_solve(transpose ? UMFPACK_A : UMFPACK_At, ap, ai, val, xc.data() + j * n, bc.data() + j * n, num,
                          control, info);
    if (st != UMFPACK_OK) err = "umfpack: solve failed (status " + std::to_string(st) + ")";
  }
  umfpack_dl_free_numeric(&num);
  if (err.empty()) from_colmajor(xc.data(), n, k, x);
  return err;
}

// A symmetric positive definite: the CSR arrays read as CSC are A itself; CHOLMOD uses the upper
// triangle (stype 1).
std::string cholmod(int64_t n, const int64_t* rp, const int64_t* col, const double* val, const double* b, int64_t k,
                    double* x) {
  cholmod_common c;
  cholmod_l_start(&c);
  const int64_t nz = rp[n];
  cholmod_sparse* a = cholmod_l_allocate_sparse(n, n, nz, 1, 1, 1, CHOLMOD_REAL, &c);
  std::string err;
  if (!a) err = "cholmod: out of memory";
  else {
    std::copy(rp, rp + n + 1, static_cast<SSL*>(a->p));
    std::copy(col, col + nz, static_cast<SSL*>(a->i));
    std::copy(val, val + nz, static_cast<double*>(a->x));
    cholmod_factor* l = cholmod_l_analyze(a, &c);
    if (l) cholmod_l_factorize(a, l, &c);
    bool pd = l && c.status != CHOLMOD_NOT_POSDEF && l->minor >= static_cast<size_t>(n);
    // A simplicial LDLᵀ factor (small matrices) succeeds on indefinite input: D must be positive.
    if (pd && !l->is_super && !l->is_ll)
      for (int64_t j = 0; j < n && pd; ++j) pd = static_cast<double*>(l->x)[static_cast<SSL*>(l->p)[j]] > 0;
    if (!pd) err = "cholmod: matrix is not positive definite";
    else {
      cholmod_dense* bd = cholmod_l_allocate_dense(n, k, n, CHOLMOD_REAL, &c);
      std::vector<double> bc = to_colmajor(b, n, k);
      std::copy(bc.begin(), bc.end(), static_cast<double*>(bd->x));
      cholmod_dense* xd = cholmod_l_solve(CHOLMOD_A, l, bd, &c);
      if (!xd) err = "cholmod: solve failed";
      else from_colmajor(static_cast<double*>(xd->x), n, k, x);
      cholmod_l_free_dense(&xd, &c);
      cholmod_l_free_dense(&bd, &c);
    }
    cholmod_l_free_factor(&l, &c);
    cholmod_l_free_sparse(&a, &c);
  }
  cholmod_l_finish(&c);
  return err;
}
#endif

}  // namespace

std::vector<std::string> direct_solve_methods() {
#ifdef RLX_HAVE_SUITESPARSE
  return {"klu", "umfpack", "cholmod", "dense"};
#else
  return {"dense"};
#endif
}

std::vector<std::string> direct_methods() { return direct_solve_methods(); }

std::string direct_solve(const std::string& method0, int64_t n, const int64_t* rp, const int64_t* col,
                         const double* val, const double* b, int64_t k, double* x, bool transpose) {
  std::string method = method0;
#ifdef RLX_HAVE_SUITESPARSE
  if (method == "auto") method = "umfpack";
#else
  if (method == "auto") method = "dense";
#endif
  std::string err;
  if (method == "dense") err = dense_solve(n, rp, col, val, b, k, x, transpose);
#ifdef RLX_HAVE_SUITESPARSE
  else if (method == "klu") err = klu(n, rp, col, val, b, k, x, transpose);
  else if (method == "umfpack") err = umfpack(n, rp, col, val, b, k, x, transpose);
  else if (method == "cholmod") err = cholmod(n, rp, col, val, b, k, x);
#endif
  else {
    err = "method '" + method + "' is not available (this build has:";
    for (auto& m : direct_solve_methods()) err += " " + m;
    err += ")";
  }
  if (!err.empty())
    for (int64_t i = 0; i < n * k; ++i) x[i] = std::numeric_limits<double>::quiet_NaN();
  return err;
}

}  // namespace rlx::sparse
