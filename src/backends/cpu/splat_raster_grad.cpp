// The f32 RGB backward compositing of one tile with the pixels as SIMD lanes: a forward pass that
// records each pixel's final transmittance and last contributing entry, then the entries back to
// front, each one branch-free loop over the tile rows its box covers (per-lane gradient terms,
// summed per entry afterwards). Same rules as splat::rasterize_tile_vjp (src/splat/splat_math.h).
#include <algorithm>
#include <cmath>

#include "backends/cpu/isa.h"
#include "backends/cpu/splat_raster.h"
#include "backends/cpu/vmath.h"

namespace rlx::cpu {

namespace {

constexpr int kMaxLanes = 64 * 64;
constexpr float kThr = static_cast<float>(splat::kAlphaThreshold), kAmax = static_cast<float>(splat::kMaxAlpha),
                kTmin = static_cast<float>(splat::kTransmittanceMin);

struct GradLanes {
  float px[kMaxLanes], py[kMaxLanes], T[kMaxLanes], live[kMaxLanes], last[kMaxLanes];
  float S[3][kMaxLanes], vo[3][kMaxLanes], va[kMaxLanes], bgdot[kMaxLanes], Tf[kMaxLanes];
  float red[9][kMaxLanes];  // per-lane terms: v_color x3, v_conic x3, v_mean2d x2, v_opacity
};

// Forward over lanes for entry kk: transmittance, liveness, last contributing entry.
#define RLX_SPLAT_TRACK_BODY                                                                   \
  for (int p = 0; p < n; ++p) {                                                                \
    const float dx = mx - px[p], dy = my - py[p];                                              \
    const float sigma = 0.5f * (a * dx * dx + c * dy * dy) + b * dx * dy;                      \
    float al = op * vm::exp(-sigma);                                                           \
    al = al < kAmax ? al : kAmax;                                                              \
    const float valid = (sigma >= 0.f ? 1.f : 0.f) * (al >= kThr ? 1.f : 0.f) * live[p];       \
    const float next = T[p] * (1.f - al);                                                      \
    const float stop = valid * (next <= kTmin ? 1.f : 0.f);                                    \
    const float use = valid - stop;                                                            \
    T[p] = use * next + (1.f - use) * T[p];                                                    \
    last[p] = use != 0.f ? kk : last[p];                                                       \
    live[p] = live[p] - stop;                                                                  \
    alive += live[p] != 0.f;                                                                   \
  }                                                                                            \
  return alive;
#define RLX_SPLAT_TRACK_ARGS                                                                               \
  int n, float kk, float mx, float my, float a, float b, float c, float op, float *__restrict px,           \
      float *__restrict py, float *__restrict T, float *__restrict live, float *__restrict last
__attribute__((optimize("O3"))) int track_generic(RLX_SPLAT_TRACK_ARGS) {
  int alive = 0;
  RLX_SPLAT_TRACK_BODY
}
__attribute__((target("avx2,fma"), optimize("O3"))) int track_avx2(RLX_SPLAT_TRACK_ARGS) {
  int alive = 0;
  RLX_SPLAT_TRACK_BODY
}
__attribute__((target("avx512f,avx512vl,avx2,fma"), optimize("O3"))) int track_avx512(RLX_SPLAT_TRACK_ARGS) {
  int alive = 0;
  RLX_SPLAT_TRACK_BODY
}

// Backward over lanes for entry kk (only lanes with kk <= last take part).
#define RLX_SPLAT_BACK_BODY                                                                    \
  for (int p = 0; p < n; ++p) {                                                                \
    const float dx = mx - px[p], dy = my - py[p];                                              \
    const float sigma = 0.5f * (a * dx * dx + c * dy * dy) + b * dx * dy;                      \
    const float gg = vm::exp(-sigma);                                                          \
    float al = op * gg;                                                                        \
    const float unclamped = al <= kAmax ? 1.f : 0.f;                                           \
    al = al < kAmax ? al : kAmax;                                                              \
    const float m = (sigma >= 0.f ? 1.f : 0.f) * (al >= kThr ? 1.f : 0.f) * (kk <= last[p] ? 1.f : 0.f); \
    const float ra = 1.f / (1.f - al);                                                         \
    const float Tc = m != 0.f ? T[p] * ra : T[p];                                              \
    T[p] = Tc;                                                                                 \
    const float vis = al * Tc * m;                                                             \
    red[0][p] = vis * vo0[p];                                                                  \
    red[1][p] = vis * vo1[p];                                                                  \
    red[2][p] = vis * vo2[p];                                                                  \
    float v_al = (cr * Tc - S0[p] * ra) * vo0[p] + (cg * Tc - S1[p] * ra) * vo1[p] +           \
                 (cb * Tc - S2[p] * ra) * vo2[p];                                              \
    v_al += -Tf[p] * ra * bgdot[p] + va[p] * Tf[p] * ra;                                       \
    S0[p] += cr * vis;                                                                         \
    S1[p] += cg * vis;                                                                         \
    S2[p] += cb * vis;                                                                         \
    const float w_al = v_al * m * unclamped;                                                   \
    const float v_sigma = -op * gg * w_al;                                                     \
    red[3][p] = 0.5f * dx * dx * v_sigma;                                                      \
    red[4][p] = dx * dy * v_sigma;                                                             \
    red[5][p] = 0.5f * dy * dy * v_sigma;                                                      \
    red[6][p] = (a * dx + b * dy) * v_sigma;                                                   \
    red[7][p] = (b * dx + c * dy) * v_sigma;                                                   \
    red[8][p] = gg * w_al;                                                                     \
  }
#define RLX_SPLAT_BACK_ARGS                                                                                  \
  int n, float kk, float mx, float my, float a, float b, float c, float op, float cr, float cg, float cb,     \
      const float *__restrict px, const float *__restrict py, float *__restrict T, const float *__restrict last, \
      float *__restrict S0, float *__restrict S1, float *__restrict S2, const float *__restrict vo0,          \
      const float *__restrict vo1, const float *__restrict vo2, const float *__restrict va,                   \
      const float *__restrict bgdot, const float *__restrict Tf, float (*__restrict red)[kMaxLanes]
__attribute__((optimize("O3"))) void back_generic(RLX_SPLAT_BACK_ARGS) { RLX_SPLAT_BACK_BODY }
__attribute__((target("avx2,fma"), optimize("O3"))) void back_avx2(RLX_SPLAT_BACK_ARGS) { RLX_SPLAT_BACK_BODY }
__attribute__((target("avx512f,avx512vl,avx2,fma"), optimize("O3"))) void back_avx512(RLX_SPLAT_BACK_ARGS) {
  RLX_SPLAT_BACK_BODY
}

// Per-entry sums of the 9 lane terms; reassociated (the order is the kernel's own, fixed per ISA level)
// so they vectorize.
#define RLX_SPLAT_SUM_BODY                                   \
  for (int q = 0; q < 9; ++q) {                              \
    const float* x = red + q * kMaxLanes;                    \
    float acc = 0.f;                                         \
    for (int p = 0; p < cnt; ++p) acc += x[p];               \
    out[q] = acc;                                            \
  }
__attribute__((optimize("O3", "associative-math", "no-signed-zeros"))) void sum_generic(const float* red, int cnt,
                                                                                      float* out) {
  RLX_SPLAT_SUM_BODY
}
__attribute__((target("avx2,fma"), optimize("O3", "associative-math", "no-signed-zeros"))) void sum_avx2(
    const float* red, int cnt, float* out) {
  RLX_SPLAT_SUM_BODY
}
__attribute__((target("avx512f,avx512vl,avx2,fma"), optimize("O3", "associative-math", "no-signed-zeros"))) void
sum_avx512(const float* red, int cnt, float* out) {
  RLX_SPLAT_SUM_BODY
}
using SumFn = void (*)(const float*, int, float*);

using TrackFn = int (*)(RLX_SPLAT_TRACK_ARGS);
using BackFn = void (*)(RLX_SPLAT_BACK_ARGS);

// The tile rows [r0, r1) Gaussian i's box covers (a row of margin each side).
void box_rows(const float* means2d, const int32_t* radii, int32_t i, int64_t y0, int rows, int* r0, int* r1) {
  const float my = means2d[2 * i + 1], ry = static_cast<float>(radii[2 * i + 1]);
  *r0 = std::clamp(static_cast<int>(std::floor(my - ry - 0.5f)) - 1 - static_cast<int>(y0), 0, rows);
  *r1 = std::clamp(static_cast<int>(std::ceil(my + ry - 0.5f)) + 2 - static_cast<int>(y0), 0, rows);
}

}  // namespace

bool rasterize_tile_vjp_f32_rgb(const splat::RasterIn& r, const splat::TileBins& bins, int64_t t,
                                const float* means2d, const float* conics, const float* colors, const float* opac,
                                const int32_t* radii, const float* bg, const float* v_image, const float* v_alpha,
                                float* v_m2, float* v_con, float* v_col, float* v_op, float* v_bg_tile) {
  if (r.channels != 3 || r.tile * r.tile > kMaxLanes) return false;
  thread_local GradLanes L;
  const CpuIsa isa = cpu_isa();
  const TrackFn track = isa == CpuIsa::Avx512 ? &track_avx512 : isa == CpuIsa::Avx2 ? &track_avx2 : &track_generic;
  const BackFn back = isa == CpuIsa::Avx512 ? &back_avx512 : isa == CpuIsa::Avx2 ? &back_avx2 : &back_generic;
  const SumFn sum9 = isa == CpuIsa::Avx512 ? &sum_avx512 : isa == CpuIsa::Avx2 ? &sum_avx2 : &sum_generic;
  const int64_t tx = t % bins.tiles_x, ty = t / bins.tiles_x;
  const int64_t x0 = tx * r.tile, y0 = ty * r.tile, x1 = std::min(r.width, x0 + r.tile),
                y1 = std::min(r.height, y0 + r.tile);
  const int w = static_cast<int>(x1 - x0), rows = static_cast<int>(y1 - y0), n = w * rows;
  for (int p = 0; p < n; ++p) {
    L.px[p] = static_cast<float>(x0 + p % w) + 0.5f;
    L.py[p] = static_cast<float>(y0 + p / w) + 0.5f;
    L.T[p] = 1.f;
    L.live[p] = 1.f;
    L.last[p] = -1.f;
  }
  const int64_t s = bins.offsets[static_cast<size_t>(t)], e = bins.offsets[static_cast<size_t>(t) + 1];
  int64_t kend = s;
  for (int64_t k = s; k < e; ++k) {
    const int32_t i = bins.ids[static_cast<size_t>(k)];
    int r0, r1;
    box_rows(means2d, radii, i, y0, rows, &r0, &r1);
    if (r0 >= r1) continue;
    const int o = r0 * w;
    const float* con = conics + 3 * i;
    kend = k + 1;
    const int alive_rows = track((r1 - r0) * w, static_cast<float>(k - s), means2d[2 * i], means2d[2 * i + 1],
                                 con[0], con[1], con[2], opac[i], L.px + o, L.py + o, L.T + o, L.live + o,
                                 L.last + o);
    if (alive_rows == 0) {
      int alive = 0;
      for (int p = 0; p < n; ++p) alive += L.live[p] != 0.f;
      if (alive == 0) break;
    }
  }
  for (int p = 0; p < n; ++p) {
    const int64_t x = x0 + p % w, y = y0 + p / w;
    const float* vo = v_image + (y * r.width + x) * 3;
    L.Tf[p] = L.T[p];
    L.va[p] = v_alpha[y * r.width + x];
    L.bgdot[p] = 0.f;
    for (int ch = 0; ch < 3; ++ch) {
      L.vo[ch][p] = vo[ch];
      L.S[ch][p] = 0.f;
      L.bgdot[p] += bg[ch] * vo[ch];
      v_bg_tile[ch] += L.T[p] * vo[ch];
    }
  }
  for (int64_t k = kend - 1; k >= s; --k) {
    const int32_t i = bins.ids[static_cast<size_t>(k)];
    int r0, r1;
    box_rows(means2d, radii, i, y0, rows, &r0, &r1);
    if (r0 >= r1) continue;
    const int o = r0 * w, cnt = (r1 - r0) * w;
    const float* con = conics + 3 * i;
    const float* col = colors + 3 * i;
    float(*red)[kMaxLanes] = L.red;
    back(cnt, static_cast<float>(k - s), means2d[2 * i], means2d[2 * i + 1], con[0], con[1], con[2], opac[i], col[0],
         col[1], col[2], L.px + o, L.py + o, L.T + o, L.last + o, L.S[0] + o, L.S[1] + o, L.S[2] + o, L.vo[0] + o,
         L.vo[1] + o, L.vo[2] + o, L.va + o, L.bgdot + o, L.Tf + o, reinterpret_cast<float(*)[kMaxLanes]>(red[0] + o));
    float sum[9];
    sum9(red[0] + o, cnt, sum);
    for (int ch = 0; ch < 3; ++ch) v_col[k * 3 + ch] += sum[ch];
    for (int j = 0; j < 3; ++j) v_con[k * 3 + j] += sum[3 + j];
    v_m2[k * 2] += sum[6];
    v_m2[k * 2 + 1] += sum[7];
    v_op[k] += sum[8];
  }
  return true;
}

}  // namespace rlx::cpu
