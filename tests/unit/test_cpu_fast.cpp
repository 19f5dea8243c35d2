// The cpu device's own GEMM (packed AVX2 micro-kernel, gemm_avx2.cpp) against a float64 loop on
// random odd shapes with every epilogue, and the cpu schedule's LIR passes (src/lir/rewrite: merged QKV with
// in-place heads, residual and LayerNorm in the GEMM) against the reference interpreter on a
// BERT-shaped layer, with the rewrites checked to have happened (profile labels).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "backends/cpu/gemm_avx2.h"
#include "backends/cpu/kernels.h"
#include "rlx/builder.h"
#include "rlx/reference.h"
#include "rlx/session.h"
#include "test_util.h"

using namespace rlx;

namespace {

std::vector<float> rnd(size_t n, std::mt19937& g) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

Tensor rnd_t(std::vector<int64_t> shape, unsigned seed, double scale = 1.0) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> d(-scale, scale);
  Tensor t(DType::f32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, d(g));
  return t;
}

using rlx_test::max_rel_diff;

}  // namespace

TEST(CpuFastGemm, RandomShapesAndEpilogues) {
  std::mt19937 g(7);
  std::uniform_int_distribution<int> pick(0, 9);
  const int64_t sizes[] = {1, 2, 5, 6, 7, 16, 17, 33, 100, 385};
  for (int iter = 0; iter < 40; ++iter) {
    int64_t M = sizes[pick(g)], N = sizes[pick(g)], K = sizes[pick(g)];
    if (iter == 0) M = 300, N = 70, K = 800;  // several K blocks and row blocks
    bool trans = iter % 2, threaded = iter % 3 != 0, acc = iter % 5 == 1;
    int64_t lda = K + iter % 3, ldb = (trans ? K : N) + 1, ldc = N + iter % 2;
    auto A = rnd(static_cast<size_t>(M * lda), g), B = rnd(static_cast<size_t>((trans ? N : K) * ldb), g);
    auto bias = rnd(static_cast<size_t>(N), g), R = rnd(static_cast<size_t>(M * N), g);
    auto C = rnd(static_cast<size_t>(M * ldc), g);
    auto C0 = C;
    cpu::GemmEpi e;
    e.bias = iter % 4 ? bias.data() : nullptr;
    e.residual = iter % 3 ? R.data() : nullptr;
    e.ldr = N;
    e.act = static_cast<cpu::GemmAct>(iter % 5);
    std::vector<int> done(static_cast<size_t>(M), 0);
    struct Ctx {
      std::vector<int>* done;
    } ctx{&done};
    e.rows_done = [](void* c, int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) ++(*static_cast<Ctx*>(c)->done)[r];
    };
    e.ctx = &ctx;
    std::vector<float> Bp(static_cast<size_t>(cpu::packed_b_size(K, N)));
    cpu::pack_b(trans, B.data(), ldb, K, N, Bp.data());
    if (threaded && !acc)
      cpu::gemm_packed(M, N, K, A.data(), lda, Bp.data(), C.data(), ldc, &e);
    else
      cpu::gemm_packed_serial(M, N, K, A.data(), lda, Bp.data(), C.data(), ldc, &e, acc);
    double worst = 0;
    for (int64_t i = 0; i < M; ++i) {
      EXPECT_EQ(done[i], 1) << "row " << i << " finished " << done[i] << " times";
      for (int64_t j = 0; j < N; ++j) {
        double s = acc ? C0[i * ldc + j] : 0.0;
        for (int64_t k = 0; k < K; ++k) s += double(A[i * lda + k]) * (trans ? B[j * ldb + k] : B[k * ldb + j]);
        if (e.bias) s += bias[j];
        if (e.residual) s += R[i * N + j];
        switch (e.act) {
          case cpu::GemmAct::None: break;
          case cpu::GemmAct::Relu: s = s > 0 ? s : 0; break;
          case cpu::GemmAct::Gelu: s = 0.5 * s * (1 + std::erf(s / std::sqrt(2.0))); break;
          case cpu::GemmAct::GeluTanh: s = 0.5 * s * (1 + std::tanh(std::sqrt(2 / M_PI) * (s + 0.044715 * s * s * s))); break;
          case cpu::GemmAct::Silu: s = s / (1 + std::exp(-s)); break;
        }
        worst = std::max(worst, std::abs(s - C[i * ldc + j]) / (1 + std::abs(s)));
      }
      for (int64_t j = N; j < ldc; ++j) EXPECT_EQ(C[i * ldc + j], C0[i * ldc + j]) << "padding column written";
    }
    EXPECT_LE(worst, 2e-5) << "M=" << M << " N=" << N << " K=" << K << " trans=" << trans << " acc=" << acc;
  }
}

// [smallseq] The pooled split for few rows and a weight packed ahead: M <= 24 (A read in place, ~4
// column chunks per thread), and M <= 144 with N >= M (column split, A packed per thread), BERT-like
// shapes with bias + residual + an every-row-once hook. The column split must give the serial
// result bit for bit (each element's sum runs over the same K blocks in the same order).
TEST(CpuFastGemm, FewRowsPackedWeightSplitsByColumns) {
  std::mt19937 g(11);
  const int64_t shapes[][3] = {{16, 384, 384}, {1, 1536, 384}, {24, 1152, 384}, {17, 384, 1536},
                               {128, 1536, 384}, {100, 385, 800}, {144, 384, 384}};
  for (auto& s : shapes) {
    const int64_t M = s[0], N = s[1], K = s[2];
    auto A = rnd(static_cast<size_t>(M * K), g), W = rnd(static_cast<size_t>(N * K), g);
    auto bias = rnd(static_cast<size_t>(N), g), R = rnd(static_cast<size_t>(M * N), g);
    std::vector<float> Bp(static_cast<size_t>(cpu::packed_b_size(K, N)));
    cpu::pack_b(true, W.data(), K, K, N, Bp.data());
    std::vector<int> done(static_cast<size_t>(M), 0);
    cpu::GemmEpi e;
    e.bias = bias.data();
    e.residual = R.data();
    e.ldr = N;
    e.rows_done = [](void* c, int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) ++(*static_cast<std::vector<int>*>(c))[r];
    };
    e.ctx = &done;
    std::vector<float> C(static_cast<size_t>(M * N)), Cs(C.size());
    cpu::gemm_packed(M, N, K, A.data(), K, Bp.data(), C.data(), N, &e);
    for (int64_t i = 0; i < M; ++i) EXPECT_EQ(done[i], 1) << "row " << i << " M=" << M << " N=" << N;
    e.rows_done = nullptr;
    cpu::gemm_packed_serial(M, N, K, A.data(), K, Bp.data(), Cs.data(), N, &e);
    double worst = 0;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double r = bias[j] + R[i * N + j];
        for (int64_t k = 0; k < K; ++k) r += double(A[i * K + k]) * W[j * K + k];
        worst = std::max(worst, std::abs(r - C[i * N + j]) / (1 + std::abs(r)));
      }
    EXPECT_LE(worst, 2e-5) << "M=" << M << " N=" << N << " K=" << K;
    EXPECT_EQ(0, std::memcmp(C.data(), Cs.data(), C.size() * sizeof(float))) << "M=" << M << " N=" << N;
  }
}

namespace {

// One post-LN BERT layer (+ a second Linear->add->LN) with odd sizes, as the BERT builder writes it.
Graph bert_layer(int64_t NH, int64_t D, int64_t F, const char* mask_kind) {
  Graph g;
  Builder b(g);
  const int64_t H = NH * D;
  auto x = b.input("x", DType::f32, {"batch", "seq", H});
  auto mask = b.input("mask", DType::i64, {"batch", "seq"});
  unsigned seed = 10;
  auto cst = [&](std::vector<int64_t> shape, double scale = 1.0) { return b.constant(rnd_t(shape, seed++, scale)); };
  auto lin = [&](ValueId in, int64_t o, int64_t i, const char* act = "none") {
    auto w = cst({o, i}, 0.3);
    return b.linear(in, w, cst({o}), act);
  };
  auto heads = [&](ValueId t) { return b.transpose(b.reshape(t, Shape{"batch", "seq", NH, D}), {0, 2, 1, 3}); };
  auto q = heads(lin(x, H, H)), k = heads(lin(x, H, H)), v = heads(lin(x, H, H));
  std::vector<ValueId> ins{q, k, v};
  if (std::string(mask_kind) != "none") ins.push_back(mask);
  auto a = b.op1(OpKind::Attention, ins, {{"mask", std::string(mask_kind)}});
  a = b.reshape(b.transpose(a, {0, 2, 1, 3}), Shape{"batch", "seq", H});
  auto g1 = cst({H}), b1 = cst({H});
  auto x1 = b.layer_norm(b.add(lin(a, H, H), x), g1, b1, 1e-12);
  auto f = lin(lin(x1, F, H, "gelu"), H, F);
  auto g2 = cst({H}), b2 = cst({H});
  auto x2 = b.layer_norm(b.add(x1, f), g2, b2, 1e-12);
  b.output(x2);
  if (std::string(mask_kind) == "none") b.output(b.reduce(OpKind::ReduceSum, b.convert(mask, DType::f32), {1}, false));
  return g;
}

}  // namespace

TEST(CpuFastFusion, BertLayerMatchesReferenceAndFuses) {
  if (!cpu::fast_gemm_available()) GTEST_SKIP() << "no AVX2/FMA: the cpu rewrites are off";
  rlx_test::ScopedEnv profile("RLX_PROFILE", "1");
  for (const char* mk : {"padding", "none", "causal_padding"}) {
    Graph g = bert_layer(3, 10, 37, mk);  // H = 30, head dim 10, FFN 37: no size a multiple of 16
    for (auto [B, S] : {std::pair<int64_t, int64_t>{3, 19}, {1, 1}, {2, 70}}) {
      Tensor x = rnd_t({B, S, 30}, 1);
      Tensor m(DType::i64, {B, S});
      for (int64_t i = 0; i < B * S; ++i) m.set(i, (i % S) < (i / S == 1 ? std::max<int64_t>(1, S / 2) : S) ? 1 : 0);
      if (B == 3) m.set(2 * S, 0);  // a hole (not a suffix) in row 2
      auto want = reference_run(g, {x, m});
      CompiledModel cm(g, CompileOptions{});
      std::vector<Tensor> feed{x, m};
      auto got = cm.run(feed);
      got = cm.run(feed);  // second run: prepared arguments, same arena
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_LE(max_rel_diff(got[i], want[i]), 5e-5) << mk << " B=" << B << " S=" << S << " output " << i;
      std::string prof = cm.profile();
      EXPECT_NE(prof.find("attention(qkv in place)"), std::string::npos) << prof;
      EXPECT_NE(prof.find("linear+residual+layer_norm"), std::string::npos) << prof;
      EXPECT_EQ(prof.find("transpose"), std::string::npos) << prof;
    }
  }
}

TEST(CpuFastFusion, ResidualProducedAfterLinearIsNotFused) {
  // add(linear(x), r) where r is computed after the Linear in schedule order: the residual cannot
  // move into the GEMM; results must still match.
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, {5, 12});
  auto y = b.linear(x, b.constant(rnd_t({12, 12}, 3)), b.constant(rnd_t({12}, 4)));
  auto r = b.unary(OpKind::Exp, b.unary(OpKind::Neg, x));
  b.output(b.add(y, r));
  Tensor xv = rnd_t({5, 12}, 5);
  auto want = reference_run(g, {xv});
  CompiledModel cm(g, CompileOptions{});
  EXPECT_LE(max_rel_diff(cm.run({xv})[0], want[0]), 2e-5);
}

TEST(CpuFastFusion, LeadingBroadcastInFusedKernel) {
  // [B,S,1] and [B,1,1] operands against [B,S,H] (mean pooling's mask multiply): the Leading path.
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, {3, 7, 1029});  // chunks (1024) straddle rows
  auto m = b.input("m", DType::f32, {3, 7, 1});
  auto c = b.input("c", DType::f32, {3, 1, 1});
  b.output(b.add(b.mul(x, m), c));
  std::vector<Tensor> in = {rnd_t({3, 7, 1029}, 1), rnd_t({3, 7, 1}, 2), rnd_t({3, 1, 1}, 3)};
  auto want = reference_run(g, in);
  CompiledModel cm(g, CompileOptions{});
  EXPECT_LE(max_rel_diff(cm.run(in)[0], want[0]), 1e-6);
}

