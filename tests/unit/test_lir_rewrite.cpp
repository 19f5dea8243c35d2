// The LIR passes (src/lir/rewrite): each one before and after on a small program, and the pipeline
// (schedule_lir) that runs a backend's list and plans memory once.
#include <gtest/gtest.h>

#include <random>

#include "lir/plan.h"
#include "lir/rewrite/pass.h"
#include "lir/rewrite/uses.h"
#include "passes/passes.h"
#include "rlx/builder.h"
#include "rlx/device.h"
#include "rlx/lir.h"
#include "rlx/reference.h"
#include "rlx/session.h"
#include "runtime/backend.h"
#include "test_util.h"

using namespace rlx;
using rlx_test::max_rel_diff;

namespace {

LirProgram lower(const Graph& g, const std::string& device = "cpu") {
  return lower_to_lir(eliminate_dead_code(fold_constants(legalize(g, device, {}).graph)), true, false);
}

Tensor rnd(Shape s, uint32_t seed) {
  Tensor t(DType::f32, static_dims(s));
  std::mt19937 r(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, u(r));
  return t;
}

int count(const LirProgram& p, OpKind op) {
  int n = 0;
  for (auto& k : p.kernels) n += k.kind == KernelKind::Library && k.op == op;
  return n;
}
const LirKernel* first(const LirProgram& p, OpKind op) {
  for (auto& k : p.kernels)
    if (k.kind == KernelKind::Library && k.op == op) return &k;
  return nullptr;
}

// One pass, then the plan; returns its count. The result must verify.
int run_pass(LirProgram& p, const char* name, const LirAbsorbs& a = {}) {
  const LirPass* pass = find_lir_pass(name);
  EXPECT_NE(pass, nullptr) << name;
  int n = pass->run(p, a);
  plan_memory(p);
  verify_lir(p);
  return n;
}

// x [B,S,H] -> q/k/v Linears, heads split [B,S,NH,D] -> [B,NH,S,D], attention, merged back, out proj.
Graph bert_attention(bool residual_norm) {
  const int64_t B = 2, S = 4, H = 8, NH = 2, D = 4;
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, {B, S, H});
  auto heads = [&](ValueId y) { return b.transpose(b.reshape(y, {B, S, NH, D}), {0, 2, 1, 3}); };
  auto lin = [&](ValueId in, uint32_t s) { return b.linear(in, b.constant(rnd({Dim(H), Dim(H)}, s)), b.constant(rnd({Dim(H)}, s + 1))); };
  auto a = b.attention(heads(lin(x, 1)), heads(lin(x, 3)), heads(lin(x, 5)));
  auto m = b.reshape(b.transpose(a, {0, 2, 1, 3}), {B, S, H});
  auto o = lin(m, 7);
  if (residual_norm) o = b.layer_norm(b.add(o, x), b.constant(rnd({Dim(H)}, 9)), b.constant(rnd({Dim(H)}, 10)));
  b.output(o);
  return g;
}

}  // namespace

TEST(LirRewrite, TableNamesEveryPassOnceWithASummary) {
  std::set<std::string> names;
  for (auto& p : lir_passes()) {
    EXPECT_TRUE(names.insert(p.name).second) << p.name;
    EXPECT_GT(std::string(p.summary).size(), 10u) << p.name;
    EXPECT_EQ(find_lir_pass(p.name), &p);
  }
  EXPECT_EQ(find_lir_pass("no-such-pass"), nullptr);
  LirProgram p = lower(bert_attention(false));
  EXPECT_THROW(schedule_lir(p, LirSchedule{{"no-such-pass"}, {}, {}}), Error);
}

TEST(LirRewrite, UsesCountReadersViewsAndOutputs) {
  LirProgram p = lower(bert_attention(false));
  LirUses u = lir_uses(p);
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    int expect = static_cast<int>(u.readers[b].size()) + 2 * u.views[b];
    for (int o : p.outputs) expect += 2 * (o == static_cast<int>(b));
    EXPECT_EQ(u.uses[b], expect);
    if (p.buffers[b].kind == BufferKind::View) {
      EXPECT_GE(u.views[p.buffers[b].view_of], 1);
    }
  }
  for (size_t k = 0; k < p.kernels.size(); ++k)
    for (int b : p.kernels[k].out) EXPECT_EQ(u.producer[b], static_cast<int>(k));
}

TEST(LirRewrite, MergeQkvOneLinearAndAttentionReadsHeadsInPlace) {
  LirProgram p = lower(bert_attention(false));
  ASSERT_EQ(count(p, OpKind::Linear), 4);
  ASSERT_EQ(count(p, OpKind::Transpose), 4);
  EXPECT_EQ(run_pass(p, "merge-qkv"), 1);
  EXPECT_EQ(count(p, OpKind::Linear), 2);
  EXPECT_EQ(count(p, OpKind::Transpose), 0);
  const LirKernel* a = first(p, OpKind::Attention);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(attr_int(lir_node(*a), "cpu_qkv"), 2);
  EXPECT_EQ(p.buffers[a->in[0]].type.shape, (Shape{Dim(2), Dim(4), Dim(24)}));  // [B, S, 3H]
  EXPECT_EQ(run_pass(p, "merge-qkv"), 0);  // nothing left to merge
}

TEST(LirRewrite, FoldAttentionTransposesReadsAndWritesBshd) {
  LirProgram p = lower(bert_attention(false));
  EXPECT_EQ(run_pass(p, "fold-attention-transposes"), 4);
  EXPECT_EQ(count(p, OpKind::Transpose), 0);
  const LirKernel* a = first(p, OpKind::Attention);
  ASSERT_NE(a, nullptr);
  for (const char* at : {"cuda_q_bshd", "cuda_k_bshd", "cuda_v_bshd", "cuda_out_bshd"}) EXPECT_TRUE(a->attrs.count(at)) << at;
}

TEST(LirRewrite, ResidualThenLayerNormIntoLinear) {
  LirProgram p = lower(bert_attention(true));
  const int adds_before = count(p, OpKind::Add), ln_before = count(p, OpKind::LayerNorm);
  ASSERT_EQ(ln_before, 1);
  EXPECT_EQ(run_pass(p, "layernorm-into-linear"), 0);  // needs the residual first
  EXPECT_EQ(run_pass(p, "residual-into-linear"), 1);
  EXPECT_EQ(count(p, OpKind::Add), adds_before - 1);
  EXPECT_EQ(run_pass(p, "layernorm-into-linear"), 1);
  EXPECT_EQ(count(p, OpKind::LayerNorm), 0);
  int fused = 0;
  for (auto& k : p.kernels) fused += k.attrs.count("cpu_res") && k.attrs.count("cpu_ln_g") && k.out.size() == 2;
  EXPECT_EQ(fused, 1);
}

TEST(LirRewrite, BatchSiblingLinearsOneKernelManyOutputs) {
  LirProgram p = lower(bert_attention(false));
  EXPECT_EQ(run_pass(p, "batch-sibling-linears"), 1);
  EXPECT_EQ(count(p, OpKind::Linear), 2);
  int batched = 0;
  for (auto& k : p.kernels)
    if (k.attrs.count("cuda_siblings")) batched = static_cast<int>(k.out.size());
  EXPECT_EQ(batched, 3);
}

TEST(LirRewrite, ResidualIntoNormThenLayerNormIntoGemmAsTheBackendAllows) {
  LirProgram p = lower(bert_attention(true));
  EXPECT_EQ(run_pass(p, "residual-into-norm"), 1);
  const LirKernel* n = first(p, OpKind::LayerNorm);
  ASSERT_NE(n, nullptr);
  EXPECT_TRUE(n->attrs.count("cuda_residual"));
  EXPECT_EQ(n->in.size(), 4u);
  LirProgram refused = p;
  EXPECT_EQ(run_pass(refused, "layernorm-into-gemm"), 0);  // no hook: the backend cannot
  LirAbsorbs yes;
  yes.gemm_layernorm = [](const LirKernel&, const std::vector<ValueType>&, const ValueType&, double) { return true; };
  EXPECT_EQ(run_pass(p, "layernorm-into-gemm", yes), 1);
  EXPECT_EQ(count(p, OpKind::LayerNorm), 0);
}

TEST(LirRewrite, BiasIntoGemmAsTheBackendAllows) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, {4, 8});
  auto y = b.add(b.matmul(x, b.constant(rnd({Dim(8), Dim(6)}, 1))), b.input("bias", DType::f32, {6}));
  b.output(b.unary(OpKind::Tanh, y));
  LirProgram p = lower(g);
  LirProgram q = p;
  EXPECT_EQ(run_pass(q, "bias-into-gemm"), 0);
  LirAbsorbs yes;
  yes.gemm_bias = [](const LirKernel&, const std::vector<ValueType>&, const ValueType&) { return true; };
  const size_t before = p.kernels.size();
  int n = run_pass(p, "bias-into-gemm", yes);
  // the add is fused with the tanh by lowering unless it stands alone; either way nothing breaks
  if (n) {
    EXPECT_EQ(p.kernels.size(), before - 1);
    bool biased = false;
    for (auto& k : p.kernels) biased |= k.attrs.count("cuda_bias") > 0;
    EXPECT_TRUE(biased);
  }
  Graph g2;
  Builder b2(g2);
  auto x2 = b2.input("x", DType::f32, {4, 8});
  b2.output(b2.add(b2.matmul(x2, b2.constant(rnd({Dim(8), Dim(6)}, 1))), b2.input("bias", DType::f32, {6})));
  LirProgram p2 = lower(g2);
  EXPECT_EQ(run_pass(p2, "bias-into-gemm", yes), 1);
  EXPECT_EQ(count(p2, OpKind::Add), 0);
}

TEST(LirRewrite, EmbeddingNormOneKernel) {
  Graph g;
  Builder b(g);
  auto ids = b.input("ids", DType::i64, {2, 4});
  auto e = b.op1(OpKind::Embedding, {b.constant(rnd({Dim(10), Dim(8)}, 1)), ids});
  auto x = b.add(b.add(e, b.constant(rnd({Dim(4), Dim(8)}, 2))), b.constant(rnd({Dim(8)}, 5)));  // position, type
  b.output(b.layer_norm(x, b.constant(rnd({Dim(8)}, 3)), b.constant(rnd({Dim(8)}, 4))));
  LirProgram p = lower(g, "cuda");  // (cpu legalizes embedding to gather)
  const size_t before = p.kernels.size();
  EXPECT_EQ(run_pass(p, "embedding-norm"), 1) << print_lir(p, true);
  EXPECT_EQ(p.kernels.size(), before - 2);
  EXPECT_EQ(count(p, OpKind::Embedding), 0);
  EXPECT_TRUE(first(p, OpKind::LayerNorm)->attrs.count("cuda_embed"));
}

// A 2-D training-style GEMM: X.W + b then ReLU (one generated kernel), and the bias gradient.
TEST(LirRewrite, TrainEpiloguesAndBiasGradIntoGemm) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, {4, 8});
  auto w = b.input("w", DType::f32, {8, 6});
  auto bias = b.input("b", DType::f32, {6});
  auto h = b.dot_general(x, w, {}, {}, {1}, {0});
  b.output(b.max(b.add(h, bias), b.scalar(0, DType::f32)));
  auto dh = b.input("dh", DType::f32, {4, 6});
  b.output(b.dot_general(x, dh, {}, {}, {0}, {0}));  // dW = x^T . dH
  b.output(b.reduce(OpKind::ReduceSum, dh, {0}, false));
  LirProgram p = lower(g);
  EXPECT_EQ(run_pass(p, "train-epilogues"), 1);
  bool epi = false;
  for (auto& k : p.kernels)
    epi |= k.attrs.count("cpu_epi") && attr_str(lir_node(k), "cpu_epi") == "bias+relu";
  EXPECT_TRUE(epi);
  EXPECT_EQ(count(p, OpKind::ReduceSum), 1);
  EXPECT_EQ(run_pass(p, "bias-grad-into-gemm"), 1);
  EXPECT_EQ(count(p, OpKind::ReduceSum), 0);
}

TEST(LirRewrite, RowRegionsAsTheBackendAllows) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, {6, 5});
  auto m = b.reduce(OpKind::ReduceMax, x, {1}, true);
  auto e = b.unary(OpKind::Exp, b.sub(x, m));
  b.output(b.div(e, b.reduce(OpKind::ReduceSum, e, {1}, true)));
  LirProgram p = lower(g);
  const size_t before = p.kernels.size();
  LirProgram q = p;
  EXPECT_EQ(run_pass(q, "row-regions"), 0);
  LirAbsorbs yes;
  yes.row_region = [](const Graph&, int64_t, int64_t) { return true; };
  EXPECT_GE(run_pass(p, "row-regions", yes), 1);
  EXPECT_LT(p.kernels.size(), before);
  bool rows = false;
  for (auto& k : p.kernels) rows |= k.attrs.count("cpu_rows") > 0;
  EXPECT_TRUE(rows);
}

TEST(LirRewrite, ConvEpilogueAsTheBackendAllows) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, {1, 2, 5, 5});
  auto y = b.op1(OpKind::Conv, {x, b.constant(rnd({Dim(3), Dim(2), Dim(3), Dim(3)}, 1))}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  b.output(b.relu(b.add(y, b.constant(rnd({Dim(1), Dim(3), Dim(1), Dim(1)}, 2)))));
  LirProgram p = lower(g);
  const size_t before = p.kernels.size();
  LirAbsorbs yes;
  yes.conv = [](const LirKernel&, const LirProgram&) { return true; };
  yes.conv_epilogue = [](const Graph&, const std::vector<int>&, const Shape&) -> std::optional<std::string> {
    return std::string("test");
  };
  EXPECT_GE(run_pass(p, "conv-epilogue", yes), 1);
  EXPECT_LT(p.kernels.size(), before);
  EXPECT_EQ(attr_str(lir_node(*first(p, OpKind::Conv)), "cpu_epi"), "test");
}

// The session holds the scheduled program: its passes ran once, the dump is what runs, and the
// executable of an unscheduled program gets the same schedule.
TEST(LirRewrite, SessionRunsTheBackendScheduleOnceAndDumpsIt) {
  CompiledModel m(bert_attention(true), CompileOptions{});
  std::string lir = m.dump("lir");
  std::string after_lower = m.dump_after("lower");
  EXPECT_NE(after_lower.find("transpose"), std::string::npos);
  EXPECT_THROW(m.dump_after("no-such-pass"), Error);
  LirSchedule s = backend_schedule("cpu");
  ASSERT_FALSE(s.passes.empty());
  EXPECT_EQ(m.dump_after(s.passes.back()), lir);
  if (s.passes[0] == "merge-qkv") {  // the packed-GEMM passes (an AVX2 host)
    EXPECT_EQ(lir.find("transpose"), std::string::npos) << lir;
    bool noted = false;
    for (auto& n : m.report().notes) noted |= n.find("merge-qkv x1") != std::string::npos;
    EXPECT_TRUE(noted);
  }
  LirProgram raw = lower_to_lir(eliminate_dead_code(fold_constants(legalize(bert_attention(true), "cpu", {}).graph)), true);
  EXPECT_FALSE(raw.scheduled);
  Tensor x = rnd({Dim(2), Dim(4), Dim(8)}, 42);
  auto a = make_executable("cpu", raw)->run({x});
  auto b = m.run(std::vector<Tensor>{x});
  ASSERT_EQ(a.size(), 1u);
  for (int64_t i = 0; i < a[0].numel(); ++i) EXPECT_EQ(a[0].get(i), b[0].get(i));
}

// An ONNX-exported Linear: MatMul by a constant [K, N] then Add of a constant bias [N].
TEST(LirRewrite, MatmulOfAConstantWeightBecomesALinear) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, {2, 3, 8});
  Tensor w = rnd({Dim(8), Dim(6)}, 1), bias = rnd({Dim(6)}, 2);
  auto y = b.add(b.matmul(x, b.constant(w)), b.constant(bias));
  b.output(b.matmul(y, b.input("z", DType::f32, {6, 4})));  // not a constant: stays a matmul
  LirProgram p = lower(g);
  ASSERT_EQ(count(p, OpKind::MatMul), 2);
  EXPECT_EQ(run_pass(p, "matmul-into-linear"), 1);
  EXPECT_EQ(count(p, OpKind::MatMul), 1);
  EXPECT_EQ(count(p, OpKind::Add), 0);
  const LirKernel* l = first(p, OpKind::Linear);
  ASSERT_NE(l, nullptr);
  ASSERT_EQ(l->in.size(), 3u);
  const Tensor& wt = p.buffers[l->in[1]].value;
  ASSERT_EQ(wt.shape(), (std::vector<int64_t>{6, 8}));
  EXPECT_EQ(wt.get(2 * 8 + 5), w.get(5 * 6 + 2));  // W^T
  // the same values as the unrewritten program
  Tensor xi = rnd({Dim(2), Dim(3), Dim(8)}, 3), zi = rnd({Dim(6), Dim(4)}, 4);
  LirProgram raw = lower(g);
  plan_memory(raw);
  raw.scheduled = true;
  p.scheduled = true;
  auto a = make_executable("cpu", raw)->run({xi, zi});
  auto c = make_executable("cpu", p)->run({xi, zi});
  for (int64_t i = 0; i < a[0].numel(); ++i) EXPECT_NEAR(a[0].get(i), c[0].get(i), 1e-4);
}

// An ONNX export's projection + residual + LayerNorm: MatMul, then add(add(y, bias), r) as one
// generated kernel, then layer_norm: one Linear with bias, residual and the norm.
TEST(LirRewrite, ExportedProjectionBiasResidualNormIntoOneLinear) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, {2, 3, 8});
  auto r = b.input("r", DType::f32, {2, 3, 6});
  auto y = b.add(b.add(b.matmul(x, b.constant(rnd({Dim(8), Dim(6)}, 1))), b.constant(rnd({Dim(6)}, 2))), r);
  b.output(b.layer_norm(y, b.constant(rnd({Dim(6)}, 3)), b.constant(rnd({Dim(6)}, 4))));
  LirProgram p = lower(g);
  LirProgram raw = p;
  EXPECT_EQ(run_pass(p, "matmul-into-linear"), 1);
  EXPECT_EQ(run_pass(p, "residual-into-linear"), 1);
  EXPECT_EQ(run_pass(p, "layernorm-into-linear"), 1);
  ASSERT_EQ(p.kernels.size(), 1u) << print_lir(p, true);
  const LirKernel& l = p.kernels[0];
  EXPECT_TRUE(l.attrs.count("cpu_res") && l.attrs.count("cpu_ln_g"));
  plan_memory(raw);
  raw.scheduled = p.scheduled = true;
  Tensor xi = rnd({Dim(2), Dim(3), Dim(8)}, 5), ri = rnd({Dim(2), Dim(3), Dim(6)}, 6);
  auto want = make_executable("cpu", raw)->run({xi, ri});
  auto got = make_executable("cpu", p)->run({xi, ri});
  for (int64_t i = 0; i < want[0].numel(); ++i) EXPECT_NEAR(got[0].get(i), want[0].get(i), 1e-4);
}

namespace {

// Two convs of x [N,2,6,6] (3 and 4 channels) concatenated on the channels, then a ReLU; with
// `also_out`, the first conv is a program output too (so it is not the concat's alone).
Graph two_convs_concat(int64_t N, bool also_out) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, {N, 2, 6, 6});
  Attrs pad{{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  auto c1 = b.op1(OpKind::Conv, {x, b.constant(rnd({Dim(3), Dim(2), Dim(3), Dim(3)}, 1))}, pad);
  auto c2 = b.op1(OpKind::Conv, {x, b.constant(rnd({Dim(4), Dim(2), Dim(1), Dim(1)}, 2))});
  b.output(b.relu(b.op1(OpKind::Concatenate, {c1, c2}, {{"axis", int64_t{1}}})));
  if (also_out) b.output(c1);
  return g;
}

}  // namespace

// concat-in-place: at batch 1 the planner puts both conv outputs inside the concat's output (the
// kernel is in_place and the printed schedule says so); at batch 2, or where an operand is also an
// output, nothing is marked or moved.
TEST(LirRewrite, ConcatInPlacePlacesOperandsInsideTheOutput) {
  LirProgram p = lower(two_convs_concat(1, false));
  EXPECT_EQ(run_pass(p, "concat-in-place"), 1);
  const LirKernel* cat = first(p, OpKind::Concatenate);
  ASSERT_NE(cat, nullptr);
  EXPECT_TRUE(cat->in_place);
  const LirBuffer &y = p.buffers[cat->out[0]], &a = p.buffers[cat->in[0]], &b = p.buffers[cat->in[1]];
  EXPECT_EQ(a.offset, y.offset);
  EXPECT_EQ(b.offset, y.offset + a.bytes());
  EXPECT_EQ(a.bytes() + b.bytes(), y.bytes());
  EXPECT_NE(print_lir(p).find("lir_concat_in_place=1} in_place"), std::string::npos) << print_lir(p);

  LirProgram p2 = lower(two_convs_concat(2, false));
  EXPECT_EQ(run_pass(p2, "concat-in-place"), 0);
  EXPECT_FALSE(first(p2, OpKind::Concatenate)->in_place);
  LirProgram p3 = lower(two_convs_concat(1, true));
  EXPECT_EQ(run_pass(p3, "concat-in-place"), 0);
}

// The cpu schedule runs it: the same values as the reference, with and without the pass, and the
// profile names the concat that copied nothing.
TEST(LirRewrite, ConcatInPlaceOnCpuMatchesTheReference) {
  for (int64_t N : {1, 2}) {
    Graph g = two_convs_concat(N, false);
    std::vector<Tensor> in{rnd({Dim(N), Dim(2), Dim(6), Dim(6)}, 7)};
    auto want = reference_run(g, in);
    rlx_test::ScopedEnv profile("RLX_PROFILE", "1");
    CompiledModel cm(g, CompileOptions{});
    cm.run(in);
    auto got = cm.run(in);
    EXPECT_LE(max_rel_diff(got[0], want[0]), 1e-5) << "N=" << N;
    const bool in_place = cm.profile().find("concatenate(in place)") != std::string::npos;
    EXPECT_EQ(in_place, N == 1) << cm.profile();
    rlx_test::ScopedEnv off("RLX_CPU_CONCAT_IN_PLACE", "0");
    CompiledModel plain(g, CompileOptions{});
    auto copied = plain.run(in);
    EXPECT_EQ(max_rel_diff(copied[0], got[0]), 0.0) << "N=" << N;
    EXPECT_EQ(plain.profile().find("(in place)"), std::string::npos) << plain.profile();
  }
}

// pool-divide: AveragePool as imported (sum reduce_window, then div by a constant count map) is one
// pool that divides each plane; the values are the reference's, with the count map and a scalar.
TEST(LirRewrite, PoolDivideFoldsTheAveragePoolsDivide) {
  for (bool map : {true, false}) {
    Graph g;
    Builder b(g);
    auto x = b.input("x", DType::f32, {2, 3, 7, 6});
    Attrs wa{{"kind", "sum"}, {"window", std::vector<int64_t>{1, 1, 3, 3}}, {"strides", std::vector<int64_t>{1, 1, 1, 1}},
             {"pads", std::vector<int64_t>{0, 0, 1, 1, 0, 0, 1, 1}}};
    auto s = b.op1(OpKind::ReduceWindow, {x}, wa);
    Tensor cnt(DType::f32, {1, 1, 7, 6});
    for (int64_t i = 0; i < cnt.numel(); ++i) cnt.set(i, 4.0 + static_cast<double>(i % 5));
    b.output(b.div(s, map ? b.constant(cnt) : b.scalar(9, DType::f32)));
    LirProgram p = lower(g);
    EXPECT_EQ(run_pass(p, "pool-divide"), 1) << print_lir(p);
    EXPECT_EQ(count(p, OpKind::Div), 0) << print_lir(p);
    std::vector<Tensor> in{rnd({Dim(2), Dim(3), Dim(7), Dim(6)}, 5)};
    auto want = reference_run(g, in);
    rlx_test::ScopedEnv profile("RLX_PROFILE", "1");
    CompiledModel cm(g, CompileOptions{});
    auto got = cm.run(in);
    EXPECT_LE(max_rel_diff(got[0], want[0]), 1e-6) << "map=" << map;
    EXPECT_NE(cm.profile().find("reduce_window+div"), std::string::npos) << cm.profile();
  }
}
