// ONNX ops composed at import: the einsum equation parser, and small
// models built in memory, run on cpu and checked against values computed independently here
// (plain loops / libm), not against our own importer.
#include <gtest/gtest.h>

#include <cmath>

#include "formats/onnx/ops_util.h"
#include "onnx_builders.h"
#include "rlx/session.h"

using namespace rlx;
using namespace onnx_test;

namespace {

Tensor ramp(std::vector<int64_t> shape, double scale, double off) {
  Tensor t(DType::f32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, std::sin(scale * static_cast<double>(i) + off));
  return t;
}

}  // namespace

TEST(OnnxOps, EinsumParseExplicitImplicitAndEllipsis) {
  auto s = rlx::onnx::parse_einsum("bij, bjk -> bik", {3, 3});
  EXPECT_EQ(s.inputs, (std::vector<std::string>{"bij", "bjk"}));
  EXPECT_EQ(s.output, "bik");
  // Implicit output: letters seen exactly once, alphabetically.
  s = rlx::onnx::parse_einsum("kj,ji", {2, 2});
  EXPECT_EQ(s.output, "ik");
  s = rlx::onnx::parse_einsum("i,i", {1, 1});
  EXPECT_EQ(s.output, "");
  // "..." stands for the leading dims; an operand with fewer takes the trailing labels.
  s = rlx::onnx::parse_einsum("...ii->...i", {4});
  EXPECT_EQ(s.inputs[0], "01ii");
  EXPECT_EQ(s.output, "01i");
  s = rlx::onnx::parse_einsum("...ij,...jk", {4, 3});
  EXPECT_EQ(s.inputs[0], "01ij");
  EXPECT_EQ(s.inputs[1], "1jk");
  EXPECT_EQ(s.output, "01ik");
  EXPECT_THROW(rlx::onnx::parse_einsum("ij,jk->ik", {2}), Error);       // operand count
  EXPECT_THROW(rlx::onnx::parse_einsum("ij->ik", {2}), Error);          // k not in inputs
  EXPECT_THROW(rlx::onnx::parse_einsum("ijk->ij", {2}), Error);         // rank mismatch
  EXPECT_THROW(rlx::onnx::parse_einsum("i1->i", {2}), Error);           // bad label
}

TEST(OnnxOps, EinsumContractionDiagonalAndSumMatchLoops) {
  auto m = model(12, 10);
  auto* g = m.mutable_graph();
  *g->add_input() = vi("a", 1, {2, 3, 3});
  *g->add_input() = vi("b", 1, {3, 4});
  *g->add_output() = vi("y", 1, {2, 4});
  // y[n,k] = Σ_i a[n,i,i] b[i,k]: a diagonal, then a contraction.
  attr_s(add_node(g, "Einsum", {"a", "b"}, {"y"}), "equation", "nii,ik->nk");
  Tensor a = ramp({2, 3, 3}, 0.7, 0.1), b = ramp({3, 4}, 0.3, 0.5);
  auto out = run(m, {a, b});
  ASSERT_EQ(out[0].shape(), (std::vector<int64_t>{2, 4}));
  for (int n = 0; n < 2; ++n)
    for (int k = 0; k < 4; ++k) {
      double want = 0;
      for (int i = 0; i < 3; ++i) want += a.get(n * 9 + i * 3 + i) * b.get(i * 4 + k);
      EXPECT_NEAR(out[0].get(n * 4 + k), want, 1e-5);
    }
}

TEST(OnnxOps, AtanAsinAcosMatchLibm) {
  auto m = model(13, 10);
  auto* g = m.mutable_graph();
  *g->add_input() = vi("x", 1, {7});
  *g->add_input() = vi("u", 1, {7});
  for (auto* o : {"at", "as", "ac"}) *g->add_output() = vi(o, 1, {7});
  add_node(g, "Atan", {"x"}, {"at"});
  add_node(g, "Asin", {"u"}, {"as"});
  add_node(g, "Acos", {"u"}, {"ac"});
  Tensor x = Tensor::from<float>(DType::f32, {7}, {-1e6f, -3.f, -0.5f, 0.f, 1e-4f, 0.9f, 250.f});
  Tensor u = Tensor::from<float>(DType::f32, {7}, {-1.f, -0.99f, -0.3f, 0.f, 1e-4f, 0.7f, 1.f});
  auto out = run(m, {x, u});
  for (int i = 0; i < 7; ++i) {
    EXPECT_NEAR(out[0].get(i), std::atan(x.get(i)), 1e-6 * (1 + std::abs(std::atan(x.get(i))))) << i;
    EXPECT_NEAR(out[1].get(i), std::asin(u.get(i)), 2e-6) << i;
    EXPECT_NEAR(out[2].get(i), std::acos(u.get(i)), 2e-6) << i;
  }
}

TEST(OnnxOps, GruUnrolledMatchesHandRecurrence) {
  // One direction, 2 steps, batch 1, input 1, hidden 1; default activations (sigmoid, tanh).
  auto m = model(14, 10);
  auto* g = m.mutable_graph();
  *g->add_input() = vi("X", 1, {2, 1, 1});
  *g->add_output() = vi("Y", 1, {2, 1, 1, 1});
  *g->add_output() = vi("Yh", 1, {1, 1, 1});
  auto init = [&](const char* name, std::vector<int64_t> d, std::vector<float> v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(1);
    for (auto x : d) t->add_dims(x);
    for (auto x : v) t->add_float_data(x);
  };
  init("W", {1, 3, 1}, {0.5f, -0.4f, 0.9f});  // z, r, h
  init("R", {1, 3, 1}, {0.3f, 0.2f, -0.7f});
  attr_i(add_node(g, "GRU", {"X", "W", "R"}, {"Y", "Yh"}), "hidden_size", 1);
  auto out = run(m, {Tensor::from<float>(DType::f32, {2, 1, 1}, {1.5f, -0.8f})});
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  double h = 0, xs[2] = {1.5, -0.8};
  for (int t = 0; t < 2; ++t) {
    double z = sig(0.5 * xs[t] + 0.3 * h), r = sig(-0.4 * xs[t] + 0.2 * h);
    double hh = std::tanh(0.9 * xs[t] + (r * h) * -0.7);
    h = (1 - z) * hh + z * h;
    EXPECT_NEAR(out[0].get(t), h, 1e-6);
  }
  EXPECT_NEAR(out[1].get(0), h, 1e-6);
}

TEST(OnnxOps, NonMaxSuppressionNeedsImportTimeValues) {
  auto m = model(11, 10);
  auto* g = m.mutable_graph();
  *g->add_input() = vi("boxes", 1, {1, 2, 4});
  *g->add_input() = vi("scores", 1, {1, 1, 2});
  *g->add_output() = vi("sel", 7, {1, 3});
  add_node(g, "NonMaxSuppression", {"boxes", "scores"}, {"sel"});
  try {
    rlx::onnx::import_onnx(m.SerializeAsString(), "", "mem");
    FAIL() << "expected an import error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("known at import time"), std::string::npos) << e.what();
  }
}

TEST(OnnxOps, DftOnesidedAndInverseMatchDirectSums) {
  // x [1, 6, 1] real; DFT (opset 20, axis -2 default) one-sided -> [1, 4, 2]; then its IRFFT back.
  auto m = model(20, 10);
  auto* g = m.mutable_graph();
  *g->add_input() = vi("x", 1, {1, 6, 1});
  *g->add_output() = vi("y", 1, {1, 4, 2});
  *g->add_output() = vi("z", 1, {1, 6, 1});
  attr_i(add_node(g, "DFT", {"x"}, {"y"}), "onesided", 1);
  auto* inv = add_node(g, "DFT", {"y"}, {"z"});
  attr_i(inv, "onesided", 1);
  attr_i(inv, "inverse", 1);
  Tensor x = ramp({1, 6, 1}, 1.3, 0.2);
  auto out = run(m, {x});
  const double pi = 3.14159265358979323846;
  for (int k = 0; k < 4; ++k) {
    double re = 0, im = 0;
    for (int n = 0; n < 6; ++n) {
      re += x.get(n) * std::cos(2 * pi * k * n / 6);
      im -= x.get(n) * std::sin(2 * pi * k * n / 6);
    }
    EXPECT_NEAR(out[0].get(2 * k), re, 1e-5) << k;
    EXPECT_NEAR(out[0].get(2 * k + 1), im, 1e-5) << k;
  }
  for (int n = 0; n < 6; ++n) EXPECT_NEAR(out[1].get(n), x.get(n), 1e-5) << n;  // irfft(rfft(x)) = x
}

// LayerNormalization over the last axis with [N] scale and bias imports as the layer_norm op (the
// device's LayerNorm kernel runs it); over other axes, or with Mean read, as the function body.
TEST(OnnxOps, LayerNormalizationLastAxisIsTheLayerNormOp) {
  for (int axis : {-1, 1}) {
    auto m = model(17);
    auto* g = m.mutable_graph();
    *g->add_input() = vi("x", 1, {2, 3, 4});
    *g->add_input() = vi("s", 1, axis == -1 ? std::vector<DimArg>{4} : std::vector<DimArg>{3, 4});
    *g->add_input() = vi("b", 1, axis == -1 ? std::vector<DimArg>{4} : std::vector<DimArg>{3, 4});
    *g->add_output() = vi("y", 1, {2, 3, 4});
    auto* n = add_node(g, "LayerNormalization", {"x", "s", "b"}, {"y"});
    attr_i(n, "axis", axis);
    attr_f(n, "epsilon", 1e-3f);
    Graph gr = import(m);
    int ln = 0;
    for (auto& nd : gr.nodes) ln += nd.op == OpKind::LayerNorm;
    EXPECT_EQ(ln, axis == -1 ? 1 : 0) << axis;
    std::vector<int64_t> sd = axis == -1 ? std::vector<int64_t>{4} : std::vector<int64_t>{3, 4};
    Tensor x = ramp({2, 3, 4}, 0.7, 0.1), s = ramp(sd, 0.3, 0.5), b = ramp(sd, -0.2, 0.05);
    auto out = run(m, {x, s, b});
    const int64_t inner = axis == -1 ? 4 : 12;
    for (int64_t r = 0; r < 24 / inner; ++r) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < inner; ++i) mean += x.get(r * inner + i) / inner;
      for (int64_t i = 0; i < inner; ++i) var += (x.get(r * inner + i) - mean) * (x.get(r * inner + i) - mean) / inner;
      for (int64_t i = 0; i < inner; ++i)
        EXPECT_NEAR(out[0].get(r * inner + i), (x.get(r * inner + i) - mean) / std::sqrt(var + 1e-3) * s.get(i) + b.get(i), 1e-5);
    }
  }
}
