// The direct plan of the cpu conv kernel (conv.cpp): groups with one input channel (depthwise
// convs, or C = 1). Each input plane is copied once, zero-padded, into sh x sw phase planes (phase
// (r, q): padded rows r, r + sh, ... and columns q, q + sw, ...), Wq floats a row. Then tap (i, j) of
// output (oh, ow) is element (oh * Wq + ow) + off(i, j) of one phase plane, a constant offset: the
// output plane is a 1-D correlation over the flat index f = oh * Wq + ow, computed 32 outputs at a
// time in registers (each input element loaded once per tap, each output stored once), with the
// Wq - OW columns past each output row computed and dropped. No border cases remain.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/conv.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/simd_avx2.h"

namespace rlx::cpu::conv_detail {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

thread_local std::vector<float> t_phase, t_flat;

}  // namespace

Phases phases_of(const Geom& g) {
  Phases p;
  const int64_t Hp = (g.OH - 1) * g.sh + (g.KH - 1) * g.dh + 1, Wp = (g.OW - 1) * g.sw + (g.KW - 1) * g.dw + 1;
  const int64_t Hq = ceil_div(std::max(Hp, g.H + g.ph), g.sh);
  p.Wq = ceil_div(std::max(Wp, g.W + g.pw), g.sw);
  p.n = (g.OH * p.Wq + 31) / 32 * 32;
  const int64_t max_off = (g.KH - 1) * g.dh / g.sh * p.Wq + (g.KW - 1) * g.dw / g.sw;
  p.plane = std::max(Hq * p.Wq, p.n + max_off);
  for (int64_t i = 0; i < g.KH; ++i)
    for (int64_t j = 0; j < g.KW; ++j) {
      const int64_t r = i * g.dh % g.sh, q = j * g.dw % g.sw;
      p.off.push_back((r * g.sw + q) * p.plane + i * g.dh / g.sh * p.Wq + j * g.dw / g.sw);
    }
  return p;
}

namespace {

#if defined(RLX_SIMD_AVX2)
// Even and odd elements of s[0, n).
RLX_AVX2_FN void deinterleave2_avx2(const float* s, int64_t n, float* even, float* odd) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(s + i), b = _mm256_loadu_ps(s + i + 8);
    // Pairs picked within 128-bit lanes, then the 64-bit quarters ordered.
    const __m256 e = _mm256_shuffle_ps(a, b, 0x88), o = _mm256_shuffle_ps(a, b, 0xDD);
    _mm256_storeu_ps(even + i / 2, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8)));
    _mm256_storeu_ps(odd + i / 2, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), 0xD8)));
  }
  for (; i < n; ++i) (i % 2 ? odd : even)[i / 2] = s[i];
}
#endif

// p[0, n) = v.
#if defined(RLX_SIMD_AVX2)
RLX_AVX2_FN void fill_avx2(float* p, int64_t n, float v) {
  const __m256 x = _mm256_set1_ps(v);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(p + i, x);
  for (; i < n; ++i) p[i] = v;
}
#endif

void fill(float* p, int64_t n, float v) {
#if defined(RLX_SIMD_AVX2)
  if (simd::cpu_has_avx2()) return fill_avx2(p, n, v);
#endif
  std::fill(p, p + n, v);
}

}  // namespace

void deinterleave2(const float* s, int64_t n, float* even, float* odd) {
#if defined(RLX_SIMD_AVX2)
  if (simd::cpu_has_avx2()) return deinterleave2_avx2(s, n, even, odd);
#endif
  for (int64_t i = 0; i < n; ++i) (i % 2 ? odd : even)[i / 2] = s[i];
}

void split(const Geom& g, const Phases& p, const float* x, float* ph, float pad) {
  const int64_t total = g.sh * g.sw * p.plane;
  if (pad == 0.f) {
    std::memset(ph, 0, static_cast<size_t>(total) * sizeof(float));
  } else {
    fill(ph, total, pad);
  }
  for (int64_t ih = 0; ih < g.H; ++ih) {
    const int64_t pr = ih + g.ph, r = pr % g.sh;
    const float* src = x + ih * g.W;
    float* row = ph + (r * g.sw) * p.plane + pr / g.sh * p.Wq;  // phase (r, 0)
    if (g.sw == 1) {
      std::memcpy(row + g.pw, src, static_cast<size_t>(g.W) * sizeof(float));
      continue;
    }
    // Input columns iw = q0 + k * sw land in phase (q0 + pw) % sw at column (q0 + pw) / sw + k.
#if defined(RLX_SIMD_AVX2)
    if (g.sw == 2 && simd::cpu_has_avx2()) {
      float* even = row + (g.pw % 2) * p.plane + g.pw / 2;           // iw even
      float* odd = row + ((g.pw + 1) % 2) * p.plane + (g.pw + 1) / 2;  // iw odd
      deinterleave2_avx2(src, g.W, even, odd);
      continue;
    }
#endif
    for (int64_t q0 = 0; q0 < g.sw && q0 < g.W; ++q0) {
      float* d = row + ((q0 + g.pw) % g.sw) * p.plane + (q0 + g.pw) / g.sw;
      for (int64_t k = 0; q0 + k * g.sw < g.W; ++k) d[k] = src[q0 + k * g.sw];
    }
  }
}

namespace {

#if defined(RLX_SIMD_AVX2)
RLX_AVX2_FN void correlate_avx2(const float* ph, const Phases& p, const float* w, float* y) {
  const int64_t nt = static_cast<int64_t>(p.off.size());
  const int64_t* off = p.off.data();
  for (int64_t f = 0; f < p.n; f += 32) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t t = 0; t < nt; ++t) {
      const __m256 wt = _mm256_set1_ps(w[t]);
      const float* s = ph + off[t] + f;
      a0 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(s), a0);
      a1 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(s + 8), a1);
      a2 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(s + 16), a2);
      a3 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(s + 24), a3);
    }
    _mm256_storeu_ps(y + f, a0);
    _mm256_storeu_ps(y + f + 8, a1);
    _mm256_storeu_ps(y + f + 16, a2);
    _mm256_storeu_ps(y + f + 24, a3);
  }
}
#endif

// y[f] = sum over taps t of w[t] * ph[off[t] + f], f in [0, n).
void correlate(const float* ph, const Phases& p, const float* w, float* y) {
#if defined(RLX_SIMD_AVX2)
  if (simd::cpu_has_avx2_fma()) return correlate_avx2(ph, p, w, y);
#endif
  std::fill(y, y + p.n, 0.f);
  for (size_t t = 0; t < p.off.size(); ++t)
    for (int64_t f = 0; f < p.n; ++f) y[f] += w[t] * ph[p.off[t] + f];
}

}  // namespace

void run_direct(const Geom& g, const float* x, const float* w, float* y, const ChannelEpi* epi) {
  const int64_t P = g.P(), HW = g.H * g.W;
  const Phases ph = phases_of(g);
  parallel_for(g.N * g.G, 1, [&](int64_t i0, int64_t i1) {
    if (t_phase.size() < static_cast<size_t>(g.sh * g.sw * ph.plane))
      t_phase.resize(static_cast<size_t>(g.sh * g.sw * ph.plane));
    if (t_flat.size() < static_cast<size_t>(ph.n)) t_flat.resize(static_cast<size_t>(ph.n));
    for (int64_t it = i0; it < i1; ++it) {
      const int64_t n = it / g.G, ch = it % g.G;
      split(g, ph, x + (n * g.C + ch) * HW, t_phase.data(), 0.f);
      for (int64_t o = ch * g.Og; o < (ch + 1) * g.Og; ++o) {
        float* yo = y + (n * g.O + o) * P;
        correlate(t_phase.data(), ph, w + o * g.KH * g.KW, t_flat.data());
        for (int64_t oh = 0; oh < g.OH; ++oh)
          std::memcpy(yo + oh * g.OW, t_flat.data() + oh * ph.Wq, static_cast<size_t>(g.OW) * sizeof(float));
        if (epi) epi_rows(*epi, yo, P, epi->res ? epi->res + (n * g.O + o) * P : nullptr, o, 0, 1, P);
      }
    }
  });
}

}  // namespace rlx::cpu::conv_detail
