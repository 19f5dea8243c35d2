// Kernels the training step needs that the inference kernels did not cover:
// (1) f32 reductions over one contiguous run of axes (bias gradients, softmax sums), argmax/argmin,
// and broadcast_in_dim for any dtype (everything else keeps the reference-based generic kernel);
// (2) the row reductions rows_kernel (fused.cpp) uses for the row regions the LIR passes make
// (src/lir/rewrite: train-epilogues, bias-grad-into-gemm, row-regions); short-row reductions 8
// rows per AVX2 vector.
#include "backends/cpu/train_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include "backends/cpu/gemm_avx2.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/vmath.h"
#include "lir/plan.h"
#include "runtime/env.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "backends/cpu/simd_avx2.h"
#define RLX_ROWS_AVX2 1  // short rows, 8 per vector
#endif

namespace rlx::cpu {

namespace {

// ---------------------------------------------------------------------------------------------
// Reductions, arg-reductions, broadcast.

// Splits `shape` into [outer, red, inner] when `axes` (normalized) are one contiguous run.
bool split3(const std::vector<int64_t>& shape, const std::vector<int64_t>& axes_in, int64_t* outer, int64_t* red,
            int64_t* inner) {
  thread_local std::vector<int64_t> axes;  // reused: a warm run allocates nothing
  axes.assign(axes_in.begin(), axes_in.end());
  int64_t r = static_cast<int64_t>(shape.size());
  for (auto& a : axes) {
    if (a < 0) a += r;
    if (a < 0 || a >= r) return false;
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  if (axes.empty()) return false;
  for (size_t i = 1; i < axes.size(); ++i)
    if (axes[i] != axes[0] + static_cast<int64_t>(i)) return false;
  *outer = *red = *inner = 1;
  for (int64_t d = 0; d < r; ++d) {
    if (d < axes.front()) *outer *= shape[d];
    else if (d <= axes.back()) *red *= shape[d];
    else *inner *= shape[d];
  }
  return true;
}

enum class Red { Sum, Max, Min };

constexpr int64_t kReduceGrain = 131072;  // elements per parallel chunk of a reduction

inline float fold(Red k, float acc, float x) {
  if (k == Red::Sum) return acc + x;
  if (k == Red::Max) return (x > acc || x != x) ? x : acc;  // NaN sticks (acc NaN compares false)
  return (x < acc || x != x) ? x : acc;
}

// One row in the fixed order every f32 reduction here uses: 8 lanes strided by 8, lanes folded in
// order, then the tail (n < 8: left to right). Inlined into the RLX_SIMD loops below.
inline __attribute__((always_inline)) float reduce_row(Red k, const float* x, int64_t n) {
  float acc[8];
  int64_t i = 0;
  if (n >= 8) {
    for (int l = 0; l < 8; ++l) acc[l] = x[l];
    for (i = 8; i + 8 <= n; i += 8)
      for (int l = 0; l < 8; ++l) acc[l] = fold(k, acc[l], x[i + l]);
    float v = acc[0];
    for (int l = 1; l < 8; ++l) v = fold(k, v, acc[l]);
    for (; i < n; ++i) v = fold(k, v, x[i]);
    return v;
  }
  float v = x[0];
  for (i = 1; i < n; ++i) v = fold(k, v, x[i]);
  return v;
}

// The index of the first maximum (max) / minimum of p[0], p[stride], ... p[(n-1) stride]: first
// extreme wins; a NaN is the extreme (the first NaN wins and stops the scan), like the reference.
inline int64_t arg_scan(const float* p, int64_t n, int64_t stride, bool max) {
  int64_t best = 0;
  float b = p[0];
  for (int64_t j = 1; j < n && b == b; ++j) {
    float v = p[j * stride];
    if (v != v || (max ? v > b : v < b)) {
      b = v;
      best = j;
    }
  }
  return best;
}

#ifdef RLX_ROWS_AVX2
// Rows shorter than 16 fold left to right (reduce_row's order for n < 16), so 8
// rows at a time in the lanes of one vector, one strided gather per column, give the same bits as
// reduce_row without its branchy scalar max (a mispredicted branch per new maximum on real data).
__attribute__((target("avx2"))) int64_t reduce_short_rows_avx2(Red k, const float* x, int64_t rows, int64_t n,
                                                                  float* y) {
  const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(static_cast<int>(n)));
  int64_t r = 0;
  for (; r + 8 <= rows; r += 8) {
    const float* p = x + r * n;
    __m256 acc = _mm256_i32gather_ps(p, idx, 4);
    for (int64_t j = 1; j < n; ++j) {
      __m256 v = _mm256_i32gather_ps(p + j, idx, 4);
      if (k == Red::Sum) {
        acc = _mm256_add_ps(acc, v);
      } else {
        __m256 ext = k == Red::Max ? _mm256_cmp_ps(v, acc, _CMP_GT_OQ) : _mm256_cmp_ps(v, acc, _CMP_LT_OQ);
        __m256 take = _mm256_or_ps(ext, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        acc = _mm256_blendv_ps(acc, v, take);
      }
    }
    _mm256_storeu_ps(y + r, acc);
  }
  return r;
}

// Arg-reduce of 8 short rows per vector; the sequential scan's rule per lane (the first extreme
// wins, a NaN wins and stops the scan).
__attribute__((target("avx2"))) int64_t argreduce_short_rows_avx2(bool max, const float* x, int64_t rows, int64_t n,
                                                                     int64_t* y) {
  const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(static_cast<int>(n)));
  int64_t r = 0;
  for (; r + 8 <= rows; r += 8) {
    const float* p = x + r * n;
    __m256 b = _mm256_i32gather_ps(p, idx, 4);
    __m256i best = _mm256_setzero_si256();
    for (int64_t j = 1; j < n; ++j) {
      __m256 v = _mm256_i32gather_ps(p + j, idx, 4);
      __m256 ext = max ? _mm256_cmp_ps(v, b, _CMP_GT_OQ) : _mm256_cmp_ps(v, b, _CMP_LT_OQ);
      __m256 better = _mm256_or_ps(ext, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
      __m256 take = _mm256_and_ps(better, _mm256_cmp_ps(b, b, _CMP_ORD_Q));
      b = _mm256_blendv_ps(b, v, take);
      best = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(best),
                                                  _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(j))), take));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + r), _mm256_cvtepi32_epi64(_mm256_castsi256_si128(best)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + r + 4), _mm256_cvtepi32_epi64(_mm256_extracti128_si256(best, 1)));
  }
  return r;
}

#endif

// all rows in one call: the per-row RLX_SIMD dispatch cost more than a 10-wide row.
RLX_SIMD void reduce_rows(Red k, const float* x, int64_t rows, int64_t n, float* y) {
  int64_t r = 0;
#ifdef RLX_ROWS_AVX2
  if (n > 1 && n < 16 && rows >= 8 && n * 8 < (int64_t{1} << 31) && simd::cpu_has_avx2()) r = reduce_short_rows_avx2(k, x, rows, n, y);
#endif
  for (; r < rows; ++r) y[r] = reduce_row(k, x + r * n, n);
}

// y[c0..c1) = fold over rows 0..R of x[r * I + c] (row order), all rows in one call.
RLX_SIMD void fold_columns(Red k, const float* x, int64_t R, int64_t I, float* y, int64_t c0, int64_t c1) {
  const int64_t n = c1 - c0;
  std::memcpy(y + c0, x + c0, static_cast<size_t>(n) * sizeof(float));
  for (int64_t rr = 1; rr < R; ++rr) {
    const float* xr = x + rr * I + c0;
    float* yy = y + c0;
    switch (k) {
      case Red::Sum: for (int64_t i = 0; i < n; ++i) yy[i] += xr[i]; break;
      case Red::Max: for (int64_t i = 0; i < n; ++i) yy[i] = (xr[i] > yy[i] || xr[i] != xr[i]) ? xr[i] : yy[i]; break;
      case Red::Min: for (int64_t i = 0; i < n; ++i) yy[i] = (xr[i] < yy[i] || xr[i] != xr[i]) ? xr[i] : yy[i]; break;
    }
  }
}

void reduce_block(Red k, const float* X, int64_t O, int64_t R, int64_t I, float* Y);

// Axes in several runs (a conv's bias gradient: axes 0, 2, 3 of [N, C, H, W]): one pass per run of
// adjacent axes, the last run first, through per-thread scratch. False for other cases.
bool reduce_runs(Red k, const float* X, const std::vector<int64_t>& shape, const std::vector<int64_t>& axes_in, float* Y) {
  const int64_t r = static_cast<int64_t>(shape.size());
  thread_local std::vector<int64_t> axes, dims;  // reused: a warm run allocates nothing
  axes.assign(axes_in.begin(), axes_in.end());
  dims.assign(shape.begin(), shape.end());
  for (auto& a : axes) {
    if (a < 0) a += r;
    if (a < 0 || a >= r) return false;
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  for (auto d : dims)
    if (d == 0) return false;
  thread_local std::vector<float> buf[2];
  const float* cur = X;
  for (int pass = 0; !axes.empty(); ++pass) {
    size_t b = axes.size() - 1;
    while (b > 0 && axes[b - 1] + 1 == axes[b]) --b;  // [axes[b], axes.back()] is the last run
    int64_t O = 1, R = 1, I = 1;
    for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d)
      (d < axes[b] ? O : d <= axes.back() ? R : I) *= dims[d];
    float* dst = Y;
    if (b > 0) {
      std::vector<float>& t = buf[pass % 2];
      if (t.size() < static_cast<size_t>(O * I)) t.resize(static_cast<size_t>(O * I));
      dst = t.data();
    }
    reduce_block(k, cur, O, R, I, dst);
    dims.erase(dims.begin() + axes[b], dims.begin() + axes.back() + 1);
    axes.resize(b);
    cur = dst;
  }
  return true;
}

void reduce_f32(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  int64_t O, R, I;
  if (in[0].dtype() != DType::f32 || out[0].dtype() != DType::f32) return generic_kernel(n, in, out);
  Red k = n.op == OpKind::ReduceSum ? Red::Sum : n.op == OpKind::ReduceMax ? Red::Max : Red::Min;
  const float* X = in[0].data<float>();
  float* Y = out[0].data<float>();
  if (!split3(in[0].shape(), attr_ints(n, "axes"), &O, &R, &I) || R == 0) {
    if (!reduce_runs(k, X, in[0].shape(), attr_ints(n, "axes"), Y)) generic_kernel(n, in, out);
    return;
  }
  reduce_block(k, X, O, R, I, Y);
}

// Y[o, i] = (+) over r of X[o, r, i].
void reduce_block(Red k, const float* X, int64_t O, int64_t R, int64_t I, float* Y) {
  if (I == 1) {
    // >= 128K elements per chunk: a bias gradient at batch 128 ([128, 512]) is ~10 us of adds, less
    // than waking a second thread costs on a busy machine.
    int64_t grain = std::max<int64_t>(1, kReduceGrain / std::max<int64_t>(R, 1));
    parallel_for(O, grain, [&](int64_t o0, int64_t o1) { reduce_rows(k, X + o0 * R, o1 - o0, R, Y + o0); });
    return;
  }
  // Inner run contiguous: fold whole rows; split the inner run (columns) across threads.
  // >= 32K elements (and 16 columns) per chunk: a bias gradient over batch 1024
  // ([1024, 128] -> [128], 0.5 MB read) now splits over both cores; each column keeps its row order.
  // Below 100K elements (batch 128's [128, 512]: ~10 us) one thread: less than a wake-up costs.
  int64_t cgrain = R * I < 100000 ? std::max<int64_t>(I, 1) : std::max<int64_t>(16, 32768 / std::max<int64_t>(R, 1));
  for (int64_t o = 0; o < O; ++o) {
    const float* x = X + o * R * I;
    float* y = Y + o * I;
    parallel_for(I, cgrain, [&](int64_t c0, int64_t c1) { fold_columns(k, x, R, I, y, c0, c1); });
  }
}

void arg_reduce_f32(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  int64_t r = x.rank(), ax = attr_int(n, "axis");
  if (ax < 0) ax += r;
  if (x.dtype() != DType::f32 || out[0].dtype() != DType::i64 || ax < 0 || ax >= r || x.shape()[ax] == 0)
    return generic_kernel(n, in, out);
  int64_t O = 1, R = x.shape()[ax], I = 1;
  for (int64_t d = 0; d < ax; ++d) O *= x.shape()[d];
  for (int64_t d = ax + 1; d < r; ++d) I *= x.shape()[d];
  bool is_max = n.op == OpKind::ArgMax;
  const float* X = x.data<float>();
  int64_t* Y = out[0].data<int64_t>();
  if (I == 1) return argreduce_rows_f32(is_max, X, O, R, Y);  // shared with rows_kernel
  for (int64_t o = 0; o < O; ++o)
    for (int64_t i = 0; i < I; ++i) Y[o * I + i] = arg_scan(X + o * R * I + i, R, I, is_max);
}

template <class E>
void broadcast_rows(const char* src, char* dst, const std::vector<int64_t>& os, const std::vector<int64_t>& st) {
  const E* s = reinterpret_cast<const E*>(src);
  E* d = reinterpret_cast<E*>(dst);
  int64_t r = static_cast<int64_t>(os.size());
  int64_t inner = os[r - 1], is = st[r - 1], rows = 1;
  for (int64_t k = 0; k + 1 < r; ++k) rows *= os[k];
  thread_local std::vector<int64_t> idx;  // reused: a warm run allocates nothing
  idx.assign(static_cast<size_t>(std::max<int64_t>(r - 1, 0)), 0);
  int64_t off = 0;
  for (int64_t row = 0; row < rows; ++row) {
    E* y = d + row * inner;
    if (is == 0) std::fill(y, y + inner, s[off]);
    else if (is == 1) std::memcpy(y, s + off, static_cast<size_t>(inner) * sizeof(E));
    else
      for (int64_t j = 0; j < inner; ++j) y[j] = s[off + j * is];
    for (int64_t k = r - 2; k >= 0; --k) {  // odometer over the outer dims
      off += st[k];
      if (++idx[k] < os[k]) break;
      off -= st[k] * os[k];
      idx[k] = 0;
    }
  }
}

void broadcast_in_dim(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  Tensor& y = out[0];
  const auto& os = y.shape();
  const auto& dims = attr_ints(n, "dims");
  size_t es = dtype_size(x.dtype());
  if (y.numel() == 0) return;
  if (os.empty() || x.dtype() != y.dtype() || dims.size() != static_cast<size_t>(x.rank()) ||
      (es != 1 && es != 2 && es != 4 && es != 8))
    return generic_kernel(n, in, out);
  int64_t r = static_cast<int64_t>(os.size());
  thread_local std::vector<int64_t> st;  // reused: a warm run allocates nothing
  st.assign(static_cast<size_t>(r), 0);
  int64_t s = 1;
  for (int64_t i = x.rank() - 1; i >= 0; --i) {
    int64_t d = dims[i];
    if (d < 0 || d >= r) return generic_kernel(n, in, out);
    if (x.shape()[i] != 1) {
      if (x.shape()[i] != os[d]) return generic_kernel(n, in, out);
      st[d] = s;
    }
    s *= x.shape()[i];
  }
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(y.raw());
  switch (es) {
    case 1: broadcast_rows<uint8_t>(src, dst, os, st); break;
    case 2: broadcast_rows<uint16_t>(src, dst, os, st); break;
    case 4: broadcast_rows<uint32_t>(src, dst, os, st); break;
    default: broadcast_rows<uint64_t>(src, dst, os, st); break;
  }
}

}  // namespace

void reduce_rows_f32(int kind, const float* x, int64_t rows, int64_t n, float* y) {
  reduce_rows(kind == 0 ? Red::Sum : kind == 1 ? Red::Max : Red::Min, x, rows, n, y);
}

void argreduce_rows_f32(bool max, const float* x, int64_t rows, int64_t n, int64_t* y) {
  int64_t r0 = 0;
#ifdef RLX_ROWS_AVX2
  if (n > 1 && n < 1024 && rows >= 8 && simd::cpu_has_avx2()) r0 = argreduce_short_rows_avx2(max, x, rows, n, y);
#endif
  for (int64_t r = r0; r < rows; ++r) y[r] = arg_scan(x + r * n, n, 1, max);
}

KernelFn find_train_kernel(OpKind op, DType dt) {
  switch (op) {
    case OpKind::ReduceSum:
    case OpKind::ReduceMax:
    case OpKind::ReduceMin: return dt == DType::f32 ? &reduce_f32 : nullptr;
    case OpKind::ArgMax:
    case OpKind::ArgMin: return dt == DType::f32 ? &arg_reduce_f32 : nullptr;
    case OpKind::BroadcastInDim: return &broadcast_in_dim;
    default: return nullptr;
  }
}

}  // namespace rlx::cpu
