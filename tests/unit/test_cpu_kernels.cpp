// The fast cpu kernels (BLAS GEMM + epilogues, SIMD norm/softmax/attention, gather, transpose, the
// typed fused evaluator) against the reference interpreter, on shapes that hit the threaded,
// blocked and broadcast paths.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "backends/cpu/blas.h"
#include "backends/cpu/gemm_avx2.h"
#include "backends/cpu/parallel.h"
#include "rlx/builder.h"
#include "rlx/reference.h"
#include "rlx/session.h"
#include "test_util.h"

using namespace rlx;

namespace {

using rlx_test::max_rel_diff;

Tensor seeded(DType dt, std::vector<int64_t> shape, int seed, double scale = 1.0) {
  return rlx_test::sine_tensor(dt, shape, 0.37 * (seed + 1), seed, scale);
}

void expect_matches(const Graph& g, const std::vector<Tensor>& in, double tol = 2e-5) {
  auto want = reference_run(g, in);
  for (bool fuse : {true, false}) {
    auto got = rlx_test::run_cpu(g, in, fuse, 2);  // the second run reuses the planned arena
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) EXPECT_LE(max_rel_diff(got[k], want[k]), tol) << "output " << k << " fuse=" << fuse;
  }
}

}  // namespace

TEST(CpuKernels, LinearWithEpilogues) {
  for (const char* act : {"none", "relu", "gelu", "gelu_tanh", "silu"}) {
    for (int64_t rows : {3, 200}) {  // column split vs row split
      Graph g;
      Builder b(g);
      auto x = b.input("x", DType::f32, {rows, 70});
      auto w = b.constant(seeded(DType::f32, {130, 70}, 2, 0.2));
      auto bias = b.constant(seeded(DType::f32, {130}, 3));
      b.output(b.linear(x, w, bias, act));
      expect_matches(g, {seeded(DType::f32, {rows, 70}, 1)});
    }
  }
}

TEST(CpuKernels, MatMulAndDotGeneral) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, {4, 33, 65});
  auto y = b.input("y", DType::f32, {65, 47});
  b.output(b.matmul(x, y));
  b.output(b.dot_general(x, x, {0}, {0}, {1}, {1}));  // [4,65,65], contracting a non-minor dim
  expect_matches(g, {seeded(DType::f32, {4, 33, 65}, 1), seeded(DType::f32, {65, 47}, 2)});
}

// The general f32 contractions (blas.cpp's sgemm): batches of small GEMMs split over the pool by
// batch element (with a broadcast operand), single GEMMs below and above the row count from which
// they run on RLX's packed GEMM when OpenBLAS is tuned for the CPU, and a Linear whose weight is an
// input (not packed ahead), with its bias and activation.
TEST(CpuKernels, GeneralGemmRoutesMatchReference) {
  Graph g;
  Builder b(g);
  auto a = b.input("a", DType::f32, {6, 70, 40});
  auto c = b.input("c", DType::f32, {6, 40, 50});
  auto big = b.input("big", DType::f32, {300, 200});
  auto w = b.input("w", DType::f32, {90, 200});
  auto bias = b.input("bias", DType::f32, {90});
  auto d = b.input("d", DType::f32, {40, 30});
  auto e = b.input("e", DType::f32, {200, 90});
  auto f = b.input("f", DType::f32, {20, 200});
  auto h = b.input("h", DType::f32, {200, 90});
  b.output(b.matmul(a, c));                           // 6 small GEMMs
  b.output(b.matmul(a, d));                           // broadcast B
  b.output(b.dot_general(a, c, {0}, {0}, {2}, {1}));  // batched dot_general
  b.output(b.matmul(big, e));                         // 300 rows
  b.output(b.matmul(f, h));                           // 20 rows
  b.output(b.linear(big, w, bias, "relu"));
  expect_matches(g, {seeded(DType::f32, {6, 70, 40}, 1), seeded(DType::f32, {6, 40, 50}, 2),
                     seeded(DType::f32, {300, 200}, 3), seeded(DType::f32, {90, 200}, 4, 0.2),
                     seeded(DType::f32, {90}, 5), seeded(DType::f32, {40, 30}, 6), seeded(DType::f32, {200, 90}, 7),
                     seeded(DType::f32, {20, 200}, 8), seeded(DType::f32, {200, 90}, 9)});
  EXPECT_EQ(cpu::sgemm_on_rlx(1000, false), cpu::fast_gemm_available());
  EXPECT_EQ(cpu::sgemm_on_rlx(8, false), cpu::fast_gemm_available() && !cpu::blas_tuned());
}

TEST(CpuKernels, LayerNormSoftmax) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, {300, 384});
  auto gm = b.constant(seeded(DType::f32, {384}, 4));
  auto bt = b.constant(seeded(DType::f32, {384}, 5));
  b.output(b.layer_norm(x, gm, bt, 1e-12));
  b.output(b.softmax(x, -1));
  b.output(b.softmax(x, 0));  // strided axis: the portable path
  expect_matches(g, {seeded(DType::f32, {300, 384}, 1, 3.0)});
}

TEST(CpuKernels, AttentionMasks) {
  for (const char* mask : {"none", "causal", "padding", "causal_padding", "bias"}) {
    Graph g;
    Builder b(g);
    int64_t B = 2, H = 4, S = 70, T = 70, D = 16;  // S > 64: several query blocks
    auto q = b.input("q", DType::f32, {B, H, S, D});
    auto k = b.input("k", DType::f32, {B, 2, T, D});  // grouped kv heads
    auto v = b.input("v", DType::f32, {B, 2, T, D});
    std::vector<ValueId> ins{q, k, v};
    std::vector<Tensor> feed{seeded(DType::f32, {B, H, S, D}, 1), seeded(DType::f32, {B, 2, T, D}, 2),
                             seeded(DType::f32, {B, 2, T, D}, 3)};
    std::string m = mask;
    if (m == "padding" || m == "causal_padding") {
      ins.push_back(b.input("mask", DType::i64, {B, T}));
      Tensor pm(DType::i64, {B, T});
      for (int64_t i = 0; i < B * T; ++i) pm.set(i, (i % T) < (i / T == 0 ? T : 40) ? 1 : 0);
      feed.push_back(pm);
    }
    if (m == "bias") {
      ins.push_back(b.input("bias", DType::f32, {B, 1, 1, T}));
      feed.push_back(seeded(DType::f32, {B, 1, 1, T}, 4));
    }
    b.output(b.op1(OpKind::Attention, ins, {{"mask", m}}));
    expect_matches(g, feed);
  }
}

TEST(CpuKernels, GatherTranspose) {
  Graph g;
  Builder b(g);
  auto table = b.constant(seeded(DType::f32, {50, 24}, 1));
  auto ids = b.input("ids", DType::i64, {3, 7});
  auto e = b.op1(OpKind::Gather, {table, ids}, {{"axis", int64_t{0}}});  // [3,7,24]
  auto r = b.reshape(e, {3, 7, 4, 6});
  b.output(b.transpose(r, {0, 2, 1, 3}));
  b.output(b.transpose(r, {3, 1, 0, 2}));
  Tensor ix(DType::i64, {3, 7});
  for (int64_t i = 0; i < 21; ++i) ix.set(i, (i * 13) % 50 - (i == 5 ? 50 : 0));  // one negative index
  expect_matches(g, {ix}, 0);
}

TEST(CpuKernels, FusedBroadcastsAndMath) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, {5, 40, 64});
  auto bias = b.constant(seeded(DType::f32, {64}, 2));        // trailing broadcast
  auto col = b.constant(seeded(DType::f32, {5, 1, 64}, 3));   // general broadcast
  auto s = b.scalar(0.5, DType::f32);                          // scalar
  auto t = b.mul(b.add(x, bias), s);
  t = b.add(b.unary(OpKind::Erf, t), b.unary(OpKind::Tanh, t));
  t = b.sub(b.unary(OpKind::Exp, b.mul(t, col)), b.unary(OpKind::Logistic, x));
  t = b.div(b.max(t, b.unary(OpKind::Neg, x)), b.add(b.unary(OpKind::Abs, x), b.scalar(1.0, DType::f32)));
  b.output(t);
  expect_matches(g, {seeded(DType::f32, {5, 40, 64}, 1, 3.0)});
}

TEST(CpuKernels, ThreadPoolCoversEachIndexOnce) {
  for (int64_t n : {1, 7, 1000, 100003}) {
    std::vector<int> hits(static_cast<size_t>(n), 0);
    cpu::parallel_for(n, 3, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) ++hits[i];
      cpu::parallel_for(4, 1, [&](int64_t, int64_t) {});  // nested: runs inline
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << "n=" << n << " i=" << i;
  }
  EXPECT_GE(cpu::num_threads(), 1);
}

// The idle spin is bounded by wall time, not by a count of `pause` instructions (whose cost differs
// ~10x between AMD and Intel cores): it returns as soon as the condition holds, and a condition that
// never holds ends it after the budget.
TEST(CpuKernels, SpinWaitIsBoundedByTime) {
  using clock = std::chrono::steady_clock;
  EXPECT_GE(cpu::spin_budget_us(), 0);
  int calls = 0;
  EXPECT_TRUE(cpu::spin_wait([&] { return ++calls >= 50; }, 1000000));  // 1 s budget, ends at call 50
  EXPECT_EQ(calls, 50);
  EXPECT_FALSE(cpu::spin_wait([] { return false; }, 0));
  for (int64_t budget : {200, 2000}) {
    const auto t0 = clock::now();
    EXPECT_FALSE(cpu::spin_wait([] { return false; }, budget));
    const double us = std::chrono::duration<double, std::micro>(clock::now() - t0).count();
    EXPECT_GE(us, double(budget)) << budget;
    EXPECT_LT(us, double(budget) + 50000.0) << budget;  // generous: a loaded machine may deschedule us
  }
}
