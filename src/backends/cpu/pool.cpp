// The cpu kernel of the MIR `reduce_window` primitive (max/min/sum pooling), f32, windows over the
// last two dims (what MaxPool / AvgPool decompose to: N and C get window 1). Each plane is padded
// with the kind's identity (0 / -inf / +inf: the reference skips pad taps, which is the same) and
// split into stride phases, so each output combines its taps at constant offsets of one flat index,
// 16 outputs at a time (conv_direct.cpp's layout); planes with wide rows instead combine the
// window's rows into one row, then each output's taps along it. A window over one other dim (LRN: channels) is
// combined row by row of the dims after it. Other windows take the generic kernel.
#include <algorithm>
#include <limits>
#include <string>

#include "backends/cpu/conv.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/simd_avx2.h"

namespace rlx::cpu {

namespace {

enum class Red { Sum, Max, Min };

// max/min keep NaN, as the reference's combine: a NaN on either side gives NaN.
inline float combine(Red k, float a, float x) {
  switch (k) {
    case Red::Sum: return a + x;
    case Red::Max: return (x > a || x != x) ? x : a;
    default: return (x < a || x != x) ? x : a;
  }
}

struct Win {
  int64_t planes, H, W, OH, OW, kh, kw, sh, sw, ph, pw;
};

#if defined(RLX_SIMD_AVX2)
// a (+) x on 8 lanes; max/min give NaN where either side is NaN (all-ones lanes: a quiet NaN).
template <Red R>
RLX_AVX2_FN inline __m256 combine8(__m256 a, __m256 x) {
  if constexpr (R == Red::Sum) return _mm256_add_ps(a, x);
  const __m256 nan = _mm256_cmp_ps(a, x, _CMP_UNORD_Q);
  return _mm256_or_ps(R == Red::Max ? _mm256_max_ps(a, x) : _mm256_min_ps(a, x), nan);
}

// acc[0, n) (+)= s[0, n).
template <Red R>
RLX_AVX2_FN void combine_row_avx2(float* acc, const float* s, int64_t n) {
  int64_t c = 0;
  for (; c + 8 <= n; c += 8) _mm256_storeu_ps(acc + c, combine8<R>(_mm256_loadu_ps(acc + c), _mm256_loadu_ps(s + c)));
  for (; c < n; ++c) acc[c] = combine(R, acc[c], s[c]);
}

// y[f] = (+) over taps t of ph[off[t] + f], f in [0, n) (n a multiple of 16). max/min keep a NaN:
// the plain max_ps/min_ps drop it, so the taps' NaN lanes are or-ed into the result at the end.
template <Red R>
RLX_AVX2_FN void taps_avx2(const float* ph, const std::vector<int64_t>& off, int64_t n, float* y) {
  const int64_t nt = static_cast<int64_t>(off.size());
  for (int64_t f = 0; f < n; f += 16) {
    __m256 v0 = _mm256_loadu_ps(ph + off[0] + f), v1 = _mm256_loadu_ps(ph + off[0] + f + 8);
    __m256 n0 = _mm256_cmp_ps(v0, v0, _CMP_UNORD_Q), n1 = _mm256_cmp_ps(v1, v1, _CMP_UNORD_Q);
    for (int64_t t = 1; t < nt; ++t) {
      const __m256 x0 = _mm256_loadu_ps(ph + off[t] + f), x1 = _mm256_loadu_ps(ph + off[t] + f + 8);
      if constexpr (R == Red::Sum) {
        v0 = _mm256_add_ps(v0, x0), v1 = _mm256_add_ps(v1, x1);
        continue;
      }
      v0 = R == Red::Max ? _mm256_max_ps(v0, x0) : _mm256_min_ps(v0, x0);
      v1 = R == Red::Max ? _mm256_max_ps(v1, x1) : _mm256_min_ps(v1, x1);
      n0 = _mm256_or_ps(n0, _mm256_cmp_ps(x0, x0, _CMP_UNORD_Q));
      n1 = _mm256_or_ps(n1, _mm256_cmp_ps(x1, x1, _CMP_UNORD_Q));
    }
    if constexpr (R != Red::Sum) v0 = _mm256_or_ps(v0, n0), v1 = _mm256_or_ps(v1, n1);
    _mm256_storeu_ps(y + f, v0);
    _mm256_storeu_ps(y + f + 8, v1);
  }
}
// y[ow] = (+) over j < kw of src[ow + j * step] for ow in [0, n) (all inside src).
template <Red R>
RLX_AVX2_FN void window_row_avx2(const float* src, int64_t step, int64_t kw, int64_t n, float* y) {
  int64_t ow = 0;
  for (; ow + 8 <= n; ow += 8) {
    __m256 v = _mm256_loadu_ps(src + ow);
    for (int64_t j = 1; j < kw; ++j) v = combine8<R>(v, _mm256_loadu_ps(src + ow + j * step));
    _mm256_storeu_ps(y + ow, v);
  }
  for (; ow < n; ++ow) {
    float v = src[ow];
    for (int64_t j = 1; j < kw; ++j) v = combine(R, v, src[ow + j * step]);
    y[ow] = v;
  }
}
#endif

// One plane: padded with the kind's identity and split into stride phases (conv_detail::split, as
// the direct conv), so every tap of every output is a constant offset of one flat index; the Wq -
// OW columns past each output row are computed and dropped. A window of only padding gives the
// identity, as the reference.
template <Red R>
void pool_plane(const conv_detail::Geom& g, const conv_detail::Phases& p, const float* x, float* y, float* ph,
                float* flat, float ident) {
  conv_detail::split(g, p, x, ph, ident);
  const int64_t n = (g.OH * p.Wq + 15) / 16 * 16;  // <= p.n, which the phase planes cover
#if defined(RLX_SIMD_AVX2)
  if (simd::cpu_has_avx2()) {
    taps_avx2<R>(ph, p.off, n, flat);
  } else
#endif
  {
    for (int64_t f = 0; f < n; ++f) {
      float v = ph[p.off[0] + f];
      for (size_t t = 1; t < p.off.size(); ++t) v = combine(R, v, ph[p.off[t] + f]);
      flat[f] = v;
    }
  }
  for (int64_t oh = 0; oh < g.OH; ++oh) std::copy(flat + oh * p.Wq, flat + oh * p.Wq + g.OW, y + oh * g.OW);
}

// One plane of wide rows. Per output row: the window's input rows combined into `row` (W floats), then each
// output combines its kw taps of that row. With stride sw > 1 the row is first split into sw
// phase rows (phase q: columns q, q + sw, ...), so an output's taps are contiguous across outputs.
template <Red R>
void pool_rows(const Win& w, const float* x, float* y, float* row, float* ph, float ident) {
  const int64_t sw = w.sw, ws = (w.W + sw - 1) / sw;
  // Outputs whose whole window lies inside the row: [o_lo, o_hi).
  const int64_t o_lo = std::min(w.OW, (w.pw + sw - 1) / sw);
  const int64_t o_hi = std::max(o_lo, std::min(w.OW, w.W + w.pw - w.kw >= 0 ? (w.W + w.pw - w.kw) / sw + 1 : 0));
#if defined(RLX_SIMD_AVX2)
  const bool avx2 = simd::cpu_has_avx2();
#endif
  for (int64_t oh = 0; oh < w.OH; ++oh) {
    const int64_t r0 = std::max<int64_t>(0, oh * w.sh - w.ph), r1 = std::min(w.H, oh * w.sh - w.ph + w.kh);
    float* yr = y + oh * w.OW;
    if (r0 >= r1) {
      std::fill(yr, yr + w.OW, ident);
      continue;
    }
    std::copy(x + r0 * w.W, x + (r0 + 1) * w.W, row);
    for (int64_t r = r0 + 1; r < r1; ++r) {
#if defined(RLX_SIMD_AVX2)
      if (avx2) {
        combine_row_avx2<R>(row, x + r * w.W, w.W);
        continue;
      }
#endif
      for (int64_t c = 0; c < w.W; ++c) row[c] = combine(R, row[c], x[r * w.W + c]);
    }
    auto edge = [&](int64_t ow) {
      const int64_t c0 = std::max<int64_t>(0, ow * sw - w.pw), c1 = std::min(w.W, ow * sw - w.pw + w.kw);
      float v = ident;
      for (int64_t c = c0; c < c1; ++c) v = combine(R, v, row[c]);
      yr[ow] = v;
    };
    for (int64_t ow = 0; ow < o_lo; ++ow) edge(ow);
    for (int64_t ow = o_hi; ow < w.OW; ++ow) edge(ow);
    if (o_lo >= o_hi) continue;
    // Interior output ow reads row[ow * sw - pw + j]; in phase form ph[q_j][ow + base_j].
    const int64_t first = o_lo * sw - w.pw;
    if (sw == 2) {
      conv_detail::deinterleave2(row, w.W, ph, ph + ws);
    } else if (sw > 1) {
      for (int64_t q = 0; q < sw; ++q)
        for (int64_t c = 0; c * sw + q < w.W; ++c) ph[q * ws + c] = row[c * sw + q];
    }
#if defined(RLX_SIMD_AVX2)
    if (avx2) {  // each tap j is one contiguous run of the (phase) row
      if (sw == 1) {
        window_row_avx2<R>(row + first, 1, w.kw, o_hi - o_lo, yr + o_lo);
      } else {
        for (int64_t j = 0; j < w.kw; ++j) {
          const int64_t off = first + j, q = off % sw, c = off / sw;  // off >= 0 inside the interior
          if (j == 0)
            std::copy(ph + q * ws + c, ph + q * ws + c + (o_hi - o_lo), yr + o_lo);
          else
            combine_row_avx2<R>(yr + o_lo, ph + q * ws + c, o_hi - o_lo);
        }
      }
      continue;
    }
#endif
    for (int64_t ow = o_lo; ow < o_hi; ++ow) {
      const float* s = row + ow * sw - w.pw;
      float v = s[0];
      for (int64_t j = 1; j < w.kw; ++j) v = combine(R, v, s[j]);
      yr[ow] = v;
    }
  }
}

thread_local std::vector<float> t_phase, t_flat, t_row, t_rphase;

// The window's attributes with defaults filled in; false when their lengths are wrong.
bool window_attrs(const Node& n, int64_t r, std::vector<int64_t>& win, std::vector<int64_t>& st,
                  std::vector<int64_t>& pads) {
  win = attr_ints(n, "window"), st = attr_ints(n, "strides"), pads = attr_ints(n, "pads");
  if (st.empty()) st.assign(r, 1);
  if (pads.empty()) pads.assign(2 * r, 0);
  return static_cast<int64_t>(win.size()) == r && static_cast<int64_t>(st.size()) == r &&
         static_cast<int64_t>(pads.size()) == 2 * r;
}

bool trivial(const std::vector<int64_t>& win, const std::vector<int64_t>& st, const std::vector<int64_t>& pads,
             int64_t r, int64_t d) {
  return win[d] == 1 && st[d] == 1 && pads[d] == 0 && pads[r + d] == 0;
}

// Windows over the last two dims (pooling): planes of H x W.
bool window_of(const Node& n, const Tensor& x, const Tensor& y, Win& w) {
  const int64_t r = x.rank();
  std::vector<int64_t> win, st, pads;
  if (r < 2 || y.rank() != r || !window_attrs(n, r, win, st, pads)) return false;
  w.planes = 1;
  for (int64_t d = 0; d + 2 < r; ++d) {
    if (!trivial(win, st, pads, r, d) || x.shape()[d] != y.shape()[d]) return false;
    w.planes *= x.shape()[d];
  }
  w.H = x.shape()[r - 2], w.W = x.shape()[r - 1], w.OH = y.shape()[r - 2], w.OW = y.shape()[r - 1];
  w.kh = win[r - 2], w.kw = win[r - 1], w.sh = st[r - 2], w.sw = st[r - 1], w.ph = pads[r - 2], w.pw = pads[r - 1];
  return w.kh >= 1 && w.kw >= 1 && w.sh >= 1 && w.sw >= 1 && w.ph >= 0 && w.pw >= 0;
}

// A window over one dim a (LRN's window over channels): x as [outer, L, inner].
struct AxisWin {
  int64_t outer = 1, L = 0, OL = 0, inner = 1, k = 1, s = 1, p = 0;
};

bool axis_window_of(const Node& n, const Tensor& x, const Tensor& y, AxisWin& w) {
  const int64_t r = x.rank();
  std::vector<int64_t> win, st, pads;
  if (r < 1 || y.rank() != r || !window_attrs(n, r, win, st, pads)) return false;
  int64_t a = -1;
  for (int64_t d = 0; d < r; ++d) {
    if (trivial(win, st, pads, r, d)) {
      if (x.shape()[d] != y.shape()[d]) return false;
      continue;
    }
    if (a >= 0) return false;
    a = d;
  }
  if (a < 0) return false;
  for (int64_t d = 0; d < a; ++d) w.outer *= x.shape()[d];
  for (int64_t d = a + 1; d < r; ++d) w.inner *= x.shape()[d];
  w.L = x.shape()[a], w.OL = y.shape()[a], w.k = win[a], w.s = st[a], w.p = pads[a];
  return w.k >= 1 && w.s >= 1 && w.p >= 0;
}

// Output rows [i0, i1) of the [outer, OL] rows of `inner` floats each.
template <Red R>
void axis_rows(const AxisWin& w, const float* x, float* y, int64_t i0, int64_t i1, float ident) {
#if defined(RLX_SIMD_AVX2)
  const bool avx2 = simd::cpu_has_avx2();
#endif
  for (int64_t it = i0; it < i1; ++it) {
    const int64_t o = it / w.OL, i = it % w.OL;
    float* yr = y + it * w.inner;
    const int64_t t0 = std::max<int64_t>(0, i * w.s - w.p), t1 = std::min(w.L, i * w.s - w.p + w.k);
    if (t0 >= t1) {
      std::fill(yr, yr + w.inner, ident);
      continue;
    }
    const float* xs = x + o * w.L * w.inner;
    std::copy(xs + t0 * w.inner, xs + (t0 + 1) * w.inner, yr);
    for (int64_t t = t0 + 1; t < t1; ++t) {
#if defined(RLX_SIMD_AVX2)
      if (avx2) {
        combine_row_avx2<R>(yr, xs + t * w.inner, w.inner);
        continue;
      }
#endif
      for (int64_t q = 0; q < w.inner; ++q) yr[q] = combine(R, yr[q], xs[t * w.inner + q]);
    }
  }
}

// y[e] /= d[e % dn] for e in [e0, e1): the pool-divide pass's divisor (a trailing broadcast).
void divide(float* y, const float* d, int64_t dn, int64_t e0, int64_t e1) {
  if (dn == 1) {
    for (int64_t e = e0; e < e1; ++e) y[e] /= d[0];
    return;
  }
  for (int64_t e = e0; e < e1; ++e) y[e] /= d[e % dn];
}

}  // namespace

void reduce_window(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  Tensor& y = out[0];
  const std::string& kind = attr_str(n, "kind");
  // pool-divide (src/lir/rewrite/pool.cpp): the average pool's divisor as a second input.
  const Tensor* dv = in.size() == 2 && n.attrs.count("cpu_pool_div") ? &in[1] : nullptr;
  if (dv) {
    RLX_CHECK(dv->dtype() == DType::f32 && y.dtype() == DType::f32 && dv->numel() >= 1 &&
                  y.numel() % dv->numel() == 0,
              "[cpu] reduce_window ", n.name, ": the divisor does not broadcast to the output");
  }
  const float* dp = dv ? dv->data<float>() : nullptr;
  const int64_t dn = dv ? dv->numel() : 1;
  if (x.dtype() != DType::f32 || y.dtype() != DType::f32 || (kind != "sum" && kind != "max" && kind != "min")) {
    generic_kernel(n, {x}, out);
    if (dp) divide(y.data<float>(), dp, dn, 0, y.numel());
    return;
  }
  const Red k = kind == "sum" ? Red::Sum : kind == "max" ? Red::Max : Red::Min;
  const float ident = k == Red::Sum ? 0.f : k == Red::Max ? -std::numeric_limits<float>::infinity()
                                                          : std::numeric_limits<float>::infinity();
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  Win w;
  AxisWin aw;
  if (!window_of(n, x, y, w)) {
    if (!axis_window_of(n, x, y, aw)) {
      generic_kernel(n, {x}, out);
      if (dp) divide(yp, dp, dn, 0, y.numel());
      return;
    }
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, aw.inner * aw.k));
    parallel_for(aw.outer * aw.OL, grain, [&](int64_t i0, int64_t i1) {
      switch (k) {
        case Red::Sum: axis_rows<Red::Sum>(aw, xp, yp, i0, i1, ident); break;
        case Red::Max: axis_rows<Red::Max>(aw, xp, yp, i0, i1, ident); break;
        case Red::Min: axis_rows<Red::Min>(aw, xp, yp, i0, i1, ident); break;
      }
      if (dp) divide(yp, dp, dn, i0 * aw.inner, i1 * aw.inner);
    });
    return;
  }
  // The window as a one-channel conv geometry (dilation 1), for the phase-plane layout.
  conv_detail::Geom g{};
  g.N = 1, g.C = 1, g.O = 1, g.G = 1, g.Cg = 1, g.Og = 1;
  g.H = w.H, g.W = w.W, g.KH = w.kh, g.KW = w.kw, g.OH = w.OH, g.OW = w.OW;
  g.sh = w.sh, g.sw = w.sw, g.ph = w.ph, g.pw = w.pw, g.dh = 1, g.dw = 1;
  const conv_detail::Phases ph = conv_detail::phases_of(g);
  const size_t nph = static_cast<size_t>(g.sh * g.sw * ph.plane);
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, w.OH * w.OW * w.kh * w.kw));
  // Small planes: the flat form (no per-row work); wide rows: the separable form, which reads each
  // input element about kh + kw times instead of splitting the plane first.
  const bool flat = w.W <= 64;
  parallel_for(w.planes, grain, [&](int64_t p0, int64_t p1) {
    if (flat) {
      if (t_phase.size() < nph) t_phase.resize(nph);
      if (t_flat.size() < static_cast<size_t>(ph.n)) t_flat.resize(static_cast<size_t>(ph.n));
    } else {
      if (t_row.size() < static_cast<size_t>(w.W)) t_row.resize(static_cast<size_t>(w.W));
      if (t_rphase.size() < static_cast<size_t>(w.W + w.sw)) t_rphase.resize(static_cast<size_t>(w.W + w.sw));
    }
    for (int64_t p = p0; p < p1; ++p) {
      const float* xs = xp + p * w.H * w.W;
      float* ys = yp + p * w.OH * w.OW;
      if (flat) {
        switch (k) {
          case Red::Sum: pool_plane<Red::Sum>(g, ph, xs, ys, t_phase.data(), t_flat.data(), ident); break;
          case Red::Max: pool_plane<Red::Max>(g, ph, xs, ys, t_phase.data(), t_flat.data(), ident); break;
          case Red::Min: pool_plane<Red::Min>(g, ph, xs, ys, t_phase.data(), t_flat.data(), ident); break;
        }
      } else {
        switch (k) {
          case Red::Sum: pool_rows<Red::Sum>(w, xs, ys, t_row.data(), t_rphase.data(), ident); break;
          case Red::Max: pool_rows<Red::Max>(w, xs, ys, t_row.data(), t_rphase.data(), ident); break;
          case Red::Min: pool_rows<Red::Min>(w, xs, ys, t_row.data(), t_rphase.data(), ident); break;
        }
      }
      if (dp) divide(yp, dp, dn, p * w.OH * w.OW, (p + 1) * w.OH * w.OW);  // the plane, while in cache
    }
  });
}

}  // namespace rlx::cpu
