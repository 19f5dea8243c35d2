// `--fallback cpu`: a node the device cannot run (cholesky: linear algebra only cpu claims) fails
// compilation without the option, and with it runs on cpu in its own segment, the report naming
// the node and the copies the cut costs (none between host devices, counted for a GPU).
#include <gtest/gtest.h>

#include <fstream>

#include "rlx/builder.h"
#include "rlx/device.h"
#include "rlx/session.h"
#include "run_rlx.h"
#include "test_util.h"

using namespace rlx;

namespace {

CompileOptions on(const std::string& device) {
  CompileOptions o;
  o.device = device;
  return o;
}

// y = cholesky(a * 2) + 1: the multiply and the add on the device, cholesky where it can run.
Graph spd_graph() {
  Graph g;
  Builder b(g);
  ValueId a = b.input("a", DType::f32, {4, 4});
  ValueId l = b.op(OpKind::Cholesky, {b.mul(a, b.constant(Tensor::from(DType::f32, {4, 4}, std::vector<float>(16, 2.f))))})[0];
  b.output(b.add(l, b.constant(Tensor::from(DType::f32, {4, 4}, std::vector<float>(16, 1.f)))));
  return g;
}

Tensor spd_input() {
  Tensor m = rlx_test::randn({4, 4}, 3), a(DType::f32, {4, 4});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      double s = i == j ? 4.0 : 0.0;
      for (int k = 0; k < 4; ++k) s += m.get(i * 4 + k) * m.get(j * 4 + k);
      a.set(i * 4 + j, s);
    }
  return a;
}

std::string notes_of(CompiledModel& m) {
  std::string s;
  for (auto& n : m.report().notes) s += n + "\n";
  return s;
}

// Compiles for `device` with the fallback, checks the report and the result against cpu; returns the notes.
std::string expect_fallback_runs(const std::string& device) {
  CompileOptions co = on(device);
  co.dispatch.fallback = "cpu";
  CompiledModel m(spd_graph(), co), cpu(spd_graph(), on("cpu"));
  Tensor got = m.run({spd_input()})[0], want = cpu.run({spd_input()})[0];
  EXPECT_LT(rlx_test::max_abs_diff(got, want), 1e-4) << device;
  bool row = false;
  for (auto& r : m.report().rows)
    row |= r.op == "cholesky" && r.path == DispatchPath::Fallback && r.reason.find("placed on cpu") != std::string::npos;
  EXPECT_TRUE(row) << m.report().table();
  EXPECT_NE(m.report().table().find("1 fallback"), std::string::npos) << m.report().table();
  std::string notes = notes_of(m);
  EXPECT_NE(notes.find("placed in 3 segments"), std::string::npos) << notes;
  EXPECT_NE(m.dump("lir").find("# segment 1 on cpu"), std::string::npos);
  return notes;
}

}  // namespace

TEST(Fallback, WithoutTheOptionCompilationFails) {
  CompiledModel m(spd_graph(), on("oneapi"));
  try {
    m.report();
    FAIL() << "cholesky compiled for oneapi without a fallback";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot legalize node"), std::string::npos) << e.what();
  }
}

TEST(Fallback, OnlyCpuTakesNodes) {
  CompileOptions co = on("oneapi");
  co.dispatch.fallback = "vulkan";
  CompiledModel m(spd_graph(), co);
  EXPECT_THROW(m.report(), Error);
}

// oneapi and cpu share host memory: the cut costs no copy.
TEST(Fallback, HostDevicesCutWithoutCopies) {
  RLX_REQUIRE(device_info("oneapi").can_execute(), "oneDNN (Debian libdnnl-dev) for the oneapi device");
  std::string notes = expect_fallback_runs("oneapi");
  EXPECT_NE(notes.find("0 device->host (0 B), 0 host->device (0 B)"), std::string::npos) << notes;
}

// vulkan (lavapipe here): the multiply's result goes down to cpu and cholesky's back up.
TEST(Fallback, GpuCutCountsItsCopies) {
  if (!device_info("vulkan").can_execute()) GTEST_SKIP() << "vulkan cannot execute here";
  std::string notes = expect_fallback_runs("vulkan");
  EXPECT_NE(notes.find("1 device->host (64 B), 1 host->device (64 B)"), std::string::npos) << notes;
}

// The command line: `rlx compile --report` fails without --fallback and shows the cut with it.
TEST(Fallback, CommandLineFlag) {
  std::string path = ::testing::TempDir() + "/rlx_fallback_cholesky.rlx";
  {
    std::ofstream f(path);
    f << "graph @g(%a: f32[4,4]) {\n  %l, %info = cholesky(%a) : f32[4,4], i32[]\n  %y = add(%l, %l) : f32[4,4]\n"
         "  return %y\n}\n";
  }
  RlxRun no = run_rlx("compile " + path + " --device oneapi --report");
  EXPECT_NE(no.code, 0) << no.out;
  EXPECT_NE(no.out.find("cannot legalize node"), std::string::npos) << no.out;
  RlxRun yes = run_rlx("compile " + path + " --device oneapi --report --fallback cpu");
  EXPECT_EQ(yes.code, 0) << yes.out;
  EXPECT_NE(yes.out.find("fallback"), std::string::npos) << yes.out;
  EXPECT_NE(yes.out.find("placed in 2 segments"), std::string::npos) << yes.out;
}
