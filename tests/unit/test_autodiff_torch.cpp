// Composite gradients against PyTorch autograd goldens (float64), produced by the committed
// script tests/unit/autodiff_goldens/make_torch_goldens.py; torch is not needed to run this.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>

#include "autodiff/autodiff.h"
#include "rlx/builder.h"
#include "rlx/npy.h"
#include "rlx/reference.h"

using namespace rlx;

namespace {

const std::map<std::string, Tensor>& goldens() {
  static std::map<std::string, Tensor> g =
      read_npz(std::string(RLX_SOURCE_DIR) + "/tests/unit/autodiff_goldens/torch_goldens.npz");
  return g;
}

// Builds loss = sum(f(inputs) * w) (or f itself when unweighted) and compares value and grads.
void check(const std::string& name, int nin, const std::function<ValueId(Builder&, std::vector<ValueId>&)>& f,
           bool weighted = true) {
  const auto& G = goldens();
  Graph g;
  Builder b(g);
  std::vector<ValueId> ins;
  std::vector<Tensor> xs;
  for (int i = 0; i < nin; ++i) {
    const Tensor& t = G.at(name + ".in" + std::to_string(i));
    ins.push_back(b.input("x" + std::to_string(i), DType::f64, to_shape(t.shape())));
    xs.push_back(t);
  }
  ValueId y = f(b, ins);
  if (weighted) {
    ValueId p = b.mul(y, b.constant(G.at(name + ".w")));
    std::vector<int64_t> axes;
    for (int64_t i = 0; i < b.rank(p); ++i) axes.push_back(i);
    y = b.reduce(OpKind::ReduceSum, p, axes, false);
  }
  b.output(y);
  auto r = reference_run(ad::value_and_grad(g), xs);
  EXPECT_NEAR(r[0].get(0), G.at(name + ".loss").get(0), 1e-10) << name;
  for (int i = 0; i < nin; ++i) {
    const Tensor& want = G.at(name + ".grad" + std::to_string(i));
    ASSERT_EQ(r[1 + i].shape(), want.shape()) << name;
    for (int64_t k = 0; k < want.numel(); ++k)
      EXPECT_NEAR(r[1 + i].get(k), want.get(k), 1e-10 * (1 + std::fabs(want.get(k)))) << name << " grad" << i << "[" << k << "]";
  }
}

using Vs = std::vector<ValueId>;

}  // namespace

TEST(AutodiffTorch, LayerNorm) {
  check("layer_norm", 3, [](Builder& b, Vs& x) { return b.layer_norm(x[0], x[1], x[2], 1e-5); });
}
TEST(AutodiffTorch, CausalAttention) {
  check("attention_causal", 3, [](Builder& b, Vs& x) { return b.attention(x[0], x[1], x[2], -1, "causal"); });
}
TEST(AutodiffTorch, ConvStride2Pad1) {
  check("conv_stride2_pad1", 3, [](Builder& b, Vs& x) {
    return b.op1(OpKind::Convolution, {x[0], x[1], x[2]},
                 {{"strides", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  });
}
TEST(AutodiffTorch, Gelu) {
  check("gelu_erf", 1, [](Builder& b, Vs& x) { return b.gelu(x[0]); });
  check("gelu_tanh", 1, [](Builder& b, Vs& x) { return b.gelu(x[0], "tanh"); });
}
TEST(AutodiffTorch, SoftmaxCrossEntropy) {
  check("softmax_xent", 1, [](Builder& b, Vs& x) {
    const Tensor& lab = goldens().at("softmax_xent.labels");
    Tensor oh(DType::f64, {4, 5});
    for (int i = 0; i < 4; ++i) oh.set(i * 5 + lab.get_int(i), 1);
    ValueId l = b.op1(OpKind::LogSoftmax, {x[0]}, {{"axis", int64_t{1}}});
    return b.mul(b.reduce(OpKind::ReduceSum, b.mul(l, b.constant(oh)), {0, 1}, false), b.scalar(-0.25, DType::f64));
  }, false);
}
TEST(AutodiffTorch, MlpRelu) {
  check("mlp_relu", 5, [](Builder& b, Vs& x) {
    ValueId h = b.add(b.dot_general(x[0], x[1], {}, {}, {1}, {0}), x[2]);
    h = b.max(h, b.scalar(0, DType::f64));
    return b.add(b.dot_general(h, x[3], {}, {}, {1}, {0}), x[4]);
  });
}
