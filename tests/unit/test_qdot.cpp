// The cpu integer block dots (src/backends/cpu/qdot.h) against the f32 dequantization oracle
// (quant::dequantize_row in double): the Q8 activation blocks stay within half a step of x, each
// row dot equals the oracle on the quantized activations up to f32 summation, and the distance to
// the exact f32 product stays under the bound the activation rounding allows. The scalar and AVX2
// forms are compared with each other on hosts with AVX2; the dequant_matmul kernel's few-row path
// is checked end to end. Run at every RLX_CPU_ISA level by `make test-isa`.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/qdot.h"
#include "quant/blocks.h"
#include "rlx/builder.h"
#include "rlx/dtype.h"
#include "rlx/reference.h"
#include "rlx/session.h"

using namespace rlx;
using namespace rlx::quant;
namespace qd = rlx::cpu::qdot;

namespace {

constexpr GgmlType kTypes[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0};

// Rows of random codes with finite f16 scales (and Q4_1 mins) of either sign.
std::vector<uint8_t> random_rows(GgmlType t, int64_t rows, int64_t k, std::mt19937& rng) {
  const TypeTraits* tr = type_traits(static_cast<uint32_t>(t));
  const int64_t nb = k / kQK, rb = nb * tr->block_bytes;
  std::vector<uint8_t> w(static_cast<size_t>(rows * rb));
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  for (int64_t blk = 0; blk < rows * nb; ++blk) {
    uint8_t* p = w.data() + blk * tr->block_bytes;
    uint16_t d = f32_to_f16(u(rng)), m = f32_to_f16(u(rng) * 8);
    std::memcpy(p, &d, 2);
    if (t == GgmlType::Q4_1) std::memcpy(p + 2, &m, 2);
  }
  return w;
}

std::vector<float> random_x(int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> n(0, 1);
  std::vector<float> x(static_cast<size_t>(k));
  for (auto& e : x) e = n(rng);
  for (int64_t i = 0; i < k; i += 97) x[i] *= 20;  // outliers, as RMS-normed activations have
  for (int i = 0; i < kQK; ++i) x[static_cast<size_t>(kQK + i)] = 0;  // one all-zero block
  return x;
}

struct Oracle {
  double on_quantized;  // the dequantized row . the dequantized activations (Q4_1 mins times the f32 block sums)
  double exact;         // the dequantized row . x
  double bound;         // |exact - on_quantized| <= this: half an activation step times |w| per block
  double magnitude;     // sum of |w_i x_i|, the scale of the f32 summation error
};

Oracle oracle(GgmlType t, const uint8_t* wr, const std::vector<float>& x, const std::vector<qd::BlockX8>& xq) {
  const int64_t k = static_cast<int64_t>(x.size()), nb = k / kQK;
  std::vector<float> w(static_cast<size_t>(k));
  dequantize_row(t, wr, w.data(), k);
  Oracle o{0, 0, 0, 0};
  for (int64_t b = 0; b < nb; ++b) {
    double mins = 0;
    if (t == GgmlType::Q4_1) mins = f16_to_f32(reinterpret_cast<const BlockQ4_1*>(wr)[b].m);
    for (int i = 0; i < kQK; ++i) {
      const int64_t e = b * kQK + i;
      const double xt = static_cast<double>(xq[b].d) * xq[b].qs[i];
      o.on_quantized += (w[e] - mins) * xt + mins * x[e];
      o.exact += static_cast<double>(w[e]) * x[e];
      o.bound += 0.5 * xq[b].d * std::abs(w[e] - mins) * (1 + 1e-6);
      o.magnitude += std::abs(static_cast<double>(w[e]) * x[e]) + std::abs((w[e] - mins) * xt);
    }
  }
  return o;
}

}  // namespace

TEST(QDot, ActivationBlocksWithinHalfAStep) {
  std::mt19937 rng(5);
  const int64_t k = 544;
  std::vector<float> x = random_x(k, rng);
  std::vector<qd::BlockX8> xq(static_cast<size_t>(k / kQK));
  qd::quantize_row(x.data(), xq.data(), k);
  EXPECT_EQ(xq[1].d, 0.f);  // the all-zero block
  for (int64_t b = 0; b < k / kQK; ++b) {
    float amax = 0;
    double sum = 0, mag = 0;
    for (int i = 0; i < kQK; ++i) {
      amax = std::max(amax, std::abs(x[b * kQK + i]));
      sum += x[b * kQK + i], mag += std::abs(x[b * kQK + i]);
    }
    EXPECT_FLOAT_EQ(xq[b].d, amax / 127) << b;
    EXPECT_NEAR(xq[b].s, sum, 1e-6 * mag) << b;
    bool hit_max = false;
    for (int i = 0; i < kQK; ++i) {
      EXPECT_LE(std::abs(xq[b].qs[i]), 127);
      EXPECT_LE(std::abs(x[b * kQK + i] - xq[b].d * xq[b].qs[i]), 0.5 * xq[b].d * (1 + 1e-5) + 1e-30) << b << " " << i;
      hit_max |= std::abs(xq[b].qs[i]) == 127;
    }
    if (amax > 0) {
      EXPECT_TRUE(hit_max) << b;
    }
  }
#if defined(__x86_64__) && defined(__GNUC__)
  if (cpu::cpu_isa_host() >= cpu::CpuIsa::Avx2) {  // the two forms give the same bytes
    std::vector<qd::BlockX8> xs(xq.size()), xa(xq.size());
    qd::quantize_row_scalar(x.data(), xs.data(), k);
    qd::quantize_row_avx2(x.data(), xa.data(), k);
    EXPECT_EQ(std::memcmp(xs.data(), xa.data(), xs.size() * sizeof(qd::BlockX8)), 0);
  }
#endif
  // A block of subnormal magnitudes (127 / amax overflows) quantizes to zeros, never to -128.
  for (int i = 0; i < kQK; ++i) x[2 * kQK + i] = (i % 2 ? -1.f : 1.f) * 1e-40f * static_cast<float>(i + 1);
  qd::quantize_row(x.data(), xq.data(), k);
  for (int i = 0; i < kQK; ++i) EXPECT_EQ(xq[2].qs[i], 0) << i;
#if defined(__x86_64__) && defined(__GNUC__)
  if (cpu::cpu_isa_host() >= cpu::CpuIsa::Avx2) {
    std::vector<qd::BlockX8> xs(xq.size()), xa(xq.size());
    qd::quantize_row_scalar(x.data(), xs.data(), k);
    qd::quantize_row_avx2(x.data(), xa.data(), k);
    EXPECT_EQ(std::memcmp(xs.data(), xa.data(), xs.size() * sizeof(qd::BlockX8)), 0);
  }
#endif
  // A non-finite element makes its block NaN, so the product is NaN rather than silently finite.
  x[3] = INFINITY;
  qd::quantize_row(x.data(), xq.data(), k);
  EXPECT_TRUE(std::isnan(xq[0].d));
}

TEST(QDot, RowDotsMatchTheDequantOracle) {
  std::mt19937 rng(11);
  for (GgmlType t : kTypes) {
    SCOPED_TRACE(type_name(static_cast<uint32_t>(t)));
    for (int64_t k : {int64_t{64}, int64_t{544}, int64_t{1536}}) {  // even and odd block counts
      const int64_t rows = 23, nb = k / kQK, rb = static_cast<int64_t>(row_bytes(t, k));
      std::vector<uint8_t> w = random_rows(t, rows, k, rng);
      std::vector<float> x = random_x(k, rng);
      std::vector<qd::BlockX8> xq(static_cast<size_t>(nb));
      qd::quantize_row(x.data(), xq.data(), k);
      for (int64_t j = 0; j < rows; ++j) {
        const uint8_t* wr = w.data() + j * rb;
        Oracle o = oracle(t, wr, x, xq);
        const double sum_tol = 2e-6 * o.magnitude + 1e-30;
        const double got = qd::row_dot(t, wr, xq.data(), nb), scalar = qd::row_dot_scalar(t, wr, xq.data(), nb);
        EXPECT_NEAR(got, o.on_quantized, sum_tol) << "k " << k << " row " << j;
        EXPECT_NEAR(scalar, o.on_quantized, sum_tol) << "k " << k << " row " << j;
        EXPECT_LE(std::abs(got - o.exact), o.bound + sum_tol) << "k " << k << " row " << j;
#if defined(__x86_64__) && defined(__GNUC__)
        if (cpu::cpu_isa_host() >= cpu::CpuIsa::Avx2) {
          EXPECT_NEAR(qd::row_dot_avx2(t, wr, xq.data(), nb), scalar, sum_tol) << "k " << k << " row " << j;
        }
#endif
      }
    }
  }
}

// The kernel on 1 and 3 rows of x (a decode step, a short prompt) takes the integer block dots for
// Q4_0/Q4_1, within the activation-rounding bound of the f32 reference interpreter; one Q8_0 row
// keeps f32 activations, and 9 rows of any type take the f32 path: both match the f32 oracle up to
// summation order.
TEST(QDot, DequantMatMulFewRowsAreTheIntegerDot) {
  if (const char* e = std::getenv("RLX_QDOT"); e && std::string(e) == "0") GTEST_SKIP() << "RLX_QDOT=0 set by the caller";
  std::mt19937 rng(17);
  const int64_t k = 576, N = 300;  // N * k is above the size that splits rows over the pool
  for (GgmlType t : kTypes) {
    for (int64_t M : {int64_t{1}, int64_t{3}, int64_t{9}}) {
      const std::string name = type_name(static_cast<uint32_t>(t));
      SCOPED_TRACE(name + " M " + std::to_string(M));
      if (t == GgmlType::Q8_0 && M == 3) continue;  // the GEMM path, as M = 9
      const int64_t rb = static_cast<int64_t>(row_bytes(t, k));
      std::vector<uint8_t> wv = random_rows(t, N, k, rng);
      Tensor w(DType::u8, {N, rb}), x(DType::f32, {M, k});
      std::memcpy(w.data<uint8_t>(), wv.data(), wv.size());
      std::vector<std::vector<float>> xs;
      for (int64_t r = 0; r < M; ++r) {
        xs.push_back(random_x(k, rng));
        std::memcpy(x.data<float>() + r * k, xs.back().data(), static_cast<size_t>(k) * sizeof(float));
      }
      Graph g;
      Builder b(g);
      ValueId xi = b.input("x", DType::f32, to_shape(x.shape()));
      ValueId wi = b.input("w", DType::u8, to_shape(w.shape()));
      b.output(b.op1(OpKind::DequantMatMul, {xi, wi}, {{"type", name}, {"k", k}}));
      CompiledModel m(g, CompileOptions{});
      Tensor y = m.run(std::vector<Tensor>{x, w})[0];
      Tensor want = reference_run(g, {x, w})[0];
      const bool integer = qd::preferred(t) && M <= 8;
      EXPECT_EQ(qd::preferred(t), t != GgmlType::Q8_0);
      int differs = 0;
      for (int64_t r = 0; r < M; ++r) {
        std::vector<qd::BlockX8> xq(static_cast<size_t>(k / kQK));
        qd::quantize_row(xs[r].data(), xq.data(), k);
        for (int64_t j = 0; j < N; ++j) {
          Oracle o = oracle(t, wv.data() + j * rb, xs[r], xq);
          const double got = y.get(r * N + j);
          if (integer) {
            EXPECT_EQ(got, qd::row_dot(t, wv.data() + j * rb, xq.data(), k / kQK)) << r << " " << j;
            EXPECT_LE(std::abs(got - want.get(r * N + j)), o.bound + 2e-6 * o.magnitude) << r << " " << j;
          } else {
            EXPECT_NEAR(got, o.exact, 2e-6 * o.magnitude) << r << " " << j;
          }
          differs += std::abs(got - o.exact) > 1e-5 * o.magnitude;
        }
      }
      if (integer) {
        EXPECT_GT(differs, M * N / 2);  // the activations really were quantized
      } else {
        EXPECT_EQ(differs, 0);
      }
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
TEST(QDot, Q8_0RowAgainstF32ActivationsMatchesTheOracle) {
  if (cpu::cpu_isa_host() < cpu::CpuIsa::Avx2) GTEST_SKIP() << "host without AVX2";
  std::mt19937 rng(23);
  for (int64_t k : {int64_t{32}, int64_t{576}}) {
    const int64_t rows = 19, rb = static_cast<int64_t>(row_bytes(GgmlType::Q8_0, k));
    std::vector<uint8_t> w = random_rows(GgmlType::Q8_0, rows, k, rng);
    std::vector<float> x = random_x(std::max<int64_t>(k, 2 * kQK), rng);
    x.resize(static_cast<size_t>(k));
    std::vector<qd::BlockX8> xq(static_cast<size_t>(k / kQK));
    qd::quantize_row(x.data(), xq.data(), k);
    for (int64_t j = 0; j < rows; ++j) {
      Oracle o = oracle(GgmlType::Q8_0, w.data() + j * rb, x, xq);
      EXPECT_NEAR(qd::row_dot_f32_q8_0_avx2(w.data() + j * rb, x.data(), k / kQK), o.exact, 2e-6 * o.magnitude) << j;
    }
  }
}
#endif
