// The null backend (src/backends/null: the reference interpreter over the LIR schedule) and the
// registry every backend folder registers itself in.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "rlx/builder.h"
#include "rlx/conformance.h"
#include "rlx/session.h"
#include "runtime/backend.h"

using namespace rlx;

namespace {

Tensor rnd(std::vector<int64_t> shape, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1, 1);
  Tensor t(DType::f32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  double e = 0;
  for (int64_t i = 0; i < a.numel(); ++i) e = std::max(e, std::abs(a.get(i) - b.get(i)));
  return e;
}

}  // namespace

// Every folder src/backends/<folder>/backend.cpp registered its device, and the listed targets
// are the 16 of `rlx devices`; null is registered but not listed.
TEST(Registry, EveryBackendFolderRegistersItself) {
  int folders = 0;
  for (auto& e : std::filesystem::directory_iterator(std::string(RLX_SOURCE_DIR) + "/src/backends"))
    folders += std::filesystem::exists(e.path() / "backend.cpp");
  std::vector<std::string> all = registered_devices();
  int backends = 0;
  for (auto& n : all) backends += find_backend(n) != nullptr;
  EXPECT_EQ(backends, folders);  // one Backend per folder
  EXPECT_EQ(all.size(), device_names().size() + 1);  // + null
  EXPECT_EQ(std::count(device_names().begin(), device_names().end(), "null"), 0);
  for (const char* codegen_only : {"fpga"}) {
    EXPECT_NE(find_device(codegen_only), nullptr) << codegen_only;
    EXPECT_EQ(find_backend(codegen_only), nullptr) << codegen_only;
  }
  // ane is a backend folder whose entry reports it cannot execute here (no macOS, no Neural Engine).
  ASSERT_NE(find_backend("ane"), nullptr);
  EXPECT_FALSE(device_info("ane").can_execute());
  EXPECT_EQ(device_info("ane").status, DeviceStatus::NoHardware);
  EXPECT_TRUE(device_info("ane").caps.has(OpKind::MatMul, DType::f16));
  EXPECT_EQ(device_names().front(), "cpu");
  EXPECT_EQ(find_device("quantum"), nullptr);
}

TEST(NullBackend, IsAvailableAndNamedByItsEntry) {
  const DeviceInfo& d = device_info("null");
  EXPECT_TRUE(d.can_execute()) << d.reason;
  EXPECT_EQ(d.name, "null");
  EXPECT_TRUE(d.caps.has(OpKind::DotGeneral, DType::f32));
  EXPECT_FALSE(d.caps.has(OpKind::Linear, DType::f32));  // HIR ops decompose
  EXPECT_TRUE(backend_schedule("null").passes.empty());
}

// A small transformer-like block (linear, gelu, layer norm, softmax, reshape/transpose views)
// through the public pipeline on null agrees with cpu.
TEST(NullBackend, RunsAModelLikeCpu) {
  std::mt19937 rng(7);
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, {2, 4, 8});
  auto h = b.linear(x, b.constant(rnd({8, 8}, rng)), b.constant(rnd({8}, rng)), "gelu");
  h = b.layer_norm(b.add(h, x), b.constant(rnd({8}, rng)), b.constant(rnd({8}, rng)), 1e-5);
  auto t = b.transpose(b.reshape(h, {2, 4, 2, 4}), {0, 2, 1, 3});
  b.output(b.softmax(t, -1));
  Tensor in = rnd({2, 4, 8}, rng);
  CompileOptions on_null, on_cpu;
  on_null.device = "null";
  CompiledModel n(g, on_null), c(g, on_cpu);
  Tensor got = n.run({in})[0], want = c.run({in})[0];
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_LT(max_abs_diff(got, want), 1e-5);
  EXPECT_NE(n.report().table().find("native"), std::string::npos) << n.report().table();
}

// Executable's resident API (the host default) on null: y = x + 1 fed back into x, three runs.
TEST(NullBackend, ResidentFeedback) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, Shape{4});
  b.output(b.add(x, b.constant(Tensor::from<float>(DType::f32, {4}, {1, 1, 1, 1}))));
  CompileOptions co;
  co.device = "null";
  CompiledModel m(g, co);
  Executable& e = m.executable();
  e.resident_feedback({{0, 0}});
  e.resident_upload({Tensor::from<float>(DType::f32, {4}, {0, 1, 2, 3})});
  e.resident_run(3);
  std::vector<double> each = e.resident_time_each(1, 2);  // three more runs
  EXPECT_EQ(each.size(), 2u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(e.resident_read_input(0).data<float>()[i], i + 6.0f);
}

// Bad input gets a clear error naming the backend.
TEST(NullBackend, WrongInputIsReported) {
  Graph g;
  Builder b(g);
  b.output(b.add(b.input("x", DType::f32, Shape{4}), b.input("y", DType::f32, Shape{4})));
  CompileOptions co;
  co.device = "null";
  CompiledModel m(g, co);
  try {
    m.executable().run({Tensor(DType::f32, {4})});
    FAIL() << "one input of two was accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("[null]"), std::string::npos) << err.what();
  }
}

// The conformance suite on null: every case it claims or decomposes runs and matches the reference.
TEST(NullBackend, ConformanceMatchesReference) {
  auto rows = run_conformance("null", true);
  int pass = 0;
  for (auto& r : rows) {
    if (r.path == DispatchPath::Unsupported) continue;  // sparse, linear algebra, collectives
    EXPECT_EQ(r.status, "pass") << r.op << " " << r.dtype << " " << r.detail << " err=" << r.max_err;
    pass += r.status == "pass";
  }
  EXPECT_GE(pass, 400);
  std::printf("null conformance: %d/%zu op x dtype cases pass\n", pass, rows.size());
}
