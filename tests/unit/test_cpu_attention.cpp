// The cpu device's attention kernel (src/backends/cpu/nn.cpp: register-tiled strips of 6 query rows
// x 16-key panels, softmax in L1, P.V tiles) against the reference interpreter: every mask kind,
// grouped KV heads, query/key counts that are not multiples of the strip or panel, value widths
// with an 8-column tail, causal with S != T (rows with no visible key), padding masks with holes and
// a batch row with every key masked, NaN in a masked key, and the fused form that reads the heads
// in place from a merged QKV buffer (the BERT pattern the merge-qkv LIR pass rewrites).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "backends/cpu/gemm_avx2.h"
#include "rlx/builder.h"
#include "rlx/reference.h"
#include "rlx/session.h"
#include "test_util.h"

using namespace rlx;

namespace {

using rlx_test::max_rel_diff;  // NaN on one side only counts as a mismatch (infinite)

Tensor wave(DType dt, std::vector<int64_t> shape, int seed, double scale = 1.0) {
  return rlx_test::sine_tensor(dt, shape, 0.61 * (seed + 2), seed, scale);
}

void expect_matches_reference(const Graph& g, const std::vector<Tensor>& in, const std::string& what) {
  auto want = reference_run(g, in);
  auto got = rlx_test::run_cpu(g, in, /*fuse=*/true, 2);  // run 2 reuses the arena and the per-thread scratch
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) EXPECT_LE(max_rel_diff(got[k], want[k]), 2e-5) << what << " output " << k;
}

struct Case {
  int64_t B, H, Hk, S, T, D, Dv;
};

}  // namespace

TEST(CpuAttention, StripsMatchReferenceForEveryMask) {
  const Case cases[] = {
      {2, 12, 12, 128, 128, 32, 32},  // MiniLM's head shape
      {3, 4, 2, 70, 45, 24, 40},      // grouped heads, S, T off the 6/16 grid, 16+16+8 value columns
      {2, 2, 1, 20, 45, 16, 8},       // causal: S < T (every row sees the first T - S keys)
      {1, 3, 3, 50, 21, 8, 16},       // causal: S > T (the first S - T rows see no key: zeros)
      {2, 2, 2, 9, 9, 12, 12},        // Dv % 8 != 0: the packed-GEMM path
  };
  for (const Case& c : cases) {
    for (const char* mask : {"none", "causal", "padding", "causal_padding", "bias"}) {
      Graph g;
      Builder b(g);
      auto q = b.input("q", DType::f32, {c.B, c.H, c.S, c.D});
      auto k = b.input("k", DType::f32, {c.B, c.Hk, c.T, c.D});
      auto v = b.input("v", DType::f32, {c.B, c.Hk, c.T, c.Dv});
      std::vector<ValueId> ins{q, k, v};
      std::vector<Tensor> feed{wave(DType::f32, {c.B, c.H, c.S, c.D}, 1, 1.5),
                               wave(DType::f32, {c.B, c.Hk, c.T, c.D}, 2, 1.5),
                               wave(DType::f32, {c.B, c.Hk, c.T, c.Dv}, 3)};
      const std::string m = mask;
      if (m == "padding" || m == "causal_padding") {
        ins.push_back(b.input("mask", DType::i64, {c.B, c.T}));
        Tensor pm(DType::i64, {c.B, c.T});
        // row 0: a prefix of 60% with a hole; row 1: nothing kept; row 2: all kept
        for (int64_t bb = 0; bb < c.B; ++bb)
          for (int64_t t = 0; t < c.T; ++t)
            pm.set(bb * c.T + t, bb == 0 ? (t < c.T * 6 / 10 && t != 3) : bb == 1 ? 0 : 1);
        feed.push_back(pm);
      }
      if (m == "bias") {
        ins.push_back(b.input("bias", DType::f32, {c.B, 1, c.S, c.T}));
        Tensor bias = wave(DType::f32, {c.B, 1, c.S, c.T}, 4, 2.0);
        bias.set(5, -std::numeric_limits<double>::infinity());  // one key masked by the bias
        feed.push_back(bias);
      }
      b.output(b.op1(OpKind::Attention, ins, {{"mask", m}}));
      expect_matches_reference(g, feed,
                               m + " B" + std::to_string(c.B) + " H" + std::to_string(c.H) + " S" + std::to_string(c.S) +
                                   " T" + std::to_string(c.T) + " D" + std::to_string(c.D) + " Dv" + std::to_string(c.Dv));
    }
  }
}

TEST(CpuAttention, MaskedKeyWithNaNIsIgnored) {
  // A NaN in a masked key's row must not reach the output (the reference skips masked keys).
  const int64_t B = 2, H = 2, S = 7, T = 19, D = 16;
  Graph g;
  Builder b(g);
  auto q = b.input("q", DType::f32, {B, H, S, D});
  auto k = b.input("k", DType::f32, {B, H, T, D});
  auto v = b.input("v", DType::f32, {B, H, T, D});
  auto mk = b.input("mask", DType::i64, {B, T});
  b.output(b.op1(OpKind::Attention, {q, k, v, mk}, {{"mask", std::string("padding")}}));
  Tensor kt = wave(DType::f32, {B, H, T, D}, 2), pm(DType::i64, {B, T});
  for (int64_t i = 0; i < B * T; ++i) pm.set(i, (i % T) != 4);
  for (int64_t d = 0; d < D; ++d) kt.set(4 * D + d, std::nan(""));  // key 4 of (b 0, h 0): masked
  std::vector<Tensor> feed{wave(DType::f32, {B, H, S, D}, 1), kt, wave(DType::f32, {B, H, T, D}, 3), pm};
  auto want = reference_run(g, feed);
  CompileOptions o;
  o.device = "cpu";
  CompiledModel m(g, o);
  auto got = m.run(feed);
  for (int64_t i = 0; i < got[0].numel(); ++i) ASSERT_FALSE(std::isnan(got[0].get(i))) << i;
  EXPECT_LE(max_rel_diff(got[0], want[0]), 2e-5);
}

TEST(CpuAttention, FusedQkvFormMatchesReference) {
  // The BERT block shape: three Linears of one input, heads split by reshape + transpose, padding
  // attention, heads merged back. The cpu executable turns it into one QKV GEMM and an attention
  // that reads the heads in place (profile label "attention(qkv in place)").
  const int64_t B = 3, S = 37, NH = 4, Dh = 16, Hd = NH * Dh;
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, {B, S, Hd});
  auto mask = b.input("mask", DType::i64, {B, S});
  auto heads = [&](int seed) {
    auto y = b.linear(x, b.constant(wave(DType::f32, {Hd, Hd}, seed, 0.3)), b.constant(wave(DType::f32, {Hd}, seed + 1)));
    return b.transpose(b.reshape(y, Shape{B, S, NH, Dh}), {0, 2, 1, 3});
  };
  auto a = b.attention(heads(1), heads(3), heads(5), mask, "padding");
  b.output(b.reshape(b.transpose(a, {0, 2, 1, 3}), Shape{B, S, Hd}));
  Tensor pm(DType::i64, {B, S});
  for (int64_t i = 0; i < B * S; ++i) pm.set(i, (i / S == 1) ? (i % S) < 20 : 1);
  std::vector<Tensor> feed{wave(DType::f32, {B, S, Hd}, 7), pm};
  auto want = reference_run(g, feed);
  CompileOptions o;
  o.device = "cpu";
  CompiledModel m(g, o);
  std::vector<Tensor> got;
  {
    rlx_test::ScopedEnv profile("RLX_PROFILE", "1");
    got = m.run(feed);  // (the executable is built on the first run)
  }
  EXPECT_LE(max_rel_diff(got[0], want[0]), 2e-5);
  const std::string prof = m.profile();
  if (cpu::fast_gemm_available()) {  // the rewrite needs the AVX2 GEMM
    EXPECT_NE(prof.find("qkv in place"), std::string::npos) << prof;
  }
}
