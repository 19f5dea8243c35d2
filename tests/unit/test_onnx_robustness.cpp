// [issue 4] Malformed ONNX input fails with a clear "[onnx]" error, never a crash: every truncation of a
// model, corrupted bytes, oversized dimensions (initializers and graph inputs) and cyclic graphs.
#include <gtest/gtest.h>

#include <random>

#include "formats/onnx/onnx.h"
#include "onnx/onnx.pb.h"
#include "rlx/session.h"

using namespace rlx;

namespace {

::onnx::ModelProto relu_model(std::vector<int64_t> in_dims = {2, 3}) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  auto* os = m.add_opset_import();
  os->set_domain("");
  os->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto add_vi = [](::onnx::ValueInfoProto* v, const std::string& name, const std::vector<int64_t>& dims) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(::onnx::TensorProto::FLOAT);
    for (auto d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  };
  add_vi(g->add_input(), "x", in_dims);
  add_vi(g->add_output(), "y", in_dims);
  auto* w = g->add_initializer();  // raw_data long enough that cuts land inside it
  w->set_name("w");
  w->set_data_type(::onnx::TensorProto::FLOAT);
  w->add_dims(in_dims.back());
  std::vector<float> v(static_cast<size_t>(in_dims.back()), 0.5f);
  w->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
  auto* a = g->add_node();
  a->set_op_type("Add");
  a->set_name("add");
  a->add_input("x");
  a->add_input("w");
  a->add_output("s");
  auto* r = g->add_node();
  r->set_op_type("Relu");
  r->set_name("relu");
  r->add_input("s");
  r->add_output("y");
  return m;
}

std::string import_error(const std::string& bytes) {
  try {
    rlx::onnx::import_onnx(bytes, "", "m.onnx");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
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
