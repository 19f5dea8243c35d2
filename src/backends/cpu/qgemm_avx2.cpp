// The AVX2 tiles of the int8 GEMM (qgemm.h): both operands held as s16 (A zero-extended u8, B
// sign-extended s8); vpmaddwd multiplies pairs of k and adds them into s32 lanes exactly
// (|255 * -128| * 2 < 2^31), where vpmaddubsw's s16 pair sums would saturate. A tile is up to 6 rows
// x 16 columns (two 8-column panels): 12 accumulators, 2 B vectors, 1 broadcast.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/qgemm.h"

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
  const int64_t kq = a.Kp / 2, panel = kq * 16, panels = b.Np / 8;
  alignas(32) int32_t out[kMr * 16];
  for (int64_t m = m0; m < m1; m += kMr) {
    int mr = static_cast<int>(std::min<int64_t>(kMr, m1 - m));
    const uint16_t* A = a.u16.data() + m * a.Kp;
    for (int64_t p = 0; p < panels; p += 2) {
      const int16_t* B0 = b.s16.data() + p * panel;
      const int16_t* B1 = p + 1 < panels ? B0 + panel : B0;  // an odd last panel: computed twice, half kept
      kTiles[mr](A, a.Kp, B0, B1, kq, out);
      int64_t c0 = p * 8, nc = std::min<int64_t>(16, b.N - c0);
      if (p + 1 >= panels) nc = std::min<int64_t>(nc, 8);
      for (int r = 0; r < mr; ++r) std::memcpy(C + (m - m0 + r) * ldc + c0, out + r * 16, static_cast<size_t>(nc) * 4);
    }
  }
}

#else

void gemm_avx2(const PackedA&, const PackedB&, int64_t, int64_t, int32_t*, int64_t) {}

#endif

}  // namespace rlx::cpu::qgemm
