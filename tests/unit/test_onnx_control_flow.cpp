// ONNX control flow, sequences and training ops: If/Loop/Scan lowered at import (branch
// choice, selection, unrolling, masked unrolling, limits), sequences flattened at the graph boundary.
// Models are built in memory with the ONNX protos and run on cpu.
#include <gtest/gtest.h>

#include "onnx_builders.h"

using namespace rlx;
using namespace onnx_test;

namespace {

Tensor f32(std::vector<int64_t> s, std::vector<float> v) { return Tensor::from<float>(DType::f32, s, v); }
Tensor boolean(bool b) {
  Tensor t(DType::boolean, {});
  t.set_int(0, b);
  return t;
}

// If(cond): then y = x + 1, else y = x * 2 (else may be replaced by an unconvertible op).
::onnx::ModelProto if_model(bool cond_is_input, bool cond_value, bool bad_else) {
  auto m = model(17);
  auto* g = m.mutable_graph();
  *g->add_input() = vi("x", TP::FLOAT, {2});
  if (cond_is_input) *g->add_input() = vi("c", TP::BOOL, {});
  else constant(g, "c", TP::BOOL, {}, {cond_value ? 1.0 : 0.0});
  *g->add_output() = vi("y", TP::FLOAT, {2});
  auto* n = add_node(g, "If", {"c"}, {"y"});
  auto* tb = attr_g(n, "then_branch");
  constant(tb, "one", TP::FLOAT, {}, {1});
  add_node(tb, "Add", {"x", "one"}, {"t"});
  *tb->add_output() = vi("t", TP::FLOAT, {2});
  auto* eb = attr_g(n, "else_branch");
  constant(eb, "two", TP::FLOAT, {}, {2});
  add_node(eb, bad_else ? "NoSuchOp" : "Mul", {"x", "two"}, {"e"});
  *eb->add_output() = vi("e", TP::FLOAT, {2});
  return m;
}

}  // namespace

TEST(OnnxControlFlow, IfWithRunTimeConditionSelectsBetweenBranches) {
  auto bytes = if_model(true, false, false).SerializeAsString();
  Graph g = rlx::onnx::import_onnx(bytes, "", "mem");
  ASSERT_EQ(g.inputs.size(), 2u);  // the condition stays a run-time input
  Graph g2 = g;
  auto t = run(std::move(g), {f32({2}, {3, 5}), boolean(true)});
  auto e = run(std::move(g2), {f32({2}, {3, 5}), boolean(false)});
  EXPECT_FLOAT_EQ(t[0].get(0), 4.f);
  EXPECT_FLOAT_EQ(t[0].get(1), 6.f);
  EXPECT_FLOAT_EQ(e[0].get(0), 6.f);
  EXPECT_FLOAT_EQ(e[0].get(1), 10.f);
}

TEST(OnnxControlFlow, IfWithConstantConditionImportsOnlyTheTakenBranch) {
  // The else branch holds an op no converter knows; a constant-true condition never imports it.
  Graph g = rlx::onnx::import_onnx(if_model(false, true, true).SerializeAsString(), "", "mem");
  auto y = run(std::move(g), {f32({2}, {1, 2})});
  EXPECT_FLOAT_EQ(y[0].get(1), 3.f);
  try {
    rlx::onnx::import_onnx(if_model(false, false, true).SerializeAsString(), "", "mem");
    FAIL() << "the taken else branch has an unsupported op";
  } catch (const std::exception& ex) {
    EXPECT_NE(std::string(ex.what()).find("NoSuchOp"), std::string::npos) << ex.what();
  }
}

namespace {
// Loop(M, cond, y): y = y * 2 per iteration; cond_out = y_new < limit; scan output = y_new.
::onnx::ModelProto loop_model(int64_t trip, bool with_scan, bool runtime_cond) {
  auto m = model(17);
  auto* g = m.mutable_graph();
  *g->add_input() = vi("y0", TP::FLOAT, {1});
  *g->add_output() = vi("y", TP::FLOAT, {1});
  if (with_scan) *g->add_output() = vi("ys", TP::FLOAT, {trip, 1});
  constant(g, "M", TP::INT64, {}, {static_cast<double>(trip)});
  constant(g, "c0", TP::BOOL, {}, {1});
  std::vector<std::string> outs{"y"};
  if (with_scan) outs.push_back("ys");
  auto* n = add_node(g, "Loop", {"M", "c0", "y0"}, outs);
  auto* b = attr_g(n, "body");
  *b->add_input() = vi("i", TP::INT64, {});
  *b->add_input() = vi("cin", TP::BOOL, {});
  *b->add_input() = vi("yin", TP::FLOAT, {1});
  constant(b, "two", TP::FLOAT, {}, {2});
  add_node(b, "Mul", {"yin", "two"}, {"yout"});
  if (runtime_cond) {
    constant(b, "lim", TP::FLOAT, {1}, {10});
    add_node(b, "Less", {"yout", "lim"}, {"cl"});
    add_node(b, "Squeeze", {"cl"}, {"cout"});
  } else {
    add_node(b, "Identity", {"cin"}, {"cout"});
  }
  *b->add_output() = vi("cout", TP::BOOL, {});
  *b->add_output() = vi("yout", TP::FLOAT, {1});
  if (with_scan) {
    add_node(b, "Identity", {"yout"}, {"sout"});
    *b->add_output() = vi("sout", TP::FLOAT, {1});
  }
  return m;
}
}  // namespace

TEST(OnnxControlFlow, LoopWithKnownTripCountUnrollsWithScanOutputs) {
  Graph g = rlx::onnx::import_onnx(loop_model(3, true, false).SerializeAsString(), "", "mem");
  auto r = run(std::move(g), {f32({1}, {1.5f})});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_FLOAT_EQ(r[0].get(0), 12.f);
  EXPECT_EQ(r[1].shape(), (std::vector<int64_t>{3, 1}));
  EXPECT_FLOAT_EQ(r[1].get(0), 3.f);
  EXPECT_FLOAT_EQ(r[1].get(1), 6.f);
  EXPECT_FLOAT_EQ(r[1].get(2), 12.f);
}

TEST(OnnxControlFlow, LoopWithRunTimeConditionIsMasked) {
  // Doubling stops once y >= 10: y0=1 -> 16 (the iteration that reaches 16 still runs), y0=20 -> 40.
  Graph g = rlx::onnx::import_onnx(loop_model(8, false, true).SerializeAsString(), "", "mem");
  Graph g2 = g;
  EXPECT_FLOAT_EQ(run(std::move(g), {f32({1}, {1})})[0].get(0), 16.f);
  EXPECT_FLOAT_EQ(run(std::move(g2), {f32({1}, {20})})[0].get(0), 40.f);
}

TEST(OnnxControlFlow, LoopBeyondTheUnrollLimitFailsClearly) {
  try {
    rlx::onnx::import_onnx(loop_model(5000, false, false).SerializeAsString(), "", "mem");
    FAIL() << "expected the unroll limit";
  } catch (const std::exception& ex) {
    EXPECT_NE(std::string(ex.what()).find("unrolled at import"), std::string::npos) << ex.what();
  }
}

// A Loop without a trip count whose condition (x + 1 < limit) is only known from a fed start value:
// the importer evaluates the condition each iteration from the fed value. Each evaluation reuses the
// previous ones (the chain behind iteration t is t adds deep; a depth-limited, memo-less fold gave
// up past ~500 iterations and then had no trip count to fall back on).
TEST(OnnxControlFlow, LoopConditionFromFedValuesFoldsThroughDeepChains) {
  auto m = model(17);
  auto* g = m.mutable_graph();
  *g->add_input() = vi("start", TP::INT64, {});
  *g->add_output() = vi("x", TP::INT64, {});
  constant(g, "c0", TP::BOOL, {}, {1});
  auto* b = attr_g(add_node(g, "Loop", {"", "c0", "start"}, {"x"}), "body");
  *b->add_input() = vi("it", TP::INT64, {});
  *b->add_input() = vi("cin", TP::BOOL, {});
  *b->add_input() = vi("xin", TP::INT64, {});
  constant(b, "one", TP::INT64, {}, {1});
  constant(b, "limit", TP::INT64, {}, {700});
  add_node(b, "Add", {"xin", "one"}, {"xout"});
  add_node(b, "Less", {"xout", "limit"}, {"cout"});
  *b->add_output() = vi("cout", TP::BOOL, {});
  *b->add_output() = vi("xout", TP::INT64, {});
  rlx::onnx::ImportOptions o;
  Tensor start(DType::i64, {});
  start.set_int(0, 3);
  o.input_values["start"] = start;
  Graph gr = import(m, o);
  EXPECT_EQ(run(std::move(gr), {start})[0].get_int(0), 700);
  // Without the fed value the condition is a run-time value and there is no trip count to unroll by.
  EXPECT_NE(import_error(m).find("no trip count"), std::string::npos) << import_error(m);
}

TEST(OnnxControlFlow, ScanReverseDirectionAndCarriedState) {
  auto m = model(17);
  auto* g = m.mutable_graph();
  *g->add_input() = vi("s0", TP::FLOAT, {2});
  *g->add_input() = vi("x", TP::FLOAT, {3, 2});
  *g->add_output() = vi("s", TP::FLOAT, {2});
  *g->add_output() = vi("z", TP::FLOAT, {3, 2});
  auto* n = add_node(g, "Scan", {"s0", "x"}, {"s", "z"});
  attr_i(n, "num_scan_inputs", 1);
  attr_ints(n, "scan_input_directions", {1});
  auto* b = attr_g(n, "body");
  *b->add_input() = vi("sin", TP::FLOAT, {2});
  *b->add_input() = vi("xi", TP::FLOAT, {2});
  add_node(b, "Add", {"sin", "xi"}, {"sout"});
  add_node(b, "Identity", {"sout"}, {"zo"});
  *b->add_output() = vi("sout", TP::FLOAT, {2});
  *b->add_output() = vi("zo", TP::FLOAT, {2});
  Graph gr = rlx::onnx::import_onnx(m.SerializeAsString(), "", "mem");
  auto r = run(std::move(gr), {f32({2}, {0, 0}), f32({3, 2}, {1, 2, 3, 4, 5, 6})});
  // Reverse: rows 2, 1, 0 -> running sums (5,6), (8,10), (9,12).
  EXPECT_FLOAT_EQ(r[0].get(0), 9.f);
  EXPECT_FLOAT_EQ(r[0].get(1), 12.f);
  std::vector<float> want{5, 6, 8, 10, 9, 12};
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(r[1].get(i), want[i]) << i;
}

TEST(OnnxSequences, SequenceInputsAndOutputsAreFlattenedPerElement) {
  // out = SequenceInsert(seq, t) at position 0; n = SequenceLength; last = SequenceAt(-1);
  // stacked = ConcatFromSequence(new_axis=1).
  auto m = model(17);
  auto* g = m.mutable_graph();
  *g->add_input() = seq_vi("seq", TP::FLOAT);
  *g->add_input() = vi("t", TP::FLOAT, {2});
  *g->add_output() = seq_vi("out", TP::FLOAT);
  *g->add_output() = vi("n", TP::INT64, {});
  *g->add_output() = vi("last", TP::FLOAT, {2});
  *g->add_output() = vi("stacked", TP::FLOAT, {3, 2});
  constant(g, "zero", TP::INT64, {}, {0});
  constant(g, "m1", TP::INT64, {}, {-1});
  add_node(g, "SequenceInsert", {"seq", "t", "zero"}, {"out"});
  add_node(g, "SequenceLength", {"out"}, {"n"});
  add_node(g, "SequenceAt", {"out", "m1"}, {"last"});
  attr_i(add_node(g, "ConcatFromSequence", {"out"}, {"stacked"}), "new_axis", 1);
  rlx::onnx::ImportOptions o;
  o.sequence_lengths["seq"] = 2;
  o.input_shapes["seq[0]"] = {2};
  o.input_shapes["seq[1]"] = {2};
  Graph gr = rlx::onnx::import_onnx(m.SerializeAsString(), "", "mem", o);
  ASSERT_EQ(gr.inputs.size(), 3u);
  EXPECT_EQ(gr.values[gr.inputs[0]].name, "seq[0]");
  ASSERT_EQ(gr.outputs.size(), 6u);  // out[0..2], n, last, stacked
  EXPECT_EQ(gr.values[gr.outputs[0]].name, "out[0]");
  EXPECT_EQ(gr.values[gr.outputs[2]].name, "out[2]");
  auto r = run(std::move(gr), {f32({2}, {1, 2}), f32({2}, {3, 4}), f32({2}, {9, 9})});
  EXPECT_FLOAT_EQ(r[0].get(0), 9.f);  // the inserted tensor comes first
  EXPECT_FLOAT_EQ(r[2].get(1), 4.f);
  EXPECT_EQ(r[3].get_int(0), 3);
  EXPECT_FLOAT_EQ(r[4].get(0), 3.f);
  EXPECT_EQ(r[5].shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_FLOAT_EQ(r[5].get(2), 1.f);
  // Without the fed length the importer names the input and what it needs.
  try {
    rlx::onnx::import_onnx(m.SerializeAsString(), "", "mem");
    FAIL() << "a sequence input needs its length";
  } catch (const std::exception& ex) {
    EXPECT_NE(std::string(ex.what()).find("'seq'"), std::string::npos) << ex.what();
  }
}

TEST(OnnxTraining, SeededTrainingDropoutMatchesNumpyLegacyStream) {
  // np.random.seed(0); np.random.uniform(0, 1, 10) >= 0.5 -> 1 1 1 1 0 1 0 1 1 0 (NumPy's values).
  auto m = model(22);
  auto* g = m.mutable_graph();
  *g->add_input() = vi("x", TP::FLOAT, {10});
  *g->add_output() = vi("y", TP::FLOAT, {10});
  *g->add_output() = vi("mask", TP::BOOL, {10});
  constant(g, "r", TP::FLOAT, {}, {0.5});
  constant(g, "t", TP::BOOL, {}, {1});
  attr_i(add_node(g, "Dropout", {"x", "r", "t"}, {"y", "mask"}), "seed", 0);
  Graph gr = rlx::onnx::import_onnx(m.SerializeAsString(), "", "mem");
  auto r = run(std::move(gr), {f32({10}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 3})});
  std::vector<int> want{1, 1, 1, 1, 0, 1, 0, 1, 1, 0};
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(r[1].get_int(i), want[i]) << i;
    EXPECT_FLOAT_EQ(r[0].get(i), want[i] * 2.f) << i;  // kept elements scaled by 1 / (1 - ratio)
  }
}

TEST(OnnxTraining, NesterovMomentumUsesBetaOnlyAfterTheFirstStep) {
  // x_new = x - R * (g + alpha * v_new), v_new = alpha * v + beta' * g, beta' = (T > 0 ? beta : 1).
  auto m = model(17);
  auto* os = m.add_opset_import();
  os->set_domain("ai.onnx.preview.training");
  os->set_version(1);
  auto* g = m.mutable_graph();
  *g->add_input() = vi("R", TP::FLOAT, {});
  *g->add_input() = vi("T", TP::INT64, {});
  *g->add_input() = vi("X", TP::FLOAT, {1});
  *g->add_input() = vi("G", TP::FLOAT, {1});
  *g->add_input() = vi("V", TP::FLOAT, {1});
  *g->add_output() = vi("Xn", TP::FLOAT, {1});
  *g->add_output() = vi("Vn", TP::FLOAT, {1});
  auto* n = add_node(g, "Momentum", {"R", "T", "X", "G", "V"}, {"Xn", "Vn"});
  n->set_domain("ai.onnx.preview.training");
  auto fattr = [&](const char* name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::FLOAT);
    a->set_f(v);
  };
  fattr("alpha", 0.5f);
  fattr("beta", 0.25f);
  fattr("norm_coefficient", 0.f);
  auto* md = n->add_attribute();
  md->set_name("mode");
  md->set_type(::onnx::AttributeProto::STRING);
  md->set_s("nesterov");
  Graph gr = rlx::onnx::import_onnx(m.SerializeAsString(), "", "mem");
  Graph gr2 = gr;
  Tensor t0(DType::i64, {}), t1(DType::i64, {});
  t1.set_int(0, 3);
  auto a = run(std::move(gr), {f32({}, {0.1f}), t0, f32({1}, {1}), f32({1}, {2}), f32({1}, {4})});
  auto b = run(std::move(gr2), {f32({}, {0.1f}), t1, f32({1}, {1}), f32({1}, {2}), f32({1}, {4})});
  EXPECT_FLOAT_EQ(a[1].get(0), 4.f);          // 0.5*4 + 1*2
  EXPECT_FLOAT_EQ(a[0].get(0), 1 - 0.1f * 4);  // 1 - 0.1*(2 + 0.5*4)
  EXPECT_FLOAT_EQ(b[1].get(0), 2.5f);         // 0.5*4 + 0.25*2
  EXPECT_FLOAT_EQ(b[0].get(0), 1 - 0.1f * 3.25f);
}
