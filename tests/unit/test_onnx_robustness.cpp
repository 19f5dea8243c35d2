// Malformed ONNX input fails with a clear "[onnx]" error, never a crash: every truncation of a
// model, corrupted bytes, oversized dimensions (initializers and graph inputs) and cyclic graphs.
#include <gtest/gtest.h>

#include <random>

#include "onnx_builders.h"

using namespace rlx;
using namespace onnx_test;

namespace {

::onnx::ModelProto relu_model(std::vector<int64_t> in_dims = {2, 3}) {
  auto m = model(17);
  auto* g = m.mutable_graph();
  g->set_name("g");
  *g->add_input() = vi("x", TP::FLOAT, dims_of(in_dims));
  *g->add_output() = vi("y", TP::FLOAT, dims_of(in_dims));
  auto* w = g->add_initializer();  // raw_data long enough that cuts land inside it
  w->set_name("w");
  w->set_data_type(TP::FLOAT);
  w->add_dims(in_dims.back());
  std::vector<float> v(static_cast<size_t>(in_dims.back()), 0.5f);
  w->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
  add_node(g, "Add", {"x", "w"}, {"s"})->set_name("add");
  add_node(g, "Relu", {"s"}, {"y"})->set_name("relu");
  return m;
}

}  // namespace

TEST(OnnxRobustness, EveryTruncationImportsOrFailsClearly) {
  std::string good = relu_model().SerializeAsString();
  int failed = 0;
  for (size_t n = 0; n < good.size(); ++n) {
    std::string e;
    try {
      rlx::onnx::import_onnx(good.substr(0, n), "", "m.onnx");  // a cut at a field boundary can still be a model
    } catch (const Error& err) {
      e = err.what();
      ++failed;
      EXPECT_EQ(e.rfind("[onnx] m.onnx", 0), 0u) << "prefix " << n << ": " << e;
    }
  }
  EXPECT_GT(failed, static_cast<int>(good.size()) / 2);
  // A cut inside the initializer's bytes is a protobuf error that says so.
  EXPECT_NE(import_error(good.substr(0, good.size() - 30)).find("truncated?"), std::string::npos);
}

TEST(OnnxRobustness, CorruptBytesImportOrFailClearly) {
  std::string good = relu_model().SerializeAsString();
  std::mt19937 rng(11);
  int ok = 0, failed = 0;
  for (int it = 0; it < 2000; ++it) {
    std::string s = good;
    for (int k = 0, f = 1 + static_cast<int>(rng() % 3); k < f; ++k) s[rng() % s.size()] = static_cast<char>(rng() & 0xff);
    try {
      rlx::onnx::import_onnx(s, "", "m.onnx");
      ++ok;
    } catch (const Error& e) {
      ++failed;
      EXPECT_EQ(std::string(e.what()).find("[onnx]"), 0u) << e.what();
    }
  }
  EXPECT_GT(failed, 0);
  EXPECT_EQ(ok + failed, 2000);
}

TEST(OnnxRobustness, OversizedDimensionsAreRefused) {
  // An initializer whose dims multiply past 2^40 elements, with no data behind it.
  auto m = relu_model();
  auto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_raw_data();
  w->clear_dims();
  w->add_dims(int64_t{1} << 31);
  w->add_dims(int64_t{1} << 31);
  std::string e = import_error(m.SerializeAsString());
  EXPECT_NE(e.find("tensor 'w'"), std::string::npos) << e;
  EXPECT_NE(e.find("too large"), std::string::npos) << e;
  // dims whose product overflows int64
  w->clear_dims();
  for (int i = 0; i < 3; ++i) w->add_dims(int64_t{1} << 62);
  EXPECT_NE(import_error(m.SerializeAsString()).find("too large"), std::string::npos);
  // A negative dimension.
  w->clear_dims();
  w->add_dims(-3);
  EXPECT_NE(import_error(m.SerializeAsString()).find("negative dimension"), std::string::npos);
  // raw_data shorter than the dims promise.
  auto m2 = relu_model();
  m2.mutable_graph()->mutable_initializer(0)->set_raw_data("abcd");
  EXPECT_NE(import_error(m2.SerializeAsString()).find("raw_data has 4 bytes, expected 12"), std::string::npos);
}

TEST(OnnxRobustness, CyclicGraphsAreClearErrors) {
  // a = Relu(b), b = Relu(a): the first node reads a value nothing has produced yet.
  auto m = relu_model();
  auto* g = m.mutable_graph();
  g->clear_node();
  auto add = [&](const char* name, const char* in, const char* out) {
    auto* n = g->add_node();
    n->set_op_type("Relu");
    n->set_name(name);
    n->add_input(in);
    n->add_output(out);
  };
  add("first", "b", "a");
  add("second", "a", "b");
  add("out", "b", "y");
  std::string e = import_error(m.SerializeAsString());
  EXPECT_NE(e.find("node 'first' (Relu)"), std::string::npos) << e;
  EXPECT_NE(e.find("input 'b' is not defined before use"), std::string::npos) << e;
  // A node that reads its own output.
  g->clear_node();
  add("self", "y", "y");
  e = import_error(m.SerializeAsString());
  EXPECT_NE(e.find("node 'self' (Relu)"), std::string::npos) << e;
  EXPECT_NE(e.find("not defined before use"), std::string::npos) << e;
}

namespace {
// One conv/pool node `op` over x [1, 1, 4, 4] with 2x2 windows and the window attributes given.
::onnx::ModelProto window_model(const std::string& op, std::vector<int64_t> strides, std::vector<int64_t> pads) {
  auto m = model(19);
  auto* g = m.mutable_graph();
  bool quant = op == "QLinearConv" || op == "ConvInteger";
  int xt = quant ? TP::UINT8 : TP::FLOAT;
  *g->add_input() = vi("x", xt, {1, 1, 4, 4});
  std::vector<std::string> ins{"x"};
  if (op == "QLinearConv") {
    for (auto [n, t] : std::vector<std::pair<const char*, int>>{{"xs", TP::FLOAT}, {"xz", TP::UINT8}}) *g->add_input() = vi(n, t, {});
    ins = {"x", "xs", "xz", "w", "ws", "wz", "ys", "yz"};
    for (auto [n, t] : std::vector<std::pair<const char*, int>>{{"ws", TP::FLOAT}, {"wz", TP::UINT8}, {"ys", TP::FLOAT}, {"yz", TP::UINT8}})
      *g->add_input() = vi(n, t, {});
  } else if (op != "LpPool" && op != "MaxPool") {
    ins.push_back("w");
  }
  if (ins.size() > 1) *g->add_input() = vi("w", xt, {1, 1, 2, 2});
  int64_t out = op == "ConvTranspose" ? 5 : 3;
  *g->add_output() = vi("y", op == "ConvInteger" ? TP::INT32 : xt, {1, 1, out, out});
  auto* n = add_node(g, op, ins, {"y"});
  if (op == "LpPool" || op == "MaxPool") attr_ints(n, "kernel_shape", {2, 2});
  attr_ints(n, "strides", strides);
  if (!pads.empty()) attr_ints(n, "pads", pads);
  return m;
}
}  // namespace

// Every conv/pool converter resolves its padding and checks its window attributes in one place
// (conv_window/pool_window): LpPool, QLinearConv/ConvInteger and ConvTranspose once had their own
// copies without the checks.
TEST(OnnxRobustness, ConvAndPoolWindowAttributesAreCheckedByEveryConverter) {
  for (const char* op : {"Conv", "MaxPool", "LpPool", "QLinearConv", "ConvInteger", "ConvTranspose"}) {
    EXPECT_EQ(import_error(window_model(op, {1, 1}, {0, 0, 0, 0})), "") << op;
    std::string e = import_error(window_model(op, {0, 1}, {}));
    EXPECT_NE(e.find(std::string("node '") + op + "_y' (" + op + "): kernel, strides and dilations must be positive"),
              std::string::npos) << op << ": " << e;
    e = import_error(window_model(op, {1, 1}, {0, 0, 0}));
    EXPECT_NE(e.find("pads must have 2 x spatial-rank entries"), std::string::npos) << op << ": " << e;
    if (std::string(op) == "ConvTranspose") continue;  // its pads crop the output: its own rule
    e = import_error(window_model(op, {1, 1}, {0, -1, 0, 0}));
    EXPECT_NE(e.find("pads must be non-negative"), std::string::npos) << op << ": " << e;
  }
}

TEST(OnnxRobustness, TriluAndGroupNormalizationCheckTheirInputs) {
  auto trilu = [](std::vector<int64_t> dims) {
    auto m = model(14);
    auto* g = m.mutable_graph();
    *g->add_input() = vi("x", TP::FLOAT, dims_of(dims));
    *g->add_output() = vi("y", TP::FLOAT, dims_of(dims));
    add_node(g, "Trilu", {"x"}, {"y"});
    return m;
  };
  EXPECT_EQ(import_error(trilu({2, 3})), "");
  std::string e = import_error(trilu({3}));
  EXPECT_NE(e.find("node 'Trilu_y' (Trilu): input must have rank >= 2"), std::string::npos) << e;
  EXPECT_NE(import_error(trilu({})).find("rank >= 2"), std::string::npos);

  auto group_norm = [](std::vector<int64_t> dims, int64_t groups, int64_t scale_len, int opset) {
    auto m = model(opset);
    auto* g = m.mutable_graph();
    *g->add_input() = vi("x", TP::FLOAT, dims_of(dims));
    *g->add_input() = vi("s", TP::FLOAT, {scale_len});
    *g->add_input() = vi("b", TP::FLOAT, {scale_len});
    *g->add_output() = vi("y", TP::FLOAT, dims_of(dims));
    attr_i(add_node(g, "GroupNormalization", {"x", "s", "b"}, {"y"}), "num_groups", groups);
    return m;
  };
  EXPECT_EQ(import_error(group_norm({2, 4, 3}, 2, 4, 21)), "");
  EXPECT_EQ(import_error(group_norm({2, 4}, 2, 4, 21)), "");
  EXPECT_EQ(import_error(group_norm({2, 4, 3}, 2, 2, 18)), "");  // opset 18: one scale per group
  e = import_error(group_norm({4}, 2, 4, 21));
  EXPECT_NE(e.find("node 'GroupNormalization_y' (GroupNormalization): X must have rank >= 2"), std::string::npos) << e;
  e = import_error(group_norm({2, 4, 3}, 3, 4, 21));
  EXPECT_NE(e.find("num_groups 3 must be positive and divide the 4 channels"), std::string::npos) << e;
  EXPECT_NE(import_error(group_norm({2, 4, 3}, 0, 4, 21)).find("must be positive"), std::string::npos);
  e = import_error(group_norm({2, 4, 3}, 2, 2, 21));
  EXPECT_NE(e.find("scale must have shape [4] (one per channel)"), std::string::npos) << e;
}
