// The .rlx text form (print/parse round trip, examples, malformed input) and the verifier.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "rlx/builder.h"
#include "rlx/text.h"

using namespace rlx;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// print -> parse -> print must reproduce the text exactly; returns the parsed graph.
Graph round_trip(const Graph& g) {
  std::string t1 = print_graph(g);
  Graph p = parse_graph(t1, "roundtrip");
  std::string t2 = print_graph(p);
  EXPECT_EQ(t1, t2);
  verify_graph(p);
  return p;
}

// Every node's attributes hold the same kinds after parsing (ints stay ints, dims stay dims).
void expect_same_structure(const Graph& a, const Graph& b) {
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  ASSERT_EQ(a.inputs.size(), b.inputs.size());
  ASSERT_EQ(a.outputs.size(), b.outputs.size());
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const Node &x = a.nodes[i], &y = b.nodes[i];
    EXPECT_EQ(x.op, y.op);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.inputs.size(), y.inputs.size());
    ASSERT_EQ(x.attrs.size(), y.attrs.size()) << op_name(x.op);
    for (auto& [k, v] : x.attrs) {
      ASSERT_TRUE(y.attrs.count(k)) << k;
      EXPECT_EQ(v.kind(), y.attrs.at(k).kind()) << op_name(x.op) << " " << k;
    }
    for (size_t k = 0; k < x.outputs.size(); ++k) {
      EXPECT_EQ(a.type(x.outputs[k]).dtype, b.type(y.outputs[k]).dtype);
      EXPECT_EQ(a.type(x.outputs[k]).shape, b.type(y.outputs[k]).shape);
    }
  }
}

const Tensor& const_value(const Graph& g, size_t node) {
  return std::get<Tensor>(g.nodes.at(node).attrs.at("value").v);
}

// Asserts parse_graph throws rlx::Error naming "<text>:LINE:" and containing `keyword`.
void expect_parse_error(const std::string& text, int line, const std::string& keyword) {
  try {
    parse_graph(text);
    ADD_FAILURE() << "no error for:\n" << text;
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("[parse] <text>:" + std::to_string(line) + ":"), std::string::npos)
        << "wanted line " << line << " in: " << msg;
    EXPECT_NE(msg.find(keyword), std::string::npos) << "wanted '" << keyword << "' in: " << msg;
  }
}

// Asserts verify_graph throws rlx::Error whose message contains every one of `parts`.
void expect_verify_error(const Graph& g, std::initializer_list<std::string> parts, bool mir_only = false) {
  try {
    verify_graph(g, mir_only);
    ADD_FAILURE() << "verify_graph accepted a broken graph:\n" << print_graph(g);
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind("[verify]", 0), 0u) << msg;
    for (auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "wanted '" << p << "' in: " << msg;
  }
}

}  // namespace

// ---- round trips ---------------------------------------------------------------------------------

TEST(TextRoundTrip, EveryAttributeKindAndMultiOutput) {
  Graph g;
  g.name = "kinds";
  Builder b(g);
  auto x = b.input("x", DType::f32, {"batch", "seq", 16});
  auto w = b.input("w", DType::f32, {8, 16});
  auto bias = b.input("bias", DType::f32, {8});
  b.set_origin("Gemm_0");
  auto h = b.linear(x, w, bias, "relu");  // str
  b.set_origin("");
  auto s = b.softmax(h, -1);                                               // int (negative)
  auto ln = b.layer_norm(s, b.input("gamma", DType::f32, {8}), -1, 1e-5);  // float
  auto r = b.reduce(OpKind::ReduceSum, ln, {1, -1}, true);                 // ints
  auto rs = b.reshape(ln, {"batch", "seq", 2, -1});                        // dims with symbols
  auto tr = b.transpose(rs, {1, 0, 3, 2});                                 // ints
  auto cv = b.convert(tr, DType::f16);                                     // dtype
  auto tk = b.op(OpKind::TopK, {ln}, {{"k", 3}, {"axis", -1}});            // two outputs
  auto so = b.op(OpKind::Sort, {ln}, {{"descending", 1}});
  auto io = b.op1(OpKind::Iota, {}, {{"shape", Shape{4, 5}}, {"dim", 1}, {"dtype", DType::i32}});
  auto rn = b.op1(
      OpKind::RngUniform, {},
      {{"shape", Shape{3}}, {"low", -std::numeric_limits<double>::infinity()}, {"high", 0.1}, {"seed", 42}});
  auto bc = b.broadcast_in_dim(b.scalar(2.5, DType::f32), {"batch", 8}, {});  // static+symbolic dims
  auto ex =
      b.op1(OpKind::Expand, {b.constant(Tensor::from<float>(DType::f32, {1, 8}, std::vector<float>(8, 1.f)))},
            {{"shape", Shape{4, 8}}});  // dims, static only
  auto g1 = b.gelu(h, "tanh");
  auto pd = b.op1(OpKind::Pad, {io},
                  {{"low", std::vector<int64_t>{0, 1}},
                   {"high", std::vector<int64_t>{2, 0}},
                   {"value", 0.0}});  // float that is integral
  for (auto v : {r, cv, tk[0], tk[1], so[0], so[1], rn, bc, ex, g1, pd}) b.output(v);
  g.values[h].name = "hidden";

  Graph p = round_trip(g);
  expect_same_structure(g, p);
  std::string t = print_graph(g);
  EXPECT_NE(t.find("graph @kinds(%x: f32[batch,seq,16], %w: f32[8,16], %bias: f32[8], %gamma: f32[8])"),
            std::string::npos)
      << t;
  EXPECT_NE(
      t.find("%hidden = linear(%x, %w, %bias) {activation=\"relu\"} : f32[batch,seq,8] loc(\"Gemm_0\")"),
      std::string::npos)
      << t;
  EXPECT_NE(t.find("{shape=[batch, seq, 2, -1]}"), std::string::npos) << t;
  EXPECT_NE(t.find("{to=f16}"), std::string::npos) << t;
  EXPECT_NE(t.find("{axis=-1, k=3} : f32[batch,seq,3], i64[batch,seq,3]"), std::string::npos) << t;
  EXPECT_NE(t.find("high=0.1, low=-inf"), std::string::npos) << t;
  EXPECT_NE(t.find("value=0.0}"), std::string::npos) << t;
  EXPECT_NE(t.find("eps=1e-05"), std::string::npos) << t;
  // Attribute values survive exactly.
  const Node& ln_node = p.nodes.at(2);
  ASSERT_EQ(ln_node.op, OpKind::LayerNorm);
  EXPECT_EQ(std::get<double>(ln_node.attrs.at("eps").v), 1e-5);
  EXPECT_EQ(p.nodes.at(0).name, "Gemm_0");
  // Unnamed values print as %N and come back named "N".
  ValueId s_parsed = p.nodes.at(1).outputs[0];
  EXPECT_EQ(p.values[s_parsed].name, std::to_string(s));
  EXPECT_EQ(p.symbols(), (std::vector<std::string>{"batch", "seq"}));
}

TEST(TextRoundTrip, ConstantsOfEveryDType) {
  const double inf = std::numeric_limits<double>::infinity();
  Graph g;
  Builder b(g);
  std::vector<ValueId> outs;
  outs.push_back(b.constant(Tensor::from<double>(
      DType::f32, {2, 4},
      {0.1, -0.0, 1e-30, 3.4028234663852886e38, 1.401298464324817e-45, -inf, 16777216.0, -2.5})));
  outs.push_back(
      b.constant(Tensor::from<double>(DType::f16, {5}, {65504.0, 5.960464477539063e-08, 0.1, -inf, 1.0})));
  outs.push_back(b.constant(Tensor::from<double>(DType::bf16, {4}, {0.1, 3.0e38, -1e-20, 7.0})));
  outs.push_back(b.constant(Tensor::from<double>(
      DType::f64, {2, 2}, {0.1, 1e-300, 4.9406564584124654e-324, 1.7976931348623157e308})));
  Tensor c(DType::c64, {3});
  c.setc(0, {1.0, 2.0});
  c.setc(1, {-0.5, -3.25});
  c.setc(2, {0.1, 1e-40});
  outs.push_back(b.constant(c));
  outs.push_back(b.constant(Tensor::from<int>(DType::i8, {3}, {-128, 0, 127})));
  outs.push_back(b.constant(Tensor::from<int>(DType::u8, {3}, {0, 1, 255})));
  outs.push_back(b.constant(Tensor::from<int>(DType::i16, {2}, {-32768, 32767})));
  outs.push_back(b.constant(Tensor::from<int64_t>(DType::i32, {2}, {INT32_MIN, INT32_MAX})));
  Tensor i64(DType::i64, {4});
  i64.set_int(0, INT64_MIN);
  i64.set_int(1, INT64_MAX);
  i64.set_int(2, (int64_t{1} << 53) + 1);  // not representable as a double
  i64.set_int(3, -7);
  outs.push_back(b.constant(i64));
  outs.push_back(b.constant(Tensor::from<int>(DType::boolean, {2, 2}, {1, 0, 0, 1})));
  outs.push_back(b.constant(Tensor(DType::f32, {0, 3})));  // empty tensor
  outs.push_back(b.scalar(-1.5, DType::f64));              // rank 0
  for (auto v : outs) b.output(v);

  Graph p = round_trip(g);
  ASSERT_EQ(p.nodes.size(), g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Tensor &a = const_value(g, i), &t = const_value(p, i);
    ASSERT_EQ(a.dtype(), t.dtype()) << i;
    ASSERT_EQ(a.shape(), t.shape()) << i;
    ASSERT_EQ(a.nbytes(), t.nbytes()) << i;
    EXPECT_EQ(std::memcmp(a.raw(), t.raw(), a.nbytes()), 0)
        << "bytes differ for constant " << i << ": " << a.str();
  }
  std::string text = print_graph(g);
  EXPECT_NE(text.find("i64[4] [-9223372036854775808, 9223372036854775807, 9007199254740993, -7]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("c64[3] [1, 2, -0.5, -3.25, "), std::string::npos) << text;
  EXPECT_NE(text.find("bool[2,2] [1, 0, 0, 1]"), std::string::npos) << text;
  EXPECT_NE(text.find("f32[0,3] []"), std::string::npos) << text;
  EXPECT_NE(text.find("f64[] [-1.5]"), std::string::npos) << text;
}

TEST(TextRoundTrip, NaNSurvivesAndBoolWords) {
  Graph g;
  Builder b(g);
  b.output(b.constant(Tensor::from<double>(DType::f32, {2}, {std::nan(""), 1.0})));
  Graph p = round_trip(g);
  EXPECT_TRUE(std::isnan(const_value(p, 0).get(0)));
  EXPECT_EQ(const_value(p, 0).get(1), 1.0);
  Graph q = parse_graph(
      "graph @m() {\n  %c = constant() {value=bool[3] [true, false, 1]} : bool[3]\n  return %c\n}\n");
  EXPECT_EQ(const_value(q, 0).get(0), 1.0);
  EXPECT_EQ(const_value(q, 0).get(1), 0.0);
  EXPECT_EQ(const_value(q, 0).get(2), 1.0);
}

TEST(TextRoundTrip, OddNamesAndStringsAreQuoted) {
  Graph g;
  g.name = "my model/v2";
  Builder b(g);
  auto x = b.input("input:0", DType::f32, {"batch size", "inf"});
  b.set_origin("/layer.0/Gelu \"quoted\" \\ back\nslash");
  auto y = b.gelu(x, "a\"b\\c\td");  // the shape rule accepts any string; escapes must survive
  b.set_origin("");
  auto z = b.unary(OpKind::Neg, y);
  g.values[z].name = "3";            // value id 2 named "3"
  auto w = b.unary(OpKind::Neg, z);  // unnamed value id 3 would also print "%3": the printer disambiguates
  b.output(w);
  b.output(z);
  Graph p = round_trip(g);
  EXPECT_EQ(p.name, "my model/v2");
  EXPECT_EQ(p.values[p.inputs[0]].name, "input:0");
  EXPECT_EQ(p.type(p.inputs[0]).shape, (Shape{"batch size", "inf"}));
  EXPECT_EQ(p.nodes[0].name, "/layer.0/Gelu \"quoted\" \\ back\nslash");
  EXPECT_EQ(std::get<std::string>(p.nodes[0].attrs.at("approximate").v), "a\"b\\c\td");
  EXPECT_NE(p.values[p.outputs[0]].name, p.values[p.outputs[1]].name);
  std::string t = print_graph(g);
  EXPECT_NE(t.find("%\"input:0\": f32[\"batch size\",\"inf\"]"), std::string::npos) << t;
  EXPECT_NE(t.find("@\"my model/v2\""), std::string::npos) << t;
}

TEST(TextRoundTrip, ParsesTheDocumentedExample) {
  const char* text = R"(# comment to end of line
graph @mlp(%x: f32[batch,784], %w1: f32[128,784], %b1: f32[128]) {
  %h = linear(%x, %w1, %b1) {activation="relu"} : f32[batch,128]
  %c = constant() {value=f32[2,2] [1, 2.5, -3, 4]} : f32[2,2]
  %v, %i = topk(%h) {k=3} : f32[batch,3], i64[batch,3]
  %r = reduce_sum(%h) {axes=[1], keepdims=1} : f32[batch,1]
  %z = convert(%r) {to=f16} : f16[batch,1] loc("Cast_7")
  return %h, %v, %z
}
)";
  Graph g = parse_graph(text, "doc.rlx");
  verify_graph(g);
  EXPECT_EQ(g.name, "mlp");
  EXPECT_EQ(g.nodes.size(), 5u);
  EXPECT_EQ(g.outputs.size(), 3u);
  EXPECT_EQ(g.nodes[4].name, "Cast_7");
  EXPECT_EQ(g.value_label(g.nodes[2].outputs[1]), "%i");
  EXPECT_EQ(g.type(g.outputs[2]).dtype, DType::f16);
  EXPECT_EQ(const_value(g, 1).get(2), -3.0);
  EXPECT_EQ(print_graph(parse_graph(print_graph(g))), print_graph(g));
}

// ---- examples/ ----------------------------------------------------------------------------------

TEST(TextExamples, ParseVerifyAndRoundTrip) {
  namespace fs = std::filesystem;
  std::vector<std::string> seen;
  for (auto& e : fs::directory_iterator(fs::path(RLX_SOURCE_DIR) / "examples")) {
    if (e.path().extension() != ".rlx") continue;
    SCOPED_TRACE(e.path().string());
    Graph g = load_graph_file(e.path().string());
    verify_graph(g);
    EXPECT_FALSE(g.outputs.empty());
    round_trip(g);
    seen.push_back(e.path().filename().string());
  }
  for (const char* want : {"mlp.rlx", "attention.rlx", "mixed.rlx"})
    EXPECT_NE(std::find(seen.begin(), seen.end(), want), seen.end()) << want;
}

TEST(TextExamples, ExpectedSignatures) {
  std::string dir = std::string(RLX_SOURCE_DIR) + "/examples/";
  Graph mlp = load_graph_file(dir + "mlp.rlx");
  ASSERT_EQ(mlp.outputs.size(), 1u);
  EXPECT_EQ(shape_str(mlp.type(mlp.outputs[0]).shape), "[batch,4]");
  EXPECT_EQ(mlp.symbols(), std::vector<std::string>{"batch"});
  Graph att = load_graph_file(dir + "attention.rlx");
  EXPECT_EQ(shape_str(att.type(att.outputs[0]).shape), "[batch,seq,8]");
  bool causal = false;
  for (auto& n : att.nodes)
    if (n.op == OpKind::Attention) causal = std::get<std::string>(n.attrs.at("mask").v) == "causal";
  EXPECT_TRUE(causal);
  Graph mixed = load_graph_file(dir + "mixed.rlx");
  EXPECT_EQ(mixed.nodes.at(2).op, OpKind::Linear);
  EXPECT_EQ(mixed.type(mixed.nodes.at(2).outputs[0]).dtype, DType::f16);
}

TEST(TextLoad, MissingFileAndDirectory) {
  try {
    load_graph_file("/nonexistent/dir/model.rlx");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open '/nonexistent/dir/model.rlx'"), std::string::npos)
        << e.what();
  }
  try {
    load_graph_file(RLX_SOURCE_DIR);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("directory"), std::string::npos) << e.what();
  }
}

// ---- malformed input -----------------------------------------------------------------------------

TEST(ParseErrors, NamesLineAndWhat) {
  const std::string head = "graph @g(%x: f32[2,2]) {\n";
  // 1. unknown op
  expect_parse_error(head + "  %y = frobnicate(%x) : f32[2,2]\n  return %y\n}\n", 2,
                     "unknown op 'frobnicate'");
  // 2. unknown value
  expect_parse_error(head + "  %y = neg(%x) : f32[2,2]\n  %z = neg(%q) : f32[2,2]\n  return %z\n}\n", 3,
                     "unknown value '%q'");
  // 3. redefinition (of a node result and of a graph input)
  expect_parse_error(head + "  %y = neg(%x) : f32[2,2]\n  %y = neg(%x) : f32[2,2]\n  return %y\n}\n", 3,
                     "redefinition");
  expect_parse_error("graph @g(%x: f32[2],\n %x: f32[2]) {\n  return %x\n}\n", 2, "redefinition");
  // 4. bad token
  expect_parse_error(head + "  %y = neg(%x) : f32[2,2]\n  $\n  return %y\n}\n", 3, "bad token '$'");
  // 5. unterminated string
  expect_parse_error(head + "  %y = gelu(%x) {approximate=\"none} : f32[2,2]\n  return %y\n}\n", 2,
                     "unterminated string");
  // 6. bad dtype (input and attribute)
  expect_parse_error("graph @g(%x: f33[2]) {\n  return %x\n}\n", 1, "bad dtype 'f33'");
  expect_parse_error(head + "  %y = convert(%x) {to=float}\n : f32[2,2]\n  return %y\n}\n", 2,
                     "bad dtype 'float'");
  // 7. bad numbers
  expect_parse_error(head + "\n  %v, %i = topk(%x) {k=12abc} : f32[2,2], i64[2,2]\n  return %v\n}\n", 3,
                     "bad number");
  expect_parse_error(
      head + "  %v, %i = topk(%x) {k=99999999999999999999} : f32[2,2], i64[2,2]\n  return %v\n}\n", 2,
      "out of range");
  expect_parse_error(head + "  %y = layer_norm(%x, %x) {eps=1e999} : f32[2,2]\n  return %y\n}\n", 2,
                     "bad number");
  // 8. missing '}' at the end
  expect_parse_error(head + "  %y = neg(%x) : f32[2,2]\n  return %y", 3, "missing '}'");
  // 9. wrong attribute kind (add_node's message, wrapped with the location)
  expect_parse_error(head + "  %y = softmax(%x) {axis=\"last\"} : f32[2,2]\n  return %y\n}\n", 2,
                     "attribute 'axis' must be int, got str");
  expect_parse_error(head + "  %y = reduce_sum(%x) {axes=[0.5, 1]} : f32[2]\n  return %y\n}\n", 2,
                     "attribute 'axes' must be ints, got floats");
  // 10. type mismatch
  expect_parse_error(head + "  %y = neg(%x) : f32[2,2]\n  %z = neg(%y) : f32[2,3]\n  return %z\n}\n", 3,
                     "type mismatch for '%z': declared f32[2,3], inferred f32[2,2]");
  expect_parse_error(head + "  %y = neg(%x) : f16[2,2]\n  return %y\n}\n", 2, "type mismatch");
  // 11. wrong arity: inputs, then results
  expect_parse_error(head + "  %y = add(%x) : f32[2,2]\n  return %y\n}\n", 2,
                     "wrong arity: 'add' takes 2 inputs, got 1");
  expect_parse_error(head + "  %y = topk(%x) {k=1} : f32[2,1]\n  return %y\n}\n", 2,
                     "wrong arity: 'topk' produces 2 results, got 1");
  expect_parse_error(head + "  %y = neg(%x) : f32[2,2], f32[2,2]\n  return %y\n}\n", 2, "2 types declared");
  // 12. return problems
  expect_parse_error(head + "  %y = neg(%x) : f32[2,2]\n}\n", 3, "missing 'return'");
  expect_parse_error(head + "  return\n}\n", 3, "at least one");
  // 13. attribute schema problems
  expect_parse_error(head + "  %y = neg(%x) {alpha=1} : f32[2,2]\n  return %y\n}\n", 2,
                     "unknown attribute 'alpha'");
  expect_parse_error(head + "  %y = reduce_sum(%x) : f32[2]\n  return %y\n}\n", 2,
                     "missing required attribute 'axes'");
  expect_parse_error(head + "  %y = softmax(%x) {axis=0,\n axis=1} : f32[2,2]\n  return %y\n}\n", 3,
                     "duplicate attribute 'axis'");
  // 14. tensors
  expect_parse_error(head + "  %c = constant() {value=f32[2,2] [1, 2, 3]} : f32[2,2]\n  return %c\n}\n", 2,
                     "needs 4 values, got 3");
  expect_parse_error(head + "  %c = constant() {value=i8[2] [1,\n 300]} : i8[2]\n  return %c\n}\n", 3,
                     "out of range for i8");
  expect_parse_error(head + "  %c = constant() {value=i32[1] [1.5]} : i32[1]\n  return %c\n}\n", 2,
                     "non-integer");
  expect_parse_error(head + "  %c = constant() {value=f32[n] [1]} : f32[1]\n  return %c\n}\n", 2, "static");
  // 15. shape rule failure from add_node
  expect_parse_error("graph @g(%a: f32[2], %b: f32[3]) {\n\n  %y = add(%a, %b) : f32[2]\n  return %y\n}\n", 3,
                     "do not broadcast");
  // 16. misc syntax
  expect_parse_error("", 1, "expected 'graph'");
  expect_parse_error("graph @g(%x: f32[2]) {\n  return %x\n}\n}\n", 4, "after the graph's closing");
  expect_parse_error("graph @g(%x: f32[-2]) {\n  return %x\n}\n", 1, "negative dimension");
  expect_parse_error(head + "  %y = gelu(%x) {approximate=\"a\\q\"} : f32[2,2]\n  return %y\n}\n", 2,
                     "bad escape");
  expect_parse_error(head + "  %y = reshape(%x) {shape=[n, 1.5]} : f32[2,2]\n  return %y\n}\n", 2, "mixes");
  expect_parse_error("graph @g(%x: f32[4611686018427387904, 4]) {\n  return %x\n}\n", 1, "too many elements");
  expect_parse_error(head + "  %y = neg(%x) : f32[2,2] loc(Cast)\n  return %y\n}\n", 2, "loc");
}

TEST(ParseErrors, ColumnIsExact) {
  try {
    parse_graph("graph @g(%x: f32[2]) {\n  %y = neg(%nope) : f32[2]\n  return %y\n}\n", "f.rlx");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "[parse] f.rlx:2:12: unknown value '%nope'");
  }
}

// Truncations and byte mutations of real files must give rlx::Error or a valid graph, never anything else.
TEST(ParseErrors, TruncatedAndMutatedInputNeverCrash) {
  std::string dir = std::string(RLX_SOURCE_DIR) + "/examples/";
  std::mt19937 rng(1234);
  const char pool[] = "%@[](){},:=\"\\#-.0123456789eafinx \n";
  int parsed = 0, errors = 0;
  for (const char* f : {"mlp.rlx", "attention.rlx"}) {
    std::string text = read_file(dir + f);
    ASSERT_FALSE(text.empty()) << f;
    for (size_t n = 0; n < text.size(); n += 7) {
      try {
        parse_graph(text.substr(0, n));
        ++parsed;
      } catch (const Error&) {
        ++errors;
      }
    }
    for (int iter = 0; iter < 800; ++iter) {
      std::string m = text;
      int edits = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < edits; ++k) {
        size_t at = rng() % m.size();
        switch (rng() % 3) {
          case 0:
            m[at] = pool[rng() % (sizeof(pool) - 1)];
            break;
          case 1:
            m.erase(at, 1 + rng() % 4);
            break;
          default:
            m.insert(at, 1, static_cast<char>(rng() % 256));
            break;
        }
        if (m.empty()) m = "x";
      }
      try {
        Graph g = parse_graph(m);
        verify_graph(g);
        ++parsed;
      } catch (const Error&) {
        ++errors;
      }
    }
  }
  EXPECT_GT(errors, 600);
  EXPECT_GT(parsed, 0);  // some mutations land in comments or numbers and still parse
}

// ---- verifier ------------------------------------------------------------------------------------

namespace {
// x -> %h = linear -> %r = relu -> output
Graph small_graph() {
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, {"batch", 4});
  auto w = b.input("w", DType::f32, {3, 4});
  auto h = b.linear(x, w);
  g.values[h].name = "h";
  auto r = b.relu(h);
  g.values[r].name = "r";
  b.output(r);
  return g;
}
}  // namespace

TEST(Verifier, AcceptsValidGraphs) {
  Graph g = small_graph();
  EXPECT_NO_THROW(verify_graph(g));
  Graph m;
  Builder b(m);
  auto x = b.input("x", DType::f32, {2});
  b.output(b.add(x, b.unary(OpKind::Exp, x)));
  EXPECT_NO_THROW(verify_graph(m, true));
}

TEST(Verifier, UseBeforeDef) {
  Graph g = small_graph();
  std::swap(g.nodes[0], g.nodes[1]);  // relu now reads %h before linear defines it
  expect_verify_error(g, {"node %r (relu)", "%h", "used before it is defined"});
}

TEST(Verifier, DuplicateDefinition) {
  Graph g = small_graph();
  g.nodes.push_back(g.nodes[1]);  // a second node claiming to define %r
  expect_verify_error(g, {"node %r (relu)", "already defined"});
  Graph h = small_graph();
  h.inputs.push_back(h.inputs[0]);
  expect_verify_error(h, {"graph input %x", "listed twice"});
}

TEST(Verifier, StaleType) {
  Graph g = small_graph();
  g.values[g.nodes[0].outputs[0]].type.shape = {"batch", 5};
  expect_verify_error(g, {"node %h (linear)", "stored as f32[batch,5]", "shape rule gives f32[batch,3]"});
  Graph d = small_graph();
  d.values[d.nodes[1].outputs[0]].type.dtype = DType::f16;
  expect_verify_error(d, {"node %r (relu)", "stored as f16"});
}

TEST(Verifier, HirOpWhenMirOnly) {
  Graph g = small_graph();
  EXPECT_NO_THROW(verify_graph(g, false));
  expect_verify_error(g, {"node %h (linear)", "HIR op"}, true);
}

TEST(Verifier, NoOutputsAndBadOutputId) {
  Graph g = small_graph();
  g.outputs.clear();
  expect_verify_error(g, {"no outputs"});
  Graph h = small_graph();
  h.outputs.push_back(99);
  expect_verify_error(h, {"graph output #1", "bad value id 99"});
}

TEST(Verifier, ArityAttributesAndBookkeeping) {
  Graph a = small_graph();
  a.nodes[1].inputs.push_back(a.inputs[0]);
  expect_verify_error(a, {"node %r (relu)", "takes 1 inputs, has 2"});
  Graph k = small_graph();
  k.nodes[0].attrs["activation"] = Attr(int64_t{1});
  expect_verify_error(k, {"node %h (linear)", "attribute 'activation' must be str, is int"});
  Graph u = small_graph();
  u.nodes[1].attrs["alpha"] = Attr(0.5);
  expect_verify_error(u, {"node %r (relu)", "unknown attribute 'alpha'"});
  Graph p = small_graph();
  p.values[p.nodes[1].outputs[0]].index = 1;
  expect_verify_error(p, {"node %r (relu)", "records producer"});
  Graph n = small_graph();
  n.nodes[0].name = "Gemm_3";
  n.nodes[0].inputs[1] = 1000;
  expect_verify_error(n, {"node 'Gemm_3' (linear)", "bad value id 1000"});
  Graph o = small_graph();
  o.values.push_back(Value{ValueType{DType::f32, {1}}, -1, 0, "orphan"});
  expect_verify_error(o, {"%orphan", "defined by no node"});
}
