// The AVX-512 VNNI tiles of the int8 GEMM (qgemm.h): vpdpbusd adds four u8 x s8 products per s32
// lane (no intermediate saturation). A tile is up to 8 rows x 32 columns (two 16-column panels):
// 16 accumulators, 2 B vectors, 1 broadcast of four A bytes.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/qgemm.h"
#include "backends/cpu/qgemm_panels.h"

namespace rlx::cpu::qgemm {

#if defined(__x86_64__)

namespace {

constexpr int kMr = 8;

template <int MR>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void tile(const uint8_t* A, int64_t lda, const int8_t* B0,
                                                                  const int8_t* B1, int64_t kq, int32_t* out) {
  __m512i acc[MR][2];
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
  for (int64_t q = 0; q < kq; ++q) {
    __m512i b0 = _mm512_loadu_si512(B0 + q * 64);
    __m512i b1 = _mm512_loadu_si512(B1 + q * 64);
    for (int r = 0; r < MR; ++r) {
      int32_t quad;
      std::memcpy(&quad, A + r * lda + 4 * q, 4);
      __m512i av = _mm512_set1_epi32(quad);
      acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], av, b0);
      acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], av, b1);
    }
  }
  for (int r = 0; r < MR; ++r) {
    _mm512_storeu_si512(out + r * 32, acc[r][0]);
    _mm512_storeu_si512(out + r * 32 + 16, acc[r][1]);
  }
}

using TileFn = void (*)(const uint8_t*, int64_t, const int8_t*, const int8_t*, int64_t, int32_t*);
constexpr TileFn kTiles[kMr + 1] = {nullptr, tile<1>, tile<2>, tile<3>, tile<4>, tile<5>, tile<6>, tile<7>, tile<8>};

}  // namespace

void gemm_vnni(const PackedA& a, const PackedB& b, int64_t m0, int64_t m1, int32_t* C, int64_t ldc) {
  const int64_t kq = a.Kp / 4;
  gemm_panels<kMr, 16>(a.u8.data(), a.Kp, b.s8.data(), kq * 64, b.Np / 16, kq, b.N, kTiles, m0, m1, C, ldc);
}

#else

void gemm_vnni(const PackedA&, const PackedB&, int64_t, int64_t, int32_t*, int64_t) {}

#endif

}  // namespace rlx::cpu::qgemm
