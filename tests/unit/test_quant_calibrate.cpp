// Activation clipping ranges (src/quant/calibrate.h): minmax keeps the extremes; percentile and
// entropy clip two far outliers of a normal sample; mse keeps them (nearly) among 50,000 values (their squared
// clip error outweighs the finer steps for the rest) and clips them among 400,000; the histogram MSE
// behaves as its formula says.
#include <gtest/gtest.h>

#include <random>

#include "quant/calibrate.h"

using namespace rlx::quant;

namespace {

std::vector<float> normal_with_outliers(double* lo, double* hi, size_t n = 50000) {
  std::mt19937 g(7);
  std::normal_distribution<float> nd(0.5f, 1.0f);
  std::vector<float> s(n);
  for (auto& v : s) v = nd(g);
  s[10] = 60.0f, s[20] = -40.0f;  // two far outliers
  *lo = *hi = s[0];
  for (float v : s) *lo = std::min<double>(*lo, v), *hi = std::max<double>(*hi, v);
  return s;
}

}  // namespace

TEST(QuantCalibrate, MethodsClipOutliers) {
  double lo, hi;
  std::vector<float> s = normal_with_outliers(&lo, &hi);
  auto mm = calibrate_range(s, lo, hi, "minmax", 99.99);
  EXPECT_EQ(mm.lo, -40.0);
  EXPECT_EQ(mm.hi, 60.0);
  for (const char* m : {"percentile", "entropy"}) {
    std::vector<float> c = s;
    auto r = calibrate_range(c, lo, hi, m, 99.9);
    EXPECT_LT(r.hi, 40.0) << m;  // the 60 outlier is clipped
    EXPECT_GT(r.hi, 2.5) << m;   // but not the bulk (mean 0.5, sd 1)
    EXPECT_GT(r.lo, -30.0) << m;
    EXPECT_LT(r.lo, -1.5) << m;
    EXPECT_LE(r.lo, 0.0) << m;
    EXPECT_GE(r.hi, 0.0) << m;
  }
  std::vector<float> c = s;
  auto r = calibrate_range(c, lo, hi, "mse", 99.9);
  EXPECT_LT(r.lo, -30.0);  // at most a little of each outlier clipped
  EXPECT_GT(r.hi, 40.0);
  c = normal_with_outliers(&lo, &hi, 400000);
  r = calibrate_range(c, lo, hi, "mse", 99.9);
  EXPECT_LT(r.hi, 40.0);
  EXPECT_GE(r.hi, 2.5);
  EXPECT_GT(r.lo, -30.0);
  EXPECT_TRUE(known_calibration("entropy"));
  EXPECT_FALSE(known_calibration("kl"));
}

TEST(QuantCalibrate, HistogramMse) {
  // All mass in one bin inside the range: only rounding error, scale^2 / 12 per value.
  std::vector<double> h(100, 0.0);
  h[50] = 10;
  double s = 2.0 / 255;
  EXPECT_NEAR(histogram_mse(h, -1, 1, -1, 1), 10 * s * s / 12, 1e-12);
  // Mass beyond the clip costs its squared distance to the clip end.
  std::vector<double> t(100, 0.0);
  t[99] = 1;  // center 0.99
  double e = histogram_mse(t, -1, 1, -0.5, 0.5);
  EXPECT_GT(e, 0.2);  // (0.99 - ~0.5)^2
  EXPECT_LT(e, 0.26);
}
