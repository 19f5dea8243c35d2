// Every HIR decomposition against the reference interpreter's direct evaluation of the HIR op.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>

#include "passes/passes.h"
#include "quant/blocks.h"
#include "rlx/builder.h"
#include "rlx/reference.h"

using namespace rlx;

namespace {

using Ints = std::vector<int64_t>;

// How an input is filled: random reals, integer ids in [0, hi), or a 0/1 padding mask whose first
// row is all zeros (so fully masked rows are exercised).
enum class Fill { Rand, Ids, Mask };

struct InSpec {
  DType dt;
  Ints shape;
  Fill fill = Fill::Rand;
  int64_t hi = 0;
};

InSpec R(DType dt, Ints s) { return {dt, std::move(s), Fill::Rand, 0}; }
InSpec Ids(DType dt, Ints s, int64_t hi) { return {dt, std::move(s), Fill::Ids, hi}; }
InSpec Mask(DType dt, Ints s) { return {dt, std::move(s), Fill::Mask, 0}; }

Tensor make_input(const InSpec& s, std::mt19937& rng) {
  Tensor t(s.dt, s.shape);
  int64_t n = t.numel();
  int64_t row = s.shape.empty() ? n : s.shape.back();
  for (int64_t i = 0; i < n; ++i) {
    switch (s.fill) {
      case Fill::Rand:
        if (is_float(s.dt))
          t.set(i, std::uniform_real_distribution<double>(-2, 2)(rng));
        else if (s.dt == DType::boolean)
          t.set(i, rng() % 2);
        else
          t.set(i, static_cast<double>(static_cast<int64_t>(rng() % 11) - 5));
        break;
      case Fill::Ids:
        t.set(i, static_cast<double>(rng() % s.hi));
        break;
      case Fill::Mask:
        t.set(i, i < row ? 0.0 : (rng() % 10 < 7 ? 1.0 : 0.0));
        break;
    }
  }
  return t;
}

double tol_for(DType dt) {
  switch (dt) {
    case DType::f64:
      return 1e-10;
    case DType::f32:
      return 1e-5;
    case DType::f16:
      return 2e-2;
    case DType::bf16:
      return 6e-2;
    default:
      return 0;  // integers and bool are exact
  }
}

// Error normalized by the output's magnitude (max |expected|, at least 1); NaN counts as failure.
void expect_close(const Tensor& got, const Tensor& want, DType dt) {
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.shape(), want.shape());
  double scale = 1, err = 0;
  for (int64_t i = 0; i < want.numel(); ++i) scale = std::max(scale, std::abs(want.get(i)));
  for (int64_t i = 0; i < want.numel(); ++i) {
    double d = std::abs(got.get(i) - want.get(i));
    err = std::isnan(d) ? INFINITY : std::max(err, d);
  }
  EXPECT_LE(err / scale, tol_for(dt)) << "got " << got.str(16) << "\nwant " << want.str(16);
}

Graph one_node(OpKind op, const std::vector<InSpec>& ins, const Attrs& attrs) {
  Graph g;
  g.name = std::string(op_name(op));
  Builder b(g);
  std::vector<ValueId> vs;
  for (size_t i = 0; i < ins.size(); ++i)
    vs.push_back(b.input("x" + std::to_string(i), ins[i].dt, to_shape(ins[i].shape)));
  b.set_origin("node0");
  for (auto o : b.op(op, vs, attrs)) b.output(o);
  return g;
}

// Builds a one-node HIR graph, lowers it, and compares both under the reference interpreter.
void check(OpKind op, const std::vector<InSpec>& ins, const Attrs& attrs = {}, uint32_t seed = 1) {
  Graph g = one_node(op, ins, attrs);
  Graph d = decompose_all(g);
  EXPECT_TRUE(d.is_hir_free());
  std::mt19937 rng(seed);
  std::vector<Tensor> inputs;
  for (auto& s : ins) inputs.push_back(make_input(s, rng));
  auto want = reference_run(g, inputs);
  auto got = reference_run(d, inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], ins[0].dt);
}

#define CASE(...)                                                          \
  do {                                                                     \
    SCOPED_TRACE(std::string("case at line ") + std::to_string(__LINE__)); \
    check(__VA_ARGS__);                                                    \
  } while (0)

constexpr DType f32 = DType::f32, f64 = DType::f64, f16 = DType::f16, bf16 = DType::bf16, i32 = DType::i32,
                i64 = DType::i64, b8 = DType::boolean;

}  // namespace

// Keep in step with the TESTs below: DecompCoverage fails when a HIR op is missing here.
static const std::set<std::string> kCovered = {"matmul",      "linear",          "convolution", "max_pool",
                                               "avg_pool",    "global_avg_pool", "layer_norm",  "rms_norm",
                                               "softmax",     "log_softmax",     "gelu",        "silu",
                                               "relu",        "embedding",       "attention",   "rope",
                                               "reduce_mean", "expand",          "squeeze",     "unsqueeze",
                                               "dequant_matmul",   // Decomp.DequantMatMul
                                               "dequantize",       // Quant.DequantizeDecompositionMatchesReference
                                               "splat_sh",         // Decomp.SplatSh
                                               "quantize_affine", "dequantize_affine", "qmatmul", "requantize",
                                               "qlinear",  // QuantAffine.* (tests/unit/test_quant_affine.cpp)
                                               "qconv",    // QConv.CpuAndDecompositionMatchReference (same file)
                                               "stop_gradient"};   // Decomp.StopGradient

TEST(DecompCoverage, EveryHirOpHasCases) {
  for (int i = 0; i < num_ops(); ++i) {
    auto k = static_cast<OpKind>(i);
    if (op_info(k).level != Level::Hir || op_info(k).decompose == nullptr) continue;  // native-only
    EXPECT_TRUE(kCovered.count(std::string(op_name(k))))
        << "HIR op '" << op_name(k) << "' has no decomposition test";
  }
}

TEST(Decomp, MatMul) {
  auto M = OpKind::MatMul;
  CASE(M, {R(f32, {3, 4}), R(f32, {4, 5})});
  CASE(M, {R(f64, {2, 3, 4}), R(f64, {4, 5})});
  CASE(M, {R(f32, {4}), R(f32, {4, 5})});
  CASE(M, {R(f32, {2, 3, 4}), R(f32, {4})});
  CASE(M, {R(f64, {4}), R(f64, {4})});
  CASE(M, {R(f32, {3, 1, 5, 6}), R(f32, {4, 6, 7})});
  CASE(M, {R(f64, {5, 6}), R(f64, {2, 6, 3})});
  CASE(M, {R(f64, {6}), R(f64, {2, 6, 3})});
  CASE(M, {R(f64, {2, 1, 3, 6}), R(f64, {6})});
  CASE(M, {R(f16, {2, 3, 8}), R(f16, {2, 8, 4})});
  CASE(M, {R(i32, {3, 4}), R(i32, {4, 2})});
}

TEST(Decomp, Linear) {
  auto L = OpKind::Linear;
  CASE(L, {R(f32, {2, 3, 8}), R(f32, {5, 8}), R(f32, {5})});
  CASE(L, {R(f64, {4, 8}), R(f64, {5, 8})}, {{"activation", "relu"}});
  CASE(L, {R(f32, {4, 8}), R(f32, {5, 8}), R(f32, {5})}, {{"activation", "gelu"}});
  CASE(L, {R(f64, {4, 8}), R(f64, {5, 8}), R(f64, {5})}, {{"activation", "gelu_tanh"}});
  CASE(L, {R(f64, {2, 2, 8}), R(f64, {3, 8}), R(f64, {3})}, {{"activation", "silu"}});
  CASE(L, {R(f32, {8}), R(f32, {5, 8})});
  CASE(L, {R(f16, {3, 8}), R(f16, {5, 8}), R(f16, {5})}, {{"activation", "gelu"}});
}

TEST(Decomp, Convolution) {
  auto C = OpKind::Convolution;
  CASE(C, {R(f32, {2, 3, 7, 7}), R(f32, {4, 3, 3, 3}), R(f32, {4})});
  CASE(C, {R(f64, {1, 3, 8, 9}), R(f64, {2, 3, 3, 2})},
       {{"strides", Ints{2, 1}}, {"pads", Ints{1, 0, 1, 2}}, {"dilations", Ints{1, 2}}});
  CASE(C, {R(f64, {1, 4, 6, 6}), R(f64, {6, 2, 3, 3}), R(f64, {6})}, {{"groups", 2}});
  CASE(C, {R(f32, {2, 3, 10}), R(f32, {4, 3, 3}), R(f32, {4})},
       {{"strides", Ints{2}}, {"pads", Ints{1, 2}}, {"dilations", Ints{2}}});
  CASE(C, {R(f64, {1, 2, 4, 4, 4}), R(f64, {3, 2, 2, 2, 2}), R(f64, {3})});
  CASE(C, {R(f16, {1, 2, 5, 5}), R(f16, {2, 2, 3, 3}), R(f16, {2})}, {{"pads", Ints{1, 1, 1, 1}}});
}

TEST(Decomp, MaxPool) {
  auto P = OpKind::MaxPool;
  CASE(P, {R(f32, {2, 3, 6, 6})}, {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}});
  CASE(P, {R(f64, {1, 2, 5, 5})}, {{"kernel", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}});
  CASE(P, {R(f64, {2, 3, 9})}, {{"kernel", Ints{3}}, {"strides", Ints{2}}, {"pads", Ints{1, 0}}});
  CASE(P, {R(f16, {1, 2, 6, 5})},
       {{"kernel", Ints{2, 3}}, {"strides", Ints{2, 1}}, {"pads", Ints{0, 1, 1, 0}}});
  CASE(P, {R(i32, {1, 2, 4, 4})}, {{"kernel", Ints{2, 2}}});
}

TEST(Decomp, AvgPool) {
  auto P = OpKind::AvgPool;
  CASE(P, {R(f32, {2, 3, 6, 6})}, {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}});
  CASE(P, {R(f64, {1, 2, 5, 5})}, {{"kernel", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}});
  CASE(P, {R(f64, {1, 2, 5, 5})},
       {{"kernel", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"count_include_pad", 1}});
  CASE(P, {R(f32, {2, 3, 9})}, {{"kernel", Ints{3}}, {"strides", Ints{2}}, {"pads", Ints{2, 1}}});
  CASE(P, {R(f64, {1, 1, 3, 4, 5})}, {{"kernel", Ints{2, 2, 3}}, {"pads", Ints{0, 1, 1, 1, 0, 1}}});
  CASE(P, {R(f16, {1, 2, 6, 5})},
       {{"kernel", Ints{2, 3}}, {"strides", Ints{2, 1}}, {"pads", Ints{0, 1, 1, 0}}});
}

TEST(Decomp, GlobalAvgPool) {
  auto P = OpKind::GlobalAvgPool;
  CASE(P, {R(f32, {2, 3, 4, 5})});
  CASE(P, {R(f64, {2, 3, 7})});
  CASE(P, {R(f16, {1, 2, 2, 3, 4})});
}

TEST(Decomp, LayerNorm) {
  auto N = OpKind::LayerNorm;
  CASE(N, {R(f32, {2, 5, 8}), R(f32, {8}), R(f32, {8})});
  CASE(N, {R(f64, {3, 6}), R(f64, {6})}, {{"eps", 1e-3}});
  CASE(N, {R(f64, {2, 3, 4}), R(f64, {3, 4}), R(f64, {3, 4})}, {{"axis", 1}});
  CASE(N, {R(f32, {2, 3, 4}), R(f32, {2, 3, 4})}, {{"axis", -3}});
  CASE(N, {R(f16, {4, 16}), R(f16, {16}), R(f16, {16})});
  CASE(N, {R(bf16, {4, 16}), R(bf16, {16}), R(bf16, {16})});
}

TEST(Decomp, RmsNorm) {
  auto N = OpKind::RmsNorm;
  CASE(N, {R(f32, {2, 5, 8}), R(f32, {8})});
  CASE(N, {R(f64, {3, 6}), R(f64, {6})}, {{"eps", 1e-3}});
  CASE(N, {R(f16, {4, 16}), R(f16, {16})});
  CASE(N, {R(bf16, {2, 3, 16}), R(bf16, {16})});
}

TEST(Decomp, Softmax) {
  for (auto op : {OpKind::Softmax, OpKind::LogSoftmax}) {
    SCOPED_TRACE(std::string(op_name(op)));
    CASE(op, {R(f32, {3, 7})});
    CASE(op, {R(f64, {4, 5, 6})}, {{"axis", 1}});
    CASE(op, {R(f64, {4, 5})}, {{"axis", 0}});
    CASE(op, {R(f16, {2, 3, 10})});
    CASE(op, {R(bf16, {2, 10})});
  }
}

TEST(Decomp, LogSoftmax) {
  // Covered with softmax above; one extra shape so both ops appear by name in the results.
  CASE(OpKind::LogSoftmax, {R(f32, {2, 3, 4, 5})}, {{"axis", -2}});
}

TEST(Decomp, Activations) {
  CASE(OpKind::Gelu, {R(f32, {4, 9})});
  CASE(OpKind::Gelu, {R(f64, {4, 9})}, {{"approximate", "tanh"}});
  CASE(OpKind::Gelu, {R(f64, {17})});
  CASE(OpKind::Gelu, {R(f16, {4, 9})}, {{"approximate", "tanh"}});
  CASE(OpKind::Gelu, {R(f16, {4, 9})});
  CASE(OpKind::Silu, {R(f32, {3, 5})});
  CASE(OpKind::Silu, {R(f64, {2, 2, 2})});
  CASE(OpKind::Silu, {R(f16, {12})});
  CASE(OpKind::Relu, {R(f32, {3, 5})});
  CASE(OpKind::Relu, {R(f64, {7})});
  CASE(OpKind::Relu, {R(f16, {2, 6})});
  CASE(OpKind::Relu, {R(i32, {2, 6})});
}

TEST(Decomp, Embedding) {
  auto E = OpKind::Embedding;
  CASE(E, {R(f32, {10, 4}), Ids(i64, {3, 5}, 10)});
  CASE(E, {R(f64, {6, 3}), Ids(i32, {7}, 6)});
  CASE(E, {R(f16, {5, 8}), Ids(i64, {2, 2}, 5)});
  CASE(E, {R(i32, {5, 2}), Ids(i64, {4}, 5)});
}

TEST(Decomp, Attention) {
  auto A = OpKind::Attention;
  CASE(A, {R(f32, {2, 4, 5, 8}), R(f32, {2, 4, 5, 8}), R(f32, {2, 4, 5, 8})});
  // grouped-query, causal with S < T, Dv != D
  CASE(A, {R(f64, {2, 4, 3, 8}), R(f64, {2, 2, 6, 8}), R(f64, {2, 2, 6, 5})}, {{"mask", "causal"}});
  // causal with S > T: the first S - T query rows see no key and must be zeros
  CASE(A, {R(f64, {1, 2, 5, 4}), R(f64, {1, 2, 3, 4}), R(f64, {1, 2, 3, 4})}, {{"mask", "causal"}});
  CASE(A, {R(f16, {1, 2, 6, 8}), R(f16, {1, 2, 6, 8}), R(f16, {1, 2, 6, 8})}, {{"mask", "causal"}});
  CASE(A, {R(f32, {3, 2, 4, 8}), R(f32, {3, 1, 6, 8}), R(f32, {3, 1, 6, 8}), Mask(i64, {3, 6})},
       {{"mask", "padding"}});
  CASE(A, {R(f64, {2, 2, 4, 4}), R(f64, {2, 2, 5, 4}), R(f64, {2, 2, 5, 4}), Mask(b8, {2, 5})},
       {{"mask", "padding"}, {"scale", 0.25}});
  CASE(A, {R(f64, {2, 6, 4, 4}), R(f64, {2, 3, 7, 4}), R(f64, {2, 3, 7, 3}), Mask(f32, {2, 7})},
       {{"mask", "causal_padding"}});
  CASE(A, {R(f32, {2, 2, 4, 8}), R(f32, {2, 2, 6, 8}), R(f32, {2, 2, 6, 8}), R(f32, {1, 1, 4, 6})},
       {{"mask", "bias"}, {"scale", 0.3}});
  CASE(A, {R(f64, {2, 2, 4, 8}), R(f64, {2, 1, 6, 8}), R(f64, {2, 1, 6, 8}), R(f64, {2, 2, 4, 6})},
       {{"mask", "bias"}});
  CASE(A, {R(f16, {1, 4, 5, 8}), R(f16, {1, 2, 5, 8}), R(f16, {1, 2, 5, 8}), Mask(i32, {1, 5})},
       {{"mask", "causal_padding"}});
  CASE(A, {R(bf16, {1, 2, 3, 8}), R(bf16, {1, 2, 3, 8}), R(bf16, {1, 2, 3, 8})});
}

TEST(Decomp, AttentionFullyMaskedRowsAreExactZeros) {
  Graph g = one_node(OpKind::Attention, {R(f32, {1, 1, 4, 4}), R(f32, {1, 1, 2, 4}), R(f32, {1, 1, 2, 4})},
                     {{"mask", "causal"}});
  std::mt19937 rng(7);
  std::vector<Tensor> in;
  for (int i = 0; i < 3; ++i) in.push_back(make_input(R(f32, {1, 1, i == 0 ? 4 : 2, 4}), rng));
  Tensor out = reference_run(decompose_all(g), in)[0];
  // t <= s + (T - S) = s - 2: rows 0 and 1 have no allowed key.
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(out.get(i), 0.0) << i;
  for (int64_t i = 8; i < 16; ++i) EXPECT_FALSE(std::isnan(out.get(i))) << i;
}

TEST(Decomp, Rope) {
  auto P = OpKind::Rope;
  CASE(P, {R(f32, {1, 2, 5, 8}), Ids(i64, {5}, 64)});
  CASE(P, {R(f32, {2, 2, 3, 8}), Ids(i64, {3}, 64)}, {{"interleaved", 1}});
  CASE(P, {R(f64, {1, 3, 4, 6}), Ids(i32, {4}, 100)}, {{"theta", 500.0}});
  CASE(P, {R(f64, {1, 3, 4, 6}), Ids(i32, {4}, 100)}, {{"theta", 500.0}, {"interleaved", 1}});
  CASE(P, {R(f16, {1, 2, 4, 8}), Ids(i64, {4}, 32)});
  CASE(P, {R(f16, {1, 2, 4, 8}), Ids(i64, {4}, 32)}, {{"interleaved", 1}});
}

TEST(Decomp, ReduceMean) {
  auto M = OpKind::ReduceMean;
  CASE(M, {R(f32, {3, 4, 5})}, {{"axes", Ints{1}}});
  CASE(M, {R(f64, {3, 4, 5})}, {{"axes", Ints{0, 2}}, {"keepdims", 1}});
  CASE(M, {R(f64, {3, 4})}, {{"axes", Ints{0, 1}}});
  CASE(M, {R(f16, {2, 8})}, {{"axes", Ints{-1}}});
}

TEST(Decomp, Expand) {
  auto E = OpKind::Expand;
  CASE(E, {R(f32, {3, 1})}, {{"shape", Shape{2, 3, 4}}});
  CASE(E, {R(f64, {4})}, {{"shape", Shape{3, 1}}});
  CASE(E, {R(i32, {1, 5})}, {{"shape", Shape{5}}});
  CASE(E, {R(b8, {2, 1})}, {{"shape", Shape{2, 3}}});
  CASE(E, {R(f16, {1, 3})}, {{"shape", Shape{4, 1, 1}}});
}

TEST(Decomp, SqueezeUnsqueeze) {
  CASE(OpKind::Squeeze, {R(f32, {3, 1, 4, 1})}, {{"axes", Ints{1, 3}}});
  CASE(OpKind::Squeeze, {R(f64, {1, 2})}, {{"axes", Ints{-2}}});
  CASE(OpKind::Squeeze, {R(i64, {1})}, {{"axes", Ints{0}}});
  CASE(OpKind::Squeeze, {R(f16, {2, 1})}, {{"axes", Ints{1}}});
  CASE(OpKind::Unsqueeze, {R(f32, {3, 4})}, {{"axes", Ints{0}}});
  CASE(OpKind::Unsqueeze, {R(f64, {3, 4})}, {{"axes", Ints{1, -1}}});
  CASE(OpKind::Unsqueeze, {R(i32, {})}, {{"axes", Ints{0}}});
  CASE(OpKind::Unsqueeze, {R(f16, {5})}, {{"axes", Ints{-1}}});
}

// ---- the pass itself ---------------------------------------------------------------------------

TEST(DecompGraph, PreservesInterfaceAndOriginNames) {
  Graph g;
  g.name = "mlp";
  Builder b(g);
  auto x = b.input("x", f32, {2, 8});
  auto w = b.input("w", f32, {4, 8});
  auto bias = b.input("bias", f32, {4});
  b.set_origin("fc1");
  auto h = b.linear(x, w, bias, "gelu");  // linear -> dot + add + gelu (HIR) -> next round
  b.set_origin("act");
  auto y = b.softmax(b.relu(h));
  g.values[y].name = "probs";
  b.output(y);
  b.output(h);

  Graph d = decompose_all(g);
  EXPECT_TRUE(d.is_hir_free());
  EXPECT_EQ(d.name, "mlp");
  ASSERT_EQ(d.inputs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(d.values[d.inputs[i]].name, g.values[g.inputs[i]].name);
    EXPECT_EQ(d.type(d.inputs[i]).dtype, g.type(g.inputs[i]).dtype);
    EXPECT_EQ(d.type(d.inputs[i]).shape, g.type(g.inputs[i]).shape);
  }
  ASSERT_EQ(d.outputs.size(), 2u);
  EXPECT_EQ(d.values[d.outputs[0]].name, "probs");
  std::set<std::string> origins;
  for (auto& n : d.nodes) origins.insert(n.name);
  EXPECT_EQ(origins, (std::set<std::string>{"fc1", "act"}));
  // Every node from the linear (including its gelu, lowered a round later) keeps the name "fc1".
  bool saw_erf = false;
  for (auto& n : d.nodes) {
    if (n.op != OpKind::Erf) continue;
    saw_erf = true;
    EXPECT_EQ(n.name, "fc1");
  }
  EXPECT_TRUE(saw_erf);

  std::mt19937 rng(3);
  std::vector<Tensor> in{make_input(R(f32, {2, 8}), rng), make_input(R(f32, {4, 8}), rng),
                         make_input(R(f32, {4}), rng)};
  auto want = reference_run(g, in), got = reference_run(d, in);
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < 2; ++i) expect_close(got[i], want[i], f32);
}

TEST(DecompGraph, LowersOnlyWhatThePredicateSelects) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", f32, {3, 5});
  b.set_origin("sm");
  auto y = b.relu(b.softmax(x));
  b.output(y);
  Graph d = decompose_graph(g, [](const Node& n, const Graph&) { return n.op == OpKind::Softmax; });
  int relus = 0, softmaxes = 0;
  for (auto& n : d.nodes) {
    relus += n.op == OpKind::Relu;
    softmaxes += n.op == OpKind::Softmax;
  }
  EXPECT_EQ(relus, 1);
  EXPECT_EQ(softmaxes, 0);
  EXPECT_FALSE(d.is_hir_free());
  // Nothing selected: a plain copy.
  Graph c = decompose_graph(g, [](const Node&, const Graph&) { return false; });
  EXPECT_EQ(c.nodes.size(), g.nodes.size());
}

TEST(DecompGraph, LoweringAPrimitiveIsAClearError) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", f32, {3});
  b.set_origin("neg0");
  b.output(b.unary(OpKind::Neg, x));
  try {
    decompose_graph(g, [](const Node&, const Graph&) { return true; });
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("neg0"), std::string::npos) << e.what();
  }
}

TEST(DecompGraph, SymbolicShapesAreAClearError) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", f32, {"batch", 4});
  b.set_origin("sm0");
  b.output(b.softmax(x));  // softmax needs no sizes: it lowers with symbolic dims
  EXPECT_TRUE(decompose_all(g).is_hir_free());
  b.set_origin("mean0");
  b.output(b.op1(OpKind::ReduceMean, {x}, {{"axes", Ints{0}}}));  // the count needs the batch size
  try {
    decompose_all(g);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("'mean0' (reduce_mean)"), std::string::npos) << m;
    EXPECT_NE(m.find("static"), std::string::npos) << m;
  }
}

// dequant_matmul -> dequantize + dot_general, on Q8_0 and Q4_0 blocks packed by src/quant.
TEST(Decomp, DequantMatMul) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const char* type : {"Q8_0", "Q4_0"}) {
    for (DType dt : {DType::f32, DType::f64}) {
      SCOPED_TRACE(std::string(type) + " " + std::string(dtype_name(dt)));
      const int64_t N = 5, K = 64;
      bool q8 = std::string(type) == "Q8_0";
      int64_t rb = static_cast<int64_t>(quant::row_bytes(q8 ? quant::GgmlType::Q8_0 : quant::GgmlType::Q4_0, K));
      Tensor w(DType::u8, {N, rb});
      std::vector<float> v(K);
      for (int64_t r = 0; r < N; ++r) {
        for (auto& e : v) e = u(rng);
        if (q8) quant::quantize_row_q8_0(v.data(), reinterpret_cast<quant::BlockQ8_0*>(w.data<uint8_t>() + r * rb), K);
        else quant::quantize_row_q4_0(v.data(), reinterpret_cast<quant::BlockQ4_0*>(w.data<uint8_t>() + r * rb), K);
      }
      Tensor x(dt, {2, 3, K});
      for (int64_t i = 0; i < x.numel(); ++i) x.set(i, u(rng));
      Graph g;
      Builder b(g);
      ValueId xi = b.input("x", dt, to_shape(x.shape()));
      ValueId wi = b.input("w", DType::u8, to_shape(w.shape()));
      b.output(b.op1(OpKind::DequantMatMul, {xi, wi}, {{"type", std::string(type)}, {"k", K}}));
      Graph d = decompose_all(g);
      EXPECT_TRUE(d.is_hir_free());
      expect_close(reference_run(d, {x, w})[0], reference_run(g, {x, w})[0], dt);
    }
  }
}

// stop_gradient lowers to its input: no node survives, values are unchanged.
TEST(Decomp, StopGradient) {
  CASE(OpKind::StopGradient, {R(f32, {3, 5})});
  CASE(OpKind::StopGradient, {R(f64, {7})});
  CASE(OpKind::StopGradient, {R(i32, {2, 6})});
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", DType::f32, {4});
  b.output(b.mul(b.stop_gradient(x), x));
  Graph d = decompose_all(g);
  ASSERT_EQ(d.nodes.size(), 1u);
  EXPECT_EQ(d.nodes[0].op, OpKind::Mul);
  EXPECT_EQ(d.nodes[0].inputs[0], d.nodes[0].inputs[1]);  // both operands are x itself
}

// Spherical harmonics of degrees 0-3 (view directions normalized inside) against the f64 reference.
TEST(Decomp, SplatSh) {
  auto S = OpKind::SplatSh;
  for (int64_t deg = 0; deg <= 3; ++deg) {
    int64_t k = (deg + 1) * (deg + 1);
    CASE(S, {R(f64, {7, 3}), R(f64, {7, k, 3})}, {{"degree", deg}});
    CASE(S, {R(f32, {5, 3}), R(f32, {5, k, 3})}, {{"degree", deg}}, 2);
  }
}
