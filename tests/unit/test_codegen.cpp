// Renderer tests that need no device: the C-like base renders the same kernels in GLSL and OpenCL
// C, and the portable GPU capability sets claim only what the renderers have kernels for.
#include <gtest/gtest.h>

#include "codegen/renderer.h"
#include "rlx/builder.h"
#include "rlx/device.h"

using namespace rlx;

namespace {

LirKernel fused_kernel(std::vector<ValueType>* in, ValueType* out) {
  LirKernel k;
  k.kind = KernelKind::Generated;
  Builder b(k.body);
  auto x = k.body.add_input("a0", DType::f32, Shape{3, 5});
  auto y = k.body.add_input("a1", DType::f32, Shape{5});
  auto s = b.op(OpKind::Add, {x, y})[0];
  auto e = b.op(OpKind::Exp, {s})[0];
  auto c = b.op(OpKind::Convert, {e}, {{"to", DType::f16}})[0];
  k.body.outputs.push_back(c);
  *in = {{DType::f32, Shape{3, 5}}, {DType::f32, Shape{5}}};
  *out = {DType::f16, Shape{3, 5}};
  return k;
}

}  // namespace

TEST(Codegen, FusedKernelRendersInBothLanguages) {
  std::vector<ValueType> in;
  ValueType out;
  LirKernel k = fused_kernel(&in, &out);
  auto glsl = codegen::make_glsl_renderer()->render(k, in, {out}, "k0");
  auto cl = codegen::make_opencl_renderer()->render(k, in, {out}, "k0");
  EXPECT_NE(glsl.source.find("#version 450"), std::string::npos);
  EXPECT_NE(glsl.source.find("f2h("), std::string::npos) << "f16 stores round through f2h";
  EXPECT_NE(glsl.source.find("o1 * 1"), std::string::npos) << "the [5] operand broadcasts over rows";
  EXPECT_NE(cl.source.find("__kernel void k0("), std::string::npos);
  EXPECT_NE(cl.source.find("vstore_half_rte"), std::string::npos);
  EXPECT_EQ(glsl.groups, 1);
  EXPECT_EQ(glsl.args.size(), 3u);
  EXPECT_TRUE(glsl.args[2].written);
}

TEST(Codegen, GemmIsTiledThroughSharedMemory) {
  LirKernel k;
  k.op = OpKind::DotGeneral;
  k.attrs = {{"lhs_contract", std::vector<int64_t>{1}}, {"rhs_contract", std::vector<int64_t>{0}}};
  std::vector<ValueType> in = {{DType::f32, Shape{40, 24}}, {DType::f32, Shape{24, 33}}};
  ValueType out{DType::f32, Shape{40, 33}};
  auto g = codegen::make_glsl_renderer()->render(k, in, {out}, "k0");
  auto c = codegen::make_opencl_renderer()->render(k, in, {out}, "k0");
  EXPECT_NE(g.source.find("shared float As[256]"), std::string::npos);
  EXPECT_NE(c.source.find("__local float As[256]"), std::string::npos);
  EXPECT_EQ(g.groups, 3 * 3);  // ceil(40/16) x ceil(33/16)
  EXPECT_EQ(g.local, 256);
  auto direct = codegen::make_glsl_renderer();  // CPU-emulated devices: no shared memory, no barriers
  direct->set_tiled_gemm(false);
  auto d = direct->render(k, in, {out}, "k0");
  EXPECT_EQ(d.source.find("shared float"), std::string::npos);
  EXPECT_EQ(d.groups, (40 * 33 + 63) / 64);
}

TEST(Codegen, CapabilitiesFollowTheRenderers) {
  for (const char* d : {"vulkan", "opengl"}) {
    const auto& caps = device_info(d).caps;
    EXPECT_TRUE(caps.has(OpKind::DotGeneral, DType::f32)) << d;
    EXPECT_FALSE(caps.has(OpKind::DotGeneral, DType::f64)) << d << ": GLSL buffers have no f64";
    EXPECT_TRUE(caps.storage.has(DType::i64)) << d << ": i64 buffers (low word read, sign-extended write)";
    EXPECT_TRUE(caps.has(OpKind::Convert, DType::i64)) << d;
    EXPECT_FALSE(caps.has(OpKind::Add, DType::i64)) << d << ": no 64-bit integer arithmetic; dispatch narrows to i32";
    EXPECT_FALSE(caps.has(OpKind::Gather, DType::i64)) << d;
    EXPECT_TRUE(caps.has(OpKind::Conv, DType::f32)) << d;
    EXPECT_TRUE(caps.has(OpKind::ReduceWindow, DType::f32)) << d;
    EXPECT_TRUE(caps.has(OpKind::Sort, DType::i32)) << d;
    EXPECT_FALSE(caps.has(OpKind::Conv, DType::f16)) << d << ": half conv is a rewrite to f32";
    EXPECT_FALSE(caps.has(OpKind::RngUniform, DType::f32)) << d << ": no rng kernel, so it is not claimed";
    EXPECT_TRUE(caps.has(OpKind::Transpose, DType::f16)) << d << ": data movement is bit-exact for halves";
    EXPECT_FALSE(caps.has(OpKind::Add, DType::f16)) << d << ": half arithmetic is a rewrite to f32, not native";
  }
  const auto& cl = device_info("gpu").caps;
  EXPECT_TRUE(cl.has(OpKind::DotGeneral, DType::f64));
  EXPECT_TRUE(cl.has(OpKind::Add, DType::i64));
  EXPECT_TRUE(cl.has(OpKind::Attention, DType::f32));
}

TEST(Codegen, WindowAndOrderingKernelsRender) {
  LirKernel conv;
  conv.op = OpKind::Conv;
  conv.attrs = {{"strides", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"groups", int64_t{1}}};
  std::vector<ValueType> in = {{DType::f32, Shape{1, 3, 8, 8}}, {DType::f32, Shape{4, 3, 3, 3}}};
  ValueType out{DType::f32, Shape{1, 4, 4, 4}};
  std::unique_ptr<codegen::CLikeRenderer> rs[] = {codegen::make_glsl_renderer(), codegen::make_opencl_renderer()};
  for (auto& r : rs) {
    auto k = r->render(conv, in, {out}, "k0");
    EXPECT_EQ(k.groups, 1) << "64 outputs, one per thread";
    EXPECT_NE(k.source.find("o2 * 2 + kq0 * 1 - 1"), std::string::npos) << k.source;
  }
  LirKernel sort;
  sort.op = OpKind::TopK;
  sort.attrs = {{"k", int64_t{2}}, {"axis", int64_t{-1}}, {"largest", int64_t{1}}};
  auto k = codegen::make_glsl_renderer()->render(sort, {{DType::f32, Shape{3, 5}}},
                                                 {{DType::f32, Shape{3, 2}}, {DType::i64, Shape{3, 2}}}, "k0");
  EXPECT_NE(k.source.find("if (rank < 2)"), std::string::npos) << k.source;
  EXPECT_NE(k.source.find("d[2 * i_ + 1] = uint(v_ >> 31)"), std::string::npos) << "i64 indices are written sign-extended";
}

// The status line carries what the device reports about itself (queried, not assumed), and the
// OpenCL f64 claim follows the device's cl_khr_fp64.
TEST(Codegen, DeviceFeaturesAreQueried) {
  for (const char* d : {"vulkan", "opengl", "gpu"}) {
    const auto& info = device_info(d);
    if (!info.can_execute()) continue;
    EXPECT_NE(info.reason.find("fp64 "), std::string::npos) << d << ": " << info.reason;
    EXPECT_NE(info.reason.find("subgroups "), std::string::npos) << d << ": " << info.reason;
    if (std::string(d) == "gpu") {
      EXPECT_EQ(info.caps.has(OpKind::DotGeneral, DType::f64), info.reason.find("fp64 yes") != std::string::npos);
    }
  }
}
