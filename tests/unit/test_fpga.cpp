// The fpga device (src/codegen/fpga): plan errors, the generated project (Verilator lint), and a
// small int8 MLP simulated cycle by cycle, bit-exact against the reference interpreter. The MNIST
// run is tests/python/test_fpga_mnist.py.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "codegen/fpga/fpga.h"
#include "quant/fixed_point.h"
#include "rlx/builder.h"
#include "rlx/reference.h"
#include "test_util.h"

using namespace rlx;

namespace {

Tensor scalar_t(DType dt, double v) {
  Tensor t(dt, {});
  t.set(0, v);
  return t;
}

// quantize_affine (i8) -> qlinear 24 -> 13 (u8 out, relu, weight zero points, ties, half_away)
// -> qlinear 13 -> 6 (i8 out, half_even) -> dequantize_affine.
Graph small_mlp(int64_t M) {
  std::mt19937 g(5);
  Graph gr;
  Builder b(gr);
  ValueId x = b.input("x", DType::f32, Shape{M, 24});
  ValueId xq = b.op1(OpKind::QuantizeAffine, {x, b.constant(scalar_t(DType::f32, 0.02)), b.constant(scalar_t(DType::i8, -3))});
  auto layer = [&](ValueId in, int64_t K, int64_t N, int64_t xzp, DType odt, int64_t zp, bool relu, const char* r, bool wzp) {
    Tensor w(DType::i8, {N, K}), bias(DType::i32, {N});
    for (int64_t i = 0; i < N * K; ++i) w.data<int8_t>()[i] = static_cast<int8_t>(g());
    for (int64_t n = 0; n < N; ++n) bias.data<int32_t>()[n] = static_cast<int32_t>(g() % 4001) - 2000;
    std::vector<int64_t> mul, sh, wz;
    for (int64_t n = 0; n < N; ++n) {
      int32_t m = 0, s = 0;
      if (n % 3 == 0) m = 1 << 30, s = static_cast<int32_t>(n % 2);  // acc / 2 or / 4: ties at every other acc
      else if (!quant::quantize_multiplier(std::ldexp(1.0 + (g() % 1000) / 1000.0, -9 - static_cast<int>(n % 4)), &m, &s))
        throw Error("bad test scale");
      mul.push_back(m), sh.push_back(s), wz.push_back(wzp ? static_cast<int64_t>(n % 5) - 2 : 0);
    }
    Attrs a{{"x_zero_point", xzp}, {"w_zero_point", wz}, {"multiplier", mul}, {"shift", sh}, {"zero_point", zp},
            {"dtype", odt}, {"rounding", std::string(r)}, {"relu", int64_t{relu}}};
    return b.op1(OpKind::QLinear, {in, b.constant(w), b.constant(bias)}, a);
  };
  ValueId h = layer(xq, 24, 13, -3, DType::u8, 7, true, "half_away", true);
  ValueId y = layer(h, 13, 6, 7, DType::i8, -4, false, "half_even", false);
  b.output(b.op1(OpKind::DequantizeAffine, {y, b.constant(scalar_t(DType::f32, 0.125)), b.constant(scalar_t(DType::i8, -4))}));
  return gr;
}

Tensor inputs(int64_t M) {
  Tensor x(DType::f32, {M, 24});
  std::mt19937 g(9);
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, (static_cast<double>(g() % 20001) - 10000.0) / 2500.0);  // beyond the i8 range too
  return x;
}

void expect_bits_equal(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.shape(), want.shape());
  ASSERT_EQ(got.dtype(), want.dtype());
  int64_t bad = 0;
  for (int64_t i = 0; i < got.numel(); ++i) bad += std::memcmp(got.data<float>() + i, want.data<float>() + i, 4) != 0;
  EXPECT_EQ(bad, 0) << "of " << got.numel();
}

}  // namespace

TEST(FpgaPlan, RejectsWhatTheDatapathCannotRun) {
  Graph gr;
  Builder b(gr);
  ValueId x = b.input("x", DType::f32, Shape{2, 8});
  Tensor w(DType::f32, {8, 3});
  b.output(b.matmul(x, b.constant(w)));
  try {
    fpga::plan_mlp(gr);
    FAIL() << "a float matmul was planned";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[fpga]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rlx quantize"), std::string::npos) << e.what();
  }
  fpga::Model m = fpga::plan_mlp(small_mlp(2));
  ASSERT_EQ(m.layers.size(), 2u);
  EXPECT_EQ(m.layers[0].wbits, 9);  // weight zero points folded into 9-bit ROM words
  EXPECT_EQ(m.layers[1].wbits, 8);
  EXPECT_TRUE(m.layers[0].relu);
  EXPECT_FALSE(m.layers[0].half_even);
  EXPECT_TRUE(m.dequant);
  fpga::Options o;
  o.parallel = 14;  // capped at N = 13 in layer 0 (K 24) and 6 in layer 1 (K 13)
  EXPECT_EQ(fpga::layer_parallelism(m, o), (std::vector<int>{13, 6}));
  o.parallel = 0;
  EXPECT_THROW(fpga::layer_parallelism(m, o), Error);
}

// The project as written: ROM image shapes, and Verilator's -Wall lint of the RTL.
TEST(FpgaPlan, ProjectLintsClean) {
  fpga::Model m = fpga::plan_mlp(small_mlp(2));
  fpga::Options o;
  o.parallel = 4;
  std::string dir = testing::TempDir() + "/rlx_fpga_lint_" + std::to_string(::getpid());
  fpga::write_project(m, dir, o);
  std::ifstream w(dir + "/l0_w.hex");
  std::string line;
  int lines = 0;
  while (std::getline(w, line)) {
    EXPECT_EQ(line.size(), 9u);  // 4 weights x 9 bits = 36 bits = 9 hex digits
    ++lines;
  }
  EXPECT_EQ(lines, 4 * 24);  // G = ceil(13 / 4) groups of K = 24 words
  RLX_REQUIRE(fpga::missing_tools().empty(), fpga::missing_tools());
  int rc = std::system(("make -s -C '" + dir + "' lint > '" + dir + "/lint.log' 2>&1").c_str());
  std::ifstream lg(dir + "/lint.log");
  std::stringstream ss;
  ss << lg.rdbuf();
  EXPECT_EQ(rc, 0) << ss.str();
  std::filesystem::remove_all(dir);
}

// One Verilator build (cached under $RLX_CACHE_DIR/fpga), two runs: a free-flowing stream and one
// with in_valid / out_ready dropped 30% of the cycles. Outputs bit-exact against the reference.
TEST(FpgaSim, SmallMlpBitExactWithBackpressure) {
  RLX_REQUIRE(fpga::missing_tools().empty(), fpga::missing_tools());
  const int64_t M = 40;
  Graph gr = small_mlp(M);
  Tensor x = inputs(M);
  Tensor want = reference_run(gr, {x})[0];
  fpga::Options o;
  o.parallel = 4;
  fpga::SimStats st;
  Tensor got = fpga::run_mlp(gr, x, o, &st);
  expect_bits_equal(got, want);
  EXPECT_EQ(st.images, M);
  // Layer 0 is the slowest stage: G = 4 groups of K = 24 MAC cycles per image, plus its drain and
  // output stream; the steady-state interval must sit just above that.
  EXPECT_GE(st.interval, 4 * 24);
  EXPECT_LT(st.interval, 2 * 4 * 24);
  EXPECT_GT(st.latency_first, 24 + 4 * 24);
  fpga::Model m = fpga::plan_mlp(gr);
  std::vector<uint8_t> raw = fpga::simulate(st.dir, fpga::quantize_inputs(m, x), M, 6, &st, 30);
  expect_bits_equal(fpga::finish_outputs(m, raw, M, {M, 6}), want);
  EXPECT_TRUE(st.cached);
}
