// ONNX importer: models built in memory with the ONNX protos, imported, run on cpu; error paths.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "onnx_builders.h"

using namespace rlx;
using namespace onnx_test;
namespace fs = std::filesystem;


TEST(Onnx, GemmReluWithInitializersAndSymbolicBatch) {
  auto m = model(17);
  auto* g = m.mutable_graph();
  *g->add_input() = vi("x", ::onnx::TensorProto::FLOAT, {"batch", "3"});
  *g->add_output() = vi("y", ::onnx::TensorProto::FLOAT, {"batch", "2"});
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(::onnx::TensorProto::FLOAT);
  w->add_dims(2);
  w->add_dims(3);
  for (float f : {1.f, 0.f, -1.f, 2.f, 2.f, 2.f}) w->add_float_data(f);
  auto* gm = add_node(g, "Gemm", {"x", "w"}, {"h"});
  auto* a = gm->add_attribute();
  a->set_name("transB");
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(1);
  add_node(g, "Relu", {"h"}, {"y"});
  Graph gr = rlx::onnx::import_onnx(m.SerializeAsString(), "", "mem");
  ASSERT_EQ(gr.inputs.size(), 1u);
  EXPECT_FALSE(gr.type(gr.inputs[0]).shape[0].is_static());  // dim_param stays symbolic
  // A·Bᵀ is a Linear layer (B is already [out, in]): no transpose of the weight at run time.
  bool linear = false, transpose = false;
  for (auto& n : gr.nodes) linear |= n.op == OpKind::Linear, transpose |= n.op == OpKind::Transpose;
  EXPECT_TRUE(linear);
  EXPECT_FALSE(transpose);
  CompiledModel cm(std::move(gr), CompileOptions{});
  auto out = cm.run({Tensor::from<float>(DType::f32, {2, 3}, {1, 2, 3, -1, -1, -1})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_FLOAT_EQ(out[0].get(0), 0.f);   // relu(1 - 3)
  EXPECT_FLOAT_EQ(out[0].get(1), 12.f);  // 2+4+6
  EXPECT_FLOAT_EQ(out[0].get(2), 0.f);
  EXPECT_FLOAT_EQ(out[0].get(3), 0.f);
}

TEST(Onnx, ShapeArithmeticFoldsIntoStaticReshape) {
  auto m = model(13);
  auto* g = m.mutable_graph();
  *g->add_input() = vi("x", ::onnx::TensorProto::FLOAT, {"2", "3", "4"});
  *g->add_output() = vi("y", ::onnx::TensorProto::FLOAT, {"6", "4"});
  add_node(g, "Shape", {"x"}, {"s"});
  auto* cs = add_node(g, "Constant", {}, {"st"});
  auto* a1 = cs->add_attribute();
  a1->set_name("value_ints");
  a1->set_type(::onnx::AttributeProto::INTS);
  a1->add_ints(2);
  auto* ce = add_node(g, "Constant", {}, {"en"});
  auto* a2 = ce->add_attribute();
  a2->set_name("value_ints");
  a2->set_type(::onnx::AttributeProto::INTS);
  a2->add_ints(3);
  add_node(g, "Slice", {"s", "st", "en"}, {"last"});
  auto* cm1 = add_node(g, "Constant", {}, {"m1"});
  auto* a3 = cm1->add_attribute();
  a3->set_name("value_ints");
  a3->set_type(::onnx::AttributeProto::INTS);
  a3->add_ints(-1);
  add_node(g, "Concat", {"m1", "last"}, {"shape"})->add_attribute()->set_name("axis");
  add_node(g, "Reshape", {"x", "shape"}, {"y"});
  Graph gr = rlx::onnx::import_onnx(m.SerializeAsString(), "", "mem");
  EXPECT_EQ(shape_str(gr.type(gr.outputs[0]).shape), "[6,4]");
  EXPECT_EQ(gr.values[gr.outputs[0]].name, "y");
}

TEST(Onnx, UnsupportedOpNamesNodeAndOp) {
  auto m = model(17);
  auto* g = m.mutable_graph();
  *g->add_input() = vi("x", ::onnx::TensorProto::FLOAT, {"2"});
  *g->add_output() = vi("y", ::onnx::TensorProto::FLOAT, {"2"});
  add_node(g, "FancyOp", {"x"}, {"y"});
  try {
    rlx::onnx::import_onnx(m.SerializeAsString(), "", "mem");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string s = e.what();
    EXPECT_NE(s.find("node 'FancyOp_y'"), std::string::npos) << s;
    EXPECT_NE(s.find("unsupported op FancyOp"), std::string::npos) << s;
  }
}

TEST(Onnx, TruncatedAndGarbageInputGiveClearErrors) {
  auto m = model(17);
  auto* g = m.mutable_graph();
  *g->add_input() = vi("x", ::onnx::TensorProto::FLOAT, {"2"});
  *g->add_output() = vi("y", ::onnx::TensorProto::FLOAT, {"2"});
  add_node(g, "Neg", {"x"}, {"y"});
  std::string bytes = m.SerializeAsString();
  EXPECT_THROW(rlx::onnx::import_onnx(bytes.substr(0, bytes.size() / 2), "", "mem"), Error);
  EXPECT_THROW(rlx::onnx::import_onnx("not a model at all", "", "mem"), Error);
  EXPECT_THROW(rlx::onnx::import_onnx("", "", "mem"), Error);
  // An initializer claiming a huge shape with no data fails cleanly instead of allocating.
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(::onnx::TensorProto::FLOAT);
  w->add_dims(int64_t{1} << 40);
  w->add_dims(int64_t{1} << 40);
  EXPECT_THROW(rlx::onnx::import_onnx(m.SerializeAsString(), "", "mem"), Error);
}

TEST(Onnx, ExternalDataAndMultipleOutputs) {
  fs::path dir = fs::temp_directory_path() / ("rlx_onnx_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::ofstream f(dir / "w.bin", std::ios::binary);
    float vals[4] = {0, 10, 20, 30};
    f.write(reinterpret_cast<const char*>(vals), sizeof vals);
  }
  auto m = model(18);
  auto* g = m.mutable_graph();
  *g->add_input() = vi("x", ::onnx::TensorProto::FLOAT, {"4"});
  *g->add_output() = vi("a", ::onnx::TensorProto::FLOAT, {"2"});
  *g->add_output() = vi("b", ::onnx::TensorProto::FLOAT, {"2"});
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(::onnx::TensorProto::FLOAT);
  w->add_dims(4);
  w->set_data_location(::onnx::TensorProto::EXTERNAL);
  auto* kv = w->add_external_data();
  kv->set_key("location");
  kv->set_value("w.bin");
  add_node(g, "Add", {"x", "w"}, {"s"});
  auto* sp = add_node(g, "Split", {"s"}, {"a", "b"});
  auto* at = sp->add_attribute();
  at->set_name("num_outputs");
  at->set_type(::onnx::AttributeProto::INT);
  at->set_i(2);
  {
    std::ofstream f(dir / "m.onnx", std::ios::binary);
    f << m.SerializeAsString();
  }
  Graph gr = rlx::onnx::load_onnx((dir / "m.onnx").string());
  CompiledModel cm(std::move(gr), CompileOptions{});
  auto out = cm.run({Tensor::from<float>(DType::f32, {4}, {1, 1, 1, 1})});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_FLOAT_EQ(out[0].get(1), 11.f);
  EXPECT_FLOAT_EQ(out[1].get(1), 31.f);
  // A location escaping the model folder is refused.
  kv->set_value("../w.bin");
  EXPECT_THROW(rlx::onnx::import_onnx(m.SerializeAsString(), dir.string(), "mem"), Error);
  fs::remove_all(dir);
}

#include "rlx/npy.h"

TEST(Onnx, CliInspectRunAndCompile) {
  fs::path dir = fs::temp_directory_path() / ("rlx_onnx_cli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto m = model(17);
  auto* g = m.mutable_graph();
  *g->add_input() = vi("x", ::onnx::TensorProto::FLOAT, {"n", "4"});
  *g->add_output() = vi("y", ::onnx::TensorProto::FLOAT, {"n", "4"});
  auto* sm = add_node(g, "Softmax", {"x"}, {"y"});
  auto* a = sm->add_attribute();
  a->set_name("axis");
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(-1);
  {
    std::ofstream f(dir / "m.onnx", std::ios::binary);
    f << m.SerializeAsString();
  }
  write_npy((dir / "x.npy").string(), Tensor::from<float>(DType::f32, {2, 4}, {0, 0, 0, 0, 1, 2, 3, 4}));
  std::string bin = RLX_BIN, d = dir.string();
  auto sh = [&](const std::string& cmd) {
    std::string out;
    FILE* p = popen((cmd + " 2>&1").c_str(), "r");
    char buf[4096];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, k);
    int rc = pclose(p);
    return std::make_pair(rc, out);
  };
  auto [rc1, o1] = sh(bin + " inspect " + d + "/m.onnx");
  EXPECT_EQ(rc1, 0) << o1;
  EXPECT_NE(o1.find("x: FLOAT[n,4]"), std::string::npos) << o1;
  EXPECT_NE(o1.find("Softmax 1"), std::string::npos) << o1;
  auto [rc2, o2] = sh(bin + " run " + d + "/m.onnx --input x=" + d + "/x.npy --output " + d + "/out.npz");
  EXPECT_EQ(rc2, 0) << o2;
  auto outs = read_npz(d + "/out.npz");
  ASSERT_TRUE(outs.count("y"));
  EXPECT_NEAR(outs["y"].get(0), 0.25, 1e-6);
  auto [rc3, o3] = sh(bin + " compile " + d + "/m.onnx --report --bind n=2");
  EXPECT_EQ(rc3, 0) << o3;
  EXPECT_NE(o3.find("softmax"), std::string::npos) << o3;
  fs::remove_all(dir);
}
