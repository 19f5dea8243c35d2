// Small-matrix kernels (linalg_small.h). Each has a body templated on a compile-time N (0 = run
// time n) and a dispatcher that picks the fixed size; accumulations run in T like LAPACK's.
#include "backends/cpu/linalg_small.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

namespace rlx::cpu::small {

namespace {

// Calls f(nn) with nn a compile-time constant for the common sizes, else the run-time n.
template <class F>
auto dispatch(int64_t n, F&& f) {
  switch (n) {
    case 2: return f(std::integral_constant<int64_t, 2>{});
    case 3: return f(std::integral_constant<int64_t, 3>{});
    case 4: return f(std::integral_constant<int64_t, 4>{});
    case 5: return f(std::integral_constant<int64_t, 5>{});
    case 6: return f(std::integral_constant<int64_t, 6>{});
    case 7: return f(std::integral_constant<int64_t, 7>{});
    case 8: return f(std::integral_constant<int64_t, 8>{});
    case 16: return f(std::integral_constant<int64_t, 16>{});
    case 32: return f(std::integral_constant<int64_t, 32>{});
    default: return f(n);
  }
}

template <class T, class NN>
int chol_body(T* l, NN nn) {
  const int64_t n = nn;
  for (int64_t j = 0; j < n; ++j) {
    T* lj = l + j * n;
    T d = lj[j];
    for (int64_t k = 0; k < j; ++k) d -= lj[k] * lj[k];
    if (!(d > 0)) return static_cast<int>(j + 1);
    T ljj = std::sqrt(d), inv = T(1) / ljj;
    lj[j] = ljj;
    for (int64_t i = j + 1; i < n; ++i) {
      T* li = l + i * n;
      T v = li[j];
      for (int64_t k = 0; k < j; ++k) v -= li[k] * lj[k];
      li[j] = v * inv;
    }
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) l[i * n + j] = 0;
  return 0;
}

template <class T, class NN>
void lu_body(T* a, NN nn, int32_t* piv, int* info) {
  const int64_t n = nn;
  for (int64_t j = 0; j < n; ++j) {
    int64_t p = j;
    T best = std::abs(a[j * n + j]);
    for (int64_t i = j + 1; i < n; ++i)
      if (std::abs(a[i * n + j]) > best) best = std::abs(a[i * n + j]), p = i;
    piv[j] = static_cast<int32_t>(p);
    if (p != j)
      for (int64_t c = 0; c < n; ++c) std::swap(a[j * n + c], a[p * n + c]);
    T d = a[j * n + j];
    if (d == 0) {
      if (!*info) *info = static_cast<int>(j + 1);
      continue;
    }
    T inv = T(1) / d;
    const T* aj = a + j * n;
    for (int64_t i = j + 1; i < n; ++i) {
      T* ai = a + i * n;
      T f = ai[j] *= inv;
      for (int64_t c = j + 1; c < n; ++c) ai[c] -= f * aj[c];
    }
  }
}

}  // namespace

template <class T>
int cholesky(T* l, int64_t n) {
  return dispatch(n, [&](auto nn) { return chol_body<T>(l, nn); });
}

template <class T>
void trsm_left(const T* a, int64_t n, T* b, int64_t k, bool lower, bool trans, bool unit) {
  bool fwd = lower != trans;
  // Row-oriented substitution: row i of X is row i of B minus a combination of solved rows, so the
  // inner loop runs over the k contiguous columns.
  for (int64_t t = 0; t < n; ++t) {
    int64_t i = fwd ? t : n - 1 - t;
    T* bi = b + i * k;
    int64_t j0 = fwd ? 0 : i + 1, j1 = fwd ? i : n;
    for (int64_t j = j0; j < j1; ++j) {
      T f = trans ? a[j * n + i] : a[i * n + j];
      const T* bj = b + j * k;
      for (int64_t c = 0; c < k; ++c) bi[c] -= f * bj[c];
    }
    if (!unit) {
      T inv = T(1) / a[i * n + i];
      for (int64_t c = 0; c < k; ++c) bi[c] *= inv;
    }
  }
}

template <class T>
int lu(T* a, int64_t n, int32_t* piv) {
  int info = 0;
  dispatch(n, [&](auto nn) {
    lu_body<T>(a, nn, piv, &info);
    return 0;
  });
  return info;
}

template <class T>
void lu_solve(const T* lu, const int32_t* piv, int64_t n, T* b, int64_t k) {
  for (int64_t i = 0; i < n; ++i)
    if (piv[i] != i)
      for (int64_t c = 0; c < k; ++c) std::swap(b[i * k + c], b[piv[i] * k + c]);
  trsm_left(lu, n, b, k, true, false, true);
  trsm_left(lu, n, b, k, false, false, false);
}

template <class T>
void eigh(T* s, int64_t n, T* w, T* v) {
  const T eps = std::numeric_limits<T>::epsilon();
  std::fill(v, v + n * n, T(0));
  for (int64_t i = 0; i < n; ++i) v[i * n + i] = 1;
  for (int sweep = 0; sweep < 60; ++sweep) {
    bool rotated = false;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) {
        T apq = s[p * n + q];
        if (apq == 0) continue;
        if (std::abs(apq) <= eps * T(1e-3) * std::sqrt(std::abs(s[p * n + p] * s[q * n + q]))) {
          s[p * n + q] = s[q * n + p] = 0;
          continue;
        }
        rotated = true;
        T z = (s[q * n + q] - s[p * n + p]) / (2 * apq);
        T t = (z >= 0 ? T(1) : T(-1)) / (std::abs(z) + std::sqrt(T(1) + z * z));
        T c = T(1) / std::sqrt(T(1) + t * t), sn = t * c;
        // Jᵀ S J on rows/cols p, q: the diagonal pair in closed form, the rest rotated.
        T spp = s[p * n + p], sqq = s[q * n + q];
        for (int64_t k = 0; k < n; ++k) {
          T kp = s[k * n + p], kq = s[k * n + q];
          s[k * n + p] = c * kp - sn * kq;
          s[k * n + q] = sn * kp + c * kq;
        }
        for (int64_t k = 0; k < n; ++k) {
          s[p * n + k] = s[k * n + p];
          s[q * n + k] = s[k * n + q];
        }
        s[p * n + p] = spp - t * apq;
        s[q * n + q] = sqq + t * apq;
        s[p * n + q] = s[q * n + p] = 0;
        for (int64_t k = 0; k < n; ++k) {
          T kp = v[k * n + p], kq = v[k * n + q];
          v[k * n + p] = c * kp - sn * kq;
          v[k * n + q] = sn * kp + c * kq;
        }
      }
    if (!rotated) break;
  }
  // Sort ascending (insertion sort: n is small) and sign each column.
  int32_t order[kSmallN];
  for (int64_t i = 0; i < n; ++i) order[i] = static_cast<int32_t>(i);
  std::stable_sort(order, order + n, [&](int32_t x, int32_t y) { return s[x * n + x] < s[y * n + y]; });
  T tmp[kSmallN * kSmallN];
  std::copy(v, v + n * n, tmp);
  for (int64_t j = 0; j < n; ++j) {
    int64_t o = order[j];
    w[j] = s[o * n + o];
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i)
      if (std::abs(tmp[i * n + o]) > std::abs(tmp[best * n + o])) best = i;
    T sg = tmp[best * n + o] < 0 ? T(-1) : T(1);
    for (int64_t i = 0; i < n; ++i) v[i * n + j] = sg * tmp[i * n + o];
  }
}

#define RLX_SMALL(T)                                                                        \
  template int cholesky<T>(T*, int64_t);                                                    \
  template void trsm_left<T>(const T*, int64_t, T*, int64_t, bool, bool, bool);             \
  template int lu<T>(T*, int64_t, int32_t*);                                                \
  template void lu_solve<T>(const T*, const int32_t*, int64_t, T*, int64_t);                \
  template void eigh<T>(T*, int64_t, T*, T*);
RLX_SMALL(float)
RLX_SMALL(double)
#undef RLX_SMALL

}  // namespace rlx::cpu::small
