// The reference algorithms that are the same over real and complex scalars, written once:
// triangular solve with several right-hand sides and LU with partial pivoting. dense.cpp
// instantiates them for double, dense_complex.cpp for complex<double>.
#pragma once

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <utility>

namespace rlx::linalg::detail {

inline double conj_if(double v, bool) { return v; }
inline std::complex<double> conj_if(std::complex<double> v, bool c) { return c ? std::conj(v) : v; }
// The pivot magnitude: |v| for reals, |re| + |im| for complex (LAPACK's izamax).
inline double pivot_size(double v) { return std::abs(v); }
inline double pivot_size(std::complex<double> v) { return std::abs(v.real()) + std::abs(v.imag()); }

// Solves op(A) X = B in place (B [n, k] row-major); op(A) = A, Aᵀ (trans), conj(A) (conj) or Aᴴ.
template <class T>
void trsm_left(const T* a, int64_t n, T* b, int64_t k, bool lower, bool trans, bool conj, bool unit) {
  auto op = [&](int64_t i, int64_t j) { return conj_if(trans ? a[j * n + i] : a[i * n + j], conj); };
  bool fwd = lower != trans;  // op(A) is lower triangular: forward substitution
  for (int64_t t = 0; t < n; ++t) {
    int64_t i = fwd ? t : n - 1 - t;
    for (int64_t c = 0; c < k; ++c) {
      T x = b[i * k + c];
      if (fwd)
        for (int64_t j = 0; j < i; ++j) x -= op(i, j) * b[j * k + c];
      else
        for (int64_t j = i + 1; j < n; ++j) x -= op(i, j) * b[j * k + c];
      b[i * k + c] = unit ? x : x / op(i, i);
    }
  }
}

// LU with partial pivoting in place (a [m, n]); pivots [min(m, n)] as LAPACK's ipiv (0-based);
// returns 0, or 1 + the first zero pivot's index (the factorization is still completed).
template <class T>
int lu(T* a, int64_t m, int64_t n, int32_t* pivots) {
  int info = 0;
  int64_t k = std::min(m, n);
  for (int64_t j = 0; j < k; ++j) {
    int64_t p = j;
    for (int64_t i = j + 1; i < m; ++i)
      if (pivot_size(a[i * n + j]) > pivot_size(a[p * n + j])) p = i;
    pivots[j] = static_cast<int32_t>(p);
    if (p != j)
      for (int64_t c = 0; c < n; ++c) std::swap(a[j * n + c], a[p * n + c]);
    T d = a[j * n + j];
    if (d == T(0)) {
      if (!info) info = static_cast<int>(j + 1);
      continue;
    }
    for (int64_t i = j + 1; i < m; ++i) {
      T f = a[i * n + j] /= d;
      for (int64_t c = j + 1; c < n; ++c) a[i * n + c] -= f * a[j * n + c];
    }
  }
  return info;
}

}  // namespace rlx::linalg::detail
