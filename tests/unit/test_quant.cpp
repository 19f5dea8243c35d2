// Block structs, Q8_K by hand, quantize round trips, and the cpu packed dequant_matmul kernel
// against the decomposition (dequantize + dot_general) and the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "quant/blocks.h"
#include "quant/fields.h"
#include "rlx/device.h"
#include <cstring>
#include "rlx/builder.h"
#include "rlx/gguf.h"
#include "rlx/reference.h"
#include "rlx/session.h"

using namespace rlx;
using namespace rlx::quant;

TEST(Quant, TraitsAndRowBytes) {
  EXPECT_EQ(row_bytes(GgmlType::Q4_K, 512), 288u);
  EXPECT_EQ(row_bytes(GgmlType::Q8_0, 64), 68u);
  EXPECT_THROW(row_bytes(GgmlType::Q6_K, 100), Error);
  EXPECT_EQ(type_name(14), "Q6_K");
  EXPECT_EQ(type_name(99), "type#99");
  ASSERT_TRUE(type_traits_by_name("q4_k"));
  EXPECT_EQ(type_traits_by_name("q4_k")->block_bytes, 144);
}

TEST(Quant, Q8KByHand) {
  BlockQ8_K b{};
  b.d = 0.5f;
  for (int i = 0; i < kQKK; ++i) b.qs[i] = static_cast<int8_t>(i % 200 - 100);
  std::vector<float> y(kQKK);
  dequantize_row(GgmlType::Q8_K, &b, y.data(), kQKK);
  for (int i = 0; i < kQKK; ++i) EXPECT_EQ(y[i], 0.5f * (i % 200 - 100));
}

TEST(Quant, RoundTripQ8_0AndQ4_0) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(256), y(256);
  for (auto& e : x) e = u(rng);
  std::vector<BlockQ8_0> q8(8);
  quantize_row_q8_0(x.data(), q8.data(), 256);
  dequantize_row(GgmlType::Q8_0, q8.data(), y.data(), 256);
  for (int i = 0; i < 256; ++i) EXPECT_NEAR(y[i], x[i], 1.0 / 127);
  std::vector<BlockQ4_0> q4(8);
  quantize_row_q4_0(x.data(), q4.data(), 256);
  dequantize_row(GgmlType::Q4_0, q4.data(), y.data(), 256);
  for (int i = 0; i < 256; ++i) EXPECT_NEAR(y[i], x[i], 0.15);
}

// The cpu kernel (native) equals the decomposition (forced common path) on real blocks of the four
// types Qwen3 GGUFs use, taken from the gguf-written test file.
TEST(Quant, CpuDequantMatMulMatchesDecomposition) {
  gguf::File f = gguf::File::open(std::string(RLX_SOURCE_DIR) + "/tests/models/qwen3/quant_blocks.gguf");
  for (const char* type : {"Q8_0", "Q4_0", "Q4_K", "Q6_K", "Q5_K", "Q2_K"}) {
    SCOPED_TRACE(type);
    Tensor w = f.packed(type);  // [3, row_bytes] of 256-element rows
    const int64_t K = 256;
    Tensor x(DType::f32, {2, 5, K});
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> u(-1, 1);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = u(rng);
    Graph g;
    Builder b(g);
    ValueId xi = b.input("x", DType::f32, to_shape(x.shape()));
    ValueId wi = b.input("w", DType::u8, to_shape(w.shape()));
    b.output(b.op1(OpKind::DequantMatMul, {xi, wi}, {{"type", std::string(type)}, {"k", K}}));
    CompileOptions native, common;
    common.dispatch.force_common.insert("dequant_matmul");
    CompiledModel mn(g, native), mc(g, common);
    Tensor yn = mn.run(std::vector<Tensor>{x, w})[0], yc = mc.run(std::vector<Tensor>{x, w})[0];
    EXPECT_NE(mn.report().table().find("native"), std::string::npos);
    Tensor want = reference_run(g, {x, w})[0];
    ASSERT_EQ(yn.shape(), (std::vector<int64_t>{2, 5, 3}));
    for (int64_t i = 0; i < want.numel(); ++i) {
      double tol = 1e-4 * std::max(1.0, std::abs(want.get(i)));
      EXPECT_NEAR(yn.get(i), want.get(i), tol) << i;
      EXPECT_NEAR(yc.get(i), want.get(i), tol) << i;
    }
  }
}

TEST(Quant, DequantMatMulShapeErrors) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", DType::f32, Shape{2, 64});
  ValueId w = b.input("w", DType::u8, Shape{4, 30});  // Q8_0 rows of 64 are 68 bytes
  EXPECT_THROW(b.op1(OpKind::DequantMatMul, {x, w}, {{"type", std::string("Q8_0")}, {"k", int64_t{64}}}), Error);
  ValueId w2 = b.input("w2", DType::u8, Shape{4, 68});
  EXPECT_THROW(b.op1(OpKind::DequantMatMul, {x, w2}, {{"type", std::string("Q9_9")}, {"k", int64_t{64}}}), Error);
  EXPECT_NO_THROW(b.op1(OpKind::DequantMatMul, {x, w2}, {{"type", std::string("Q8_0")}, {"k", int64_t{64}}}));
}

namespace {

const GgmlType kBlockTypes[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                                GgmlType::Q8_1, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                                GgmlType::Q6_K};

// `rows` rows of `k` elements of random blocks: random bytes, with every f16 scale (d, m/dmin)
// replaced by a finite f16 (normal or subnormal, either sign).
Tensor random_blocks(GgmlType t, int64_t rows, int64_t k, uint32_t seed) {
  BlockFields f;
  EXPECT_TRUE(block_fields(t, &f));
  int64_t nb = k / f.elems;
  Tensor w(DType::u8, {rows, nb * f.block_bytes});
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < w.numel(); ++i) w.data<uint8_t>()[i] = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> u(-2, 2);
  for (int64_t blk = 0; blk < rows * nb; ++blk) {
    uint8_t* p = w.data<uint8_t>() + blk * f.block_bytes;
    for (int at : {f.d_byte, f.min_byte}) {
      if (at < 0) continue;
      float v = blk % 7 == 3 ? u(rng) * 1e-6f : u(rng);  // some subnormal scales
      uint16_t h = f32_to_f16(v);
      std::memcpy(p + at, &h, 2);
    }
  }
  return w;
}

}  // namespace

// The per-element bit-field description of every block type reproduces the reference dequantizer.
TEST(Quant, BlockFieldsMatchReferenceDequantizer) {
  for (GgmlType t : kBlockTypes) {
    SCOPED_TRACE(type_name(static_cast<uint32_t>(t)));
    BlockFields f;
    ASSERT_TRUE(block_fields(t, &f));
    Tensor w = random_blocks(t, 1, 2 * f.elems, 5);
    std::vector<float> want(2 * f.elems), got(2 * f.elems);
    dequantize_row(t, w.data<uint8_t>(), want.data(), 2 * f.elems);
    dequantize_by_fields(f, w.data<uint8_t>(), got.data(), 2);
    for (int i = 0; i < 2 * f.elems; ++i) ASSERT_EQ(got[i], want[i]) << i;
  }
  BlockFields f;
  EXPECT_FALSE(block_fields(GgmlType::Q8_K, &f));
}

// The dequantize decomposition (gather/div/rem + f16 rebuilt from bits) equals the reference
// dequantizer bit for bit on the cpu (forced common path).
TEST(Quant, DequantizeDecompositionMatchesReference) {
  for (GgmlType t : kBlockTypes) {
    std::string name = type_name(static_cast<uint32_t>(t));
    SCOPED_TRACE(name);
    const int64_t K = 512;
    Tensor w = random_blocks(t, 3, K, 11);
    Graph g;
    Builder b(g);
    ValueId wi = b.input("w", DType::u8, to_shape(w.shape()));
    b.output(b.op1(OpKind::Dequantize, {wi}, {{"type", name}, {"k", K}}));
    CompileOptions common;
    common.dispatch.force_common.insert("dequantize");
    CompiledModel m(g, common);
    EXPECT_NE(m.report().table().find("common"), std::string::npos);
    Tensor y = m.run(std::vector<Tensor>{w})[0];
    std::vector<float> want(3 * K);
    dequantize_row(t, w.data<uint8_t>(), want.data(), 3 * K);
    ASSERT_EQ(y.shape(), (std::vector<int64_t>{3, K}));
    for (int64_t i = 0; i < 3 * K; ++i) ASSERT_EQ(y.data<float>()[i], want[i]) << i;
  }
}

// dequant_matmul legalizes on every device with f32 and integer arithmetic (the packed path is
// decomposed to primitives), and runs on the portable GPU devices that can execute here, matching
// the reference. The packed weights are a graph input, so the device itself runs the unpacking
// (a constant would be folded on the host).
TEST(Quant, DequantMatMulRunsOnPortableGpus) {
  const int64_t K = 256;
  int ran = 0;
  for (const char* dev : {"vulkan", "opengl", "gpu", "cuda", "webgpu"}) {
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
      std::string name = type_name(static_cast<uint32_t>(t));
      SCOPED_TRACE(std::string(dev) + " " + name);
      Tensor w = random_blocks(t, 4, K, 21);
      Tensor x(DType::f32, {2, K});
      std::mt19937 rng(9);
      std::uniform_real_distribution<float> u(-1, 1);
      for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = u(rng);
      Graph g;
      Builder b(g);
      ValueId xi = b.input("x", DType::f32, to_shape(x.shape()));
      ValueId wi = b.input("w", DType::u8, to_shape(w.shape()));
      b.output(b.op1(OpKind::DequantMatMul, {xi, wi}, {{"type", name}, {"k", K}}));
      Graph lg = legalize(g, dev, DispatchOptions{}).graph;  // throws when a part has no path on `dev`
      EXPECT_FALSE(lg.nodes.empty());
      // Shader compilation on the software drivers is slow: run a spread of the cases (legacy
      // f16-scaled nibbles, K-quant 6-bit scales and mins, signed scales with high bits).
      bool run = std::string(dev) == "vulkan" ? t == GgmlType::Q4_0 || t == GgmlType::Q4_K : t == GgmlType::Q6_K;
      if (!run || !device_info(dev).can_execute()) continue;
      ++ran;
      CompileOptions co;
      co.device = dev;
      Tensor got = CompiledModel(g, co).run(std::vector<Tensor>{x, w})[0];
      Tensor want = reference_run(g, {x, w})[0];
      for (int64_t i = 0; i < want.numel(); ++i)
        EXPECT_NEAR(got.get(i), want.get(i), 1e-4 * std::max(1.0, std::abs(want.get(i)))) << i;
    }
  }
  std::printf("dequant_matmul ran on %d device x type cases\n", ran);
}
