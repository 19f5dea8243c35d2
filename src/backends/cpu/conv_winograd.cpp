// The Winograd plan of the cpu conv kernel (conv.cpp): 3x3, stride 1, dilation 1, one group,
// F(2x2, 3x3). Each 2x2 block of outputs ("tile") reads a 4x4 patch d of the input:
//   V = Bᵀ d B (16 values per tile and input channel), U = G g Gᵀ (16 per output and input channel,
//   packed once for a constant weight), M[ξ] = U[ξ] · V[ξ] for each of the 16 positions ξ (a GEMM
//   [O, C] x [C, tiles]), Y = Aᵀ M A (the 2x2 outputs).
// 16 GEMMs of C multiply-adds per tile instead of 36 C per 2x2 outputs: 2.25x fewer FMAs than the
// im2col plan, for adds in the transforms. The GEMMs run on the packed GEMM's micro-kernels
// (gemm_avx2_internal.h): U is stored in the k-major micro-panels of the family's tile height, V in its
// 16-column panels (tiles as columns), so no per-call packing is left. Work items are (image, block
// of whole tile rows, block of output channels); a block's V is ~C x 160 floats per position, so a
// position's V stays in L2 while every output channel's micro-panel passes over it; M is written for a
// block of output channels at a time and turned into outputs (and the epilogue) while in cache.
// AVX2+FMA transforms; hosts without AVX2 (or RLX_CONV_WINOGRAD=0) use the im2col plan.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/conv.h"
#include "backends/cpu/gemm_avx2.h"
#include "backends/cpu/gemm_avx2_internal.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/simd_avx2.h"

namespace rlx::cpu::conv_detail {

namespace {

constexpr int64_t kNr = kGemmNr;
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

const gemm_detail::GemmKernels& family() {
  return gemm_detail::gemm_kernels(fast_gemm_available() ? cpu_isa() : CpuIsa::Generic);
}

std::atomic<bool>& enabled() {
  static std::atomic<bool> on{[] {
    const char* e = std::getenv("RLX_CONV_WINOGRAD");
    return !(e && std::string(e) == "0");
  }()};
  return on;
}

// Blocking of one conv.
struct WPlan {
  int64_t TH, TW;   // tile rows and columns
  int64_t pitch;    // tile slots a tile row takes in a block (TW rounded up to 8: 8-tile vectors stay in one panel)
  int64_t rb, ntb;  // tile rows per block, blocks per image
  int64_t og, nog;  // output channels per group of an item (a multiple of mr), groups
  int64_t osb;      // output channels per M block inside an item (a multiple of mr)
  int64_t mr;
};

WPlan wplan(const Geom& g) {
  WPlan p;
  p.mr = family().mr;
  p.TH = ceil_div(g.OH, 2), p.TW = ceil_div(g.OW, 2), p.pitch = round_up(p.TW, 8);
  // A position's V block (C x tiles) at most ~160 KiB, at least one tile row.
  const int64_t tmax = std::max<int64_t>(16, 40960 / g.C);
  p.rb = std::clamp<int64_t>(tmax / p.pitch, 1, p.TH);
  p.ntb = ceil_div(p.TH, p.rb);
  p.rb = ceil_div(p.TH, p.ntb);
  const int nt = num_threads();
  const int64_t units = g.N * p.ntb, rows = ceil_div(g.O, p.mr);
  p.nog = 1;
  // Few (image, tile block) items: split the output channels too (each part redoes the input
  // transform, which is small next to its 16 GEMMs), down to ~4 micro rows a part.
  if (nt > 1 && units < 4 * nt) p.nog = std::clamp<int64_t>(ceil_div(4 * nt, units), 1, std::max<int64_t>(1, rows / 4));
  p.og = ceil_div(rows, p.nog) * p.mr;
  p.nog = ceil_div(g.O, p.og);
  const int64_t tpan = round_up(p.rb * p.pitch, kNr);
  // M of a block: 16 x osb x tiles floats, at most ~1 MiB.
  p.osb = std::clamp<int64_t>(16384 / tpan / p.mr * p.mr, p.mr, p.og);
  return p;
}

thread_local std::vector<float> t_v, t_m, t_row;

float* grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

#if defined(RLX_SIMD_AVX2)
// The 16 values Bᵀ d B of tiles [t, t + 8) of a tile row from the even/odd split of their 4 input
// rows (e[i][k] = row i element 2k, o[i][k] = element 2k + 1 of the zero-padded row), to out[ξ * ld
// + lane], ξ = 4 * row + column of V.
RLX_AVX2_FN void input_tiles8(const float* const e[4], const float* const o[4], int64_t t, float* out, int64_t ld) {
  __m256 r[4][4];
  for (int i = 0; i < 4; ++i) {
    const __m256 d0 = _mm256_loadu_ps(e[i] + t), d1 = _mm256_loadu_ps(o[i] + t);
    const __m256 d2 = _mm256_loadu_ps(e[i] + t + 1), d3 = _mm256_loadu_ps(o[i] + t + 1);
    r[i][0] = _mm256_sub_ps(d0, d2);  // d B: columns of Bᵀ's rows
    r[i][1] = _mm256_add_ps(d1, d2);
    r[i][2] = _mm256_sub_ps(d2, d1);
    r[i][3] = _mm256_sub_ps(d1, d3);
  }
  for (int j = 0; j < 4; ++j) {  // Bᵀ (d B)
    _mm256_storeu_ps(out + (0 * 4 + j) * ld, _mm256_sub_ps(r[0][j], r[2][j]));
    _mm256_storeu_ps(out + (1 * 4 + j) * ld, _mm256_add_ps(r[1][j], r[2][j]));
    _mm256_storeu_ps(out + (2 * 4 + j) * ld, _mm256_sub_ps(r[2][j], r[1][j]));
    _mm256_storeu_ps(out + (3 * 4 + j) * ld, _mm256_sub_ps(r[1][j], r[3][j]));
  }
}

// Aᵀ m A of 8 adjacent tiles: m[ξ] + t (row stride ld between positions); writes the two output rows
// y0, y1 (y1 null past the last output row), `cols` columns from the tiles' first (at most 16).
RLX_AVX2_FN void output_tiles8(const float* m, int64_t ld, int64_t t, float* y0, float* y1, int64_t cols) {
  __m256 s[2][4];
  for (int j = 0; j < 4; ++j) {
    const __m256 m0 = _mm256_loadu_ps(m + (0 * 4 + j) * ld + t), m1 = _mm256_loadu_ps(m + (1 * 4 + j) * ld + t);
    const __m256 m2 = _mm256_loadu_ps(m + (2 * 4 + j) * ld + t), m3 = _mm256_loadu_ps(m + (3 * 4 + j) * ld + t);
    s[0][j] = _mm256_add_ps(_mm256_add_ps(m0, m1), m2);
    s[1][j] = _mm256_sub_ps(_mm256_sub_ps(m1, m2), m3);
  }
  const __m256i ma = simd::tail_mask(std::min<int64_t>(cols, 8)), mb = simd::tail_mask(std::max<int64_t>(cols - 8, 0));
  for (int i = 0; i < 2; ++i) {
    float* y = i ? y1 : y0;
    if (!y) break;
    const __m256 a = _mm256_add_ps(_mm256_add_ps(s[i][0], s[i][1]), s[i][2]);  // output column 0 of each tile
    const __m256 b = _mm256_sub_ps(_mm256_sub_ps(s[i][1], s[i][2]), s[i][3]);  // column 1
    const __m256 lo = _mm256_unpacklo_ps(a, b), hi = _mm256_unpackhi_ps(a, b);
    const __m256 v0 = _mm256_permute2f128_ps(lo, hi, 0x20), v1 = _mm256_permute2f128_ps(lo, hi, 0x31);
    if (cols >= 16) {
      _mm256_storeu_ps(y, v0);
      _mm256_storeu_ps(y + 8, v1);
    } else {
      _mm256_maskstore_ps(y, ma, v0);
      _mm256_maskstore_ps(y + 8, mb, v1);
    }
  }
}
#endif

// V of tile rows [ty0, ty1) of image xn, all input channels, into panels vb (layout
// ((ξ * npan + panel) * C + c) * 16 + lane, tile q = (ty - ty0) * pitch + tx; the slots past TW hold
// the transform of the zero padding, and are never read back).
void input_block(const Geom& g, const WPlan& p, const float* xn, int64_t ty0, int64_t ty1, int64_t npan, float* vb) {
#if defined(RLX_SIMD_AVX2)
  const int64_t TW = p.TW, twp = p.pitch + 8;  // split rows: pitch + 1 read
  const int64_t rowlen = 2 * twp;
  float* row = grow(t_row, static_cast<size_t>(4 * rowlen + 8 * twp));
  float *e[4], *o[4];
  for (int i = 0; i < 4; ++i) e[i] = row + 4 * rowlen + 2 * i * twp, o[i] = e[i] + twp;
  const int64_t pan_stride = g.C * kNr, xi_stride = npan * pan_stride;
  // Lanes of the last panel past the block's tiles are zero (their columns are never read back).
  const int64_t T = (ty1 - ty0) * p.pitch;
  if (T % kNr)
    for (int64_t xi = 0; xi < 16; ++xi)
      for (int64_t c = 0; c < g.C; ++c)
        std::fill_n(vb + xi * xi_stride + (npan - 1) * pan_stride + c * kNr + T % kNr, kNr - T % kNr, 0.f);
  for (int64_t c = 0; c < g.C; ++c) {
    const float* xc = xn + c * g.H * g.W;
    for (int64_t ty = ty0; ty < ty1; ++ty) {
      for (int i = 0; i < 4; ++i) {  // padded input row 2 ty - ph + i, split into even/odd columns
        float* pr = row + i * rowlen;
        const int64_t ih = 2 * ty - g.ph + i;
        std::fill_n(pr, rowlen, 0.f);
        if (ih >= 0 && ih < g.H) {
          // element k of the padded row is input column k - pw
          const int64_t k0 = std::max<int64_t>(0, g.pw), w0 = k0 - g.pw;
          const int64_t n = std::min(g.W - w0, rowlen - k0);
          if (n > 0) std::memcpy(pr + k0, xc + ih * g.W + w0, static_cast<size_t>(n) * sizeof(float));
        }
        deinterleave2(pr, rowlen, e[i], o[i]);
      }
      for (int64_t t = 0, q = (ty - ty0) * p.pitch; t < TW; t += 8, q += 8)  // q % 8 == 0: one panel
        input_tiles8(e, o, t, vb + (q / kNr) * pan_stride + c * kNr + q % kNr, xi_stride);
    }
  }
#else
  (void)g, (void)p, (void)xn, (void)ty0, (void)ty1, (void)npan, (void)vb;
#endif
}

// Outputs of channels [o0, o0 + on) (M rows [0, on), layout (ξ * osb + row) * tpan + tile) for tile
// rows [ty0, ty1) of image n.
void output_block(const Geom& g, const WPlan& p, const float* mb, int64_t osb, int64_t tpan, int64_t o0, int64_t on,
                  int64_t ty0, int64_t ty1, float* yn) {
#if defined(RLX_SIMD_AVX2)
  const int64_t P = g.P(), ld = osb * tpan;
  for (int64_t r = 0; r < on; ++r) {
    const float* m = mb + r * tpan;
    float* yc = yn + (o0 + r) * P;
    for (int64_t ty = ty0; ty < ty1; ++ty) {
      const int64_t q = (ty - ty0) * p.pitch, oh = 2 * ty;
      float* y0 = yc + oh * g.OW;
      float* y1 = oh + 1 < g.OH ? y0 + g.OW : nullptr;
      for (int64_t tx = 0; tx < p.TW; tx += 8)
        output_tiles8(m, ld, q + tx, y0 + 2 * tx, y1 ? y1 + 2 * tx : nullptr, std::min<int64_t>(16, g.OW - 2 * tx));
    }
  }
#else
  (void)g, (void)p, (void)mb, (void)osb, (void)tpan, (void)o0, (void)on, (void)ty0, (void)ty1, (void)yn;
#endif
}

}  // namespace

bool winograd_fits(const Geom& g) {
  if (!enabled().load(std::memory_order_relaxed) || !simd::cpu_has_avx2_fma() || family().isa == CpuIsa::Generic) return false;
  return g.KH == 3 && g.KW == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && g.G == 1 && g.C >= 32 &&
         g.O >= 16 && g.OH >= 4 && g.OW >= 4 && g.ph <= 2 && g.pw <= 2 && ceil_div(g.OW, 2) >= 7;
}

int64_t winograd_pack_size(const Geom& g) { return 16 * round_up(g.O, family().mr) * g.C; }

void winograd_pack(const Geom& g, const float* w, float* dst) {
  const int64_t mr = family().mr, rows = ceil_div(g.O, mr), C = g.C;
  std::fill_n(dst, winograd_pack_size(g), 0.f);
  parallel_for(g.O, 8, [&](int64_t a, int64_t b) {
    for (int64_t o = a; o < b; ++o)
      for (int64_t c = 0; c < C; ++c) {
        const float* k = w + (o * C + c) * 9;
        float t[4][3];  // G g
        for (int j = 0; j < 3; ++j) {
          const float g0 = k[j], g1 = k[3 + j], g2 = k[6 + j];
          t[0][j] = g0, t[1][j] = 0.5f * (g0 + g1 + g2), t[2][j] = 0.5f * (g0 - g1 + g2), t[3][j] = g2;
        }
        for (int i = 0; i < 4; ++i) {  // (G g) Gᵀ
          const float u[4] = {t[i][0], 0.5f * (t[i][0] + t[i][1] + t[i][2]), 0.5f * (t[i][0] - t[i][1] + t[i][2]),
                              t[i][2]};
          for (int j = 0; j < 4; ++j) dst[(((i * 4 + j) * rows + o / mr) * C + c) * mr + o % mr] = u[j];
        }
      }
  });
}

void run_winograd(const Geom& g, const float* x, const float* u, float* y, const ChannelEpi* epi) {
  const auto& ks = family();
  const WPlan p = wplan(g);
  const int64_t mr = p.mr, rows = ceil_div(g.O, mr), C = g.C, P = g.P();
  const auto uk = ks.k1[1][mr];
  const int64_t items = g.N * p.ntb * p.nog;
  parallel_for(items, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t it = i0; it < i1; ++it) {
      const int64_t n = it / (p.ntb * p.nog), b = it / p.nog % p.ntb, grp = it % p.nog;
      const int64_t ty0 = b * p.rb, ty1 = std::min(p.TH, ty0 + p.rb);
      const int64_t T = (ty1 - ty0) * p.pitch, npan = ceil_div(T, kNr), tpan = npan * kNr;
      float* vb = grow(t_v, static_cast<size_t>(16 * tpan * C));
      input_block(g, p, x + n * C * g.H * g.W, ty0, ty1, npan, vb);
      float* mb = grow(t_m, static_cast<size_t>(16 * p.osb * tpan + 8));  // + the last 8-tile load's overhang
      const int64_t og0 = grp * p.og, og1 = std::min(g.O, og0 + p.og);
      for (int64_t o0 = og0; o0 < og1; o0 += p.osb) {
        const int64_t on = std::min(p.osb, og1 - o0);
        for (int64_t xi = 0; xi < 16; ++xi) {
          const float* v = vb + xi * tpan * C;
          float* m = mb + xi * p.osb * tpan;
          for (int64_t r = 0; r < on; r += mr) {  // micro rows of U (zero rows past O)
            const float* ur = u + ((xi * rows + (o0 + r) / mr) * C) * mr;
            for (int64_t pn = 0; pn < npan; ++pn)
              uk(C, ur, mr, v + pn * C * kNr, m + r * tpan + pn * kNr, tpan, static_cast<int>(kNr), false, nullptr, 0,
                 nullptr, 0, nullptr);
          }
        }
        float* yn = y + n * g.O * P;
        output_block(g, p, mb, p.osb, tpan, o0, on, ty0, ty1, yn);
        if (epi) {
          const int64_t p0 = 2 * ty0 * g.OW, pn = (std::min(2 * ty1, g.OH) - 2 * ty0) * g.OW;
          const int64_t off = (n * g.O + o0) * P + p0;
          epi_rows(*epi, y + off, P, epi->res ? epi->res + off : nullptr, o0, 0, on, pn);
        }
      }
    }
  });
}

}  // namespace rlx::cpu::conv_detail

namespace rlx::cpu {
bool conv_set_winograd(bool on) { return conv_detail::enabled().exchange(on); }
}  // namespace rlx::cpu
