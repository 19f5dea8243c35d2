// The AVX-512 tiles of the packed f32 GEMM (gemm_avx2.h; the loop nest is gemm_avx2.cpp's). Same
// packed-B format (16-column k-major panels): a tile spans two adjacent panels, 32 columns = 2 zmm per
// row, and up to 12 rows (24 accumulators, one A broadcast per row and k, 2 B loads per k), or one
// panel (16 columns) where only one is left. The epilogue (bias, residual, GELU/ReLU, mask, other
// activations) runs on the finished tile with AVX-512 masks for partial column ranges. Each element
// is one FMA chain over k in order, as in the AVX2 tile, so with the same K blocking the two give the
// same bits.
#include <algorithm>
#include <cstring>
#include <utility>

#include "backends/cpu/gemm_avx2_internal.h"
#include "backends/cpu/simd_avx2.h"
#include "backends/cpu/simd_avx512.h"

#if defined(RLX_GEMM_X86)

namespace rlx::cpu::gemm_detail {

namespace {

constexpr int kNr = static_cast<int>(kGemmNr);
constexpr int kMr = 12;  // rows of a full tile: 12 x 2 accumulators + 2 B vectors + 1 broadcast <= 32 zmm

// Finishes rows [0, mr) x columns [0, nr) of a tile held in t (row stride kLd): + C (acc), bias,
// residual, activation, mask, with masked loads and stores for a partial column range.
constexpr int kLd = 2 * kNr;
RLX_AVX512_FN void finish_tile(const float* t, int mr, int nr, float* C, int64_t ldc, bool acc,
                               const GemmEpi* epi, int64_t col, const float* res, int64_t ldr,
                               const float* msk) {
  const float* bias = epi && epi->bias ? epi->bias + col : nullptr;
  const GemmAct act = epi ? epi->act : GemmAct::None;
  const bool other_act = act != GemmAct::None && act != GemmAct::Gelu && act != GemmAct::Relu;
  const int64_t ldm = epi ? epi->ldm : 0;
  const __m512 zero = _mm512_setzero_ps();
  for (int r = 0; r < mr; ++r) {
    float* c = C + r * ldc;
    for (int q = 0; q < nr; q += kNr) {
      const __mmask16 m = simd::tail_mask16(nr - q);
      __m512 v = _mm512_load_ps(t + r * kLd + q);
      if (acc) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, c + q));
      if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias + q));
      if (res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, res + r * ldr + q));
      if (act == GemmAct::Gelu) v = simd::gelu16(v);
      if (act == GemmAct::Relu)
        v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), zero);  // NaN kept
      if (other_act) {  // tanh-GELU, SiLU: apply_act (vmath.h) on the stored values
        _mm512_mask_storeu_ps(c + q, m, v);
        apply_act(c + q, std::min(nr - q, kNr), act);
        v = _mm512_maskz_loadu_ps(m, c + q);
      }
      if (msk)
        v = _mm512_maskz_mov_ps(
            _mm512_cmp_ps_mask(_mm512_maskz_loadu_ps(m, msk + r * ldm + q), zero, _CMP_GT_OQ), v);
      _mm512_mask_storeu_ps(c + q, m, v);
    }
  }
}

// MR rows x NP panels (16 or 32 columns). Accumulators live in a fully unrolled array, which GCC keeps
// in zmm registers; a tile without epilogue leaves straight from them, else through finish_tile.
template <int MR, int NP, bool PA>
RLX_AVX512_FN void ukernel_avx512(int64_t kc, const float* A, int64_t lda, const float* B, int64_t bstride,
                                  float* C, int64_t ldc, int nr, bool acc, const GemmEpi* epi, int64_t col,
                                  const float* res, int64_t ldr, const float* msk) {
  __m512 c[MR][NP];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p) c[r][p] = _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {  // the tile's C lines arrive while the k loop runs
    _mm_prefetch(reinterpret_cast<const char*>(C + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(C + r * ldc + NP * kNr - 1), _MM_HINT_T0);
  }
  if (res)  // and the residual's, read once from memory (a strided stream the hardware misses)
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(res + r * ldr), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(res + r * ldr + NP * kNr - 1), _MM_HINT_T0);
    }
  const float* B1 = B + bstride;
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_loadu_ps(B + k * kNr);
    const __m512 b1 = NP > 1 ? _mm512_loadu_ps(B1 + k * kNr) : b0;
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 a = _mm512_set1_ps(PA ? A[k * lda + r] : A[r * lda + k]);
      c[r][0] = _mm512_fmadd_ps(a, b0, c[r][0]);
      if constexpr (NP > 1) c[r][1] = _mm512_fmadd_ps(a, b1, c[r][1]);
    }
  }
  if (!epi && nr == NP * kNr) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
      for (int p = 0; p < NP; ++p) {
        float* cp = C + r * ldc + p * kNr;
        _mm512_storeu_ps(cp, acc ? _mm512_add_ps(c[r][p], _mm512_loadu_ps(cp)) : c[r][p]);
      }
    return;
  }
  alignas(64) float t[MR][kLd];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p) _mm512_store_ps(t[r] + p * kNr, c[r][p]);
  finish_tile(t[0], MR, nr, C, ldc, acc, epi, col, res, ldr, msk);
}

template <int MR, bool PA>
RLX_AVX512_FN void k16(int64_t kc, const float* A, int64_t lda, const float* B, float* C, int64_t ldc, int nr,
                       bool acc, const GemmEpi* epi, int64_t col, const float* res, int64_t ldr,
                       const float* msk) {
  ukernel_avx512<MR, 1, PA>(kc, A, lda, B, 0, C, ldc, nr, acc, epi, col, res, ldr, msk);
}

// 4 x 4 transposes: rows s[i * ls] to rows d[j * ld] (8 x 8: simd::transpose8x8).
RLX_AVX512_FN inline void transpose4x4(const float* s, int64_t ls, float* d, int64_t ld) {
  __m128 r0 = _mm_loadu_ps(s), r1 = _mm_loadu_ps(s + ls), r2 = _mm_loadu_ps(s + 2 * ls),
         r3 = _mm_loadu_ps(s + 3 * ls);
  _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
  _mm_storeu_ps(d, r0);
  _mm_storeu_ps(d + ld, r1);
  _mm_storeu_ps(d + 2 * ld, r2);
  _mm_storeu_ps(d + 3 * ld, r3);
}

// Copies rows [0, MR) x k [0, kc) of a row-major A into a k-major micro-panel d[k * MR + r]: 8 k at a
// time, rows in groups of 8 and 4.
template <int MR>
RLX_AVX512_FN void pack_a_rows(const float* A, int64_t lda, int64_t kc, float* d) {
  int64_t k = 0;
  for (; k + 8 <= kc; k += 8) {
    int r = 0;
    for (; r + 8 <= MR; r += 8) simd::transpose8x8(A + r * lda + k, lda, d + k * MR + r, MR);
    for (; r + 4 <= MR; r += 4) {
      transpose4x4(A + r * lda + k, lda, d + k * MR + r, MR);
      transpose4x4(A + r * lda + k + 4, lda, d + (k + 4) * MR + r, MR);
    }
    for (; r < MR; ++r)
      for (int64_t kk = k; kk < k + 8; ++kk) d[kk * MR + r] = A[r * lda + kk];
  }
  for (; k < kc; ++k)
    for (int r = 0; r < MR; ++r) d[k * MR + r] = A[r * lda + k];
}

template <bool PA, int... R>
void fill_rows(GemmKernels& t, std::integer_sequence<int, R...>) {
  ((t.k1[PA][R + 1] = k16<R + 1, PA>, t.k2[PA][R + 1] = ukernel_avx512<R + 1, 2, PA>), ...);
}

}  // namespace

void fill_avx512_kernels(GemmKernels& t) {
  t.isa = CpuIsa::Avx512;
  t.mr = kMr;
  // The AVX2 family's K and row blocking: the same sums, and as fast here as kc 384-1536, mc 36-144.
  t.kc = 768;
  t.mc = 72;
  fill_rows<false>(t, std::make_integer_sequence<int, kMr>{});
  fill_rows<true>(t, std::make_integer_sequence<int, kMr>{});
  t.pack_a_rows = pack_a_rows<kMr>;
  t.avx2 = true;
}

}  // namespace rlx::cpu::gemm_detail

#endif
