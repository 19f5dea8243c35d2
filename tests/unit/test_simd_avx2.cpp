// The shared 8-lane AVX2 exp (src/backends/cpu/simd_avx2.h, used by the GEMM's GELU
// epilogue and attention's softmax) against the correctly rounded float of a float64 exp: a sweep of
// the range, and the special values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backends/cpu/gemm_avx2.h"
#include "backends/cpu/simd_avx2.h"

#if defined(RLX_SIMD_AVX2)
namespace {

// Floats in a monotonic integer order (ulp distance = difference).
int64_t ordered(float f) {
  int32_t i;
  std::memcpy(&i, &f, sizeof i);
  return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : i;
}

RLX_AVX2_FN void exp8_of(const float* x, float* y) { _mm256_storeu_ps(y, rlx::cpu::simd::exp8(_mm256_loadu_ps(x))); }

}  // namespace

TEST(SimdAvx2, Exp8WithinOneUlpOverTheRange) {
  if (!rlx::cpu::fast_gemm_available()) GTEST_SKIP() << "no AVX2/FMA on this CPU";
  int64_t worst = 0, n = 0;
  float at = 0.f;
  alignas(32) float x[8], y[8];
  // 4M points spread over [-86.98, 88.72], plus every float in [-1e-3, 1e-3] step 1e-9 around 0.
  const double lo = -86.98, hi = 88.72;
  for (int64_t i = 0; i < (int64_t(1) << 22); i += 8) {
    for (int l = 0; l < 8; ++l) x[l] = static_cast<float>(lo + (hi - lo) * double(i + l) / double(int64_t(1) << 22));
    exp8_of(x, y);
    for (int l = 0; l < 8; ++l, ++n) {
      const int64_t u = std::llabs(ordered(y[l]) - ordered(static_cast<float>(std::exp(double(x[l])))));
      if (u > worst) worst = u, at = x[l];
    }
  }
  for (float v = -1e-3f; v < 1e-3f; v += 1e-6f) {
    for (int l = 0; l < 8; ++l) x[l] = v + float(l) * 1e-7f;
    exp8_of(x, y);
    for (int l = 0; l < 8; ++l) worst = std::max<int64_t>(worst, std::llabs(ordered(y[l]) - ordered(static_cast<float>(std::exp(double(x[l]))))));
  }
  EXPECT_LE(worst, 1) << "at x = " << at << " over " << n << " points";
}

TEST(SimdAvx2, Exp8SpecialValues) {
  if (!rlx::cpu::fast_gemm_available()) GTEST_SKIP() << "no AVX2/FMA on this CPU";
  const float inf = std::numeric_limits<float>::infinity();
  alignas(32) float x[8] = {-inf, inf, std::numeric_limits<float>::quiet_NaN(), -1000.f, -87.5f, 88.72283f, 88.7229f, 0.f};
  alignas(32) float y[8];
  exp8_of(x, y);
  EXPECT_EQ(y[0], 0.f);  // a masked attention score
  EXPECT_EQ(y[1], inf);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(y[3], 0.f);
  EXPECT_EQ(y[4], 0.f);  // below -86.98: flushed (true value 1e-38)
  EXPECT_TRUE(std::isfinite(y[5]));
  EXPECT_NEAR(y[5], 3.4028e38f, 1e34f);
  EXPECT_EQ(y[6], inf);
  EXPECT_EQ(y[7], 1.f);
}
#endif

#if defined(RLX_SIMD_AVX2)
namespace {
RLX_AVX2_FN void exp8_nonpos_of(const float* x, float* y) {
  _mm256_storeu_ps(y, rlx::cpu::simd::exp8<true>(_mm256_loadu_ps(x)));
}
}  // namespace

// exp8<true>, attention's variant for x <= 0: the same accuracy down to -87, exact 0 for -inf and below
// -88, NaN kept.
TEST(SimdAvx2, Exp8NonPositive) {
  if (!rlx::cpu::fast_gemm_available()) GTEST_SKIP() << "no AVX2/FMA on this CPU";
  int64_t worst = 0;
  alignas(32) float x[8], y[8];
  for (int64_t i = 0; i < (int64_t(1) << 21); i += 8) {
    for (int l = 0; l < 8; ++l) x[l] = static_cast<float>(-87.0 * double(i + l) / double(int64_t(1) << 21));
    exp8_nonpos_of(x, y);
    for (int l = 0; l < 8; ++l)
      worst = std::max<int64_t>(worst, std::llabs(ordered(y[l]) - ordered(static_cast<float>(std::exp(double(x[l]))))));
  }
  EXPECT_LE(worst, 1);
  const float inf = std::numeric_limits<float>::infinity();
  alignas(32) float s[8] = {-inf, std::numeric_limits<float>::quiet_NaN(), -88.f, -1000.f, 0.f, -0.f, -1.f, -10.f};
  exp8_nonpos_of(s, y);
  EXPECT_EQ(y[0], 0.f);
  EXPECT_TRUE(std::isnan(y[1]));
  EXPECT_EQ(y[2], 0.f);
  EXPECT_EQ(y[3], 0.f);
  EXPECT_EQ(y[4], 1.f);
  EXPECT_EQ(y[5], 1.f);
  EXPECT_NEAR(y[6], std::exp(-1.f), 1e-7f);
}
#endif
