// Block structs, Q8_K by hand, quantize round trips, and the cpu packed dequant_matmul kernel
// against the decomposition (dequantize + dot_general) and the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "quant/blocks.h"
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
