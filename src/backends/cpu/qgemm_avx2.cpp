// The AVX2 tiles of the int8 GEMM (qgemm.h): both operands held as s16 (A zero-extended u8, B
// sign-extended s8); vpmaddwd multiplies pairs of k and adds them into s32 lanes exactly
// (|255 * -128| * 2 < 2^31), where vpmaddubsw's s16 pair sums would saturate. A tile is up to 6 rows
// x 16 columns (two 8-column panels): 12 accumulators, 2 B vectors, 1 broadcast.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/qgemm.h"
#include "backends/cpu/qgemm_panels.h"

namespace rlx::cpu::qgemm {

#if defined(__x86_64__)

namespace {

constexpr int kMr = 6;

template <int MR>
__attribute__((target("avx2"))) void tile(const uint16_t* A, int64_t lda, const int16_t* B0, const int16_t* B1,
                                          int64_t kq, int32_t* out /* [MR][16] */) {
  __m256i acc[MR][2];
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int64_t q = 0; q < kq; ++q) {
    __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(B0 + q * 16));
    __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(B1 + q * 16));
    for (int r = 0; r < MR; ++r) {
      int32_t pair;
      std::memcpy(&pair, A + r * lda + 2 * q, 4);
      __m256i a = _mm256_set1_epi32(pair);
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(a, b0));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(a, b1));
    }
  }
  for (int r = 0; r < MR; ++r) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * 16), acc[r][0]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * 16 + 8), acc[r][1]);
  }
}

using TileFn = void (*)(const uint16_t*, int64_t, const int16_t*, const int16_t*, int64_t, int32_t*);
constexpr TileFn kTiles[kMr + 1] = {nullptr, tile<1>, tile<2>, tile<3>, tile<4>, tile<5>, tile<6>};

}  // namespace

void gemm_avx2(const PackedA& a, const PackedB& b, int64_t m0, int64_t m1, int32_t* C, int64_t ldc) {
  const int64_t kq = a.Kp / 2;
  gemm_panels<kMr, 8>(a.u16.data(), a.Kp, b.s16.data(), kq * 16, b.Np / 8, kq, b.N, kTiles, m0, m1, C, ldc);
}

#else

void gemm_avx2(const PackedA&, const PackedB&, int64_t, int64_t, int32_t*, int64_t) {}

#endif

}  // namespace rlx::cpu::qgemm
