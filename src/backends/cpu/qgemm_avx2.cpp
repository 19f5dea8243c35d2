// The AVX2 tiles of the int8 GEMM (qgemm.h), A as u8 rows in both:
//  * u8 x s8: B in k-quads of 8-column panels; vpmaddubsw multiplies a broadcast of four A bytes by
//    32 B bytes and adds neighbouring products into s16 (saturating), vpmaddwd by ones adds those
//    pairs into s32 lanes. Exact when avx2_u8s8_exact() holds (no pair sum leaves s16). A tile is up
//    to 6 rows x 16 columns (two panels): 12 accumulators, 2 B vectors, the broadcast, ones and a
//    temporary (one more than the 16 ymm registers: the compiler keeps ones or a B vector in memory).
//  * s16 (the exact fallback for 8-bit activations x 8-bit weights): both operands as s16, B in
//    k-pairs; vpmaddwd adds two products per s32 lane exactly (|255 * -128| * 2 < 2^31). Up to 6
//    rows x 16 columns: 12 accumulators, 2 B vectors, 1 broadcast of a zero-extended A pair.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/qgemm.h"
#include "backends/cpu/qgemm_panels.h"

namespace rlx::cpu::qgemm {

#if defined(__x86_64__)

namespace {

constexpr int kMrU8 = 6, kMrS16 = 6;

template <int MR>
__attribute__((target("avx2"))) void tile_u8s8(const uint8_t* A, int64_t lda, const int8_t* B0, const int8_t* B1,
                                               int64_t kq, int32_t* out /* [MR][16] */) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[MR][2];
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int64_t q = 0; q < kq; ++q) {
    __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(B0 + q * 32));
    __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(B1 + q * 32));
    for (int r = 0; r < MR; ++r) {
      int32_t quad;
      std::memcpy(&quad, A + r * lda + 4 * q, 4);
      __m256i a = _mm256_set1_epi32(quad);
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b0), ones));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b1), ones));
    }
  }
  for (int r = 0; r < MR; ++r) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * 16), acc[r][0]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * 16 + 8), acc[r][1]);
  }
}

template <int MR>
__attribute__((target("avx2"))) void tile_s16(const uint8_t* A, int64_t lda, const int16_t* B0, const int16_t* B1,
                                              int64_t kq, int32_t* out /* [MR][16] */) {
  __m256i acc[MR][2];
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int64_t q = 0; q < kq; ++q) {
    __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(B0 + q * 16));
    __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(B1 + q * 16));
    for (int r = 0; r < MR; ++r) {
      const uint8_t* p = A + r * lda + 2 * q;
      __m256i a = _mm256_set1_epi32(static_cast<int32_t>(p[0] | (static_cast<uint32_t>(p[1]) << 16)));
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(a, b0));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(a, b1));
    }
  }
  for (int r = 0; r < MR; ++r) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * 16), acc[r][0]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * 16 + 8), acc[r][1]);
  }
}

using TileU8 = void (*)(const uint8_t*, int64_t, const int8_t*, const int8_t*, int64_t, int32_t*);
using TileS16 = void (*)(const uint8_t*, int64_t, const int16_t*, const int16_t*, int64_t, int32_t*);
constexpr TileU8 kTilesU8[kMrU8 + 1] = {nullptr, tile_u8s8<1>, tile_u8s8<2>, tile_u8s8<3>, tile_u8s8<4>, tile_u8s8<5>, tile_u8s8<6>};
constexpr TileS16 kTilesS16[kMrS16 + 1] = {nullptr, tile_s16<1>, tile_s16<2>, tile_s16<3>, tile_s16<4>, tile_s16<5>, tile_s16<6>};

}  // namespace

void gemm_avx2(const PackedA& a, const PackedB& b, int64_t m0, int64_t m1, int32_t* C, int64_t ldc) {
  if (avx2_u8s8_exact(a, b)) {
    const int64_t kq = a.Kp / 4;
    gemm_panels<kMrU8, 8>(a.u8.data(), a.Kp, b.s8.data(), kq * 32, b.Np / 8, kq, b.N, kTilesU8, m0, m1, C, ldc);
  } else {
    const int64_t kq = a.Kp / 2;
    gemm_panels<kMrS16, 8>(a.u8.data(), a.Kp, b.s16.data(), kq * 16, b.Np / 8, kq, b.N, kTilesS16, m0, m1, C, ldc);
  }
}

#else

void gemm_avx2(const PackedA&, const PackedB&, int64_t, int64_t, int32_t*, int64_t) {}

#endif

}  // namespace rlx::cpu::qgemm
