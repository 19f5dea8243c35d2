// Plain float64 dense factorizations on one row-major matrix: the reference semantics of every
// linear-algebra op (src/linalg/reference.cpp) and the cpu fallback where LAPACKE is absent.
// Accuracy first (Jacobi eigen/SVD, Householder QR with LAPACK's reflector signs); no blocking.
#pragma once
#include <cstdint>
#include <vector>

namespace rlx::linalg {

using Mat = std::vector<double>;  // row-major

// In place: a (n x n, lower triangle read) -> L with zeros above. Returns 0 or k+1 for the first
// non-positive leading minor k (then a is left partly factored).
int cholesky(double* a, int64_t n);
// Solves op(A) X = B in place of B (n x k); A n x n triangular, lower/upper, transposed, unit diagonal.
void trsm_left(const double* a, int64_t n, double* b, int64_t k, bool lower, bool trans, bool unit);
// In place LU with partial pivoting of a (m x n): pivots[i] = row swapped with row i (0-based,
// LAPACK getrf order); returns 0 or k+1 for the first exactly-zero pivot U[k][k].
int lu(double* a, int64_t m, int64_t n, int32_t* pivots);
// The row permutation that the pivots apply: (P A)[i] = A[perm[i]].
void pivots_to_perm(const int32_t* pivots, int64_t k, int64_t m, int32_t* perm);
// Householder QR of a (m x n): q (m x kq, kq = min(m,n) or m when full), r (kq x n).
void qr(const double* a, int64_t m, int64_t n, bool full, double* q, double* r);
// Symmetric eigendecomposition of (A+Aᵀ)/2: ascending w (n), eigenvectors as columns of v (n x n),
// each column signed so that its largest-magnitude entry is positive.
void eigh(const double* a, int64_t n, double* w, double* v);
// Thin SVD a = u diag(s) vh, s descending; u (m x k), vh (k x n), k = min(m,n); each u column
// signed so that its largest-magnitude entry is positive (vh's row follows).
void svd(const double* a, int64_t m, int64_t n, double* u, double* s, double* vh);
// exp(a) (n x n) by Pade(13) with scaling and squaring (smaller degrees for small norms).
void matrix_exp(const double* a, int64_t n, double* out);
// Sign the columns of u (m x k, row-major) so each column's largest-magnitude entry is positive,
// flipping the matching rows of vh (k x n) when given.
void normalize_signs(double* u, int64_t m, int64_t k, double* vh, int64_t n);

}  // namespace rlx::linalg
