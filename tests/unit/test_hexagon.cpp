// The hexagon device: every claimed conformance case runs in qemu-hexagon (one emulated program
// for the whole batch) and matches the reference; the renderer's kernels have the shape the
// runtime expects.
#include "codegen/renderer.h"
#include "rlx/device.h"
#include "unit/test_codegen_common.h"

using namespace rlx;

TEST(Hexagon, ConformanceOnEveryClaimedCase) { expect_device_conformance("hexagon"); }

TEST(Hexagon, StatusSaysEmulated) {
  const DeviceInfo& d = device_info("hexagon");
  RLX_REQUIRE(d.can_execute(), "hexagon toolchain (clang --target=hexagon, lld, qemu-hexagon): " + d.reason);
  if (d.can_execute()) EXPECT_NE(d.reason.find("emulated, not hardware"), std::string::npos) << d.reason;
  else EXPECT_EQ(d.status, DeviceStatus::NoDriver) << d.reason;
  EXPECT_TRUE(d.caps.has(OpKind::DotGeneral, DType::f32));
  EXPECT_TRUE(d.caps.has(OpKind::Add, DType::i64)) << "Hexagon computes 64-bit integers";
  EXPECT_TRUE(d.caps.has(OpKind::DotGeneral, DType::f64));
  EXPECT_FALSE(d.caps.has(OpKind::Add, DType::f16)) << "halves are stored, computed in f32";
}

TEST(Hexagon, KernelsAreFreestandingFunctions) {
  auto r = codegen::make_hexagon_renderer();
  LirKernel k;
  k.op = OpKind::DotGeneral;
  k.attrs = {{"lhs_contract", std::vector<int64_t>{1}}, {"rhs_contract", std::vector<int64_t>{0}},
             {"lhs_batch", std::vector<int64_t>{}}, {"rhs_batch", std::vector<int64_t>{}}};
  auto g = r->render(k, {{DType::f32, Shape{5, 7}}, {DType::f32, Shape{7, 3}}}, {{DType::f32, Shape{5, 3}}}, "k0");
  EXPECT_NE(g.source.find("static __attribute__((noinline)) void k0(const float* b0, const float* b1, float* b2)"), std::string::npos) << g.source;
  EXPECT_EQ(g.source.find("BARRIER"), std::string::npos) << "the GEMM is one work-item per output";
  LirKernel sm;
  sm.op = OpKind::Softmax;
  sm.attrs = {{"axis", int64_t{-1}}};
  auto s = r->render(sm, {{DType::f32, Shape{4, 10}}}, {{DType::f32, Shape{4, 10}}}, "k1");
  EXPECT_NE(s.source.find("static float red["), std::string::npos) << "work-group memory is static: " << s.source;
}
