// The cortexm code generator: int8 graphs (quantize_affine -> qlinear with relu, i32 bias and
// per-channel requantize -> f32-out qlinear / dequantize_affine, f32 elementwise; a small CNN of
// qconv, i8 max pooling, depthwise qconv with a ReLU6 cap, flatten, qlinear) compiled to the C
// project, built for this machine (`make host`, always) and as firmware for both boards in
// qemu-system-arm (where the toolchain is; under CI=true its absence fails), outputs compared bit
// for bit with the reference interpreter.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "codegen/cortexm/cortexm.h"
#include "quant/fixed_point.h"
#include "rlx/builder.h"
#include "rlx/device.h"
#include "rlx/lir.h"
#include "rlx/reference.h"
#include "rlx/session.h"
#include "test_util.h"

using namespace rlx;

namespace {

Tensor random_tensor(DType dt, std::vector<int64_t> shape, uint32_t seed, double lo, double hi) {
  Tensor t(dt, shape);
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = u(g);
    if (dt == DType::f32) t.data<float>()[i] = static_cast<float>(v);
    else if (dt == DType::i8) t.data<int8_t>()[i] = static_cast<int8_t>(std::lround(v));
    else if (dt == DType::i32) t.data<int32_t>()[i] = static_cast<int32_t>(std::lround(v));
  }
  return t;
}

ValueId scalar_const(Builder& b, DType dt, double v) {
  Tensor t(dt, {});
  if (dt == DType::f32) t.data<float>()[0] = static_cast<float>(v);
  else if (dt == DType::u8) t.data<uint8_t>()[0] = static_cast<uint8_t>(v);
  else t.data<int8_t>()[0] = static_cast<int8_t>(v);
  return b.constant(t);
}

// x f32 [M, K] -> quantize -> qlinear (int out, relu, bias, per channel) -> second layer: variant 0
// f32-out qlinear + f32 bias + max(., 0); variant 1 i8-out qlinear -> dequantize_affine.
Graph int8_mlp(int variant, int64_t M, int64_t K, int64_t H, int64_t N) {
  Graph g;
  Builder b(g);
  DType adt = variant == 0 ? DType::u8 : DType::i8;
  int64_t xzp = variant == 0 ? 131 : -5, hzp = variant == 0 ? 120 : -3;
  ValueId x = b.input("x", DType::f32, Shape{M, K});
  ValueId xq = b.op1(OpKind::QuantizeAffine, {x, scalar_const(b, DType::f32, 1.0 / 97), scalar_const(b, adt, static_cast<double>(xzp))});
  auto layer = [&](ValueId in, int64_t in_zp, int64_t k, int64_t n, uint32_t seed, DType odt, int64_t ozp, bool relu) {
    std::vector<int64_t> mul, sh, wz;
    std::vector<double> sc;
    for (int64_t j = 0; j < n; ++j) {
      int32_t m = 0, s = 0;
      EXPECT_TRUE(quant::quantize_multiplier(3e-3 * (1 + j % 5), &m, &s));
      mul.push_back(m), sh.push_back(s), sc.push_back(2e-3 * (1 + j % 3));
      wz.push_back(variant == 1 ? j % 5 - 2 : 0);
    }
    Attrs a{{"x_zero_point", in_zp}, {"w_zero_point", wz}, {"dtype", odt}, {"relu", int64_t{relu}},
            {"rounding", std::string(variant == 1 ? "half_away" : "half_even")}};
    if (odt == DType::f32) a["scale"] = sc;
    else a["multiplier"] = mul, a["shift"] = sh, a["zero_point"] = ozp;
    ValueId w = b.constant(random_tensor(DType::i8, {n, k}, seed, -127, 127));
    ValueId bias = b.constant(random_tensor(DType::i32, {n}, seed + 1, -3000, 3000));
    return b.op1(OpKind::QLinear, {in, w, bias}, a);
  };
  ValueId h = layer(xq, xzp, K, H, 3, adt, hzp, true);
  if (variant == 0) {
    ValueId z = layer(h, hzp, H, N, 5, DType::f32, 0, false);
    ValueId bias = b.constant(random_tensor(DType::f32, {N}, 9, -1, 1));
    b.output(b.max(b.add(z, bias), scalar_const(b, DType::f32, 0)));
  } else {
    ValueId z = layer(h, hzp, H, N, 5, DType::i8, 4, false);
    b.output(b.op1(OpKind::DequantizeAffine, {z, scalar_const(b, DType::f32, 0.0625), scalar_const(b, DType::i8, 4)}));
  }
  return g;
}

std::string temp_dir(const std::string& tag) {
  std::string d = (std::filesystem::temp_directory_path() / ("rlx-test-cortexm-" + tag + "-" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(d);
  return d;
}

void write_bytes(const std::string& path, const Tensor& t) {
  std::ofstream f(path, std::ios::binary);
  f.write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
}

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

bool same_bits(const std::vector<char>& got, const Tensor& want) {
  return got.size() == want.nbytes() && std::memcmp(got.data(), want.raw(), want.nbytes()) == 0;
}

struct Case {
  Graph g;
  Tensor x, want;
};

// x f32 [2, 1, 9, 9] -> quantize (i8) -> qconv 3x3 1->6 (pad 1, relu, bias, per channel) -> max pool
// 2x2 (i8 reduce_window) -> depthwise qconv 3x3 (groups 6, stride 2, relu + max_q, u8 out) -> flatten
// -> qlinear (f32 out).
Graph int8_cnn() {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", DType::f32, Shape{2, 1, 9, 9});
  ValueId xq = b.op1(OpKind::QuantizeAffine, {x, scalar_const(b, DType::f32, 1.0 / 97), scalar_const(b, DType::i8, -9)});
  auto rq = [&](int64_t n, double s, std::vector<int64_t>* mul, std::vector<int64_t>* sh) {
    for (int64_t j = 0; j < n; ++j) {
      int32_t m = 0, t = 0;
      EXPECT_TRUE(quant::quantize_multiplier(s * (1 + j % 4), &m, &t));
      mul->push_back(m), sh->push_back(t);
    }
  };
  std::vector<int64_t> m1, s1, m2, s2;
  rq(6, 4e-3, &m1, &s1);
  rq(6, 6e-3, &m2, &s2);
  ValueId c1 = b.op1(OpKind::QConv, {xq, b.constant(random_tensor(DType::i8, {6, 1, 3, 3}, 21, -127, 127)),
                                     b.constant(random_tensor(DType::i32, {6}, 22, -2000, 2000))},
                     {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"x_zero_point", int64_t{-9}}, {"multiplier", m1},
                      {"shift", s1}, {"zero_point", int64_t{-20}}, {"relu", int64_t{1}}});
  ValueId p = b.op1(OpKind::ReduceWindow, {c1}, {{"kind", std::string("max")}, {"window", std::vector<int64_t>{1, 1, 2, 2}},
                                               {"strides", std::vector<int64_t>{1, 1, 2, 2}}});
  ValueId c2 = b.op1(OpKind::QConv, {p, b.constant(random_tensor(DType::i8, {6, 1, 3, 3}, 23, -127, 127))},
                     {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{2, 2}},
                      {"groups", int64_t{6}}, {"x_zero_point", int64_t{-20}}, {"w_zero_point", std::vector<int64_t>{1, 0, -1, 2, 0, 0}},
                      {"multiplier", m2}, {"shift", s2}, {"zero_point", int64_t{100}}, {"dtype", DType::u8},
                      {"relu", int64_t{1}}, {"max_q", int64_t{180}}, {"rounding", std::string("half_away")}});
  ValueId f = b.reshape(c2, Shape{2, 6 * 4});
  std::vector<double> sc;
  for (int j = 0; j < 10; ++j) sc.push_back(1e-3 * (1 + j % 3));
  b.output(b.op1(OpKind::QLinear, {f, b.constant(random_tensor(DType::i8, {10, 24}, 24, -127, 127))},
                 {{"x_zero_point", int64_t{100}}, {"dtype", DType::f32}, {"scale", sc}}));
  return g;
}

Case make_case(int variant) {
  if (variant == 2) {
    Case c{int8_cnn(), random_tensor(DType::f32, {2, 1, 9, 9}, 31, -0.5, 1.5), Tensor()};
    c.want = reference_run(c.g, {c.x}).at(0);
    return c;
  }
  Case c{int8_mlp(variant, 3, 37, 19, 10), random_tensor(DType::f32, {3, 37}, 17 + variant, -1.5, 2.5), Tensor()};
  c.want = reference_run(c.g, {c.x}).at(0);
  return c;
}

std::string project_for(const Case& c, cortexm::Board b, const std::string& tag) {
  CompileOptions o;
  o.device = "cortexm";
  CompiledModel m(c.g, o);
  std::string dir = temp_dir(tag);
  cortexm::write_project(cortexm::generate_project(m.lir(), b), dir);
  write_bytes(dir + "/input.bin", c.x);
  return dir;
}

}  // namespace

// The generated C, built for this machine: the kernels' arithmetic equals the reference's bits.
TEST(Cortexm, HostBuildBitExactWithReference) {
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    Case c = make_case(variant);
    std::string dir = project_for(c, cortexm::Board::M4, "host" + std::to_string(variant));
    ASSERT_EQ(std::system(("make -s -C " + dir + " host >" + dir + "/host.log 2>&1").c_str()), 0) << dir;
    ASSERT_EQ(std::system(("cd " + dir + " && ./model_host input.bin output.bin >/dev/null").c_str()), 0);
    EXPECT_TRUE(same_bits(read_bytes(dir + "/output.bin"), c.want)) << "host build of the generated C differs: " << dir;
    std::filesystem::remove_all(dir);
  }
}

// The firmware in qemu-system-arm, M4 (SMLAD) and M55 (MVE), bit-exact with the reference.
TEST(Cortexm, FirmwareBitExactWithReference) {
  const DeviceInfo& d = device_info("cortexm");
  RLX_REQUIRE(d.can_execute(), "cortexm toolchain (arm-none-eabi-gcc, qemu-system-arm): " + d.reason);
  for (int variant = 0; variant < 3; ++variant)
    for (auto board : {cortexm::Board::M4, cortexm::Board::M55}) {
      std::string name = cortexm::board_info(board).name;
      SCOPED_TRACE(name + " variant " + std::to_string(variant));
      Case c = make_case(variant);
      std::string dir = project_for(c, board, name + std::to_string(variant));
      ASSERT_EQ(std::system(("make -s -C " + dir + " >" + dir + "/build.log 2>&1").c_str()), 0) << dir;
      ASSERT_EQ(std::system(("cd " + dir + " && timeout 60 make -s run >run.log 2>&1").c_str()), 0) << dir;
      EXPECT_TRUE(same_bits(read_bytes(dir + "/output.bin"), c.want)) << "firmware output differs: " << dir;
      std::filesystem::remove_all(dir);
    }
}

// An op the firmware has no kernel for is refused at compile time with a [cortexm]/dispatch message.
TEST(Cortexm, UnsupportedOpIsRefused) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", DType::f32, Shape{2, 3});
  b.output(b.unary(OpKind::Exp, x));
  CompileOptions o;
  o.device = "cortexm";
  CompiledModel m(g, o);
  try {
    (void)m.lir();
    FAIL() << "exp compiled for cortexm";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cortexm"), std::string::npos) << e.what();
  }
}
