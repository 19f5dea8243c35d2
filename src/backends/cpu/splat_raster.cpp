// The f32 forward compositing of one tile with the pixels as SIMD lanes: for each Gaussian of the
// tile's depth-sorted list, one branch-free loop over the tile's pixels (vm::exp, selects for the
// thresholds and the per-pixel stop), so the compiler vectorizes it for AVX-512/AVX2 (RLX_SIMD
// clones). Same rules as splat::rasterize_tile (src/splat/splat_math.h), which f64 uses.
#include "backends/cpu/splat_raster.h"

#include <algorithm>
#include <cmath>

#include "backends/cpu/isa.h"
#include "backends/cpu/vmath.h"
#include "splat/splat_math.h"

namespace rlx::cpu {

namespace {

constexpr int kMaxLanes = 64 * 64;

struct Lanes {
  float px[kMaxLanes], py[kMaxLanes], T[kMaxLanes], live[kMaxLanes], acc[3][kMaxLanes];
};

// One Gaussian over `n` lanes; returns the number of lanes still live. One copy per ISA level
// (the target_clones of RLX_SIMD do not vectorize this loop with GCC 12; explicit targets do).
#define RLX_SPLAT_COMPOSITE_ARGS                                                                            \
  int n, float mx, float my, float a, float b, float c, float op, float r, float g, float bl,                \
      float *__restrict px, float *__restrict py, float *__restrict T, float *__restrict live,               \
      float *__restrict ar, float *__restrict ag, float *__restrict ab
__attribute__((optimize("O3"))) int composite_generic(int n, float mx, float my, float a, float b, float c, float op, float r, float g,
                             float bl, float* __restrict px, float* __restrict py, float* __restrict T,
                             float* __restrict live, float* __restrict ar, float* __restrict ag,
                             float* __restrict ab) {
  const float thr = static_cast<float>(splat::kAlphaThreshold), amax = static_cast<float>(splat::kMaxAlpha),
              tmin = static_cast<float>(splat::kTransmittanceMin);
  int alive = 0;
  for (int p = 0; p < n; ++p) {
    const float dx = mx - px[p], dy = my - py[p];
    const float sigma = 0.5f * (a * dx * dx + c * dy * dy) + b * dx * dy;
    float al = op * vm::exp(-sigma);
    al = al < amax ? al : amax;
    // masks as 0/1 floats: selects, no branches
    const float valid = (sigma >= 0.f ? 1.f : 0.f) * (al >= thr ? 1.f : 0.f) * live[p];
    const float next = T[p] * (1.f - al);
    const float stop = valid * (next <= tmin ? 1.f : 0.f);
    const float use = valid - stop;
    const float vis = use * al * T[p];
    ar[p] += r * vis;
    ag[p] += g * vis;
    ab[p] += bl * vis;
    T[p] = use * next + (1.f - use) * T[p];
    live[p] = live[p] - stop;
    alive += live[p] != 0.f;
  }
  return alive;
}

__attribute__((target("avx2,fma"), optimize("O3"))) int composite_avx2(int n, float mx, float my, float a, float b, float c, float op, float r, float g,
                             float bl, float* __restrict px, float* __restrict py, float* __restrict T,
                             float* __restrict live, float* __restrict ar, float* __restrict ag,
                             float* __restrict ab) {
  const float thr = static_cast<float>(splat::kAlphaThreshold), amax = static_cast<float>(splat::kMaxAlpha),
              tmin = static_cast<float>(splat::kTransmittanceMin);
  int alive = 0;
  for (int p = 0; p < n; ++p) {
    const float dx = mx - px[p], dy = my - py[p];
    const float sigma = 0.5f * (a * dx * dx + c * dy * dy) + b * dx * dy;
    float al = op * vm::exp(-sigma);
    al = al < amax ? al : amax;
    // masks as 0/1 floats: selects, no branches
    const float valid = (sigma >= 0.f ? 1.f : 0.f) * (al >= thr ? 1.f : 0.f) * live[p];
    const float next = T[p] * (1.f - al);
    const float stop = valid * (next <= tmin ? 1.f : 0.f);
    const float use = valid - stop;
    const float vis = use * al * T[p];
    ar[p] += r * vis;
    ag[p] += g * vis;
    ab[p] += bl * vis;
    T[p] = use * next + (1.f - use) * T[p];
    live[p] = live[p] - stop;
    alive += live[p] != 0.f;
  }
  return alive;
}

__attribute__((target("avx512f,avx512vl,avx2,fma"), optimize("O3"))) int composite_avx512(int n, float mx, float my, float a, float b, float c, float op, float r, float g,
                             float bl, float* __restrict px, float* __restrict py, float* __restrict T,
                             float* __restrict live, float* __restrict ar, float* __restrict ag,
                             float* __restrict ab) {
  const float thr = static_cast<float>(splat::kAlphaThreshold), amax = static_cast<float>(splat::kMaxAlpha),
              tmin = static_cast<float>(splat::kTransmittanceMin);
  int alive = 0;
  for (int p = 0; p < n; ++p) {
    const float dx = mx - px[p], dy = my - py[p];
    const float sigma = 0.5f * (a * dx * dx + c * dy * dy) + b * dx * dy;
    float al = op * vm::exp(-sigma);
    al = al < amax ? al : amax;
    // masks as 0/1 floats: selects, no branches
    const float valid = (sigma >= 0.f ? 1.f : 0.f) * (al >= thr ? 1.f : 0.f) * live[p];
    const float next = T[p] * (1.f - al);
    const float stop = valid * (next <= tmin ? 1.f : 0.f);
    const float use = valid - stop;
    const float vis = use * al * T[p];
    ar[p] += r * vis;
    ag[p] += g * vis;
    ab[p] += bl * vis;
    T[p] = use * next + (1.f - use) * T[p];
    live[p] = live[p] - stop;
    alive += live[p] != 0.f;
  }
  return alive;
}


using CompositeFn = int (*)(RLX_SPLAT_COMPOSITE_ARGS);
CompositeFn composite_for_isa() {
  switch (cpu_isa()) {
    case CpuIsa::Avx512: return &composite_avx512;
    case CpuIsa::Avx2: return &composite_avx2;
    default: return &composite_generic;
  }
}

}  // namespace

bool rasterize_tile_f32_rgb(const splat::RasterIn& r, const splat::TileBins& bins, int64_t t, const float* means2d,
                            const float* conics, const float* colors, const float* opac, const int32_t* radii,
                            const float* bg, float* image, float* alpha) {
  if (r.channels != 3 || r.tile * r.tile > kMaxLanes) return false;
  thread_local Lanes L;
  static const CompositeFn composite = composite_for_isa();
  const int64_t tx = t % bins.tiles_x, ty = t / bins.tiles_x;
  const int64_t x0 = tx * r.tile, y0 = ty * r.tile, x1 = std::min(r.width, x0 + r.tile),
                y1 = std::min(r.height, y0 + r.tile);
  const int w = static_cast<int>(x1 - x0), rows = static_cast<int>(y1 - y0), n = w * rows;
  for (int p = 0; p < n; ++p) {
    L.px[p] = static_cast<float>(x0 + p % w) + 0.5f;
    L.py[p] = static_cast<float>(y0 + p / w) + 0.5f;
    L.T[p] = 1.f;
    L.live[p] = 1.f;
    L.acc[0][p] = L.acc[1][p] = L.acc[2][p] = 0.f;
  }
  const int64_t s = bins.offsets[static_cast<size_t>(t)], e = bins.offsets[static_cast<size_t>(t) + 1];
  for (int64_t k = s; k < e; ++k) {
    const int32_t i = bins.ids[static_cast<size_t>(k)];
    const float* con = conics + 3 * i;
    const float* col = colors + 3 * i;
    // Only the tile rows inside the Gaussian's box: outside it alpha < 1/255 (the box is the
    // opacity-aware extent of the marginal in y), so those lanes would be skipped anyway.
    const float my = means2d[2 * i + 1], ry = static_cast<float>(radii[2 * i + 1]);
    const int r0 = std::clamp(static_cast<int>(std::floor(my - ry - 0.5f)) - 1 - static_cast<int>(y0), 0, rows);
    const int r1 = std::clamp(static_cast<int>(std::ceil(my + ry - 0.5f)) + 2 - static_cast<int>(y0), 0, rows);
    if (r0 >= r1) continue;
    const int o = r0 * w;
    const int alive_rows = composite((r1 - r0) * w, means2d[2 * i], means2d[2 * i + 1], con[0], con[1], con[2], opac[i], col[0],
                                col[1], col[2], L.px + o, L.py + o, L.T + o, L.live + o, L.acc[0] + o,
                                     L.acc[1] + o, L.acc[2] + o);
    // all lanes done: count the untouched rows' live lanes too (cheap, rare)
    if (alive_rows == 0) {
      int alive = 0;
      for (int p = 0; p < n; ++p) alive += L.live[p] != 0.f;
      if (alive == 0) break;
    }
  }
  for (int p = 0; p < n; ++p) {
    const int64_t x = x0 + p % w, y = y0 + p / w;
    float* o = image + (y * r.width + x) * 3;
    for (int ch = 0; ch < 3; ++ch) o[ch] = L.acc[ch][p] + L.T[p] * bg[ch];
    alpha[y * r.width + x] = 1.f - L.T[p];
  }
  return true;
}

}  // namespace rlx::cpu
