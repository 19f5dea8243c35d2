// cpu kernels the training step relies on (src/backends/cpu/train_kernels.cpp), checked
// against the reference interpreter, and the closed-form softmax-xent backward (stop-gradient).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include "autodiff/autodiff.h"
#include "backends/cpu/gemm_avx2.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/train_kernels.h"
#include "models/mlp.h"
#include "rlx/builder.h"
#include "rlx/reference.h"
#include "rlx/session.h"
#include "test_util.h"
#include "train/train.h"

using namespace rlx;

namespace {

using rlx_test::randn;

void expect_same(const Tensor& a, const Tensor& b, double tol, const std::string& what) {
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (std::isnan(b.get(i))) {
      ASSERT_TRUE(std::isnan(a.get(i))) << what << " [" << i << "]";
      continue;
    }
    if (tol == 0) ASSERT_EQ(a.get(i), b.get(i)) << what << " [" << i << "]";
    else ASSERT_NEAR(a.get(i), b.get(i), tol * (1 + std::fabs(b.get(i)))) << what << " [" << i << "]";
  }
}

}  // namespace

TEST(TrainKernels, MixedFusedBodyMatchesReference) {
  // ReLU backward (ge + select), one-hot (eq + convert of i64), logic ops, broadcasts.
  Graph body;
  ValueId h = body.add_input("h", DType::f32, Shape{37, 70});
  ValueId zero = body.add_input("z", DType::f32, Shape{37, 70});
  ValueId g = body.add_input("g", DType::f32, Shape{37, 70});
  ValueId lab = body.add_input("lab", DType::i64, Shape{37, 70});
  ValueId cls = body.add_input("cls", DType::i64, Shape{37, 70});
  Builder c(body);
  ValueId ge = c.op1(OpKind::Ge, {h, zero});
  ValueId eq = c.op1(OpKind::Eq, {lab, cls});
  ValueId both = c.op1(OpKind::Or, {c.op1(OpKind::Not, {ge}), eq});
  ValueId sel = c.select(both, g, c.convert(eq, DType::f32));
  body.outputs = {c.mul(sel, h)};
  // Inputs broadcast the way the fused kernels receive them: scalar, trailing row, column.
  Tensor th = randn({37, 70}, 1), tg = randn({37, 70}, 2), tz(DType::f32, {});
  Tensor tl(DType::i64, {37, 1}), tc(DType::i64, {70});
  for (int64_t i = 0; i < 37; ++i) tl.set_int(i, i % 10);
  for (int64_t i = 0; i < 70; ++i) tc.set_int(i, i % 10);
  std::vector<Tensor> in{th, tz, tg, tl, tc};
  // The body's declared input shapes are the output's; the kernels broadcast smaller inputs.
  Tensor got(DType::f32, {37, 70}), want(DType::f32, {37, 70});
  ASSERT_TRUE(cpu::fused_kernel_typed(body, in, got));
  cpu::fused_kernel_reference(body, in, want);
  expect_same(got, want, 0, "mixed body");
  // Unsupported (float -> int convert) is declined without writing.
  Graph bad;
  ValueId x = bad.add_input("x", DType::f32, Shape{4});
  Builder bb(bad);
  bad.outputs = {bb.convert(x, DType::i32)};
  Tensor out(DType::i32, {4});
  EXPECT_FALSE(cpu::fused_kernel_typed(bad, {randn({4}, 3)}, out));
}

TEST(TrainKernels, ReductionsBroadcastArgmaxMatchReference) {
  struct Case {
    OpKind op;
    std::vector<int64_t> shape, axes;
    bool keep;
  };
  std::vector<Case> cases = {{OpKind::ReduceSum, {128, 128}, {0}, false}, {OpKind::ReduceSum, {128, 10}, {1}, true},
                             {OpKind::ReduceSum, {7, 9}, {0, 1}, false},  {OpKind::ReduceMax, {5, 6, 7}, {1}, false},
                             {OpKind::ReduceMin, {5, 6, 7}, {1, 2}, true}, {OpKind::ReduceSum, {3, 4, 5}, {0, 2}, false},
                             {OpKind::ReduceMax, {13, 3}, {-1}, false}};
  for (auto& cs : cases) {
    Graph g;
    Builder b(g);
    Shape s;
    for (auto d : cs.shape) s.push_back(Dim(d));
    ValueId x = b.input("x", DType::f32, s);
    b.output(b.reduce(cs.op, x, cs.axes, cs.keep));
    Tensor tx = randn(cs.shape, 7);
    if (cs.op == OpKind::ReduceMax) tx.set(3, std::nan(""));  // NaN propagates like the reference
    auto got = CompiledModel(g, CompileOptions{}).run(std::vector<Tensor>{tx});
    auto want = reference_run(g, {tx});
    for (int64_t i = 0; i < got[0].numel(); ++i) {
      double a = got[0].get(i), w = want[0].get(i);
      if (std::isnan(w)) EXPECT_TRUE(std::isnan(a)) << op_name(cs.op) << " [" << i << "]";
      else EXPECT_NEAR(a, w, 1e-5 * (1 + std::fabs(w))) << op_name(cs.op) << " [" << i << "]";
    }
  }
  // broadcast_in_dim for several dtypes and dim maps; argmax with ties and a NaN.
  Graph g;
  Builder b(g);
  ValueId v = b.input("v", DType::f32, {6});
  ValueId l = b.input("l", DType::i64, {4});
  ValueId m = b.input("m", DType::f32, {4, 6});
  b.output(b.broadcast_in_dim(v, Shape{4, 6}, {1}));
  b.output(b.broadcast_in_dim(l, Shape{4, 3, 6}, {0}));
  b.output(b.broadcast_in_dim(m, Shape{4, 2, 6}, {0, 2}));
  b.output(b.op1(OpKind::ArgMax, {m}, {{"axis", int64_t{1}}}));
  b.output(b.op1(OpKind::ArgMin, {m}, {{"axis", int64_t{0}}, {"keepdims", int64_t{1}}}));
  Tensor tv = randn({6}, 4), tl = Tensor::from<int64_t>(DType::i64, {4}, {3, -1, 7, 1 << 30}), tm = randn({4, 6}, 5);
  tm.set(7, tm.get(9));  // tie in row 1
  tm.set(14, std::nan(""));
  auto got = CompiledModel(g, CompileOptions{}).run(std::vector<Tensor>{tv, tl, tm});
  auto want = reference_run(g, {tv, tl, tm});
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) expect_same(got[i], want[i], 0, "output " + std::to_string(i));
}

TEST(TrainHead, ClosedFormBackwardIsSoftmaxMinusOnehot) {
  const int64_t B = 5, C = 4;
  Graph g;
  Builder b(g);
  ValueId z = b.input("z", DType::f32, {B, C}), y = b.input("y", DType::i64, {B});
  auto h = models::classification_head(b, z, y);
  b.output(h[0]);
  b.output(h[1]);
  Graph vg = ad::value_and_grad(g, {0});
  // The stop-gradient keeps reduce_max out of the backward pass: one reduce_max (forward) only.
  int nmax = 0;
  for (auto& n : vg.nodes) nmax += n.op == OpKind::ReduceMax;
  EXPECT_EQ(nmax, 1);
  Tensor tz = randn({B, C}, 9), ty = Tensor::from<int64_t>(DType::i64, {B}, {0, 3, 1, 1, 2});
  auto r = reference_run(vg, {tz, ty});
  double loss = 0;
  for (int64_t i = 0; i < B; ++i) {
    double mx = -1e30, s = 0;
    for (int64_t j = 0; j < C; ++j) mx = std::max(mx, tz.get(i * C + j));
    for (int64_t j = 0; j < C; ++j) s += std::exp(tz.get(i * C + j) - mx);
    loss += (std::log(s) + mx - tz.get(i * C + ty.get_int(i))) / B;
    for (int64_t j = 0; j < C; ++j) {
      double p = std::exp(tz.get(i * C + j) - mx) / s, want = (p - (j == ty.get_int(i))) / B;
      EXPECT_NEAR(r[2].get(i * C + j), want, 1e-6);
    }
  }
  EXPECT_NEAR(r[0].get(0), loss, 1e-5);
}

TEST(TrainHead, ReluBackwardUsesTheOutputMask) {
  // max(x, 0): gradient w * (x > 0), computed from the output (the pre-activation is not needed).
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", DType::f32, {3, 5}), w = b.input("w", DType::f32, {3, 5});
  b.output(b.reduce(OpKind::ReduceSum, b.mul(b.max(x, b.scalar(0, DType::f32)), w), {0, 1}, false));
  Graph vg = ad::value_and_grad(g, {0});
  int ge = 0;
  for (auto& n : vg.nodes) ge += n.op == OpKind::Ge;
  EXPECT_EQ(ge, 0);
  Tensor tx = randn({3, 5}, 11), tw = randn({3, 5}, 12);
  tx.set(4, 0.0);  // at the kink: zero gradient, like PyTorch's relu
  auto r = CompiledModel(vg, CompileOptions{}).run(std::vector<Tensor>{tx, tw});
  for (int64_t i = 0; i < 15; ++i) EXPECT_EQ(r[1].get(i), tx.get(i) > 0 ? tw.get(i) : 0.0) << i;
}

// 2-D f32 dot_generals run on the packed AVX2 GEMM (gemm.cpp, train_gemm) with
// either operand transposed; checked against the reference interpreter on odd and step shapes.
TEST(TrainGemm, DotGeneralAllTransposesMatchReference) {
  struct Mnk {
    int64_t m, n, k;
  };
  std::vector<Mnk> shapes = {{1, 1, 1}, {5, 7, 3}, {37, 50, 77}, {128, 10, 128}, {130, 33, 300}, {16, 784, 32},
                             {200, 128, 128}, {13, 260, 64}, {64, 256, 200}, {20, 300, 400}};  // last two: column splits
  uint64_t seed = 100;
  for (auto s : shapes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        Graph g;
        Builder b(g);
        std::vector<int64_t> as = ta ? std::vector<int64_t>{s.k, s.m} : std::vector<int64_t>{s.m, s.k};
        std::vector<int64_t> bs = tb ? std::vector<int64_t>{s.n, s.k} : std::vector<int64_t>{s.k, s.n};
        ValueId a = b.input("a", DType::f32, Shape{Dim(as[0]), Dim(as[1])});
        ValueId w = b.input("b", DType::f32, Shape{Dim(bs[0]), Dim(bs[1])});
        b.output(b.dot_general(a, w, {}, {}, {ta ? 0 : 1}, {tb ? 1 : 0}));
        Tensor x = randn(as, ++seed), y = randn(bs, ++seed);
        auto got = CompiledModel(g, CompileOptions{}).run(std::vector<Tensor>{x, y});
        auto want = reference_run(g, {x, y});
        expect_same(got[0], want[0], 1e-4,
                    "dot_general " + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) +
                        (ta ? " ta" : "") + (tb ? " tb" : ""));
      }
}

// A whole SGD training step (3-layer MLP): the cpu schedule gets the bias/ReLU, ReLU-mask and SGD
// epilogues fused into its GEMMs (the train-epilogues LIR pass; the profile labels name them) and still matches
// the reference interpreter.
TEST(TrainGemm, FusedStepEpiloguesMatchReference) {
  const int64_t B = 37;
  std::vector<int64_t> sizes = {50, 40, 30, 10};
  Graph loss = models::mlp_loss_graph(sizes, B);
  train::OptimizerConfig c;  // plain SGD
  Graph step = train::build_train_step(loss, static_cast<int>(2 * (sizes.size() - 1)), c);
  std::vector<Tensor> in = rlx_test::train_step_inputs(step, 300, 0.3);
  std::vector<Tensor> got;
  std::string prof;
  {
    rlx_test::ScopedEnv profile("RLX_PROFILE", "1");
    CompiledModel m(step, CompileOptions{});
    got = m.run(in);
    prof = m.profile();
  }
  auto want = reference_run(step, in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) expect_same(got[i], want[i], 1e-4, "output " + std::to_string(i));
  if (cpu::fast_gemm_available()) {
    EXPECT_NE(prof.find("dot_general+bias+relu"), std::string::npos) << prof;
    EXPECT_NE(prof.find("dot_general+relu_mask"), std::string::npos) << prof;
    EXPECT_NE(prof.find("dot_general+sgd"), std::string::npos) << prof;
  }
}

// The bias gradients (reduce_sum of dH over the batch) fold into the weight
// gradient's GEMM (fold_bias_grads: the column sums are taken while dH is packed as B). Every output
// of whole SGD steps is bitwise that of the unfolded schedule (RLX_CPU_BIASGRAD=0), on shapes with
// partial 16-column panels, the narrow N = 10 GEMM and pooled packing; the profile shows the fold and
// the bias-gradient reduce kernels are gone.
TEST(TrainGemm, BiasGradientsFoldIntoTheGemmBitwise) {
  struct Net {
    std::vector<int64_t> sizes;
    int64_t B;
    double momentum;  // 0: plain SGD (the fold joins the +sgd GEMM); else the dW GEMM has no epilogue
  };
  const Net nets[] = {{{50, 40, 30, 10}, 37, 0}, {{100, 64, 48, 10}, 200, 0}, {{784, 128, 10}, 256, 0},
                      {{60, 33, 10}, 50, 0.9}};
  for (const Net& n : nets) {
    Graph loss = models::mlp_loss_graph(n.sizes, n.B);
    train::OptimizerConfig c;
    c.momentum = n.momentum;
    Graph step = train::build_train_step(loss, static_cast<int>(2 * (n.sizes.size() - 1)), c);
    std::vector<Tensor> in = rlx_test::train_step_inputs(step, 400 + n.B, 0.3);
    auto run = [&](const char* fold, std::string* prof, int64_t* reduces) {
      std::vector<Tensor> out;
      {
        rlx_test::ScopedEnv biasgrad("RLX_CPU_BIASGRAD", fold), profile("RLX_PROFILE", "1");
        CompiledModel m(step, CompileOptions{});
        out = m.run(in);
        out = m.run(in);  // warm: the second run reuses the arena
        *prof = m.profile();
      }
      *reduces = 0;
      for (size_t pos = 0; (pos = prof->find("calls  reduce_sum\n", pos)) != std::string::npos; ++pos) {
        size_t b = prof->rfind("us", pos);
        *reduces += std::stoll(prof->substr(b + 2, pos - b - 2));
      }
      return out;
    };
    std::string p0, p1;
    int64_t r0 = 0, r1 = 0;
    auto want = run("0", &p0, &r0);
    auto got = run("1", &p1, &r1);
    const std::string what = "mlp b" + std::to_string(n.B) + " layers " + std::to_string(n.sizes.size() - 1);
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) expect_same(got[i], want[i], 0, what + " output " + std::to_string(i));
    if (cpu::fast_gemm_available()) {
      EXPECT_NE(p1.find(n.momentum == 0 ? "+sgd+colsum" : "dot_general+colsum"), std::string::npos) << p1;
      EXPECT_EQ(p0.find("colsum"), std::string::npos) << p0;
      // one bias gradient per layer, 2 runs
      EXPECT_EQ(r0 - r1, 2 * static_cast<int64_t>(n.sizes.size() - 1)) << what << "\n" << p0 << p1;
    }
  }
}
