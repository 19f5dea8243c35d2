// The 16-lane AVX-512 math of simd_avx512.h (the AVX-512 GEMM tile's GELU epilogue): exp16 is exp8
// (simd_avx2.h) lane for lane over the whole range and at the special values, and gelu16 is within
// 5e-7 of a float64 erf-GELU (absolute, relative for |x| > 1).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backends/cpu/isa.h"
#include "backends/cpu/simd_avx2.h"
#include "backends/cpu/simd_avx512.h"

#if defined(RLX_SIMD_AVX512) && defined(RLX_SIMD_AVX2)
namespace {

bool have_avx512() { return rlx::cpu::cpu_isa_host() >= rlx::cpu::CpuIsa::Avx512; }

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

RLX_AVX512_FN void exp16_of(const float* x, float* y) {
  _mm512_storeu_ps(y, rlx::cpu::simd::exp16(_mm512_loadu_ps(x)));
}
RLX_AVX512_FN void gelu16_of(const float* x, float* y) {
  _mm512_storeu_ps(y, rlx::cpu::simd::gelu16(_mm512_loadu_ps(x)));
}
RLX_AVX2_FN void exp8_of(const float* x, float* y) {
  _mm256_storeu_ps(y, rlx::cpu::simd::exp8(_mm256_loadu_ps(x)));
}

#define RLX_NEED_AVX512()                                                                                    \
  if (!have_avx512())                                                                                        \
  GTEST_SKIP() << "this CPU has no AVX-512 (host level " << rlx::cpu::cpu_isa_name(rlx::cpu::cpu_isa_host()) \
               << ": " << rlx::cpu::cpu_isa_features() << ")"

}  // namespace

TEST(SimdAvx512, Exp16IsExp8LaneForLane) {
  RLX_NEED_AVX512();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  alignas(64) float x[16], y[16], z[16];
  const double lo = -90.0, hi = 90.0;
  const int64_t n = int64_t(1) << 22;
  for (int64_t i = 0; i < n; i += 16) {
    for (int l = 0; l < 16; ++l) x[l] = static_cast<float>(lo + (hi - lo) * double(i + l) / double(n));
    exp16_of(x, y);
    exp8_of(x, z);
    exp8_of(x + 8, z + 8);
    for (int l = 0; l < 16; ++l) ASSERT_EQ(bits(y[l]), bits(z[l])) << "x = " << x[l];
  }
  const float special[16] = {-inf, inf,  nan, -1000.f, -87.5f, -86.98f, 88.72283f, 88.7229f,
                             0.f,  -0.f, 1.f, -1.f,    1e-30f, -1e-30f, 3.4e38f,   -3.4e38f};
  exp16_of(special, y);
  exp8_of(special, z);
  exp8_of(special + 8, z + 8);
  for (int l = 0; l < 16; ++l) EXPECT_EQ(bits(y[l]), bits(z[l])) << "x = " << special[l];
  EXPECT_EQ(y[0], 0.f);
  EXPECT_EQ(y[1], inf);
  EXPECT_TRUE(std::isnan(y[2]));
}

TEST(SimdAvx512, Gelu16AgainstFloat64) {
  RLX_NEED_AVX512();
  alignas(64) float x[16], y[16];
  double worst = 0;
  float at = 0;
  const int64_t n = int64_t(1) << 20;
  for (int64_t i = 0; i < n; i += 16) {
    for (int l = 0; l < 16; ++l) x[l] = static_cast<float>(-12.0 + 24.0 * double(i + l) / double(n));
    gelu16_of(x, y);
    for (int l = 0; l < 16; ++l) {
      const double v = x[l], want = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
      const double err = std::abs(y[l] - want) / std::max(1.0, std::abs(v));
      if (err > worst) worst = err, at = x[l];
    }
  }
  EXPECT_LE(worst, 5e-7) << "at x = " << at;
  const float inf = std::numeric_limits<float>::infinity();
  alignas(64) float s[16] = {-inf,   inf,   std::numeric_limits<float>::quiet_NaN(), 0.f, -0.f, 100.f,
                             -100.f, 1e-20f};
  gelu16_of(s, y);
  EXPECT_EQ(y[1], inf);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(y[3], 0.f);
  EXPECT_EQ(y[5], 100.f);
  EXPECT_EQ(y[6], 0.f);
}
#endif
