// Gradient checks: every VJP rule against central finite differences in float64 (one test per
// rule), composite HIR ops through their decompositions, jvp against finite differences, vmap
// against a per-example loop, and coverage of the VJP table over every MIR primitive.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "autodiff/autodiff.h"
#include "models/mlp.h"
#include "passes/passes.h"
#include "rlx/builder.h"
#include "rlx/reference.h"

using namespace rlx;
using Ints = std::vector<int64_t>;

namespace {

enum class Dom { Any, Pos, Unit };  // Any: [-2,2] away from 0; Pos: [0.5,2]; Unit: [-0.9,0.9]
struct In {
  Ints shape;
  Dom dom = Dom::Any;
};
struct Case {
  std::string name;
  std::vector<In> in;
  std::function<ValueId(Builder&, const std::vector<ValueId>&)> f;
  double tol = 1e-6;
  double eps = 1e-6;  // finite-difference step
};

Tensor random_tensor(const In& in, std::mt19937_64& rng) {
  Tensor t(DType::f64, in.shape);
  std::uniform_real_distribution<double> u(0, 1);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = u(rng);
    if (in.dom == Dom::Pos) v = 0.5 + 1.5 * v;
    else if (in.dom == Dom::Unit) v = -0.9 + 1.8 * v;
    else v = (v < 0.5 ? -1 : 1) * (0.2 + 1.8 * std::fabs(2 * v - 1));  // |v| >= 0.2: no kinks at 0
    t.set(i, v);
  }
  return t;
}

// loss = sum(f(x) * w) with a fixed random w, so every output element matters differently.
Graph loss_graph(const Case& c, std::mt19937_64& rng) {
  Graph g;
  Builder b(g);
  std::vector<ValueId> ins;
  for (size_t i = 0; i < c.in.size(); ++i) ins.push_back(b.input("x" + std::to_string(i), DType::f64, to_shape(c.in[i].shape)));
  ValueId y = c.f(b, ins);
  if (b.dtype(y) != DType::f64) y = b.convert(y, DType::f64);
  Ints yd = static_dims(b.shape(y));
  Tensor w = random_tensor({yd, Dom::Any}, rng);
  ValueId p = b.mul(y, b.constant(w));
  Ints axes;
  for (size_t i = 0; i < yd.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  b.output(axes.empty() ? p : b.reduce(OpKind::ReduceSum, p, axes, false));
  return g;
}

void check(const Case& c) {
  std::mt19937_64 rng(1234);
  Graph g = loss_graph(c, rng);
  std::vector<Tensor> xs;
  for (auto& in : c.in) xs.push_back(random_tensor(in, rng));
  Graph gg = ad::value_and_grad(g);
  auto r = reference_run(gg, xs);
  ASSERT_EQ(r.size(), 1 + xs.size());
  double f0 = reference_run(g, xs)[0].get(0);
  EXPECT_NEAR(r[0].get(0), f0, 1e-12 * (1 + std::fabs(f0)));
  const double eps = c.eps;
  for (size_t i = 0; i < xs.size(); ++i) {
    ASSERT_EQ(r[1 + i].shape(), xs[i].shape()) << c.name << " input " << i;
    int64_t n = xs[i].numel(), stride = std::max<int64_t>(1, n / 48);
    for (int64_t k = 0; k < n; k += stride) {
      std::vector<Tensor> xp = xs, xm = xs;
      xp[i] = xs[i].clone();
      xm[i] = xs[i].clone();
      xp[i].set(k, xs[i].get(k) + eps);
      xm[i].set(k, xs[i].get(k) - eps);
      double fd = (reference_run(g, xp)[0].get(0) - reference_run(g, xm)[0].get(0)) / (2 * eps);
      double an = r[1 + i].get(k);
      EXPECT_NEAR(an, fd, c.tol * (1 + std::fabs(fd))) << c.name << ": d/dx" << i << "[" << k << "]";
    }
  }
}

ValueId un(Builder& b, OpKind k, const std::vector<ValueId>& x) { return b.unary(k, x[0]); }
ValueId bin(Builder& b, OpKind k, const std::vector<ValueId>& x) { return b.op1(k, {x[0], x[1]}); }
Tensor idx(Ints shape, std::vector<int64_t> v) { return Tensor::from(DType::i64, std::move(shape), v); }

std::vector<Case> rule_cases() {
  using V = const std::vector<ValueId>&;
  std::vector<Case> c;
  auto unary = [&](const char* n, OpKind k, Dom d) { c.push_back({n, {{{3, 4}, d}}, [k](Builder& b, V x) { return un(b, k, x); }}); };
  unary("neg", OpKind::Neg, Dom::Any);
  unary("abs", OpKind::Abs, Dom::Any);
  unary("exp", OpKind::Exp, Dom::Any);
  unary("log", OpKind::Log, Dom::Pos);
  unary("sqrt", OpKind::Sqrt, Dom::Pos);
  unary("rsqrt", OpKind::Rsqrt, Dom::Pos);
  unary("tanh", OpKind::Tanh, Dom::Any);
  unary("erf", OpKind::Erf, Dom::Any);
  unary("sin", OpKind::Sin, Dom::Any);
  unary("cos", OpKind::Cos, Dom::Any);
  unary("logistic", OpKind::Logistic, Dom::Any);
  unary("floor", OpKind::Floor, Dom::Unit);
  unary("ceil", OpKind::Ceil, Dom::Unit);
  unary("round", OpKind::Round, Dom::Unit);
  unary("sign", OpKind::Sign, Dom::Any);
  c.push_back({"convert", {{{3, 4}}}, [](Builder& b, V x) { return b.convert(b.convert(x[0], DType::f32), DType::f64); }, 1e-4, 1e-2});
  auto binary = [&](const char* n, OpKind k, Dom d0, Dom d1, Ints s0 = {3, 4}, Ints s1 = {4}) {
    c.push_back({n, {{s0, d0}, {s1, d1}}, [k](Builder& b, V x) { return bin(b, k, x); }});
  };
  binary("add_broadcast", OpKind::Add, Dom::Any, Dom::Any, {2, 3, 4}, {3, 1});
  binary("sub_broadcast", OpKind::Sub, Dom::Any, Dom::Any);
  binary("mul_broadcast", OpKind::Mul, Dom::Any, Dom::Any, {3, 1}, {3, 4});
  binary("div", OpKind::Div, Dom::Any, Dom::Pos);
  binary("pow", OpKind::Pow, Dom::Pos, Dom::Any, {3, 4}, {3, 4});
  binary("max", OpKind::Max, Dom::Any, Dom::Any, {3, 4}, {3, 4});
  binary("min", OpKind::Min, Dom::Any, Dom::Any, {3, 4}, {3, 4});
  binary("rem", OpKind::Rem, Dom::Any, Dom::Pos, {3, 4}, {3, 4});
  // max(x, constant): ReLU's path through vjp_max (mask from the output), distinct from max(a, b)
  c.push_back({"max_constant_relu", {{{3, 4}}}, [](Builder& b, V x) { return b.max(x[0], b.scalar(0, DType::f64)); }});
  c.push_back({"select", {{{3, 4}}, {{3, 4}}, {{4}}}, [](Builder& b, V x) {
                 return b.select(b.op1(OpKind::Gt, {x[0], b.scalar(0, DType::f64)}), x[1], x[2]);
               }});
  c.push_back({"reduce_sum", {{{2, 3, 4}}}, [](Builder& b, V x) { return b.reduce(OpKind::ReduceSum, x[0], {0, 2}, false); }});
  c.push_back({"reduce_max", {{{3, 5}}}, [](Builder& b, V x) { return b.reduce(OpKind::ReduceMax, x[0], {1}, true); }});
  c.push_back({"reduce_min", {{{3, 5}}}, [](Builder& b, V x) { return b.reduce(OpKind::ReduceMin, x[0], {0}, false); }});
  c.push_back({"reduce_prod", {{{3, 4}, Dom::Pos}}, [](Builder& b, V x) { return b.reduce(OpKind::ReduceProd, x[0], {1}, false); }});
  c.push_back({"cumsum", {{{3, 4}}}, [](Builder& b, V x) {
                 return b.op1(OpKind::Cumsum, {x[0]}, {{"axis", int64_t{1}}, {"exclusive", int64_t{1}}});
               }});
  c.push_back({"dot_general_matmul", {{{3, 4}}, {{4, 5}}}, [](Builder& b, V x) { return b.dot_general(x[0], x[1], {}, {}, {1}, {0}); }});
  c.push_back({"dot_general_batched", {{{2, 4, 3}}, {{5, 2, 4}}}, [](Builder& b, V x) {
                 return b.dot_general(x[0], x[1], {0}, {1}, {1}, {2});
               }});
  c.push_back({"conv_stride1_pad1", {{{2, 2, 5, 5}}, {{3, 2, 3, 3}}}, [](Builder& b, V x) {
                 return b.op1(OpKind::Conv, {x[0], x[1]}, {{"pads", Ints{1, 1, 1, 1}}});
               }});
  c.push_back({"conv_stride2", {{{1, 2, 6, 7}}, {{2, 2, 3, 2}}}, [](Builder& b, V x) {
                 return b.op1(OpKind::Conv, {x[0], x[1]}, {{"strides", Ints{2, 2}}, {"pads", Ints{1, 0, 0, 1}}});
               }});
  // sort/topk: values selected by the indices output (distinct random values: no ties)
  c.push_back({"sort_axis1", {{{3, 5}}}, [](Builder& b, V x) {
                 return b.op(OpKind::Sort, {x[0]}, {{"axis", int64_t{1}}, {"descending", int64_t{1}}})[0];
               }});
  c.push_back({"topk_axis0", {{{5, 3}}}, [](Builder& b, V x) {
                 return b.op(OpKind::TopK, {x[0]}, {{"k", int64_t{2}}, {"axis", int64_t{0}}})[0];
               }});
  c.push_back({"reduce_window_max", {{{4, 6}}}, [](Builder& b, V x) {
                 return b.op1(OpKind::ReduceWindow, {x[0]}, {{"kind", std::string("max")},
                                                             {"window", Ints{2, 3}}, {"strides", Ints{2, 3}}});
               }});
  c.push_back({"conv_dilation2_stride2", {{{1, 2, 9, 8}}, {{2, 2, 3, 2}}}, [](Builder& b, V x) {
                 return b.op1(OpKind::Conv, {x[0], x[1]}, {{"strides", Ints{2, 1}}, {"dilations", Ints{2, 3}},
                                                           {"pads", Ints{1, 2, 3, 0}}});
               }});
  c.push_back({"broadcast_in_dim", {{{3, 1}}}, [](Builder& b, V x) { return b.broadcast_in_dim(x[0], Shape{2, 3, 4}, {1, 2}); }});
  c.push_back({"reshape", {{{3, 4}}}, [](Builder& b, V x) { return b.reshape(x[0], Shape{2, 6}); }});
  c.push_back({"transpose", {{{2, 3, 4}}}, [](Builder& b, V x) { return b.transpose(x[0], {2, 0, 1}); }});
  c.push_back({"slice_strided", {{{5, 7}}}, [](Builder& b, V x) {
                 return b.op1(OpKind::Slice, {x[0]}, {{"start", Ints{1, 0}}, {"limit", Ints{5, 7}}, {"stride", Ints{2, 3}}});
               }});
  c.push_back({"pad", {{{2, 3}}}, [](Builder& b, V x) {
                 return b.op1(OpKind::Pad, {x[0]}, {{"low", Ints{1, 0}}, {"high", Ints{0, 2}}, {"value", 1.5}});
               }});
  c.push_back({"concatenate", {{{2, 3}}, {{2, 2}}}, [](Builder& b, V x) {
                 return b.op1(OpKind::Concatenate, {x[0], x[1]}, {{"axis", int64_t{1}}});
               }});
  c.push_back({"gather", {{{4, 3}}}, [](Builder& b, V x) {
                 return b.op1(OpKind::Gather, {x[0], b.constant(idx({2, 2}, {3, 0, 3, 1}))}, {{"axis", int64_t{0}}});
               }});
  c.push_back({"scatter_add", {{{4, 3}}, {{4, 2}}}, [](Builder& b, V x) {
                 return b.op1(OpKind::ScatterAdd, {x[0], b.constant(idx({2}, {2, 2})), x[1]}, {{"axis", int64_t{1}}});
               }});
  return c;
}

std::vector<Case> composite_cases() {
  using V = const std::vector<ValueId>&;
  std::vector<Case> c;
  c.push_back({"softmax", {{{3, 5}}}, [](Builder& b, V x) { return b.softmax(x[0], 1); }});
  c.push_back({"log_softmax_xent", {{{4, 5}}}, [](Builder& b, V x) {
                 Tensor oh(DType::f64, {4, 5});
                 for (int i = 0; i < 4; ++i) oh.set(i * 5 + (i * 3) % 5, 1);
                 ValueId l = b.op1(OpKind::LogSoftmax, {x[0]}, {{"axis", int64_t{1}}});
                 return b.reduce(OpKind::ReduceSum, b.mul(l, b.constant(oh)), {1}, false);
               }});
  // pooling (reduce_window VJP, non-overlapping windows; 5 rows -> the last is cut off)
  c.push_back({"max_pool_2x2", {{{2, 2, 5, 6}}}, [](Builder& b, V x) {
                 return b.op1(OpKind::MaxPool, {x[0]}, {{"kernel", std::vector<int64_t>{2, 2}},
                                                        {"strides", std::vector<int64_t>{2, 2}}});
               }});
  c.push_back({"reduce_window_sum", {{{2, 4, 6}}}, [](Builder& b, V x) {
                 return b.op1(OpKind::ReduceWindow, {x[0]}, {{"kind", std::string("sum")},
                                                             {"window", std::vector<int64_t>{1, 2, 3}},
                                                             {"strides", std::vector<int64_t>{1, 2, 3}}});
               }});
  c.push_back({"reduce_window_min", {{{4, 6}}}, [](Builder& b, V x) {
                 return b.op1(OpKind::ReduceWindow, {x[0]}, {{"kind", std::string("min")},
                                                             {"window", std::vector<int64_t>{2, 3}},
                                                             {"strides", std::vector<int64_t>{2, 3}}});
               }});
  c.push_back({"layer_norm", {{{3, 6}}, {{6}}, {{6}}}, [](Builder& b, V x) { return b.layer_norm(x[0], x[1], x[2]); }});
  c.push_back({"layer_norm_axis1_no_bias", {{{2, 3, 4}}, {{3, 4}}}, [](Builder& b, V x) {
                 return b.op1(OpKind::LayerNorm, {x[0], x[1]}, {{"axis", int64_t{1}}, {"eps", 1e-3}});
               }});
  c.push_back({"gelu_erf", {{{3, 4}}}, [](Builder& b, V x) { return b.gelu(x[0]); }});
  c.push_back({"gelu_tanh", {{{3, 4}}}, [](Builder& b, V x) { return b.gelu(x[0], "tanh"); }});
  c.push_back({"attention_causal", {{{1, 2, 4, 3}}, {{1, 2, 4, 3}}, {{1, 2, 4, 3}}}, [](Builder& b, V x) {
                 return b.attention(x[0], x[1], x[2], -1, "causal");
               }});
  c.push_back({"linear_relu", {{{3, 4}}, {{5, 4}}, {{5}}}, [](Builder& b, V x) { return b.linear(x[0], x[1], x[2], "relu"); }});
  c.push_back({"convolution_bias", {{{1, 2, 5, 5}}, {{3, 2, 3, 3}}, {{3}}}, [](Builder& b, V x) {
                 return b.op1(OpKind::Convolution, {x[0], x[1], x[2]}, {{"pads", Ints{1, 1, 1, 1}}});
               }});
  c.push_back({"rms_norm", {{{2, 6}}, {{6}}}, [](Builder& b, V x) { return b.op1(OpKind::RmsNorm, {x[0], x[1]}); }});
  c.push_back({"silu", {{{3, 4}}}, [](Builder& b, V x) { return b.unary(OpKind::Silu, x[0]); }});
  return c;
}

class VjpRule : public ::testing::TestWithParam<Case> {};
TEST_P(VjpRule, MatchesFiniteDifferences) { check(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Autodiff, VjpRule, ::testing::ValuesIn(rule_cases()),
                         [](const auto& i) { return i.param.name; });

class CompositeGrad : public ::testing::TestWithParam<Case> {};
TEST_P(CompositeGrad, MatchesFiniteDifferences) { check(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Autodiff, CompositeGrad, ::testing::ValuesIn(composite_cases()),
                         [](const auto& i) { return i.param.name; });

// Forward mode per rule: the tangent of loss = sum(f(x) * w) along a random direction t
// (every float input perturbed) against central differences of the loss along t.
void check_jvp(const Case& c) {
  std::mt19937_64 rng(4321);
  Graph g = loss_graph(c, rng);
  std::vector<Tensor> xs, ts;
  for (auto& in : c.in) xs.push_back(random_tensor(in, rng));
  for (auto& in : c.in) ts.push_back(random_tensor({in.shape, Dom::Any}, rng));
  Graph j = ad::jvp(g);
  ASSERT_EQ(j.inputs.size(), 2 * xs.size()) << c.name;
  ASSERT_EQ(j.outputs.size(), 2u) << c.name;
  std::vector<Tensor> in = xs;
  in.insert(in.end(), ts.begin(), ts.end());
  auto r = reference_run(j, in);
  auto shifted = [&](double s) {
    std::vector<Tensor> v;
    for (size_t i = 0; i < xs.size(); ++i) {
      Tensor t = xs[i].clone();
      for (int64_t k = 0; k < t.numel(); ++k) t.set(k, t.get(k) + s * ts[i].get(k));
      v.push_back(t);
    }
    return reference_run(g, v)[0].get(0);
  };
  double fd = (shifted(c.eps) - shifted(-c.eps)) / (2 * c.eps);
  EXPECT_NEAR(r[0].get(0), reference_run(g, xs)[0].get(0), 1e-12) << c.name;
  EXPECT_NEAR(r[1].get(0), fd, 10 * c.tol * (1 + std::fabs(fd))) << c.name << ": jvp";
}

// vmap per rule: f with every input batched (leading axis 3) against a per-example loop.
void check_vmap(const Case& c) {
  const int64_t B = 3;
  Graph g;
  Builder b(g);
  std::vector<ValueId> ins;
  for (size_t i = 0; i < c.in.size(); ++i)
    ins.push_back(b.input("x" + std::to_string(i), DType::f64, to_shape(c.in[i].shape)));
  b.output(c.f(b, ins));
  std::mt19937_64 rng(99);
  std::vector<Tensor> xb;
  for (auto& in : c.in) {
    Ints s = in.shape;
    s.insert(s.begin(), B);
    xb.push_back(random_tensor({s, in.dom}, rng));
  }
  auto out = reference_run(ad::vmap(g, B), xb);
  ASSERT_EQ(out.size(), 1u);
  for (int64_t e = 0; e < B; ++e) {
    std::vector<Tensor> xe;
    for (auto& t : xb) {
      Ints s(t.shape().begin() + 1, t.shape().end());
      Tensor one(DType::f64, s);
      for (int64_t k = 0; k < one.numel(); ++k) one.set(k, t.get(e * one.numel() + k));
      xe.push_back(one);
    }
    Tensor want = reference_run(g, xe)[0];
    ASSERT_EQ(out[0].numel(), B * want.numel()) << c.name;
    for (int64_t k = 0; k < want.numel(); ++k)
      EXPECT_NEAR(out[0].get(e * want.numel() + k), want.get(k), 1e-12 * (1 + std::fabs(want.get(k))))
          << c.name << ": example " << e << "[" << k << "]";
  }
}

class JvpRule : public ::testing::TestWithParam<Case> {};
TEST_P(JvpRule, MatchesFiniteDifferences) { check_jvp(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Autodiff, JvpRule, ::testing::ValuesIn(rule_cases()),
                         [](const auto& i) { return i.param.name; });
INSTANTIATE_TEST_SUITE_P(AutodiffComposite, JvpRule, ::testing::ValuesIn(composite_cases()),
                         [](const auto& i) { return i.param.name; });

class VmapRule : public ::testing::TestWithParam<Case> {};
TEST_P(VmapRule, MatchesPerExampleLoop) { check_vmap(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Autodiff, VmapRule, ::testing::ValuesIn(rule_cases()),
                         [](const auto& i) { return i.param.name; });
INSTANTIATE_TEST_SUITE_P(AutodiffComposite, VmapRule, ::testing::ValuesIn(composite_cases()),
                         [](const auto& i) { return i.param.name; });

}  // namespace

// stop_gradient: identity in value, no cotangent and no tangent through it; kept by vmap.
TEST(Autodiff, StopGradientBlocksCotangentAndTangent) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", DType::f64, {4});
  ValueId sx = b.stop_gradient(x);
  // f = sum(x * sg(x)) + sum(exp(sg(x))): value as without the stop, gradient x (not 2x + exp(x))
  b.output(b.add(b.reduce(OpKind::ReduceSum, b.mul(x, sx), {0}, false),
                 b.reduce(OpKind::ReduceSum, b.unary(OpKind::Exp, sx), {0}, false)));
  Tensor xv = Tensor::from(DType::f64, {4}, std::vector<double>{0.5, -1.25, 2, 3});
  Tensor tv = Tensor::from(DType::f64, {4}, std::vector<double>{1, 2, -1, 0.5});
  double want = 0;
  for (int k = 0; k < 4; ++k) want += xv.get(k) * xv.get(k) + std::exp(xv.get(k));
  auto r = reference_run(ad::value_and_grad(g), {xv});
  EXPECT_NEAR(r[0].get(0), want, 1e-12);
  for (int k = 0; k < 4; ++k) EXPECT_DOUBLE_EQ(r[1].get(k), xv.get(k)) << k;
  auto j = reference_run(ad::jvp(g), {xv, tv});
  double dir = 0;
  for (int k = 0; k < 4; ++k) dir += xv.get(k) * tv.get(k);
  EXPECT_NEAR(j[1].get(0), dir, 1e-12);
  // vmap keeps the op (so a later grad still stops there) and batches it elementwise
  Graph v = ad::vmap(g, 2);
  int stops = 0;
  for (auto& n : v.nodes) stops += n.op == OpKind::StopGradient;
  EXPECT_EQ(stops, 1);
  auto gv = reference_run(ad::vjp(v), {Tensor::from(DType::f64, {2, 4}, std::vector<double>{0.5, -1.25, 2, 3, 1, 1, 1, 1}),
                                       Tensor::from(DType::f64, {2}, std::vector<double>{1, 1})});
  ASSERT_EQ(gv.size(), 2u);
  for (int k = 0; k < 4; ++k) EXPECT_DOUBLE_EQ(gv[1].get(k), xv.get(k));  // per-example gradient: x
  for (int k = 4; k < 8; ++k) EXPECT_DOUBLE_EQ(gv[1].get(k), 1.0);
  // the value of stop_gradient itself: its input, bit for bit; decompose_all drops it
  Graph id;
  Builder ib(id);
  ib.output(ib.stop_gradient(ib.input("x", DType::f64, {4})));
  EXPECT_EQ(reference_run(id, {xv})[0].get(2), 2.0);
  EXPECT_TRUE(decompose_all(id).nodes.empty());
}

// The MNIST loss head puts the log-softmax max under stop_gradient: its gradient is the
// closed form (softmax - onehot) / B, and the backward pass has no reduce_max VJP (no extra eq).
TEST(Autodiff, ClassificationHeadGradientIsClosedForm) {
  const int64_t B = 3, C = 4;
  Graph g;
  Builder b(g);
  ValueId z = b.input("z", DType::f64, {B, C});
  ValueId lab = b.input("labels", DType::i64, {B});
  auto h = models::classification_head(b, z, lab);
  b.output(h[0]);
  std::vector<double> zv = {0.1, 2.0, -1.0, 0.5, 3.0, 3.0, 0.0, -2.0, -0.5, 0.25, 1.5, 1.0};
  std::vector<int64_t> lv = {1, 0, 3};
  Graph vg = ad::value_and_grad(g, {0});
  auto r = reference_run(vg, {Tensor::from(DType::f64, {B, C}, zv), Tensor::from(DType::i64, {B}, lv)});
  double loss = 0;
  for (int64_t i = 0; i < B; ++i) {
    double mx = -1e300, se = 0;
    for (int64_t c = 0; c < C; ++c) mx = std::max(mx, zv[i * C + c]);
    for (int64_t c = 0; c < C; ++c) se += std::exp(zv[i * C + c] - mx);
    loss += (std::log(se) + mx - zv[i * C + lv[i]]) / B;
    for (int64_t c = 0; c < C; ++c) {
      double want = (std::exp(zv[i * C + c] - mx) / se - (c == lv[i] ? 1.0 : 0.0)) / B;
      EXPECT_NEAR(r[1].get(i * C + c), want, 1e-14) << i << "," << c;
    }
  }
  EXPECT_NEAR(r[0].get(0), loss, 1e-14);
  auto count_eq = [](const Graph& x) {
    int n = 0;
    for (auto& nd : x.nodes) n += nd.op == OpKind::Eq;
    return n;
  };
  EXPECT_EQ(count_eq(decompose_all(vg)), count_eq(decompose_all(g)) - 1);  // the argmax eq (correct) is dead
}

TEST(Autodiff, EveryMirPrimitiveHasAVjpOrIsMarked) {
  // The VJP column of ops.def names a rule, or marks the op nondiff / pending (complex parts: f64
  // finite differences cannot probe them; complex autodiff is not supported).
  for (int i = 0; i < num_ops(); ++i) {
    OpKind k = static_cast<OpKind>(i);
    const auto& info = op_info(k);
    if (info.level != Level::Mir) continue;
    bool pending = info.vjp == "pending";
    EXPECT_EQ(ad::has_vjp(k), !pending) << op_name(k) << ": VJP column '" << info.vjp << "'";
    EXPECT_EQ(ad::is_nondifferentiable(k), info.vjp == "nondiff") << op_name(k);
    if (pending) {  // send/recv: docs/distributed.md
      EXPECT_TRUE(k == OpKind::Real || k == OpKind::Imag || k == OpKind::Conj || k == OpKind::Send ||
                  k == OpKind::Recv)
          << op_name(k);
    }
  }
}

TEST(Autodiff, VjpTakesCotangentInputs) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", DType::f64, {3});
  b.output(b.mul(x, x));
  Graph v = ad::vjp(g);
  ASSERT_EQ(v.inputs.size(), 2u);
  auto r = reference_run(v, {Tensor::from(DType::f64, {3}, std::vector<double>{1, 2, 3}),
                             Tensor::from(DType::f64, {3}, std::vector<double>{1, 10, 100})});
  EXPECT_DOUBLE_EQ(r[1].get(0), 2);
  EXPECT_DOUBLE_EQ(r[1].get(1), 40);
  EXPECT_DOUBLE_EQ(r[1].get(2), 600);
}

TEST(Autodiff, UnusedInputGetsZeroGradAndErrorsNameTheNode) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", DType::f64, {2}), y = b.input("y", DType::f64, {2});
  (void)y;
  b.output(b.reduce(OpKind::ReduceSum, b.unary(OpKind::Exp, x), {0}, false));
  auto r = reference_run(ad::grad(g), {Tensor(DType::f64, {2}), Tensor(DType::f64, {2})});
  EXPECT_DOUBLE_EQ(r[0].get(0), 1);
  EXPECT_DOUBLE_EQ(r[1].get(0), 0);
  Graph h;
  Builder hb(h);
  ValueId z = hb.input("z", DType::c64, {4});
  ValueId w = hb.input("w", DType::f32, {4});
  hb.output(hb.reduce(OpKind::ReduceSum, hb.mul(hb.unary(OpKind::Real, z), w), {0}, false));
  try {
    ad::grad(h);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("real"), std::string::npos) << e.what();
  }
}

TEST(Autodiff, JvpMatchesFiniteDifferences) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", DType::f64, {3, 4}), w = b.input("w", DType::f64, {4, 2});
  ValueId h = b.unary(OpKind::Tanh, b.dot_general(x, w, {}, {}, {1}, {0}));
  b.output(b.softmax(h, 1));
  b.output(b.reduce(OpKind::ReduceSum, b.mul(h, h), {0, 1}, false));
  std::mt19937_64 rng(7);
  std::vector<Tensor> xs = {random_tensor({{3, 4}}, rng), random_tensor({{4, 2}}, rng)};
  std::vector<Tensor> ts = {random_tensor({{3, 4}}, rng), random_tensor({{4, 2}}, rng)};
  Graph j = ad::jvp(g);
  ASSERT_EQ(j.inputs.size(), 4u);
  ASSERT_EQ(j.outputs.size(), 4u);
  auto r = reference_run(j, {xs[0], xs[1], ts[0], ts[1]});
  const double eps = 1e-6;
  auto shifted = [&](double s) {
    std::vector<Tensor> v;
    for (int i = 0; i < 2; ++i) {
      Tensor t = xs[i].clone();
      for (int64_t k = 0; k < t.numel(); ++k) t.set(k, t.get(k) + s * ts[i].get(k));
      v.push_back(t);
    }
    return reference_run(g, v);
  };
  auto p = shifted(eps), m = shifted(-eps);
  for (int o = 0; o < 2; ++o)
    for (int64_t k = 0; k < p[o].numel(); ++k) {
      double fd = (p[o].get(k) - m[o].get(k)) / (2 * eps);
      EXPECT_NEAR(r[2 + o].get(k), fd, 1e-6 * (1 + std::fabs(fd))) << "output " << o << "[" << k << "]";
    }
  auto y = reference_run(g, xs);
  EXPECT_NEAR(r[1].get(0), y[1].get(0), 1e-12);
}

TEST(Autodiff, VmapMatchesPerExampleLoop) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", DType::f64, {4}), w = b.input("w", DType::f64, {4, 3});
  ValueId h = b.dot_general(x, w, {}, {}, {0}, {0});                 // batched lhs
  ValueId s = b.op(OpKind::Sort, {b.unary(OpKind::Tanh, h)})[0];     // unrolled
  ValueId r = b.reduce(OpKind::ReduceMax, s, {0}, true);
  b.output(b.sub(s, r));
  b.output(b.dot_general(w, x, {}, {}, {0}, {0}));                    // batched rhs
  std::mt19937_64 rng(3);
  const int64_t B = 5;
  Tensor xb = random_tensor({{B, 4}}, rng), wb = random_tensor({{B, 4, 3}}, rng), w0 = random_tensor({{4, 3}}, rng);
  // all inputs batched
  auto out = reference_run(ad::vmap(g, B), {xb, wb});
  // only x batched
  auto out2 = reference_run(ad::vmap(g, B, {0}), {xb, w0});
  for (int64_t i = 0; i < B; ++i) {
    Tensor xi(DType::f64, {4}), wi(DType::f64, {4, 3});
    for (int k = 0; k < 4; ++k) xi.set(k, xb.get(i * 4 + k));
    for (int k = 0; k < 12; ++k) wi.set(k, wb.get(i * 12 + k));
    auto ref = reference_run(g, {xi, wi});
    auto ref2 = reference_run(g, {xi, w0});
    for (int o = 0; o < 2; ++o)
      for (int64_t k = 0; k < ref[o].numel(); ++k) {
        EXPECT_NEAR(out[o].get(i * ref[o].numel() + k), ref[o].get(k), 1e-12);
        EXPECT_NEAR(out2[o].get(i * ref2[o].numel() + k), ref2[o].get(k), 1e-12);
      }
  }
}
