// The narrow path of gemm_f32 (gemm_avx2.h), for narrow op(B); gemm_avx2.cpp has the
// packed 6x16 path and the dispatch, gemm_avx2_internal.h what the two share.
// Narrow op(B): N <= 12 columns (a classifier layer, N = 10). The 6x16 tile would
// leave 6 of 16 lanes idle at N = 10 and pack all of A or B for a few FLOPs per element, so two
// kernels that read both operands in place and keep every lane busy:
//  - trans_a (Xᵀ·dY, the weight gradient): outer products along op(A)'s rows, which are contiguous in
//    the stored A: 16 rows of C x up to 6 columns (N = 10: two passes of 5), 2 A loads and 5
//    broadcasts of op(B) per 10 FMAs; row tails 8 rows x N columns with a masked A load.
//  - otherwise (X·W), when K >= 256: dot products along k, which is contiguous in A's rows: 2 rows x
//    up to 6 columns per pass (12 accumulators), against op(B) transposed to [N,K] (in place when
//    trans_b, else a copy of N x K floats). With a shorter K the horizontal sums cost more than the
//    idle lanes of the 6x16 tile.
// Each finished block of whole rows goes through the same epilogue as the packed path.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <string>
#include <utility>

#include "backends/cpu/gemm_avx2_internal.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/simd_avx2.h"
#include "runtime/env.h"

namespace rlx::cpu::gemm_detail {

#if defined(RLX_GEMM_X86)
// RLX_GEMM_NARROW=0 sends N <= 12 through the 6x16 path too (for A/B timing).
bool narrow_enabled() {
  static const bool on = env_on("RLX_GEMM_NARROW", true);
  return on;
}

namespace {

// rows [0, mr) x [0, N) of C from t (row stride kNarrowN): alpha, + C (acc), bias, residual, act.
void narrow_store(const float* t, int64_t mr, int64_t N, float* C, int64_t ldc, bool acc, const GemmEpi* epi,
                  const float* res, int64_t ldr, const float* msk, float alpha) {
  const float* bias = epi ? epi->bias : nullptr;
  for (int64_t r = 0; r < mr; ++r) {
    float* c = C + r * ldc;
    for (int64_t j = 0; j < N; ++j) {
      float v = alpha * t[r * kNarrowN + j] + (acc ? c[j] : 0.f);
      if (bias) v += bias[j];
      if (res) v += res[r * ldr + j];
      c[j] = v;
    }
    if (epi && epi->act != GemmAct::None) apply_act(c, N, epi->act);
    if (msk)
      for (int64_t j = 0; j < N; ++j) c[j] = msk[r * epi->ldm + j] > 0.f ? c[j] : 0.f;
  }
}

using simd::hsum8;
using simd::tail_mask;

// C rows [0, mr) (mr <= 8) x N columns of op(A)·op(B), op(A) = Aᵀ with A stored [K, M] (A points at
// column i0), into t (row stride kNarrowN). op(B)(k, n) is B[k * ldb + n], or B[n * ldb + k] with tb.
template <int NN>
__attribute__((target("avx2,fma"))) void narrow_ta_tile(int64_t K, const float* A, int64_t lda, const float* B,
                                                        int64_t ldb, bool tb, int64_t mr, float* t) {
  __m256 acc[NN];
#pragma GCC unroll 12
  for (int n = 0; n < NN; ++n) acc[n] = _mm256_setzero_ps();
  const int64_t sk = tb ? 1 : ldb, sn = tb ? ldb : 1;  // op(B)(k, n) = B[k * sk + n * sn]
  if (mr == 8) {
    for (int64_t k = 0; k < K; ++k) {
      const __m256 a = _mm256_loadu_ps(A + k * lda);
      const float* b = B + k * sk;
#pragma GCC unroll 12
      for (int n = 0; n < NN; ++n) acc[n] = _mm256_fmadd_ps(a, _mm256_broadcast_ss(b + n * sn), acc[n]);
    }
  } else {
    const __m256i m = tail_mask(mr);
    for (int64_t k = 0; k < K; ++k) {
      const __m256 a = _mm256_maskload_ps(A + k * lda, m);
      const float* b = B + k * sk;
#pragma GCC unroll 12
      for (int n = 0; n < NN; ++n) acc[n] = _mm256_fmadd_ps(a, _mm256_broadcast_ss(b + n * sn), acc[n]);
    }
  }
  alignas(32) float tmp[NN][8];
#pragma GCC unroll 12
  for (int n = 0; n < NN; ++n) _mm256_store_ps(tmp[n], acc[n]);
  for (int64_t r = 0; r < mr; ++r)
    for (int n = 0; n < NN; ++n) t[r * kNarrowN + n] = tmp[n][r];
}

// 16 full rows of C x G columns (G <= 6: 12 accumulators), the same product as narrow_ta_tile: two
// A loads and G broadcasts per 2G FMAs, so FMA-bound; N = 10 takes two passes of 5 columns over the
// same 16-float strip of A (the second from L1/L2). Results to t (row stride kNarrowN), columns [0, G).
template <int G>
__attribute__((target("avx2,fma"))) void narrow_ta_tile16(int64_t K, const float* A, int64_t lda, const float* B,
                                                          int64_t sk, int64_t sn, float* t) {
  __m256 lo[G], hi[G];
#pragma GCC unroll 6
  for (int n = 0; n < G; ++n) lo[n] = hi[n] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const __m256 a0 = _mm256_loadu_ps(A + k * lda), a1 = _mm256_loadu_ps(A + k * lda + 8);
    const float* b = B + k * sk;
#pragma GCC unroll 6
    for (int n = 0; n < G; ++n) {
      const __m256 bn = _mm256_broadcast_ss(b + n * sn);
      lo[n] = _mm256_fmadd_ps(a0, bn, lo[n]);
      hi[n] = _mm256_fmadd_ps(a1, bn, hi[n]);
    }
  }
  alignas(32) float tmp[G][16];
#pragma GCC unroll 6
  for (int n = 0; n < G; ++n) {
    _mm256_store_ps(tmp[n], lo[n]);
    _mm256_store_ps(tmp[n] + 8, hi[n]);
  }
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < G; ++n) t[r * kNarrowN + n] = tmp[n][r];
}

// C rows [0, MR) x columns [0, G) of A[MR, K] (rows contiguous, stride lda) · Btᵀ, Bt [G, K] (stride
// ldbt): dot products along k, 8 at a time, the tail masked. Results to t (row stride kNarrowN).
template <int MR, int G>
__attribute__((target("avx2,fma"))) void narrow_dot_tile(int64_t K, const float* A, int64_t lda, const float* Bt,
                                                         int64_t ldbt, float* t) {
  __m256 acc[MR][G];
#pragma GCC unroll 12
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 12
    for (int g = 0; g < G; ++g) acc[r][g] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    __m256 a[MR];
#pragma GCC unroll 12
    for (int r = 0; r < MR; ++r) a[r] = _mm256_loadu_ps(A + r * lda + k);
#pragma GCC unroll 12
    for (int g = 0; g < G; ++g) {
      const __m256 b = _mm256_loadu_ps(Bt + g * ldbt + k);
#pragma GCC unroll 12
      for (int r = 0; r < MR; ++r) acc[r][g] = _mm256_fmadd_ps(a[r], b, acc[r][g]);
    }
  }
  if (k < K) {
    const __m256i m = tail_mask(K - k);
    __m256 a[MR];
#pragma GCC unroll 12
    for (int r = 0; r < MR; ++r) a[r] = _mm256_maskload_ps(A + r * lda + k, m);
#pragma GCC unroll 12
    for (int g = 0; g < G; ++g) {
      const __m256 b = _mm256_maskload_ps(Bt + g * ldbt + k, m);
#pragma GCC unroll 12
      for (int r = 0; r < MR; ++r) acc[r][g] = _mm256_fmadd_ps(a[r], b, acc[r][g]);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 12
    for (int g = 0; g < G; ++g) t[r * kNarrowN + g] = hsum8(acc[r][g]);
}

using NarrowTa = void (*)(int64_t, const float*, int64_t, const float*, int64_t, bool, int64_t, float*);
using NarrowDot = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*);
using NarrowTa16 = void (*)(int64_t, const float*, int64_t, const float*, int64_t, int64_t, float*);

template <int... I>
constexpr std::array<NarrowTa, sizeof...(I)> ta_table(std::integer_sequence<int, I...>) {
  return {narrow_ta_tile<I + 1>...};
}
template <int... I>
constexpr std::array<NarrowTa16, sizeof...(I)> ta16_table(std::integer_sequence<int, I...>) {
  return {narrow_ta_tile16<I + 1>...};
}
template <int MR, int... I>
constexpr std::array<NarrowDot, sizeof...(I)> dot_table(std::integer_sequence<int, I...>) {
  return {narrow_dot_tile<MR, I + 1>...};
}

// Rows [r0, r1) of C for the narrow path (see above); Bt is op(B) as [N, K] rows (stride ldbt) for
// the dot kernel, unused with trans_a.
void narrow_rows(bool trans_a, bool trans_b, int64_t r0, int64_t r1, int64_t N, int64_t K, const float* A, int64_t lda,
                 const float* B, int64_t ldb, const float* Bt, int64_t ldbt, float* C, int64_t ldc, bool acc,
                 const GemmEpi* epi, float alpha) {
  static constexpr auto ta = ta_table(std::make_integer_sequence<int, kNarrowN>{});
  static constexpr auto dot2 = dot_table<2>(std::make_integer_sequence<int, 6>{});
  static constexpr auto dot1 = dot_table<1>(std::make_integer_sequence<int, 6>{});
  static constexpr auto ta16 = ta16_table(std::make_integer_sequence<int, 6>{});
  alignas(32) float t[16 * kNarrowN];
  const int64_t ldr = epi ? epi->ldr : 0;
  const int64_t step = trans_a ? 16 : 2;
  const int64_t groups = (N + 5) / 6, gw = (N + groups - 1) / groups;  // N = 10: two passes of 5 columns
  for (int64_t i = r0; i < r1; i += step) {
    const int64_t mr = std::min(step, r1 - i);
    if (trans_a && mr == 16) {
      const int64_t sk = trans_b ? 1 : ldb, sn = trans_b ? ldb : 1;
      for (int64_t g0 = 0; g0 < N; g0 += gw)
        ta16[std::min(gw, N - g0) - 1](K, A + i, lda, B + g0 * sn, sk, sn, t + g0);
    } else if (trans_a) {
      for (int64_t i8 = 0; i8 < mr; i8 += 8)
        ta[N - 1](K, A + i + i8, lda, B, ldb, trans_b, std::min<int64_t>(8, mr - i8), t + i8 * kNarrowN);
    } else {
      for (int64_t g0 = 0; g0 < N; g0 += gw) {
        const int64_t g = std::min(gw, N - g0);
        (mr == 2 ? dot2 : dot1)[g - 1](K, A + i * lda, lda, Bt + g0 * ldbt, ldbt, t + g0);
      }
    }
    const float* res = epi && epi->residual ? epi->residual + i * ldr : nullptr;
    const float* msk = epi && epi->mask ? epi->mask + i * epi->ldm : nullptr;
    narrow_store(t, mr, N, C + i * ldc, ldc, acc, epi, res, ldr, msk, alpha);
  }
  if (epi && epi->rows_done) epi->rows_done(epi->ctx, epi->row_base + r0, epi->row_base + r1);
}

}  // namespace

// The narrow path of gemm_f32 (AVX2 only; N <= kNarrowN, K > 0). Rows are split over the pool.
void gemm_narrow(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float* C, int64_t ldc, bool acc, bool parallel, const GemmEpi* epi,
                 float alpha, float* bbuf) {
  if (epi && epi->colsum && !trans_b) column_sums(B, ldb, K, N, epi->colsum);  // N <= 12: cheap
  const float* Bt = B;
  int64_t ldbt = ldb;
  if (!trans_a && !trans_b) {  // op(B) = B [K, N] -> Bt [N, K]
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) bbuf[n * K + k] = B[k * ldb + n];
    Bt = bbuf, ldbt = K;
  }
  const double flops = 2.0 * M * N * K;
  if (!parallel || num_threads() == 1 || flops < kParMinFlops || M < 32)
    return narrow_rows(trans_a, trans_b, 0, M, N, K, A, lda, B, ldb, Bt, ldbt, C, ldc, acc, epi, alpha);
  // Blocks of 16-row multiples, about 4 per thread.
  const int64_t blk = std::max<int64_t>(16, (M / (4 * num_threads()) + 15) / 16 * 16), nb = (M + blk - 1) / blk;
  parallel_for(nb, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = b * blk, r1 = std::min(M, r0 + blk);
      GemmEpi e;
      const GemmEpi* ep = nullptr;
      if (epi) {
        e = *epi;
        if (e.residual) e.residual += r0 * e.ldr;
        if (e.mask) e.mask += r0 * e.ldm;
        e.row_base += r0;
        ep = &e;
      }
      narrow_rows(trans_a, trans_b, 0, r1 - r0, N, K, trans_a ? A + r0 : A + r0 * lda, lda, B, ldb, Bt, ldbt,
                  C + r0 * ldc, ldc, acc, ep, alpha);
    }
  });
}
#endif

}  // namespace rlx::cpu::gemm_detail
