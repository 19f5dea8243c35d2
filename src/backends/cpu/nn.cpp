// Normalization, softmax and attention kernels for the cpu device: row-parallel on the pool, inner
// loops vectorized (RLX_SIMD). Attention (AVX2) works per (batch, head) on strips of 6 query rows:
// register-tiled QK^T against K packed once per head, softmax in L1, register-tiled P.V; scores are
// never a [B,H,S,T] tensor, and keys past a sentence's last real token are skipped. Without AVX2
// (or RLX_CPU_ATTENTION=gemm) blocks of 128 query rows go through the packed GEMM instead.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/blas.h"
#include "backends/cpu/gemm_avx2.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/simd_avx2.h"
#include "backends/cpu/vmath.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define RLX_NN_X86 1
#endif

namespace rlx::cpu {

namespace {

template <class T>
void softmax_t(const Node& n, const Tensor& x, Tensor& y) {
  int64_t ax = attr_int(n, "axis");
  if (ax < 0) ax += x.rank();
  int64_t outer = 1, len = x.shape()[ax], inner = 1;
  for (int64_t i = 0; i < ax; ++i) outer *= x.shape()[i];
  for (int64_t i = ax + 1; i < x.rank(); ++i) inner *= x.shape()[i];
  const T* X = x.data<T>();
  T* Y = y.data<T>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const T* xr = X + o * len * inner + in;
      T* yr = Y + o * len * inner + in;
      T m = -std::numeric_limits<T>::infinity();
      for (int64_t i = 0; i < len; ++i) m = std::max(m, xr[i * inner]);
      T s = 0;
      for (int64_t i = 0; i < len; ++i) s += (yr[i * inner] = std::exp(xr[i * inner] - m));
      for (int64_t i = 0; i < len; ++i) yr[i * inner] /= s;
    }
  }
}

// Reductions keep 16 lanes explicitly: without -ffast-math GCC vectorizes no float `s += x[i]` or
// max chain, and every clone then reduces in the same order.
RLX_SIMD float row_max(const float* x, int64_t n) {
  float acc[16];
  for (int j = 0; j < 16; ++j) acc[j] = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
  for (int j = 0; i + j < n; ++j) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
  float m = acc[0];
  for (int j = 1; j < 16; ++j) m = acc[j] > m ? acc[j] : m;
  return m;
}

// y = exp(x - m), returns the sum.
RLX_SIMD float row_exp(const float* x, float* y, int64_t n, float m) {
  float acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) {
      float e = vm::exp(x[i + j] - m);
      y[i + j] = e;
      acc[j] += e;
    }
  for (int j = 0; i + j < n; ++j) {
    float e = vm::exp(x[i + j] - m);
    y[i + j] = e;
    acc[j] += e;
  }
  for (int j = 0; j < 8; ++j) acc[j] += acc[j + 8];
  for (int j = 0; j < 4; ++j) acc[j] += acc[j + 4];
  return (acc[0] + acc[2]) + (acc[1] + acc[3]);
}

RLX_SIMD void row_scale(float* y, int64_t n, float f) {
  for (int64_t i = 0; i < n; ++i) y[i] *= f;
}

// Softmax of one contiguous row; a row of -inf (or NaN max) follows the reference via std::exp.
void softmax_row(const float* x, float* y, int64_t n) {
  float m = row_max(x, n);
  if (!std::isfinite(m)) {
    float s = 0;
    for (int64_t i = 0; i < n; ++i) s += (y[i] = std::exp(x[i] - m));
    for (int64_t i = 0; i < n; ++i) y[i] /= s;
    return;
  }
  float s = row_exp(x, y, n, m);
  row_scale(y, n, 1.f / s);
}

// Sum of x[0..n) in 16 lanes (GCC vectorizes a plain `s += x[i]` only under -ffast-math, so the
// lanes are explicit; every clone adds in the same order).
RLX_INLINE float lane_sum(const float* x, int64_t n) {
  float acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += x[i + j];
  for (int j = 0; i + j < n; ++j) acc[j] += x[i + j];
  for (int j = 0; j < 8; ++j) acc[j] += acc[j + 8];
  for (int j = 0; j < 4; ++j) acc[j] += acc[j + 4];
  return (acc[0] + acc[2]) + (acc[1] + acc[3]);
}

RLX_INLINE float lane_sq_dev(const float* x, int64_t n, float mean) {
  float acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) {
      float d = x[i + j] - mean;
      acc[j] += d * d;
    }
  for (int j = 0; i + j < n; ++j) {
    float d = x[i + j] - mean;
    acc[j] += d * d;
  }
  for (int j = 0; j < 8; ++j) acc[j] += acc[j + 8];
  for (int j = 0; j < 4; ++j) acc[j] += acc[j + 4];
  return (acc[0] + acc[2]) + (acc[1] + acc[3]);
}

RLX_SIMD void layer_norm_rows(const float* X, const float* G, const float* B, float* Y, int64_t r0, int64_t r1,
                              int64_t D, float eps) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = X + r * D;
    float* yr = Y + r * D;
    // Two passes (mean, then squared deviations) keep accuracy for the row lengths models use.
    const float mean = lane_sum(xr, D) / static_cast<float>(D);
    const float inv = 1.f / std::sqrt(lane_sq_dev(xr, D, mean) / static_cast<float>(D) + eps);
    if (B)
      for (int64_t i = 0; i < D; ++i) yr[i] = (xr[i] - mean) * inv * G[i] + B[i];
    else
      for (int64_t i = 0; i < D; ++i) yr[i] = (xr[i] - mean) * inv * G[i];
  }
}


// Where attention reads and writes: element (b, h, s, d) of Q/K/V/O lives at
// base + b*xb + h*xh + s*xs + d, and the mask as the caller resolved it.
struct AttnArgs {
  int64_t B, H, Hk, S, T, D, Dv;
  const float *Q, *K, *V;
  float* O;
  int64_t qb, qh, qs, kb, kh, ks, vb, vh, vs, ob, oh, os;
  float scale;
  bool causal, padding, bias;
  const float* Bias;  // [B,H,S,T] broadcast through bstr, when bias
  int64_t bstr[4];
  const char* keep;      // [B,T] key kept, when padding
  const int64_t* t_end;  // [B] keys at or past t_end[b] are masked
};

#if defined(RLX_NN_X86)
#define RLX_AVX2 __attribute__((target("avx2,fma")))

// The AVX2 attention below works per (batch, head) on strips of 6 query rows. A strip's scores
// (6 x T) are computed by a register-tiled micro-kernel (6 queries x 16 keys, 12 accumulators) from
// K packed once per head into 16-key panels, scaled and masked on the way out, soft-maxed in L1
// (exp on 8 lanes; the 1/sum is applied to the output instead of the probabilities), and multiplied
// by V (6 rows x 16 output columns in registers). Scores never leave L1.
constexpr int kStrip = 6;

// e^x of a score minus its row max (x <= 0, -inf for a masked key: exactly 0; NaN stays NaN) and the
// horizontal max/sum: the shared 8-lane helpers of simd_avx2.h .
RLX_AVX2 inline __m256 exp_nonpos8(__m256 x) { return simd::exp8<true>(x); }
using simd::hmax8;
using simd::hsum8;

// Accumulators are named variables so GCC keeps all 12 in ymm registers.
#define RLX_ACC_DECL                                                                   \
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00; \
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
#define RLX_FMA_ROW(r, A)                          \
  if constexpr (MR > r) {                          \
    __m256 av = _mm256_broadcast_ss(A);            \
    c##r##0 = _mm256_fmadd_ps(av, b0, c##r##0);    \
    if constexpr (NV > 1) c##r##1 = _mm256_fmadd_ps(av, b1, c##r##1); \
  }

// S[r][0..16) = scale * (Q row r . K panel), or -inf for a key whose `keep` lane has its sign bit
// clear, for MR query rows and one 16-key panel (Kp: D rows of 16 keys).
template <int MR>
RLX_AVX2 void qk_tile(int64_t D, const float* Q, int64_t qs, const float* Kp, float scale, const float* keep, float* S,
                      int64_t lds) {
  constexpr int NV = 2;
  RLX_ACC_DECL
  for (int64_t d = 0; d < D; ++d) {
    __m256 b0 = _mm256_loadu_ps(Kp + d * 16), b1 = _mm256_loadu_ps(Kp + d * 16 + 8);
    RLX_FMA_ROW(0, Q + d) RLX_FMA_ROW(1, Q + qs + d) RLX_FMA_ROW(2, Q + 2 * qs + d)
    RLX_FMA_ROW(3, Q + 3 * qs + d) RLX_FMA_ROW(4, Q + 4 * qs + d) RLX_FMA_ROW(5, Q + 5 * qs + d)
  }
  // A masked key's score is -inf whatever the product was (even NaN), as in the reference.
  const __m256 sc = _mm256_set1_ps(scale), k0 = _mm256_loadu_ps(keep), k1 = _mm256_loadu_ps(keep + 8);
  const __m256 ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 a0[6] = {c00, c10, c20, c30, c40, c50}, a1[6] = {c01, c11, c21, c31, c41, c51};
  for (int r = 0; r < MR; ++r) {
    _mm256_storeu_ps(S + r * lds, _mm256_blendv_ps(ninf, _mm256_mul_ps(a0[r], sc), k0));
    _mm256_storeu_ps(S + r * lds + 8, _mm256_blendv_ps(ninf, _mm256_mul_ps(a1[r], sc), k1));
  }
}

// O[r][0..8*NV) = inv[r] * sum_t P[r][t] * V[t][..], for MR rows over T keys.
template <int MR, int NV>
RLX_AVX2 void pv_tile(int64_t T, const float* P, int64_t ldp, const float* V, int64_t ldv, const float* inv, float* O,
                      int64_t os) {
  RLX_ACC_DECL
  for (int64_t t = 0; t < T; ++t) {
    __m256 b0 = _mm256_loadu_ps(V + t * ldv), b1 = b0;
    if constexpr (NV > 1) b1 = _mm256_loadu_ps(V + t * ldv + 8);
    RLX_FMA_ROW(0, P + t) RLX_FMA_ROW(1, P + ldp + t) RLX_FMA_ROW(2, P + 2 * ldp + t)
    RLX_FMA_ROW(3, P + 3 * ldp + t) RLX_FMA_ROW(4, P + 4 * ldp + t) RLX_FMA_ROW(5, P + 5 * ldp + t)
  }
  __m256 a0[6] = {c00, c10, c20, c30, c40, c50}, a1[6] = {c01, c11, c21, c31, c41, c51};
  for (int r = 0; r < MR; ++r) {
    const __m256 f = _mm256_set1_ps(inv[r]);
    _mm256_storeu_ps(O + r * os, _mm256_mul_ps(a0[r], f));
    if constexpr (NV > 1) _mm256_storeu_ps(O + r * os + 8, _mm256_mul_ps(a1[r], f));
  }
}
#undef RLX_FMA_ROW
#undef RLX_ACC_DECL

// Row softmax of `rows` rows of length Tp (a multiple of 16) in place, without the normalization:
// inv[r] gets 1/sum (0 for a row whose keys are all masked; that row becomes zeros).
RLX_AVX2 void softmax_strip(float* S, int64_t lds, int rows, int64_t Tp, float* inv) {
  for (int r = 0; r < rows; ++r) {
    float* p = S + r * lds;
    __m256 m = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
    __m256 m1 = m;
    for (int64_t t = 0; t < Tp; t += 16) {  // Tp is a multiple of 16
      m = _mm256_max_ps(m, _mm256_loadu_ps(p + t));
      m1 = _mm256_max_ps(m1, _mm256_loadu_ps(p + t + 8));
    }
    m = _mm256_max_ps(m, m1);
    const float mx = hmax8(m);
    if (mx == -std::numeric_limits<float>::infinity()) {  // every key masked: zeros, by definition
      std::fill(p, p + Tp, 0.f);
      inv[r] = 0.f;
      continue;
    }
    if (!std::isfinite(mx)) {  // +inf / NaN scores: the reference's std::exp path
      softmax_row(p, p, Tp);
      inv[r] = 1.f;
      continue;
    }
    // Four independent exps per step: one exp is a ~50-cycle dependency chain.
    const __m256 vmx = _mm256_set1_ps(mx);
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t t = 0;
    for (; t + 32 <= Tp; t += 32) {
      __m256 e0 = exp_nonpos8(_mm256_sub_ps(_mm256_loadu_ps(p + t), vmx));
      __m256 e1 = exp_nonpos8(_mm256_sub_ps(_mm256_loadu_ps(p + t + 8), vmx));
      __m256 e2 = exp_nonpos8(_mm256_sub_ps(_mm256_loadu_ps(p + t + 16), vmx));
      __m256 e3 = exp_nonpos8(_mm256_sub_ps(_mm256_loadu_ps(p + t + 24), vmx));
      _mm256_storeu_ps(p + t, e0);
      _mm256_storeu_ps(p + t + 8, e1);
      _mm256_storeu_ps(p + t + 16, e2);
      _mm256_storeu_ps(p + t + 24, e3);
      s0 = _mm256_add_ps(s0, e0);
      s1 = _mm256_add_ps(s1, e1);
      s2 = _mm256_add_ps(s2, e2);
      s3 = _mm256_add_ps(s3, e3);
    }
    if (t < Tp) {  // Tp is a multiple of 16
      __m256 e0 = exp_nonpos8(_mm256_sub_ps(_mm256_loadu_ps(p + t), vmx));
      __m256 e1 = exp_nonpos8(_mm256_sub_ps(_mm256_loadu_ps(p + t + 8), vmx));
      _mm256_storeu_ps(p + t, e0);
      _mm256_storeu_ps(p + t + 8, e1);
      s0 = _mm256_add_ps(s0, e0);
      s1 = _mm256_add_ps(s1, e1);
    }
    inv[r] = 1.f / hsum8(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  }
}

// One strip of MR query rows [s, s+MR) of head (b, h): scores against Tq keys (Kp panels), masks,
// softmax, times V (Vp: Tl rows of Dv), into O.
template <int MR>
void attention_strip(const AttnArgs& a, int64_t b, int64_t h, int64_t s, const float* Qs, const float* Kp,
                     const float* Vp, const float* keep, int64_t Tl, float* sp, float* Os) {
  const int64_t Tq = (Tl + 15) / 16 * 16;
  for (int64_t j = 0; j < Tq; j += 16) qk_tile<MR>(a.D, Qs, a.qs, Kp + j * a.D, a.scale, keep + j, sp + j, Tq);
  if (a.bias || a.causal) {
    for (int r = 0; r < MR; ++r) {
      float* p = sp + r * Tq;
      if (a.bias) {
        const float* br = a.Bias + b * a.bstr[0] + h * a.bstr[1] + (s + r) * a.bstr[2];
        for (int64_t t = 0; t < Tl; ++t) p[t] += br[t * a.bstr[3]];
      }
      if (a.causal)
        for (int64_t t = std::max<int64_t>(0, s + r + (a.T - a.S) + 1); t < Tq; ++t)
          p[t] = -std::numeric_limits<float>::infinity();
    }
  }
  float inv[kStrip];
  softmax_strip(sp, Tq, MR, Tq, inv);
  int64_t c = 0;
  for (; c + 16 <= a.Dv; c += 16) pv_tile<MR, 2>(Tl, sp, Tq, Vp + c, a.Dv, inv, Os + c, a.os);
  for (; c < a.Dv; c += 8) pv_tile<MR, 1>(Tl, sp, Tq, Vp + c, a.Dv, inv, Os + c, a.os);
}

// K^T of one head in 16-key panels: Kp[(t/16)*16*D + d*16 + t%16] = K[t][d], zero for keys in
// [Te, ceil16(Te)). Blocks of 8 keys x 8 dims go through an 8x8 register transpose.
RLX_AVX2 void pack_k_panels(const float* K, int64_t ks, int64_t Te, int64_t D, float* Kp) {
  const int64_t Tp = (Te + 15) / 16 * 16;
  const int64_t D8 = D / 8 * 8;
  for (int64_t t = 0; t < Tp; t += 8) {
    float* panel = Kp + (t / 16) * 16 * D + t % 16;
    const int64_t nk = std::clamp<int64_t>(Te - t, 0, 8);  // real keys in this block of 8
    for (int64_t d = 0; d < D8; d += 8) {
      __m256 r[8];
      for (int i = 0; i < 8; ++i) r[i] = i < nk ? _mm256_loadu_ps(K + (t + i) * ks + d) : _mm256_setzero_ps();
      __m256 u0 = _mm256_unpacklo_ps(r[0], r[1]), u1 = _mm256_unpackhi_ps(r[0], r[1]);
      __m256 u2 = _mm256_unpacklo_ps(r[2], r[3]), u3 = _mm256_unpackhi_ps(r[2], r[3]);
      __m256 u4 = _mm256_unpacklo_ps(r[4], r[5]), u5 = _mm256_unpackhi_ps(r[4], r[5]);
      __m256 u6 = _mm256_unpacklo_ps(r[6], r[7]), u7 = _mm256_unpackhi_ps(r[6], r[7]);
      __m256 v0 = _mm256_shuffle_ps(u0, u2, 0x44), v1 = _mm256_shuffle_ps(u0, u2, 0xEE);
      __m256 v2 = _mm256_shuffle_ps(u1, u3, 0x44), v3 = _mm256_shuffle_ps(u1, u3, 0xEE);
      __m256 v4 = _mm256_shuffle_ps(u4, u6, 0x44), v5 = _mm256_shuffle_ps(u4, u6, 0xEE);
      __m256 v6 = _mm256_shuffle_ps(u5, u7, 0x44), v7 = _mm256_shuffle_ps(u5, u7, 0xEE);
      float* o = panel + d * 16;
      _mm256_storeu_ps(o + 0 * 16, _mm256_permute2f128_ps(v0, v4, 0x20));
      _mm256_storeu_ps(o + 1 * 16, _mm256_permute2f128_ps(v1, v5, 0x20));
      _mm256_storeu_ps(o + 2 * 16, _mm256_permute2f128_ps(v2, v6, 0x20));
      _mm256_storeu_ps(o + 3 * 16, _mm256_permute2f128_ps(v3, v7, 0x20));
      _mm256_storeu_ps(o + 4 * 16, _mm256_permute2f128_ps(v0, v4, 0x31));
      _mm256_storeu_ps(o + 5 * 16, _mm256_permute2f128_ps(v1, v5, 0x31));
      _mm256_storeu_ps(o + 6 * 16, _mm256_permute2f128_ps(v2, v6, 0x31));
      _mm256_storeu_ps(o + 7 * 16, _mm256_permute2f128_ps(v3, v7, 0x31));
    }
    for (int64_t d = D8; d < D; ++d)
      for (int i = 0; i < 8; ++i) panel[d * 16 + i] = i < nk ? K[(t + i) * ks + d] : 0.f;
  }
}

inline void prefetch_row(const float* p, int64_t n) {
  for (int64_t d = 0; d < n; d += 16) __builtin_prefetch(p + d);
  __builtin_prefetch(p + n - 1);
}

// The whole attention, parallel over (batch, head, block of query rows) with a shared cursor.
// Needs AVX2+FMA and Dv % 8 == 0.
void attention_avx2(const AttnArgs& a) {
  const int64_t Tmax = (a.T + 15) / 16 * 16;
  // Key mask per batch row as blend lanes: -0.0 (sign bit set) for an attended key, +0.0 for a
  // masked one and for the padding of the last 16-key panel.
  thread_local std::vector<float> kmask_tl;
  kmask_tl.resize(static_cast<size_t>(a.B * Tmax));
  for (int64_t b = 0; b < a.B; ++b)
    for (int64_t t = 0; t < Tmax; ++t)
      kmask_tl[b * Tmax + t] = t < a.t_end[b] && (!a.padding || a.keep[b * a.T + t]) ? -0.f : 0.f;
  const float* kmask = kmask_tl.data();
  constexpr int64_t kBlock = 32 * kStrip;  // query rows per work item
  const int64_t sblocks = (a.S + kBlock - 1) / kBlock, items = a.B * a.H * sblocks;
  const int64_t nt = std::min<int64_t>(num_threads(), items);
  // Items are taken a few at a time, so a thread knows its next one (prefetch) and still balances.
  const int64_t chunk = std::clamp<int64_t>(items / (8 * nt), 1, 4);
  std::atomic<int64_t> next{0};
  auto worker = [&](int64_t, int64_t) {
    thread_local std::vector<float> kp, vp, sp;
    if (static_cast<int64_t>(kp.size()) < Tmax * a.D) kp.resize(static_cast<size_t>(Tmax * a.D));
    if (static_cast<int64_t>(vp.size()) < Tmax * a.Dv) vp.resize(static_cast<size_t>(Tmax * a.Dv));
    if (static_cast<int64_t>(sp.size()) < kStrip * Tmax) sp.resize(static_cast<size_t>(kStrip * Tmax));
    int64_t packed = -1;  // the (b, h) whose K and V are in kp / vp
    // Item w; wn is the item this thread most likely runs next: its Q, K and V rows are prefetched
    // a strip at a time while w computes (they come from a large QKV buffer, far from L1/L2).
    auto run_item = [&](int64_t w, int64_t wn) {
      const int64_t bh = w / sblocks, s0 = (w % sblocks) * kBlock, rows = std::min(kBlock, a.S - s0);
      const float *pq = nullptr, *pk = nullptr, *pv = nullptr;
      int64_t pq_rows = 0, pkv_rows = 0;
      if (wn < items) {
        const int64_t bhn = wn / sblocks, s0n = (wn % sblocks) * kBlock, bn = bhn / a.H, hn = bhn % a.H;
        const int64_t hkn = hn / (a.H / a.Hk);
        pq = a.Q + bn * a.qb + hn * a.qh + s0n * a.qs;
        pq_rows = std::min(kBlock, a.S - s0n);
        pk = a.K + bn * a.kb + hkn * a.kh;
        pv = a.V + bn * a.vb + hkn * a.vh;
        pkv_rows = a.t_end[bn];
      }
      const int64_t b = bh / a.H, h = bh % a.H, hk = h / (a.H / a.Hk), Te = a.t_end[b];
      float* Ob = a.O + b * a.ob + h * a.oh + s0 * a.os;
      if (Te == 0) {  // every key masked: zeros, by definition
        for (int64_t i = 0; i < rows; ++i) std::fill(Ob + i * a.os, Ob + i * a.os + a.Dv, 0.f);
        return;
      }
      if (packed != bh) {  // K^T in 16-key panels (zero past Te), V as Te contiguous rows
        const float* Kb = a.K + b * a.kb + hk * a.kh;
        const float* Vb = a.V + b * a.vb + hk * a.vh;
        pack_k_panels(Kb, a.ks, Te, a.D, kp.data());
        for (int64_t t = 0; t < Te; ++t) std::copy(Vb + t * a.vs, Vb + t * a.vs + a.Dv, vp.data() + t * a.Dv);
        packed = bh;
      }
      const float* Qb = a.Q + b * a.qb + h * a.qh + s0 * a.qs;
      const float* mb = kmask + b * Tmax;
      for (int64_t i = 0; i < rows; i += kStrip) {
        const int mr = static_cast<int>(std::min<int64_t>(kStrip, rows - i));
        const int64_t s = s0 + i;
        // causal: no row of the strip sees keys past s + mr - 1 + (T - S)
        const int64_t Tl = a.causal ? std::clamp<int64_t>(s + mr + (a.T - a.S), 0, Te) : Te;
        float* Os = Ob + i * a.os;
        if (Tl == 0) {
          for (int r = 0; r < mr; ++r) std::fill(Os + r * a.os, Os + r * a.os + a.Dv, 0.f);
          continue;
        }
        for (int64_t r = i; r < i + kStrip; ++r) {
          if (r < pq_rows) prefetch_row(pq + r * a.qs, a.D);
          if (r < pkv_rows) {
            prefetch_row(pk + r * a.ks, a.D);
            prefetch_row(pv + r * a.vs, a.Dv);
          }
        }
        const float* Qs = Qb + i * a.qs;
        switch (mr) {
          case 6: attention_strip<6>(a, b, h, s, Qs, kp.data(), vp.data(), mb, Tl, sp.data(), Os); break;
          case 5: attention_strip<5>(a, b, h, s, Qs, kp.data(), vp.data(), mb, Tl, sp.data(), Os); break;
          case 4: attention_strip<4>(a, b, h, s, Qs, kp.data(), vp.data(), mb, Tl, sp.data(), Os); break;
          case 3: attention_strip<3>(a, b, h, s, Qs, kp.data(), vp.data(), mb, Tl, sp.data(), Os); break;
          case 2: attention_strip<2>(a, b, h, s, Qs, kp.data(), vp.data(), mb, Tl, sp.data(), Os); break;
          default: attention_strip<1>(a, b, h, s, Qs, kp.data(), vp.data(), mb, Tl, sp.data(), Os); break;
        }
      }
    };
    for (int64_t c0; (c0 = next.fetch_add(chunk, std::memory_order_relaxed)) < items;) {
      const int64_t c1 = std::min(items, c0 + chunk);
      for (int64_t w = c0; w < c1; ++w) run_item(w, w + 1 < c1 ? w + 1 : next.load(std::memory_order_relaxed));
    }
  };
  if (nt <= 1)
    worker(0, 1);
  else
    parallel_for(nt, 1, worker);  // one range per thread; each takes work items from `next`
}
#undef RLX_AVX2
#endif  // RLX_NN_X86

}  // namespace

void layer_norm_rows_f32(const float* X, const float* G, const float* B, float* Y, int64_t r0, int64_t r1, int64_t D,
                         float eps) {
  layer_norm_rows(X, G, B, Y, r0, r1, D, eps);
}

void softmax(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  if (in[0].dtype() == DType::f32) {
    int64_t ax = attr_int(n, "axis");
    if (ax < 0) ax += in[0].rank();
    if (ax == in[0].rank() - 1 && in[0].numel() > 0) {  // contiguous rows: the fast path
      int64_t len = in[0].shape()[ax], rows = in[0].numel() / len;
      const float* X = in[0].data<float>();
      float* Y = out[0].data<float>();
      parallel_for(rows, std::max<int64_t>(1, 4096 / len), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) softmax_row(X + r * len, Y + r * len, len);
      });
      return;
    }
    return softmax_t<float>(n, in[0], out[0]);
  }
  if (in[0].dtype() == DType::f64) return softmax_t<double>(n, in[0], out[0]);
  generic_kernel(n, in, out);
}

void layer_norm(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  if (in[0].dtype() != DType::f32) return generic_kernel(n, in, out);
  const Tensor& x = in[0];
  int64_t ax = attr_int(n, "axis");
  if (ax < 0) ax += x.rank();
  int64_t D = 1;
  for (int64_t i = ax; i < x.rank(); ++i) D *= x.shape()[i];
  int64_t rows = D ? x.numel() / D : 0;
  float eps = static_cast<float>(attr_float(n, "eps"));
  const float *X = x.data<float>(), *G = in[1].data<float>(), *B = in.size() > 2 ? in[2].data<float>() : nullptr;
  float* Y = out[0].data<float>();
  parallel_for(rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(D, 1)),
               [&](int64_t r0, int64_t r1) { layer_norm_rows(X, G, B, Y, r0, r1, D, eps); });
}

void attention(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  if (in[0].dtype() != DType::f32) return generic_kernel(n, in, out);
  const std::string& kind = attr_str(n, "mask");
  // Layout: element (b, h, s, d) of Q/K/V/O lives at base + b*sb + h*sh + s*ss + d. The standard
  // layout is [B,H,S,D]; the merge-qkv pass's fused form (attr cpu_qkv) reads the heads in place from one
  // [B,S,3*H*D] QKV buffer and writes O as [B,S,H,D], so no transposes run.
  const bool fused = n.attrs.count("cpu_qkv") > 0;
  int64_t B, H, S, D, Hk, T, Dv;
  const float *Q, *K, *V;
  int64_t qb, qh, qs, kb, kh, ks, vb, vh, vs, ob, oh, os;
  const Tensor* mask_t = nullptr;
  if (fused) {
    const Tensor& qkv = in[0];
    H = Hk = attr_int(n, "cpu_qkv");
    B = qkv.shape()[0];
    S = T = qkv.shape()[1];
    D = Dv = qkv.shape()[2] / (3 * H);
    const int64_t W = 3 * H * D;
    Q = qkv.data<float>();
    K = Q + H * D;
    V = Q + 2 * H * D;
    qb = kb = vb = S * W;
    qh = kh = vh = D;
    qs = ks = vs = W;
    ob = S * H * D, oh = D, os = H * D;
    if (in.size() > 1) mask_t = &in[1];
  } else {
    const Tensor &q = in[0], &k = in[1], &v = in[2];
    B = q.shape()[0], H = q.shape()[1], S = q.shape()[2], D = q.shape()[3];
    Hk = k.shape()[1], T = k.shape()[2], Dv = v.shape()[3];
    Q = q.data<float>(), K = k.data<float>(), V = v.data<float>();
    qb = H * S * D, qh = S * D, qs = D;
    kb = Hk * T * D, kh = T * D, ks = D;
    vb = Hk * T * Dv, vh = T * Dv, vs = Dv;
    ob = H * S * Dv, oh = S * Dv, os = Dv;
    if (in.size() > 3) mask_t = &in[3];
  }
  double sc = attr_float(n, "scale");
  float scale = static_cast<float>(sc == 0 ? 1.0 / std::sqrt(static_cast<double>(D)) : sc);
  bool causal = kind == "causal" || kind == "causal_padding";
  bool padding = kind == "padding" || kind == "causal_padding";
  bool bias = kind == "bias";
  int64_t bstr[4] = {0, 0, 0, 0};
  if (bias) {  // the bias broadcasts to [B,H,S,T]: size-1 dims get stride 0
    const auto& bs = mask_t->shape();
    int64_t full[4] = {B, H, S, T}, r = static_cast<int64_t>(bs.size()), st = 1;
    for (int64_t d = 3; d >= 0; --d) {
      int64_t bd = d - (4 - r);
      int64_t size = bd >= 0 ? bs[bd] : 1;
      bstr[d] = (size == 1 && full[d] != 1) || bd < 0 ? 0 : st;
      st *= size;
    }
  }
  // Key mask per batch row, read once (any dtype: nonzero = attend). Keys past the last kept one
  // are skipped entirely (t_end), which saves the padded tail of short sentences.
  thread_local std::vector<char> keep;
  thread_local std::vector<int64_t> t_end;
  keep.assign(static_cast<size_t>(padding ? B * T : 0), 1);
  t_end.assign(static_cast<size_t>(B), T);
  if (padding) {
    for (int64_t b = 0; b < B; ++b) {
      int64_t last = 0;
      for (int64_t t = 0; t < T; ++t) {
        bool k = mask_t->get(b * T + t) != 0.0;
        keep[b * T + t] = k;
        if (k) last = t + 1;
      }
      if (!causal) t_end[b] = last;
    }
  }
#if defined(RLX_NN_X86)
  // RLX_CPU_ATTENTION=gemm keeps the previous form (packed-GEMM blocks + row softmax) for comparison.
  static const bool strips = !(std::getenv("RLX_CPU_ATTENTION") && std::string(std::getenv("RLX_CPU_ATTENTION")) == "gemm");
  if (strips && fast_gemm_available() && Dv % 8 == 0 && Hk > 0 && H % Hk == 0) {
    AttnArgs a{B, H, Hk, S, T, D, Dv, Q, K, V, out[0].data<float>(), qb, qh, qs, kb, kh, ks, vb, vh, vs, ob, oh, os,
               scale, causal, padding, bias, bias ? mask_t->data<float>() : nullptr,
               {bstr[0], bstr[1], bstr[2], bstr[3]}, keep.data(), t_end.data()};
    return attention_avx2(a);
  }
#endif
  // (thread_local storage is the caller's; workers read it through these plain pointers)
  const char* keep_p = keep.data();
  const int64_t* t_end_p = t_end.data();
  const float* Bias = bias ? mask_t->data<float>() : nullptr;
  float* O = out[0].data<float>();
  const bool fast = fast_gemm_available();
  constexpr int64_t kRows = 128;  // query rows per block: the score block stays in L2
  const int64_t sblocks = (S + kRows - 1) / kRows;
  parallel_for(B * H * sblocks, 1, [&](int64_t w0, int64_t w1) {
    thread_local std::vector<float> scores, kp, vp;
    if (static_cast<int64_t>(scores.size()) < kRows * T) scores.resize(static_cast<size_t>(kRows * T));
    if (fast) {
      int64_t kn = packed_b_size(D, T), vn = packed_b_size(T, Dv);
      if (static_cast<int64_t>(kp.size()) < kn) kp.resize(static_cast<size_t>(kn));
      if (static_cast<int64_t>(vp.size()) < vn) vp.resize(static_cast<size_t>(vn));
    }
    float* P = scores.data();
    int64_t packed_bh = -1;  // the (b, h) whose K and V are packed in kp / vp
    for (int64_t w = w0; w < w1; ++w) {
      int64_t bh = w / sblocks, s0 = (w % sblocks) * kRows, rows = std::min(kRows, S - s0);
      int64_t b = bh / H, h = bh % H, hk = h / (H / Hk), Te = t_end_p[b];
      const float* Kb = K + b * kb + hk * kh;
      const float* Vb = V + b * vb + hk * vh;
      const float* Qb = Q + b * qb + h * qh + s0 * qs;
      float* Ob = O + b * ob + h * oh + s0 * os;
      if (Te == 0) {  // every key masked: zeros, by definition
        for (int64_t i = 0; i < rows; ++i) std::fill(Ob + i * os, Ob + i * os + Dv, 0.f);
        continue;
      }
      if (fast) {
        if (packed_bh != bh) {
          pack_b(true, Kb, ks, D, Te, kp.data());
          pack_b(false, Vb, vs, Te, Dv, vp.data());
          packed_bh = bh;
        }
        gemm_packed_serial(rows, Te, D, Qb, qs, kp.data(), P, Te, nullptr);
      } else {
        sgemm_serial(false, true, rows, Te, D, Qb, qs, Kb, ks, P, Te);
      }
      for (int64_t i = 0; i < rows; ++i) {
        int64_t s = s0 + i;
        float* p = P + i * Te;
        bool any = false;
        if (!causal && !bias && !padding) {
          row_scale(p, Te, scale);
          any = true;
        } else {
          for (int64_t t = 0; t < Te; ++t) {
            bool ok = (!causal || t <= s + (T - S)) && (!padding || keep_p[b * T + t]);
            float d = p[t] * scale;
            if (bias) d += Bias[b * bstr[0] + h * bstr[1] + s * bstr[2] + t * bstr[3]];
            p[t] = ok ? d : -std::numeric_limits<float>::infinity();
            any |= ok;
          }
        }
        if (!any) {  // fully masked row: zeros, by definition
          std::fill(p, p + Te, 0.f);
          continue;
        }
        softmax_row(p, p, Te);
      }
      if (fast)
        gemm_packed_serial(rows, Dv, Te, P, Te, vp.data(), Ob, os, nullptr);
      else
        sgemm_serial(false, false, rows, Dv, Te, P, Te, Vb, vs, Ob, os);
    }
  });
}

}  // namespace rlx::cpu
