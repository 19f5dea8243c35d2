// The direct plan of the cpu conv kernel (conv.cpp): groups with one input channel (depthwise
// convs, or C = 1). Per output row, every tap adds w * (a contiguous run of an input row) into
// registers, 32 outputs at a time, so each input element is loaded once per tap and each output
// stored once. A strided conv first splits each input plane into `stride` phase planes (columns
// q, q + s, ...), so a tap's run is contiguous there too. Outputs whose window leaves the row take a
// scalar loop.
#include <algorithm>
#include <vector>

#include "backends/cpu/conv.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/simd_avx2.h"

namespace rlx::cpu::conv_detail {

namespace {

thread_local std::vector<float> t_phase;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Horizontal tap j of the direct plan: output ow reads phase q's row at ow + base, valid for
// ow in [lo, hi). Outputs in [lo_all, hi_all) have every tap inside the row.
struct ColTaps {
  std::vector<int64_t> q, base, lo, hi;
  int64_t lo_all = 0, hi_all = 0;
};

ColTaps col_taps(const Geom& g) {
  ColTaps c;
  c.lo_all = 0, c.hi_all = g.OW;
  for (int64_t j = 0; j < g.KW; ++j) {
    const int64_t off = j * g.dw - g.pw, q = ((off % g.sw) + g.sw) % g.sw, base = (off - q) / g.sw;
    const int64_t len = (g.W - q + g.sw - 1) / g.sw;  // length of phase q's rows
    c.q.push_back(q);
    c.base.push_back(base);
    c.lo.push_back(std::clamp<int64_t>(-base, 0, g.OW));
    c.hi.push_back(std::clamp<int64_t>(len - base, c.lo.back(), g.OW));
    c.lo_all = std::max(c.lo_all, c.lo.back());
    c.hi_all = std::min(c.hi_all, c.hi.back());
  }
  c.hi_all = std::max(c.hi_all, c.lo_all);
  return c;
}

// The taps of one output row: output ow reads src[off[t] + ow] with weight w[t]; col[t] is the tap's
// horizontal index (its valid range in ColTaps).
struct RowTaps {
  std::vector<int64_t> off, col;
  std::vector<float> w;
};
thread_local RowTaps t_rtaps;

// Outputs [lo, hi) of a row, every tap inside: 32 (then 8) outputs per step in registers, so each
// input element is loaded once per tap and each output stored once.
#if defined(RLX_SIMD_AVX2)
RLX_AVX2_FN void taps_avx2(const float* src, const RowTaps& t, int64_t lo, int64_t hi, float* y) {
  const int64_t n = static_cast<int64_t>(t.w.size());
  const int64_t* off = t.off.data();
  const float* w = t.w.data();
  int64_t ow = lo;
  for (; ow + 32 <= hi; ow += 32) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t k = 0; k < n; ++k) {
      const __m256 wk = _mm256_set1_ps(w[k]);
      const float* p = src + off[k] + ow;
      a0 = _mm256_fmadd_ps(wk, _mm256_loadu_ps(p), a0);
      a1 = _mm256_fmadd_ps(wk, _mm256_loadu_ps(p + 8), a1);
      a2 = _mm256_fmadd_ps(wk, _mm256_loadu_ps(p + 16), a2);
      a3 = _mm256_fmadd_ps(wk, _mm256_loadu_ps(p + 24), a3);
    }
    _mm256_storeu_ps(y + ow, a0);
    _mm256_storeu_ps(y + ow + 8, a1);
    _mm256_storeu_ps(y + ow + 16, a2);
    _mm256_storeu_ps(y + ow + 24, a3);
  }
  for (; ow < hi; ow += 8) {
    const __m256i m = simd::tail_mask(std::min<int64_t>(8, hi - ow));
    __m256 a = _mm256_setzero_ps();
    for (int64_t k = 0; k < n; ++k) a = _mm256_fmadd_ps(_mm256_set1_ps(w[k]), _mm256_maskload_ps(src + off[k] + ow, m), a);
    _mm256_maskstore_ps(y + ow, m, a);
  }
}
#endif

// Outputs [o0, o1) of a row, taps outside the row skipped when `check`.
void taps_scalar(const float* src, const RowTaps& t, const ColTaps& c, int64_t o0, int64_t o1, bool check, float* y) {
  const size_t n = t.w.size();
  for (int64_t ow = o0; ow < o1; ++ow) {
    float a = 0.f;
    for (size_t k = 0; k < n; ++k)
      if (!check || (ow >= c.lo[t.col[k]] && ow < c.hi[t.col[k]])) a += t.w[k] * src[t.off[k] + ow];
    y[ow] = a;
  }
}

// One output plane of a one-input-channel group. src holds sw phase planes (phase q: columns
// q, q + sw, ... of each input row, ws floats a row; sw == 1: the input plane itself).
void direct_plane(const Geom& g, const ColTaps& c, const float* src, int64_t ws, const float* wk, float* y) {
  RowTaps& t = t_rtaps;
#if defined(RLX_SIMD_AVX2)
  const bool avx2 = simd::cpu_has_avx2_fma();
#endif
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    t.off.clear(), t.col.clear(), t.w.clear();
    for (int64_t i = 0; i < g.KH; ++i) {
      const int64_t ih = oh * g.sh + i * g.dh - g.ph;
      if (ih < 0 || ih >= g.H) continue;
      for (int64_t j = 0; j < g.KW; ++j) {
        t.off.push_back((c.q[j] * g.H + ih) * ws + c.base[j]);
        t.col.push_back(j);
        t.w.push_back(wk[i * g.KW + j]);
      }
    }
    float* yr = y + oh * g.OW;
    taps_scalar(src, t, c, 0, c.lo_all, true, yr);
#if defined(RLX_SIMD_AVX2)
    if (avx2)
      taps_avx2(src, t, c.lo_all, c.hi_all, yr);
    else
#endif
      taps_scalar(src, t, c, c.lo_all, c.hi_all, false, yr);
    taps_scalar(src, t, c, c.hi_all, g.OW, true, yr);
  }
}

#if defined(RLX_SIMD_AVX2)
// Even and odd columns of a row of n floats.
RLX_AVX2_FN void deinterleave2_avx2(const float* s, int64_t n, float* even, float* odd) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(s + i), b = _mm256_loadu_ps(s + i + 8);
    // a = a0..a7, b = b0..b7: shuffles pick pairs within 128-bit lanes, the permute orders them.
    const __m256 e = _mm256_shuffle_ps(a, b, 0x88), o = _mm256_shuffle_ps(a, b, 0xDD);
    _mm256_storeu_ps(even + i / 2, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8)));
    _mm256_storeu_ps(odd + i / 2, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), 0xD8)));
  }
  for (; i < n; ++i) (i % 2 ? odd : even)[i / 2] = s[i];
}
#endif

}  // namespace

void run_direct(const Geom& g, const float* x, const float* w, float* y, const ChannelEpi* epi) {
  const int64_t P = g.P(), HW = g.H * g.W, ws = ceil_div(g.W, g.sw);
  const ColTaps c = col_taps(g);
  parallel_for(g.N * g.G, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t it = i0; it < i1; ++it) {
      const int64_t n = it / g.G, ch = it % g.G;
      const float* plane = x + (n * g.C + ch) * HW;
      const float* src = plane;
      if (g.sw > 1) {
        if (t_phase.size() < static_cast<size_t>(g.sw * g.H * ws)) t_phase.resize(static_cast<size_t>(g.sw * g.H * ws));
        float* ph = t_phase.data();
        for (int64_t ih = 0; ih < g.H; ++ih) {
#if defined(RLX_SIMD_AVX2)
          if (g.sw == 2 && simd::cpu_has_avx2()) {
            deinterleave2_avx2(plane + ih * g.W, g.W, ph + ih * ws, ph + (g.H + ih) * ws);
            continue;
          }
#endif
          for (int64_t q = 0; q < g.sw; ++q)
            for (int64_t s = 0; s * g.sw + q < g.W; ++s) ph[(q * g.H + ih) * ws + s] = plane[ih * g.W + s * g.sw + q];
        }
        src = ph;
      }
      for (int64_t o = ch * g.Og; o < (ch + 1) * g.Og; ++o) {
        float* yo = y + (n * g.O + o) * P;
        direct_plane(g, c, src, g.sw > 1 ? ws : g.W, w + o * g.KH * g.KW, yo);
        if (epi) epi_rows(*epi, yo, P, epi->res ? epi->res + (n * g.O + o) * P : nullptr, o, 0, 1, P);
      }
    }
  });
}

}  // namespace rlx::cpu::conv_detail
