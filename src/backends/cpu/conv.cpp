// The cpu kernel of the MIR `conv` primitive, f32, 1-D and 2-D (NCHW; a 1-D conv is a 2-D one with
// H = 1). Three plans, picked from the shapes:
//  - Direct: one input channel per group (depthwise, or C = 1), vectorized over the output width:
//    conv_direct.cpp.
//  - Cols: out[Og, P] = W[Og, K] · col[K, P] per (image, group, block of output pixels): the
//    im2col block is written straight into the GEMM's 16-pixel panels (gemm_avx2.h) in per-thread
//    scratch; a 1x1 stride-1 unpadded conv packs the input itself. K = Cg * KH * KW.
//  - Rows (few output pixels: 7x7 maps, the weight gradient of training): out^T[P, Og] =
//    col^T · W^T, the weight packed once (at build time when it is a constant) into 16-channel panels,
//    so the output channels fill the register tile instead of a half-empty pixel panel.
//  - Winograd F(2x2, 3x3) for 3x3 stride-1 convs with enough channels: conv_winograd.cpp.
// Work items are (image, group, pixel block[, channel block]) claimed by the pool's threads.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/conv.h"
#include "backends/cpu/gemm_avx2.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/simd_avx2.h"

namespace rlx::cpu {

using conv_detail::Geom;
using conv_detail::epi_rows;

namespace {

constexpr int64_t kNr = kGemmNr;
// im2col block per thread, in floats (512 KiB: the L2 of our AMD machines). On the 2 MiB-L2 Xeon,
// 256 and 512 KiB blocks ran at the same speed and 1-2 MiB ones 5-30% slower (VGG/ResNet 3x3 shapes).
constexpr int64_t kColFloats = 128 * 1024;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

bool geom_of(const Node& n, const std::vector<int64_t>& xd, const std::vector<int64_t>& wd,
             const std::vector<int64_t>& yd, Geom& g) {
  const size_t r = xd.size();
  if ((r != 3 && r != 4) || wd.size() != r || yd.size() != r) return false;
  const size_t sp = r - 2;
  std::vector<int64_t> st = attr_ints(n, "strides"), pads = attr_ints(n, "pads"), dil = attr_ints(n, "dilations");
  if (st.empty()) st.assign(sp, 1);
  if (dil.empty()) dil.assign(sp, 1);
  if (pads.empty()) pads.assign(2 * sp, 0);
  if (st.size() != sp || dil.size() != sp || pads.size() != 2 * sp) return false;
  g.N = xd[0], g.C = xd[1], g.O = wd[0], g.Cg = wd[1], g.G = attr_int(n, "groups");
  if (g.G < 1 || g.Cg < 1 || g.C != g.Cg * g.G || g.O % g.G || yd[0] != g.N || yd[1] != g.O) return false;
  g.Og = g.O / g.G;
  if (r == 4) {
    g.H = xd[2], g.W = xd[3], g.KH = wd[2], g.KW = wd[3], g.OH = yd[2], g.OW = yd[3];
    g.sh = st[0], g.sw = st[1], g.ph = pads[0], g.pw = pads[1], g.dh = dil[0], g.dw = dil[1];
  } else {
    g.H = 1, g.W = xd[2], g.KH = 1, g.KW = wd[2], g.OH = 1, g.OW = yd[2];
    g.sh = 1, g.sw = st[0], g.ph = 0, g.pw = pads[0], g.dh = 1, g.dw = dil[0];
  }
  return g.sh >= 1 && g.sw >= 1 && g.dh >= 1 && g.dw >= 1 && g.KH >= 1 && g.KW >= 1;
}

struct Plan {
  enum Kind { Direct, Cols, Rows, Wino } kind = Cols;
  int64_t kc = 0, nkb = 1;  // K blocks of kc (a multiple of KH*KW; the last may be shorter)
  int64_t pb = 0, npb = 1;  // Cols: output pixels per block (a multiple of 16 but the last)
  int64_t mb = 0, nmb = 1;  // Cols: output channels per block
  int64_t jb = 0, njb = 1;  // Rows: output channels per block (a multiple of 16 but the last)
};

// K blocks hold whole channels (kc a multiple of KH*KW), at most `floats / cols` rows.
void k_blocks(const Geom& g, int64_t cols, Plan& pl) {
  const int64_t K = g.K(), kk = g.KH * g.KW;
  const int64_t per = std::max<int64_t>(1, kColFloats / std::max<int64_t>(cols, 1) / kk);  // channels per block
  pl.nkb = ceil_div(g.Cg, per);
  pl.kc = ceil_div(g.Cg, pl.nkb) * kk;
  pl.nkb = ceil_div(K, pl.kc);
}

Plan plan_of(const Geom& g) {
  Plan pl;
  const int nt = num_threads();
  const int64_t P = g.P(), units = g.N * g.G;
  if (g.Cg == 1) {
    pl.kind = Plan::Direct;
    return pl;
  }
  if (conv_detail::winograd_fits(g)) {
    pl.kind = Plan::Wino;
    return pl;
  }
  // Share of the register tile's lanes doing useful work: pixels x 16 panels vs pixels x 6 rows
  // and channels x 16 panels.
  const double eff_cols = double(P) / double(round_up(P, kNr));
  const double eff_rows = double(P) / double(round_up(P, 6)) * double(g.Og) / double(round_up(g.Og, kNr));
  if (eff_rows > 1.15 * eff_cols) {
    pl.kind = Plan::Rows;
    k_blocks(g, P, pl);
    const int64_t pairs = ceil_div(g.Og, 2 * kNr);  // 32-channel panel pairs (the AVX-512 tile's width)
    // Few (image, group) units for the threads: split the output channels, down to 64 a part
    // (each part redoes the im2col, which is small next to its GEMM).
    pl.njb = std::clamp<int64_t>(ceil_div(4 * nt, units), 1, std::max<int64_t>(1, pairs / 2));
    if (pl.njb * units < nt) pl.njb = std::min<int64_t>(pairs, ceil_div(nt, units));
    pl.jb = ceil_div(pairs, pl.njb) * 2 * kNr;
    pl.njb = ceil_div(g.Og, pl.jb);
    return pl;
  }
  pl.kind = Plan::Cols;
  k_blocks(g, round_up(std::min<int64_t>(P, 64), kNr), pl);
  // Blocks of whole 32-pixel panel pairs: the GEMM's AVX-512 tile is two 16-pixel panels wide.
  const int64_t pb_max = std::max<int64_t>(2 * kNr, kColFloats / pl.kc / (2 * kNr) * (2 * kNr));
  pl.npb = ceil_div(P, pb_max);
  // About 8 items per thread where blocks keep >= 64 pixels (re-packing W per block is then cheap),
  // so a thread descheduled on a busy machine holds up little of the conv.
  if (nt > 1 && units * pl.npb < 8 * nt)
    pl.npb = std::max(pl.npb, std::min(ceil_div(P, 64), ceil_div(8 * nt, units)));
  pl.pb = round_up(ceil_div(P, pl.npb), 2 * kNr);
  pl.npb = ceil_div(P, pl.pb);
  pl.nmb = 1;
  if (units * pl.npb < nt) pl.nmb = std::max<int64_t>(1, std::min(ceil_div(nt, units * pl.npb), g.Og / 24));
  pl.mb = round_up(ceil_div(g.Og, pl.nmb), 6);
  pl.nmb = ceil_div(g.Og, pl.mb);
  return pl;
}

// Size and offset of the Rows plan's packed weight: per group, per K block, ceil(Og/16) panels.
int64_t rows_pack_size(const Geom& g) { return g.G * round_up(g.Og, kNr) * g.K(); }
int64_t rows_pack_off(const Geom& g, int64_t grp, int64_t k0) { return (grp * g.K() + k0) * round_up(g.Og, kNr); }

void rows_pack(const Geom& g, const Plan& pl, const float* w, float* dst) {
  const int64_t K = g.K();
  parallel_for(g.G * pl.nkb, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t grp = i / pl.nkb, k0 = (i % pl.nkb) * pl.kc, kb = std::min(pl.kc, K - k0);
      pack_b(true, w + grp * g.Og * K + k0, K, kb, g.Og, dst + rows_pack_off(g, grp, k0));
    }
  });
}

// Per-thread scratch, grown on first use and then reused.
struct Buf {
  std::vector<float> v;
  float* get(size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
  }
};
thread_local Buf t_col, t_ct, t_wpack;

// A run of output pixels inside one output row (and one 16-pixel panel for Cols): its im2col
// values go to (panel * panel_stride + lane) within each k row. oh < 0: zero lanes past the end.
struct Seg {
  int64_t oh, ow0, len, panel, lane;
};
thread_local std::vector<Seg> t_segs;

void make_segs(const Geom& g, int64_t p0, int64_t p1, bool panels, std::vector<Seg>& s) {
  s.clear();
  for (int64_t p = p0; p < p1;) {
    const int64_t q = p - p0, ow = p % g.OW;
    int64_t len = std::min(g.OW - ow, p1 - p);
    if (panels) len = std::min(len, kNr - q % kNr);
    s.push_back({p / g.OW, ow, len, panels ? q / kNr : 0, panels ? q % kNr : q});
    p += len;
  }
  const int64_t q = p1 - p0;
  if (panels && q % kNr) s.push_back({-1, 0, kNr - q % kNr, q / kNr, q % kNr});
}

// One tap row of a run for `rows` channels: o[0, lo) = 0, o[lo, hi) = src[(t - lo) * sw], o[hi, len)
// = 0, for o at o0 + r * ostride and src at s0 + r * sstride.
#if defined(RLX_SIMD_AVX2)
// Strides 1 and 2 by masked loads, 8 outputs a chunk: a lane outside [lo, hi) is not read and
// loads as 0, which is the padding; chunk masks are built once for all rows. Stride 2 loads 16
// floats and keeps the even ones.
RLX_AVX2_FN inline __m256i in_range(__m256i t, __m256i lo_1, __m256i hi) {  // lo_1 < t < hi, per lane
  return _mm256_and_si256(_mm256_cmpgt_epi32(t, lo_1), _mm256_cmpgt_epi32(hi, t));
}

RLX_AVX2_FN void tap_rows_avx2(const float* s0, int64_t sstride, float* o0, int64_t ostride, int64_t rows,
                               int64_t lo, int64_t hi, int64_t len, int64_t sw) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i lo_1 = _mm256_set1_epi32(static_cast<int>(lo - 1)), hiv = _mm256_set1_epi32(static_cast<int>(hi));
  for (int64_t t0 = 0; t0 < len; t0 += 8) {
    const int64_t n8 = std::min<int64_t>(8, len - t0);
    const __m256i st = simd::tail_mask(n8);
    const __m256i t = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(t0)), lane);
    const float* s = s0 + (t0 - lo) * sw;  // where output t0 would read (masked where it is padding)
    float* o = o0 + t0;
    if (sw == 1) {
      const __m256i m = in_range(t, lo_1, hiv);
      if (n8 == 8)
        for (int64_t r = 0; r < rows; ++r) _mm256_storeu_ps(o + r * ostride, _mm256_maskload_ps(s + r * sstride, m));
      else
        for (int64_t r = 0; r < rows; ++r)
          _mm256_maskstore_ps(o + r * ostride, st, _mm256_maskload_ps(s + r * sstride, m));
      continue;
    }
    // sw == 2: element e of 16 belongs to output t0 + e / 2 and is needed when e is even.
    const __m256i even = _mm256_cmpeq_epi32(_mm256_and_si256(lane, _mm256_set1_epi32(1)), _mm256_setzero_si256());
    const __m256i half = _mm256_srli_epi32(lane, 1);
    const __m256i ma = _mm256_and_si256(even, in_range(_mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(t0)), half), lo_1, hiv));
    const __m256i mb = _mm256_and_si256(even, in_range(_mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(t0 + 4)), half), lo_1, hiv));
    for (int64_t r = 0; r < rows; ++r) {
      const float* p = s + r * sstride;
      const __m256 e = _mm256_shuffle_ps(_mm256_maskload_ps(p, ma), _mm256_maskload_ps(p + 8, mb), 0x88);
      const __m256 v = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8));
      if (n8 == 8)
        _mm256_storeu_ps(o + r * ostride, v);
      else
        _mm256_maskstore_ps(o + r * ostride, st, v);
    }
  }
}
#endif

void tap_rows(const float* s0, int64_t sstride, float* o0, int64_t ostride, int64_t rows, int64_t lo, int64_t hi,
              int64_t len, int64_t sw) {
#if defined(RLX_SIMD_AVX2)
  if (sw <= 2 && simd::cpu_has_avx2()) return tap_rows_avx2(s0, sstride, o0, ostride, rows, lo, hi, len, sw);
#endif
  for (int64_t r = 0; r < rows; ++r, s0 += sstride, o0 += ostride) {
    for (int64_t t = 0; t < lo; ++t) o0[t] = 0.f;
    for (int64_t t = lo; t < hi; ++t) o0[t] = s0[(t - lo) * sw];
    for (int64_t t = hi; t < len; ++t) o0[t] = 0.f;
  }
}

// The panels of a 1x1 stride-1 conv's B: rows [0, kb) of x (row stride ld), pixels [0, pn), row by
// row, so each input row streams once (packing panel by panel would read kb rows at a time, a
// stride apart, which the prefetchers do not follow). Lanes past pn are zero.
#if defined(RLX_SIMD_AVX2)
RLX_AVX2_FN void pack_rows_avx2(const float* x, int64_t ld, int64_t kb, int64_t pn, float* dst) {
  const int64_t full = pn / kNr, tail = pn % kNr;
  const __m256i m0 = simd::tail_mask(std::min<int64_t>(tail, 8)), m1 = simd::tail_mask(std::max<int64_t>(tail - 8, 0));
  for (int64_t k = 0; k < kb; ++k) {
    const float* s = x + k * ld;
    float* d = dst + k * kNr;
    for (int64_t j = 0; j < full; ++j, s += kNr, d += kb * kNr) {
      _mm256_storeu_ps(d, _mm256_loadu_ps(s));
      _mm256_storeu_ps(d + 8, _mm256_loadu_ps(s + 8));
    }
    if (tail) {
      _mm256_storeu_ps(d, _mm256_maskload_ps(s, m0));
      _mm256_storeu_ps(d + 8, _mm256_maskload_ps(s + 8, m1));
    }
  }
}
#endif

void pack_rows(const float* x, int64_t ld, int64_t kb, int64_t pn, float* dst) {
#if defined(RLX_SIMD_AVX2)
  if (simd::cpu_has_avx2()) return pack_rows_avx2(x, ld, kb, pn, dst);
#endif
  pack_b(false, x, ld, kb, pn, dst);
}

// im2col of channels [c0, c1) of one group (xg: its first input plane) for the pixels in `segs`:
// row k = (c - c0) * KH*KW + i * KW + j at dst + k * kstride. The geometry of a run is worked out
// once per tap and run, then copied for every channel.
void im2col(const Geom& g, const float* xg, int64_t c0, int64_t c1, const std::vector<Seg>& segs, int64_t pstride,
            int64_t kstride, float* dst) {
  const int64_t HW = g.H * g.W, kk = g.KH * g.KW, rows = c1 - c0;
  for (int64_t i = 0; i < g.KH; ++i)
    for (int64_t j = 0; j < g.KW; ++j) {
      float* dk = dst + (i * g.KW + j) * kstride;
      for (const Seg& s : segs) {
        float* o0 = dk + s.panel * pstride + s.lane;
        const int64_t ih = s.oh * g.sh + i * g.dh - g.ph, len = s.len;
        if (s.oh < 0 || ih < 0 || ih >= g.H) {
          tap_rows(xg, 0, o0, kk * kstride, rows, len, len, len, 1);  // all padding
          continue;
        }
        // Taps t with 0 <= iw0 + t * sw < W are [lo, hi); the rest is padding.
        const int64_t iw0 = s.ow0 * g.sw + j * g.dw - g.pw, sw = g.sw;
        const int64_t lo = std::min(len, iw0 >= 0 ? 0 : ceil_div(-iw0, sw));
        const int64_t hi = std::clamp(iw0 >= g.W ? 0 : (g.W - 1 - iw0) / sw + 1, lo, len);
        tap_rows(xg + c0 * HW + ih * g.W + iw0 + lo * sw, HW, o0, kk * kstride, rows, lo, hi, len, sw);
      }
    }
}

// The epilogue on rows [r0, r1) of a block of the output (row r is channel c0 + r, pn pixels,
// row stride ldy); res (same block of the residual, row stride ldy) or null.
#if defined(RLX_SIMD_AVX2)
// max_ps(lo, v) and min_ps(hi, v) return v when it is NaN (the second operand), as the reference.
RLX_AVX2_FN void epi_rows_avx2(const ChannelEpi& e, float* y, int64_t ldy, const float* res, int64_t c0, int64_t r0,
                               int64_t r1, int64_t pn) {
  const __m256 lo = _mm256_set1_ps(e.lo), hi = _mm256_set1_ps(e.hi);
  const bool mf = e.min_first;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t c = c0 + r;
    const __m256 sc = _mm256_set1_ps(e.scale ? e.scale[c] : 1.f), sh = _mm256_set1_ps(e.shift ? e.shift[c] : 0.f);
    const __m256 rs = _mm256_set1_ps(e.res_scale ? e.res_scale[c] : 1.f);
    float* row = y + r * ldy;
    const float* rr = res ? res + r * ldy : nullptr;
    for (int64_t p = 0; p < pn; p += 8) {
      const bool full = p + 8 <= pn;
      const __m256i m = simd::tail_mask(full ? 8 : pn - p);
      __m256 v = full ? _mm256_loadu_ps(row + p) : _mm256_maskload_ps(row + p, m);
      v = _mm256_fmadd_ps(v, sc, sh);
      if (rr) v = _mm256_fmadd_ps(rs, full ? _mm256_loadu_ps(rr + p) : _mm256_maskload_ps(rr + p, m), v);
      v = mf ? _mm256_max_ps(lo, _mm256_min_ps(hi, v)) : _mm256_min_ps(hi, _mm256_max_ps(lo, v));
      if (full)
        _mm256_storeu_ps(row + p, v);
      else
        _mm256_maskstore_ps(row + p, m, v);
    }
  }
}
#endif

}  // namespace

void conv_detail::epi_rows(const ChannelEpi& e, float* y, int64_t ldy, const float* res, int64_t c0, int64_t r0,
                           int64_t r1, int64_t pn) {
#if defined(RLX_SIMD_AVX2)
  if (simd::cpu_has_avx2_fma()) return epi_rows_avx2(e, y, ldy, res, c0, r0, r1, pn);
#endif
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t c = c0 + r;
    const float sc = e.scale ? e.scale[c] : 1.f, sh = e.shift ? e.shift[c] : 0.f;
    const float rs = e.res_scale ? e.res_scale[c] : 1.f;
    float* row = y + r * ldy;
    const float* rr = res ? res + r * ldy : nullptr;
    for (int64_t p = 0; p < pn; ++p) {
      float v = std::fma(row[p], sc, sh);
      if (rr) v = std::fma(rs, rr[p], v);
      if (e.min_first) {  // comparisons written so that a NaN stays NaN
        v = v > e.hi ? e.hi : v;
        v = v < e.lo ? e.lo : v;
      } else {
        v = v < e.lo ? e.lo : v;
        v = v > e.hi ? e.hi : v;
      }
      row[p] = v;
    }
  }
}

namespace {

struct EpiCtx {
  const ChannelEpi* e;
  float* y;
  const float* res;
  int64_t ldy, c0, pn;
};

void rows_done(void* ctx, int64_t r0, int64_t r1) {
  const EpiCtx& c = *static_cast<const EpiCtx*>(ctx);
  epi_rows(*c.e, c.y, c.ldy, c.res, c.c0, r0, r1, c.pn);
}

void run_cols(const Geom& g, const Plan& pl, const float* x, const float* w, float* y, const ChannelEpi* epi) {
  const int64_t K = g.K(), P = g.P(), kk = g.KH * g.KW;
  const int64_t per_unit = pl.npb * pl.nmb, items = g.N * g.G * per_unit;
  const bool pw = g.pointwise();
  parallel_for(items, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t it = i0; it < i1; ++it) {
      const int64_t unit = it / per_unit, n = unit / g.G, grp = unit % g.G;
      const int64_t p0 = (it % per_unit) / pl.nmb * pl.pb, p1 = std::min(P, p0 + pl.pb), pn = p1 - p0;
      const int64_t m0 = (it % pl.nmb) * pl.mb, m1 = std::min(g.Og, m0 + pl.mb);
      const float* xg = x + (n * g.C + grp * g.Cg) * g.H * g.W;
      const int64_t c_first = grp * g.Og + m0;  // absolute output channel of block row 0
      float* yb = y + (n * g.O + c_first) * P + p0;
      float* col = t_col.get(static_cast<size_t>(round_up(pn, kNr) * std::min(pl.kc, K)));
      if (!pw) make_segs(g, p0, p1, true, t_segs);
      EpiCtx ctx{epi, yb, epi && epi->res ? epi->res + (n * g.O + c_first) * P + p0 : nullptr, P, c_first, pn};
      GemmEpi ge;
      ge.rows_done = &rows_done;
      ge.ctx = &ctx;
      for (int64_t k0 = 0; k0 < K; k0 += pl.kc) {
        const int64_t kb = std::min(pl.kc, K - k0);
        if (pw)
          pack_rows(xg + k0 * P + p0, P, kb, pn, col);
        else
          im2col(g, xg, k0 / kk, (k0 + kb) / kk, t_segs, kb * kNr, kNr, col);
        const bool last = k0 + kb == K;
        gemm_packed_serial(m1 - m0, pn, kb, w + (grp * g.Og + m0) * K + k0, K, col, yb, P,
                           last && epi ? &ge : nullptr, k0 > 0);
      }
    }
  });
}

void run_rows(const Geom& g, const Plan& pl, const float* x, const float* wp, float* y, const ChannelEpi* epi) {
  const int64_t K = g.K(), P = g.P(), kk = g.KH * g.KW, items = g.N * g.G * pl.njb;
  parallel_for(items, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t it = i0; it < i1; ++it) {
      const int64_t unit = it / pl.njb, n = unit / g.G, grp = unit % g.G;
      const int64_t j0 = (it % pl.njb) * pl.jb, jn = std::min(g.Og, j0 + pl.jb) - j0;
      const float* xg = x + (n * g.C + grp * g.Cg) * g.H * g.W;
      float* col = t_col.get(static_cast<size_t>(std::min(pl.kc, K) * P));
      float* ct = t_ct.get(static_cast<size_t>(P * jn));
      make_segs(g, 0, P, false, t_segs);
      for (int64_t k0 = 0; k0 < K; k0 += pl.kc) {
        const int64_t kb = std::min(pl.kc, K - k0);
        im2col(g, xg, k0 / kk, (k0 + kb) / kk, t_segs, 0, P, col);
        gemm_packed_serial(P, jn, kb, col, P, wp + rows_pack_off(g, grp, k0) + j0 * kb, ct, jn, nullptr, k0 > 0, true);
      }
      const int64_t c_first = grp * g.Og + j0;
      float* yb = y + (n * g.O + c_first) * P;
      for (int64_t j = 0; j < jn; ++j)
        for (int64_t p = 0; p < P; ++p) yb[j * P + p] = ct[p * jn + j];
      if (epi) epi_rows(*epi, yb, P, epi->res ? epi->res + (n * g.O + c_first) * P : nullptr, c_first, 0, jn, P);
    }
  });
}

}  // namespace

bool conv_f32(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out, const float* packed,
              const ChannelEpi* epi) {
  if (in.size() < 2 || out.empty()) return false;
  const Tensor &x = in[0], &w = in[1];
  Tensor& y = out[0];
  if (x.dtype() != DType::f32 || w.dtype() != DType::f32 || y.dtype() != DType::f32) return false;
  Geom g;
  if (!geom_of(n, x.shape(), w.shape(), y.shape(), g)) return false;
  if (y.numel() == 0) return true;
  const Plan pl = plan_of(g);
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  float* yp = y.data<float>();
  switch (pl.kind) {
    case Plan::Direct: run_direct(g, xp, wp, yp, epi); break;
    case Plan::Cols: run_cols(g, pl, xp, wp, yp, epi); break;
    case Plan::Rows:
      if (!packed) {
        float* buf = t_wpack.get(static_cast<size_t>(rows_pack_size(g)));
        rows_pack(g, pl, wp, buf);
        packed = buf;
      }
      run_rows(g, pl, xp, packed, yp, epi);
      break;
    case Plan::Wino:
      if (!packed) {
        float* buf = t_wpack.get(static_cast<size_t>(conv_detail::winograd_pack_size(g)));
        conv_detail::winograd_pack(g, wp, buf);
        packed = buf;
      }
      conv_detail::run_winograd(g, xp, packed, yp, epi);
      break;
  }
  return true;
}

std::string conv_plan_name(const Node& n, const std::vector<int64_t>& xdims, const std::vector<int64_t>& wdims,
                           const std::vector<int64_t>& ydims) {
  Geom g;
  if (!geom_of(n, xdims, wdims, ydims, g)) return "";
  switch (plan_of(g).kind) {
    case Plan::Direct: return "direct";
    case Plan::Cols: return "cols";
    case Plan::Rows: return "rows";
    case Plan::Wino: return "winograd";
  }
  return "";
}

std::vector<float> conv_prepack(const Node& n, const Tensor& w, const std::vector<int64_t>& xdims,
                                const std::vector<int64_t>& ydims) {
  Geom g;
  if (w.dtype() != DType::f32 || !geom_of(n, xdims, w.shape(), ydims, g)) return {};
  const Plan pl = plan_of(g);
  if (pl.kind == Plan::Wino) {
    std::vector<float> p(static_cast<size_t>(conv_detail::winograd_pack_size(g)));
    conv_detail::winograd_pack(g, w.data<float>(), p.data());
    return p;
  }
  if (pl.kind != Plan::Rows) return {};
  std::vector<float> p(static_cast<size_t>(rows_pack_size(g)));
  rows_pack(g, pl, w.data<float>(), p.data());
  return p;
}

bool conv_f32_supported(const Node& n, const ValueType& x, const ValueType& w, const ValueType& y) {
  Geom g;
  for (const ValueType* t : {&x, &w, &y})
    for (auto& d : t->shape)
      if (!d.is_static()) return false;
  return x.dtype == DType::f32 && w.dtype == DType::f32 && y.dtype == DType::f32 &&
         geom_of(n, static_dims(x.shape), static_dims(w.shape), static_dims(y.shape), g);
}

void conv_packed(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out, const float* packed,
                 const ConvEpiPlan* epi) {
  if (!epi) {
    if (!conv_f32(n, in, out, packed, nullptr)) generic_kernel(n, in, out);
    return;
  }
  ChannelEpi e;
  if (conv_epi_fill(*epi, in, e)) {
    RLX_CHECK(conv_f32(n, in, out, packed, &e), "[cpu] conv ", n.name, ": the fused conv kernel rejected its operands");
    return;
  }
  // The plan cannot express this run's values: the conv into scratch, then the region as it was.
  std::vector<Tensor> y{Tensor(DType::f32, out[0].shape())};
  RLX_CHECK(conv_f32(n, {in[0], in[1]}, y, packed, nullptr), "[cpu] conv ", n.name, ": unsupported operands");
  const auto& slots = attr_ints(n, "cpu_conv_slots");
  std::vector<Tensor> body_in;
  for (int64_t s : slots) body_in.push_back(s < 0 ? y[0] : in[static_cast<size_t>(s)]);
  conv_epi_region(*epi, body_in, out[0]);
}

void conv(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  conv_packed(n, in, out, nullptr, nullptr);
}

}  // namespace rlx::cpu
