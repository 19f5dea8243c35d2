// The cpu quantize / dequantize row kernels (src/backends/cpu/quant_affine_rows.h): the AVX2 form
// gives the same bits as the scalar one (the ONNX QuantizeLinear element function) on ties, NaN,
// out-of-range values and run lengths that leave a scalar tail.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backends/cpu/quant_affine_rows.h"
#include "backends/cpu/simd_avx2.h"

using namespace rlx::cpu;

namespace {

std::vector<float> probe_values(int64_t n, float scale, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-300.f * scale, 300.f * scale);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    switch (i % 7) {
      case 0: x[static_cast<size_t>(i)] = (static_cast<float>(static_cast<int>(g() % 400)) - 200.f + 0.5f) * scale; break;  // ties
      case 1: x[static_cast<size_t>(i)] = (i % 3 == 0) ? std::numeric_limits<float>::quiet_NaN() : 1e30f * ((i & 8) ? 1.f : -1.f); break;
      default: x[static_cast<size_t>(i)] = u(g);
    }
  }
  return x;
}

}  // namespace

TEST(QuantRows, Avx2QuantizeMatchesScalar) {
  if (!simd::cpu_has_avx2()) GTEST_SKIP() << "AVX2 not in use (host without it, or RLX_CPU_ISA=generic): only the scalar row kernels run here";
  for (int64_t n : {1, 31, 32, 33, 100, 1000}) {
    for (float scale : {0.0173f, 0.5f, 3.0f}) {
      for (int32_t zp : {0, 7, 128, 255}) {
        std::vector<float> x = probe_values(n, scale, static_cast<uint32_t>(n * 31 + zp));
        std::vector<uint8_t> u0(static_cast<size_t>(n)), u1(static_cast<size_t>(n));
        qrows::quantize_u8_scalar(x.data(), n, scale, zp, u0.data());
        qrows::quantize_u8_avx2(x.data(), n, scale, zp, u1.data());
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(u0[static_cast<size_t>(i)], u1[static_cast<size_t>(i)]) << "u8 n=" << n << " i=" << i << " x=" << x[static_cast<size_t>(i)];
        const int32_t zs = zp - 128;
        std::vector<int8_t> s0(static_cast<size_t>(n)), s1(static_cast<size_t>(n));
        qrows::quantize_s8_scalar(x.data(), n, scale, zs, s0.data());
        qrows::quantize_s8_avx2(x.data(), n, scale, zs, s1.data());
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(s0[static_cast<size_t>(i)], s1[static_cast<size_t>(i)]) << "s8 n=" << n << " i=" << i << " x=" << x[static_cast<size_t>(i)];
      }
    }
  }
}

TEST(QuantRows, Avx2DequantizeMatchesScalar) {
  if (!simd::cpu_has_avx2()) GTEST_SKIP() << "AVX2 not in use (host without it, or RLX_CPU_ISA=generic): only the scalar row kernels run here";
  std::vector<uint8_t> u(259);
  std::vector<int8_t> s(259);
  for (size_t i = 0; i < u.size(); ++i) u[i] = static_cast<uint8_t>(i * 37), s[i] = static_cast<int8_t>(i * 53);
  const int64_t n = static_cast<int64_t>(u.size());
  for (int32_t zp : {0, 3, 200}) {
    std::vector<float> a(u.size()), b(u.size());
    qrows::dequantize_u8_scalar(u.data(), n, 0.0371f, zp, a.data());
    qrows::dequantize_u8_avx2(u.data(), n, 0.0371f, zp, b.data());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "u8 " << i;
    qrows::dequantize_s8_scalar(s.data(), n, 0.0371f, zp - 128, a.data());
    qrows::dequantize_s8_avx2(s.data(), n, 0.0371f, zp - 128, b.data());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "s8 " << i;
  }
}
