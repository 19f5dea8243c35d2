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
}

TEST(Codegen, CapabilitiesFollowTheRenderers) {
  for (const char* d : {"vulkan", "opengl"}) {
    const auto& caps = device_info(d).caps;
    EXPECT_TRUE(caps.has(OpKind::DotGeneral, DType::f32)) << d;
    EXPECT_FALSE(caps.has(OpKind::DotGeneral, DType::f64)) << d << ": GLSL buffers have no f64";
    EXPECT_FALSE(caps.storage.has(DType::i64)) << d;
    EXPECT_FALSE(caps.has(OpKind::Conv, DType::f32)) << d << ": no conv kernel, so it is not claimed";
    EXPECT_TRUE(caps.has(OpKind::Transpose, DType::f16)) << d << ": data movement is bit-exact for halves";
    EXPECT_FALSE(caps.has(OpKind::Add, DType::f16)) << d << ": half arithmetic is a rewrite to f32, not native";
  }
  const auto& cl = device_info("gpu").caps;
  EXPECT_TRUE(cl.has(OpKind::DotGeneral, DType::f64));
  EXPECT_TRUE(cl.has(OpKind::Add, DType::i64));
  EXPECT_TRUE(cl.has(OpKind::Attention, DType::f32));
}
