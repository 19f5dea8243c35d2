// Typed CSR kernels and iterative solvers shared by the reference interpreter (run serially) and
// the cpu backend (run on its thread pool). `Par` is any callable par(n, grain, fn(begin, end)).
// Index type I is int32_t or int64_t; value type T is float or double (dot products and norms
// accumulate in double).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "rlx/error.h"

namespace rlx::sparse {

template <class T, class I>
struct CsrView {
  int64_t rows, cols;
  const T* val;
  const I* col;
  const I* rp;
  int64_t nnz() const { return static_cast<int64_t>(rp[rows]); }
};

// Full structural check (O(rows + nnz)); "" when the pattern is usable by every kernel. Sorted
// columns are required only when `sorted`.
template <class I>
std::string check_pattern(int64_t rows, int64_t cols, int64_t nnz, const I* col, const I* rp, bool sorted) {
  if (rp[0] != 0) return "row_ptr[0] is " + std::to_string(rp[0]) + ", expected 0";
  if (static_cast<int64_t>(rp[rows]) != nnz)
    return "row_ptr[rows] is " + std::to_string(rp[rows]) + ", expected nnz = " + std::to_string(nnz);
  for (int64_t i = 0; i < rows; ++i) {
    if (rp[i] > rp[i + 1]) return "row_ptr decreases at row " + std::to_string(i);
    for (I k = rp[i]; k < rp[i + 1]; ++k) {
      if (col[k] < 0 || col[k] >= cols)
        return "column index " + std::to_string(col[k]) + " at entry " + std::to_string(k) + " is out of range [0, " +
               std::to_string(cols) + ")";
      if (sorted && k > rp[i] && col[k] <= col[k - 1])
        return "row " + std::to_string(i) + ": columns not strictly increasing at entry " + std::to_string(k);
    }
  }
  return "";
}

struct SerialPar {
  template <class F>
  void operator()(int64_t n, int64_t, F&& f) const {
    if (n > 0) f(int64_t{0}, n);
  }
};

// y = A x over rows [r0, r1) (pattern already checked).
template <class T, class I>
inline void spmv_rows(const CsrView<T, I>& a, const T* x, T* y, int64_t r0, int64_t r1) {
  for (int64_t i = r0; i < r1; ++i) {
    const I b = a.rp[i], e = a.rp[i + 1];
    T s0 = 0, s1 = 0;
    I k = b;
    for (; k + 1 < e; k += 2) {
      s0 += a.val[k] * x[a.col[k]];
      s1 += a.val[k + 1] * x[a.col[k + 1]];
    }
    if (k < e) s0 += a.val[k] * x[a.col[k]];
    y[i] = s0 + s1;
  }
}

template <class T, class I, class Par>
void spmv(const Par& par, const CsrView<T, I>& a, const T* x, T* y) {
  par(a.rows, 2048, [&](int64_t r0, int64_t r1) { spmv_rows(a, x, y, r0, r1); });
}

// y = Aᵀ x (y has a.cols entries): a scatter, run serially.
template <class T, class I>
void spmv_t(const CsrView<T, I>& a, const T* x, T* y) {
  std::fill(y, y + a.cols, T(0));
  for (int64_t i = 0; i < a.rows; ++i)
    for (I k = a.rp[i]; k < a.rp[i + 1]; ++k) y[a.col[k]] += a.val[k] * x[i];
}

// Y [rows, n] = A X (X [cols, n], row-major).
template <class T, class I, class Par>
void spmm(const Par& par, const CsrView<T, I>& a, const T* x, int64_t n, T* y) {
  par(a.rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      T* yi = y + i * n;
      std::fill(yi, yi + n, T(0));
      for (I k = a.rp[i]; k < a.rp[i + 1]; ++k) {
        const T v = a.val[k];
        const T* xr = x + static_cast<int64_t>(a.col[k]) * n;
        for (int64_t j = 0; j < n; ++j) yi[j] += v * xr[j];
      }
    }
  });
}

template <class T, class I>
void spmm_t(const CsrView<T, I>& a, const T* x, int64_t n, T* y) {
  std::fill(y, y + a.cols * n, T(0));
  for (int64_t i = 0; i < a.rows; ++i)
    for (I k = a.rp[i]; k < a.rp[i + 1]; ++k) {
      const T v = a.val[k];
      T* yr = y + static_cast<int64_t>(a.col[k]) * n;
      const T* xi = x + i * n;
      for (int64_t j = 0; j < n; ++j) yr[j] += v * xi[j];
    }
}

// Transpose by counting sort: out arrays hold nnz values/cols and cols+1 row pointers.
template <class T, class I>
void transpose(const CsrView<T, I>& a, T* tv, I* tc, I* trp) {
  std::fill(trp, trp + a.cols + 1, I(0));
  const int64_t nz = a.nnz();
  for (int64_t k = 0; k < nz; ++k) ++trp[a.col[k] + 1];
  for (int64_t j = 0; j < a.cols; ++j) trp[j + 1] += trp[j];
  std::vector<I> pos(trp, trp + a.cols);
  for (int64_t i = 0; i < a.rows; ++i)
    for (I k = a.rp[i]; k < a.rp[i + 1]; ++k) {
      I p = pos[a.col[k]]++;
      tc[p] = static_cast<I>(i);
      tv[p] = a.val[k];
    }
}

// ---- iterative solvers --------------------------------------------------------------------------

struct SolveStats {
  int64_t iterations = 0;
  double residual = 0;  // |b - A x| / |b| of the returned x (0 when b = 0)
  std::string breakdown;  // why the iteration stopped early, "" when it converged or ran out
};

template <class T, class Par>
double dot(const Par& par, const T* a, const T* b, int64_t n) {
  // Fixed blocks summed in order: the same result for any thread count.
  constexpr int64_t kB = 8192;
  const int64_t nb = (n + kB - 1) / kB;
  std::vector<double> part(std::max<int64_t>(nb, 1), 0.0);
  par(nb, 4, [&](int64_t b0, int64_t b1) {
    for (int64_t q = b0; q < b1; ++q) {
      double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t i = q * kB, e = std::min(n, i + kB);
      for (; i + 3 < e; i += 4) {
        s0 += double(a[i]) * b[i];
        s1 += double(a[i + 1]) * b[i + 1];
        s2 += double(a[i + 2]) * b[i + 2];
        s3 += double(a[i + 3]) * b[i + 3];
      }
      for (; i < e; ++i) s0 += double(a[i]) * b[i];
      part[q] = (s0 + s1) + (s2 + s3);
    }
  });
  double s = 0;
  for (double p : part) s += p;
  return s;
}

// Preconditioners: M⁻¹ r into z. Jacobi: 1/diag. IC(0): L Lᵀ with L on A's lower pattern.
template <class T, class I>
struct Precond {
  enum Kind { None, Jacobi, Ic0 } kind = None;
  std::vector<T> inv_diag;
  // IC(0): L by rows (lower, diagonal last in each row) and Lᵀ by rows (diagonal first).
  std::vector<T> lv, uv;
  std::vector<I> lc, lp, uc, up;
  std::vector<T> tmp;

  std::string setup(const std::string& name, const CsrView<T, I>& a) {
    const int64_t n = a.rows;
    if (name == "none") return "";
    if (name == "jacobi") {
      kind = Jacobi;
      inv_diag.assign(n, T(0));
      for (int64_t i = 0; i < n; ++i) {
        T d = 0;
        for (I k = a.rp[i]; k < a.rp[i + 1]; ++k)
          if (a.col[k] == i) d += a.val[k];
        if (!(d != 0) || !std::isfinite(d)) return "jacobi: zero or non-finite diagonal at row " + std::to_string(i);
        inv_diag[i] = T(1) / d;
      }
      return "";
    }
    if (name == "ic0") {
      kind = Ic0;
      lp.assign(n + 1, I(0));
      for (int64_t i = 0; i < n; ++i) {
        bool diag = false;
        for (I k = a.rp[i]; k < a.rp[i + 1]; ++k) {
          if (a.col[k] <= i) {
            lc.push_back(a.col[k]);
            lv.push_back(a.val[k]);
          }
          diag |= a.col[k] == i;
        }
        if (!diag) return "ic0: row " + std::to_string(i) + " has no stored diagonal";
        lp[i + 1] = static_cast<I>(lc.size());
      }
      // Row-wise IC(0): L[i,k] = (A[i,k] - sum_{j<k} L[i,j] L[k,j]) / L[k,k]; columns are sorted,
      // so the diagonal is each row's last entry and the sums are sorted merges.
      for (int64_t i = 0; i < n; ++i) {
        for (I p = lp[i]; p < lp[i + 1]; ++p) {
          const I k = lc[p];
          double s = lv[p];
          I q = lp[i], r = lp[k];
          while (q < p && r < lp[k + 1] - 1) {
            if (lc[q] == lc[r]) s -= double(lv[q++]) * lv[r++];
            else if (lc[q] < lc[r]) ++q;
            else ++r;
          }
          if (k == i) {
            if (!(s > 0) || !std::isfinite(s))
              return "ic0: non-positive pivot at row " + std::to_string(i) + " (A not SPD, or IC(0) breaks down)";
            lv[p] = static_cast<T>(std::sqrt(s));
          } else {
            lv[p] = static_cast<T>(s / lv[lp[k + 1] - 1]);
          }
        }
      }
      // Lᵀ by rows.
      up.assign(n + 1, I(0));
      uc.resize(lc.size());
      uv.resize(lv.size());
      CsrView<T, I> l{n, n, lv.data(), lc.data(), lp.data()};
      transpose(l, uv.data(), uc.data(), up.data());
      tmp.assign(n, T(0));
      return "";
    }
    return "unknown preconditioner '" + name + "' (none, jacobi, ic0)";
  }

  template <class Par>
  void apply(const Par& par, const T* r, T* z, int64_t n) {
    if (kind == None) {
      std::copy(r, r + n, z);
    } else if (kind == Jacobi) {
      par(n, 4096, [&](int64_t a, int64_t b) {
        for (int64_t i = a; i < b; ++i) z[i] = r[i] * inv_diag[i];
      });
    } else {
      for (int64_t i = 0; i < n; ++i) {  // L y = r
        double s = r[i];
        I e = lp[i + 1] - 1;
        for (I k = lp[i]; k < e; ++k) s -= double(lv[k]) * tmp[lc[k]];
        tmp[i] = static_cast<T>(s / lv[e]);
      }
      for (int64_t i = n - 1; i >= 0; --i) {  // Lᵀ z = y
        double s = tmp[i];
        I b = up[i];
        for (I k = b + 1; k < up[i + 1]; ++k) s -= double(uv[k]) * z[uc[k]];
        z[i] = static_cast<T>(s / uv[b]);
      }
    }
  }
};

// Fills residual with |b - A x| / |b| of the final x (one more matvec).
template <class T, class I, class Par>
void final_residual(const Par& par, const CsrView<T, I>& a, const T* b, const T* x, double bn, SolveStats& st,
                    std::vector<T>& w) {
  spmv(par, a, x, w.data());
  const int64_t n = a.rows;
  par(n, 8192, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) w[i] = b[i] - w[i];
  });
  st.residual = bn > 0 ? std::sqrt(dot(par, w.data(), w.data(), n)) / bn : 0.0;
}

// Fixed 8192-element blocks for every reduction, summed in block order: the same result for any
// thread count (and serially).
constexpr int64_t kRedBlock = 8192;

// q = A p and returns pᵀq, in one pass over A.
template <class T, class I, class Par>
double spmv_dot(const Par& par, const CsrView<T, I>& a, const T* p, T* q, std::vector<double>& part) {
  const int64_t nb = (a.rows + kRedBlock - 1) / kRedBlock;
  part.assign(std::max<int64_t>(nb, 1), 0.0);
  par(nb, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t r0 = blk * kRedBlock, r1 = std::min(a.rows, r0 + kRedBlock);
      spmv_rows(a, p, q, r0, r1);
      double s = 0;
      for (int64_t i = r0; i < r1; ++i) s += double(p[i]) * q[i];
      part[blk] = s;
    }
  });
  double s = 0;
  for (double v : part) s += v;
  return s;
}

// x += alpha p, r -= alpha q; returns rᵀr, in one pass.
template <class T, class Par>
double update_xr(const Par& par, int64_t n, T alpha, const T* p, const T* q, T* x, T* r, std::vector<double>& part) {
  const int64_t nb = (n + kRedBlock - 1) / kRedBlock;
  part.assign(std::max<int64_t>(nb, 1), 0.0);
  par(nb, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t i0 = blk * kRedBlock, i1 = std::min(n, i0 + kRedBlock);
      double s = 0;
      for (int64_t i = i0; i < i1; ++i) {
        x[i] += alpha * p[i];
        const T ri = r[i] - alpha * q[i];
        r[i] = ri;
        s += double(ri) * ri;
      }
      part[blk] = s;
    }
  });
  double s = 0;
  for (double v : part) s += v;
  return s;
}

// Preconditioned conjugate gradients. x holds x0 on entry (zeros when none). Without a
// preconditioner z = r, so each iteration is three passes: q = A p with pᵀq, the x/r update with
// rᵀr, and p = r + beta p.
template <class T, class I, class Par>
SolveStats cg(const Par& par, const CsrView<T, I>& a, const T* b, T* x, double tol, double atol, int64_t maxiter,
              Precond<T, I>& m) {
  const int64_t n = a.rows;
  SolveStats st;
  const bool plain = m.kind == Precond<T, I>::None;
  std::vector<T> r(n), z(plain ? 0 : n), p(n), q(n);
  std::vector<double> part;
  const double bn = std::sqrt(dot(par, b, b, n));
  if (bn == 0) {
    std::fill(x, x + n, T(0));
    return st;
  }
  const double stop = std::max(tol * bn, atol);
  spmv(par, a, x, q.data());
  par(n, 8192, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) r[i] = b[i] - q[i];
  });
  double rr = dot(par, r.data(), r.data(), n);
  const T* zp = plain ? r.data() : z.data();
  if (!plain) m.apply(par, r.data(), z.data(), n);
  std::copy(zp, zp + n, p.begin());
  double rz = plain ? rr : dot(par, r.data(), z.data(), n);
  int64_t it = 0;
  while (std::sqrt(rr) > stop && it < maxiter) {
    const double pq = spmv_dot(par, a, p.data(), q.data(), part);
    if (!(pq > 0) || !std::isfinite(pq)) {
      st.breakdown = "pᵀAp = " + std::to_string(pq) + " <= 0 at iteration " + std::to_string(it) +
                     ": A is not symmetric positive definite";
      break;
    }
    const T alpha = static_cast<T>(rz / pq);
    rr = update_xr(par, n, alpha, p.data(), q.data(), x, r.data(), part);
    ++it;
    if (std::sqrt(rr) <= stop) break;
    if (!plain) m.apply(par, r.data(), z.data(), n);
    const double rz2 = plain ? rr : dot(par, r.data(), z.data(), n);
    const T beta = static_cast<T>(rz2 / rz);
    rz = rz2;
    par(n, 8192, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) p[i] = zp[i] + beta * p[i];
    });
  }
  st.iterations = it;
  final_residual(par, a, b, x, bn, st, q);
  return st;
}

// Preconditioned BiCGSTAB (right preconditioning) for general square A.
template <class T, class I, class Par>
SolveStats bicgstab(const Par& par, const CsrView<T, I>& a, const T* b, T* x, double tol, double atol,
                    int64_t maxiter, Precond<T, I>& m) {
  const int64_t n = a.rows;
  SolveStats st;
  std::vector<T> r(n), rh(n), p(n, T(0)), v(n, T(0)), y(n), s(n), zz(n), t(n);
  const double bn = std::sqrt(dot(par, b, b, n));
  if (bn == 0) {
    std::fill(x, x + n, T(0));
    return st;
  }
  const double stop = std::max(tol * bn, atol);
  spmv(par, a, x, t.data());
  for (int64_t i = 0; i < n; ++i) r[i] = b[i] - t[i];
  rh = r;
  double rho = 1, alpha = 1, omega = 1, rn = std::sqrt(dot(par, r.data(), r.data(), n));
  int64_t it = 0;
  while (rn > stop && it < maxiter) {
    const double rho2 = dot(par, rh.data(), r.data(), n);
    if (rho2 == 0 || !std::isfinite(rho2)) {
      st.breakdown = "rho = 0 at iteration " + std::to_string(it);
      break;
    }
    const double beta = (rho2 / rho) * (alpha / omega);
    rho = rho2;
    par(n, 8192, [&](int64_t s0, int64_t e) {
      for (int64_t i = s0; i < e; ++i) p[i] = static_cast<T>(r[i] + beta * (p[i] - omega * v[i]));
    });
    m.apply(par, p.data(), y.data(), n);
    spmv(par, a, y.data(), v.data());
    const double rv = dot(par, rh.data(), v.data(), n);
    if (rv == 0 || !std::isfinite(rv)) {
      st.breakdown = "r̂ᵀv = 0 at iteration " + std::to_string(it);
      break;
    }
    alpha = rho / rv;
    par(n, 8192, [&](int64_t s0, int64_t e) {
      for (int64_t i = s0; i < e; ++i) s[i] = static_cast<T>(r[i] - alpha * v[i]);
    });
    ++it;
    const double sn = std::sqrt(dot(par, s.data(), s.data(), n));
    if (sn <= stop) {
      for (int64_t i = 0; i < n; ++i) x[i] += static_cast<T>(alpha * y[i]);
      rn = sn;
      break;
    }
    m.apply(par, s.data(), zz.data(), n);
    spmv(par, a, zz.data(), t.data());
    const double tt = dot(par, t.data(), t.data(), n);
    omega = tt > 0 ? dot(par, t.data(), s.data(), n) / tt : 0.0;
    par(n, 8192, [&](int64_t s0, int64_t e) {
      for (int64_t i = s0; i < e; ++i) {
        x[i] += static_cast<T>(alpha * y[i] + omega * zz[i]);
        r[i] = static_cast<T>(s[i] - omega * t[i]);
      }
    });
    rn = std::sqrt(dot(par, r.data(), r.data(), n));
    if (omega == 0) {
      st.breakdown = "omega = 0 at iteration " + std::to_string(it);
      break;
    }
  }
  st.iterations = it;
  final_residual(par, a, b, x, bn, st, t);
  return st;
}

}  // namespace rlx::sparse
