// Before/after tests for the graph pattern passes: attention-from-matmuls and gelu-into-linear, on
// the node patterns torch.onnx.export writes (scaled_dot_product_attention's symbolic, transformers'
// eager BERT attention, the erf GELU), each checked against the reference interpreter.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "passes/passes.h"
#include "rlx/builder.h"
#include "rlx/reference.h"
#include "test_util.h"

using namespace rlx;

namespace {

constexpr int64_t B = 2, S = 5, NH = 2, D = 4, H = NH * D;
const double kMin = std::numeric_limits<float>::lowest();

int count(const Graph& g, OpKind k) {
  int n = 0;
  for (auto& nd : g.nodes) n += nd.op == k;
  return n;
}
const Node* first(const Graph& g, OpKind k) {
  for (auto& nd : g.nodes)
    if (nd.op == k) return &nd;
  return nullptr;
}

enum class Style { Sdpa, Eager, EagerUnfusedKey, BoolWhere, NotPadding };

// An exported attention over x [B, S, H] with a 0/1 mask [B, S]: projections, head split, scores,
// softmax, context, head merge.
Graph exported_attention(Style st) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", DType::f32, {B, S, H});
  ValueId m = b.input("mask", DType::i64, {B, S});
  auto proj = [&](uint64_t seed) { return b.matmul(x, b.constant(rlx_test::randn({H, H}, seed, 0.5))); };
  auto heads = [&](ValueId t, std::vector<int64_t> perm) {
    return b.transpose(b.reshape(t, {B, S, NH, D}), perm);
  };
  ValueId q = heads(proj(1), {0, 2, 1, 3}), v = heads(proj(3), {0, 2, 1, 3});
  ValueId kt = st == Style::EagerUnfusedKey ? b.transpose(heads(proj(2), {0, 2, 1, 3}), {0, 1, 3, 2})
                                            : heads(proj(2), {0, 2, 3, 1});
  // mask [B,1,S,S]: unsqueeze twice, expand, cast, 1 - m, then where / multiply by finfo.min
  ValueId mk = b.op1(OpKind::Unsqueeze, {b.op1(OpKind::Unsqueeze, {m}, {{"axes", std::vector<int64_t>{1}}})},
                     {{"axes", std::vector<int64_t>{2}}});
  mk = b.op1(OpKind::Expand, {mk}, {{"shape", Shape{B, 1, S, S}}});
  ValueId inv = b.sub(b.scalar(1.0, DType::f32), b.convert(mk, DType::f32));
  ValueId bias;
  if (st == Style::Sdpa)
    bias = b.select(b.convert(inv, DType::boolean), b.scalar(kMin, DType::f32), inv);
  else if (st == Style::BoolWhere)  // a boolean mask for sdpa: Where(mask, 0, -inf)
    bias = b.select(b.convert(mk, DType::boolean), b.scalar(0.0, DType::f32),
                    b.scalar(-std::numeric_limits<double>::infinity(), DType::f32));
  else if (st == Style::NotPadding)
    bias = b.mul(b.convert(mk, DType::f32), b.scalar(-2.0, DType::f32));
  else
    bias = b.mul(inv, b.scalar(kMin, DType::f32));
  ValueId scores;
  if (st == Style::Sdpa) {
    ValueId sc = b.unary(OpKind::Sqrt, b.scalar(1.0 / std::sqrt(double(D)), DType::f32));
    scores = b.matmul(b.mul(q, sc), b.mul(kt, sc));
  } else {
    scores = b.div(b.matmul(q, kt), b.scalar(std::sqrt(double(D)), DType::f32));
  }
  ValueId ctx = b.matmul(b.softmax(b.add(scores, bias), -1), v);
  b.output(b.reshape(b.transpose(ctx, {0, 2, 1, 3}), {B, S, H}));
  return g;
}

std::vector<Tensor> attention_inputs() {
  Tensor x = rlx_test::randn({B, S, H}, 7);
  Tensor m(DType::i64, {B, S});
  for (int64_t i = 0; i < B * S; ++i) m.set(i, (i % S) < (i < S ? S : 3) ? 1 : 0);  // row 1 padded after 3
  return {x, m};
}

void expect_same_outputs(const Graph& a, const Graph& b, const std::vector<Tensor>& in, double tol) {
  auto ra = reference_run(a, in), rb = reference_run(b, in);
  ASSERT_EQ(ra.size(), rb.size());
  for (size_t o = 0; o < ra.size(); ++o) {
    ASSERT_EQ(ra[o].numel(), rb[o].numel());
    for (int64_t i = 0; i < ra[o].numel(); ++i)
      ASSERT_NEAR(ra[o].get(i), rb[o].get(i), tol) << "element " << i;
  }
}

}  // namespace

TEST(GraphPatterns, SdpaExportBecomesPaddingAttention) {
  Graph g = exported_attention(Style::Sdpa);
  int n = -1;
  Graph r = attention_from_matmuls(g, &n);
  EXPECT_EQ(n, 1);
  EXPECT_EQ(count(r, OpKind::Softmax), 0);
  EXPECT_EQ(count(r, OpKind::MatMul), 3);  // the projections only
  const Node* at = first(r, OpKind::Attention);
  ASSERT_NE(at, nullptr);
  EXPECT_EQ(attr_str(*at, "mask"), "padding");
  EXPECT_EQ(attr_float(*at, "scale"), 0.0);  // the two sqrt factors make the default 1/sqrt(D)
  ASSERT_EQ(at->inputs.size(), 4u);
  EXPECT_EQ(at->inputs[3], r.inputs[1]);  // the [B,S] mask itself
  // k in the builders' form: Transpose(0,2,1,3) of the head split
  const Node* kt = &r.nodes[static_cast<size_t>(r.values[at->inputs[1]].producer)];
  ASSERT_EQ(kt->op, OpKind::Transpose);
  EXPECT_EQ(attr_ints(*kt, "perm"), (std::vector<int64_t>{0, 2, 1, 3}));
  expect_same_outputs(g, r, attention_inputs(), 1e-5);
}

TEST(GraphPatterns, EagerAndBooleanMaskExportsBecomePaddingAttention) {
  for (Style st : {Style::Eager, Style::EagerUnfusedKey, Style::BoolWhere}) {
    Graph g = exported_attention(st);
    int n = -1;
    Graph r = attention_from_matmuls(g, &n);
    EXPECT_EQ(n, 1);
    const Node* at = first(r, OpKind::Attention);
    ASSERT_NE(at, nullptr);
    EXPECT_EQ(attr_str(*at, "mask"), "padding");
    EXPECT_EQ(count(r, OpKind::Transpose), 4);  // q, k, v head splits and the merge
    expect_same_outputs(g, r, attention_inputs(), 1e-5);
  }
}

TEST(GraphPatterns, MaskThatIsNotPaddingStaysAnAdditiveBias) {
  // m * -2 lowers the kept keys' scores instead of masking the padded ones: not a padding mask,
  // kept as an additive bias.
  Graph g = exported_attention(Style::NotPadding);
  Graph r = attention_from_matmuls(g);
  const Node* at = first(r, OpKind::Attention);
  ASSERT_NE(at, nullptr);
  EXPECT_EQ(attr_str(*at, "mask"), "bias");
  expect_same_outputs(g, r, attention_inputs(), 1e-5);
}

TEST(GraphPatterns, SoftmaxOverAnotherAxisIsLeft) {
  Graph g;
  Builder b(g);
  ValueId q = b.input("q", DType::f32, {1, 2, 3, 4}), k = b.input("k", DType::f32, {1, 2, 4, 3});
  ValueId v = b.input("v", DType::f32, {1, 2, 3, 4});
  b.output(b.matmul(b.softmax(b.matmul(q, k), 2), v));
  int n = -1;
  Graph r = attention_from_matmuls(g, &n);
  EXPECT_EQ(n, 0);
  EXPECT_EQ(count(r, OpKind::Attention), 0);
}

namespace {
// x · 0.5 · (1 + erf(x / sqrt 2)) as the aten::gelu symbolic writes it: Mul(Mul(x, 1 + erf), 0.5).
ValueId erf_gelu(Builder& b, ValueId x, double half = 0.5) {
  ValueId e = b.unary(OpKind::Erf, b.div(x, b.scalar(1.4142135623730951, DType::f32)));
  return b.mul(b.mul(x, b.add(e, b.scalar(1.0, DType::f32))), b.scalar(half, DType::f32));
}
}  // namespace

TEST(GraphPatterns, ErfGeluUnderAnExportedLinearBecomesLinearGelu) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", DType::f32, {2, 3, 8});
  ValueId y =
      b.add(b.constant(rlx_test::randn({16}, 2)), b.matmul(x, b.constant(rlx_test::randn({8, 16}, 1, 0.5))));
  b.output(erf_gelu(b, y));
  int n = -1;
  Graph r = gelu_into_linear(g, &n);
  EXPECT_EQ(n, 1);
  const Node* lin = first(r, OpKind::Linear);
  ASSERT_NE(lin, nullptr);
  EXPECT_EQ(attr_str(*lin, "activation"), "gelu");
  EXPECT_EQ(count(r, OpKind::Erf) + count(r, OpKind::MatMul) + count(r, OpKind::Mul), 0);
  expect_same_outputs(g, r, {rlx_test::randn({2, 3, 8}, 5)}, 1e-5);
}

TEST(GraphPatterns, ErfGeluAloneBecomesGeluAndNearMissesAreLeft) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", DType::f32, {4, 6});
  ValueId h = b.unary(OpKind::Tanh, x);
  b.output(erf_gelu(b, h));
  b.output(erf_gelu(b, x, 0.6));  // not a GELU
  int n = -1;
  Graph r = gelu_into_linear(g, &n);
  EXPECT_EQ(n, 1);
  EXPECT_EQ(count(r, OpKind::Gelu), 1);
  EXPECT_EQ(count(r, OpKind::Erf), 1);  // the 0.6 one stays as written
  expect_same_outputs(g, r, {rlx_test::randn({4, 6}, 3)}, 1e-5);
}
