// Complex (complex<double>) dense factorizations on one row-major matrix: the reference semantics
// of the linear-algebra ops on c64 (src/linalg/reference_complex.cpp). The same algorithms as
// dense.h with Hermitian transposes: Householder QR with zlarfg's reflectors (R's diagonal real, as
// LAPACK's), partial-pivoting LU choosing the pivot by |re| + |im| (izamax, so pivots match LAPACK),
// Hermitian Jacobi eigh and one-sided Jacobi SVD that first rotate each pair by a phase.
#pragma once
#include <complex>
#include <cstdint>
#include <vector>

namespace rlx::linalg {

using Cx = std::complex<double>;
using CMat = std::vector<Cx>;  // row-major

// In place: a (n x n, lower triangle read) -> L with L Lᴴ = A, zeros above; 0 or k+1 as cholesky().
int cholesky(Cx* a, int64_t n);
// Solves op(A) X = B in place of B (n x k); op(A) = A, Aᵀ, conj(A) or Aᴴ.
void trsm_left(const Cx* a, int64_t n, Cx* b, int64_t k, bool lower, bool trans, bool conj, bool unit);
// In place LU with partial pivoting (pivot: largest |re| + |im|); pivots and info as lu() of dense.h.
int lu(Cx* a, int64_t m, int64_t n, int32_t* pivots);
// Householder QR: q (m x kq), r (kq x n), A = Q R, QᴴQ = I.
void qr(const Cx* a, int64_t m, int64_t n, bool full, Cx* q, Cx* r);
// Eigen-decomposition of the Hermitian (A+Aᴴ)/2: real ascending w, eigenvectors as columns of v,
// each column's largest-magnitude entry made real and positive.
void eigh(const Cx* a, int64_t n, double* w, Cx* v);
// Thin SVD a = u diag(s) vh, s real descending; each u column's largest-magnitude entry made real
// and positive (vh's row takes the opposite phase).
void svd(const Cx* a, int64_t m, int64_t n, Cx* u, double* s, Cx* vh);

}  // namespace rlx::linalg
