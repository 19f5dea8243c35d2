// Own batched kernels for small matrices (n <= kSmallN): one matrix per call, no library call, no
// allocation, sizes 2..8, 16 and 32 compiled with a fixed n so the loops unroll and vectorize. They
// beat a LAPACK call per matrix by the call and argument-checking overhead (bench/linalg.py).
#pragma once
#include <cstdint>

namespace rlx::cpu::small {

constexpr int64_t kSmallN = 32;

// L (row-major, lower, zeros above) of the n x n SPD matrix in `l` (read: lower triangle of
// (A+Aᵀ)/2 already written there). Returns 0 or k+1 for the first non-positive pivot.
template <class T> int cholesky(T* l, int64_t n);
// op(A) X = B in place of B (n x k), A row-major n x n.
template <class T> void trsm_left(const T* a, int64_t n, T* b, int64_t k, bool lower, bool trans, bool unit);
// LU with partial pivoting in place (n x n); pivots 0-based. Returns 0 or k+1 for a zero pivot.
template <class T> int lu(T* a, int64_t n, int32_t* piv);
// A X = B for the LU of lu(): B (n x k) in place.
template <class T> void lu_solve(const T* lu, const int32_t* piv, int64_t n, T* b, int64_t k);
// Symmetric eigendecomposition of s (n x n, symmetric, destroyed) by cyclic Jacobi: w ascending,
// v columns (row-major n x n), largest-magnitude entry of each column positive.
template <class T> void eigh(T* s, int64_t n, T* w, T* v);

}  // namespace rlx::cpu::small
