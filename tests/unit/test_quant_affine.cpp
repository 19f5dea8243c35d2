// Affine int8 ops (incl. qconv): the fixed-point arithmetic (src/quant/fixed_point.h), each op's reference against
// its MIR decomposition (bit-exact), and the cpu int8 GEMM paths and kernels against the reference.
#include <gtest/gtest.h>

#include <array>
#include <map>
#include <cmath>
#include <random>

#include "backends/cpu/qepilogue.h"
#include "backends/cpu/qgemm.h"
#include "backends/cpu/simd_avx2.h"
#include "passes/passes.h"
#include "quant/fixed_point.h"
#include "rlx/builder.h"
#include "rlx/reference.h"
#include "rlx/session.h"

using namespace rlx;

namespace {

// round(acc * m / 2^s) by exact 128-bit arithmetic, for the property test.
int64_t exact_round(int64_t acc, int64_t m, int s, bool even) {
  __int128 p = static_cast<__int128>(acc) * m, d = static_cast<__int128>(1) << s;
  __int128 q = p / d, r = p % d;  // truncating
  __int128 ar2 = (r < 0 ? -r : r) * 2;
  int sg = p < 0 ? -1 : 1;
  if (ar2 > d || (ar2 == d && (!even || q % 2 != 0))) q += sg;
  return static_cast<int64_t>(q);
}

Tensor rand_t(DType dt, std::vector<int64_t> shape, uint32_t seed, double lo = -1, double hi = 1) {
  Tensor t(dt, std::move(shape));
  std::mt19937 g(seed);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dt == DType::i8) t.data<int8_t>()[i] = static_cast<int8_t>(g());
    else if (dt == DType::u8) t.data<uint8_t>()[i] = static_cast<uint8_t>(g());
    else if (dt == DType::i32) t.data<int32_t>()[i] = static_cast<int32_t>(g() % 200001) - 100000;
    else t.set(i, lo + (hi - lo) * (g() / 4294967296.0));
  }
  return t;
}

void expect_same(const Tensor& a, const Tensor& b, const char* what) {
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  int bad = 0;
  for (int64_t i = 0; i < a.numel() && bad < 5; ++i)
    if (a.get(i) != b.get(i)) {
      ++bad;
      ADD_FAILURE() << what << " [" << i << "]: " << a.get(i) << " vs " << b.get(i);
    }
}

// The op graph, its reference, its decomposition under the reference, and the cpu device: all equal.
void check_all_paths(const Graph& g, const std::vector<Tensor>& in, const char* what, bool cpu_native) {
  Tensor want = reference_run(g, in)[0];
  Graph d = decompose_all(g);
  expect_same(reference_run(d, in)[0], want, (std::string(what) + " decomposed").c_str());
  CompileOptions native, common;
  for (int i = 0; i < num_ops(); ++i) {
    if (op_info(static_cast<OpKind>(i)).group == OpGroup::Quant) common.dispatch.force_common.insert(std::string(op_name(static_cast<OpKind>(i))));
  }
  CompiledModel mn(g, native), mc(g, common);
  expect_same(mn.run(in)[0], want, (std::string(what) + " cpu").c_str());
  expect_same(mc.run(in)[0], want, (std::string(what) + " cpu common").c_str());
  if (cpu_native) {
    EXPECT_NE(mn.report().table().find("native"), std::string::npos) << mn.report().table();
  }
}

Attrs requant_attrs(const std::vector<int64_t>& m, const std::vector<int64_t>& s, int64_t zp, DType dt, const char* r) {
  return {{"multiplier", m}, {"shift", s}, {"zero_point", zp}, {"dtype", dt}, {"rounding", std::string(r)}};
}

}  // namespace

TEST(QuantAffine, FixedPointTiesAndSigns) {
  using quant::Rounding;
  // acc * 2^30 / 2^32 = acc / 4: ties at acc = +-2, +-6.
  const int32_t m = 1 << 30;
  EXPECT_EQ(quant::requantize(2, m, 1, 0, -128, 127, Rounding::HalfEven), 0);   // 0.5 -> 0
  EXPECT_EQ(quant::requantize(6, m, 1, 0, -128, 127, Rounding::HalfEven), 2);   // 1.5 -> 2
  EXPECT_EQ(quant::requantize(-2, m, 1, 0, -128, 127, Rounding::HalfEven), 0);  // -0.5 -> 0
  EXPECT_EQ(quant::requantize(-6, m, 1, 0, -128, 127, Rounding::HalfEven), -2);
  EXPECT_EQ(quant::requantize(2, m, 1, 0, -128, 127, Rounding::HalfAway), 1);
  EXPECT_EQ(quant::requantize(-2, m, 1, 0, -128, 127, Rounding::HalfAway), -1);
  EXPECT_EQ(quant::requantize(-7, m, 1, 0, -128, 127, Rounding::HalfAway), -2);  // -1.75
  EXPECT_EQ(quant::requantize(1000, m, 1, 5, -128, 127, Rounding::HalfEven), 127);  // saturates
  EXPECT_EQ(quant::requantize(-1000, m, 1, 5, 0, 255, Rounding::HalfEven), 0);
  std::mt19937 g(3);
  for (int i = 0; i < 20000; ++i) {
    int32_t acc = static_cast<int32_t>(g());
    int32_t mm = static_cast<int32_t>(g() & 0x7fffffff);
    int32_t sh = static_cast<int32_t>(g() % 62) - 30;
    bool even = g() & 1;
    int64_t want = exact_round(acc, mm, 31 + sh, even) + 3;
    want = std::clamp<int64_t>(want, -128, 127);
    ASSERT_EQ(quant::requantize(acc, mm, sh, 3, -128, 127, even ? Rounding::HalfEven : Rounding::HalfAway), want)
        << acc << " " << mm << " " << sh;
  }
}

TEST(QuantAffine, QuantizeMultiplierEncodes) {
  for (double s : {1.0, 0.5, 0.75, 1e-3, 3.3e-7, 1.999, 2e-9}) {
    int32_t m = 0, sh = 0;
    ASSERT_TRUE(quant::quantize_multiplier(s, &m, &sh)) << s;
    EXPECT_GE(m, 1 << 30);
    EXPECT_NEAR(quant::multiplier_value(m, sh) / s, 1.0, 1e-9) << s;
  }
  int32_t m = 0, sh = 0;
  EXPECT_FALSE(quant::quantize_multiplier(0.0, &m, &sh));
  EXPECT_TRUE(quant::quantize_multiplier(4.0, &m, &sh));
  EXPECT_EQ(quant::multiplier_value(m, sh), 4.0);
  EXPECT_FALSE(quant::quantize_multiplier(2e9, &m, &sh));    // needs shift < -30
  EXPECT_FALSE(quant::quantize_multiplier(1e-11, &m, &sh));  // needs shift > 31
  EXPECT_FALSE(quant::quantize_multiplier(std::nan(""), &m, &sh));
}

TEST(QuantAffine, QuantizeDequantizeMatchDecomposition) {
  for (int64_t axis : {int64_t{-1}, int64_t{1}}) {
    for (DType zdt : {DType::i8, DType::u8}) {
      Graph g;
      Builder b(g);
      Shape ps = axis < 0 ? Shape{} : Shape{5};
      ValueId x = b.input("x", DType::f32, Shape{3, 5});
      ValueId s = b.input("s", DType::f32, ps), z = b.input("z", zdt, ps);
      ValueId q = b.op1(OpKind::QuantizeAffine, {x, s, z}, {{"axis", axis}});
      b.output(b.op1(OpKind::DequantizeAffine, {q, s, z}, {{"axis", axis}}));
      Tensor xt = rand_t(DType::f32, {3, 5}, 1, -3, 3);
      xt.set(0, 0.025);  // exact ties at scale 0.01: 2.5 -> 2
      xt.set(1, -0.035);
      xt.set(2, 1e6);    // saturates
      Tensor st(DType::f32, axis < 0 ? std::vector<int64_t>{} : std::vector<int64_t>{5});
      Tensor zt(zdt, st.shape());
      for (int64_t i = 0; i < st.numel(); ++i) {
        st.set(i, 0.01 * (i + 1));
        zt.set(i, zdt == DType::u8 ? 128 + i : -i);
      }
      check_all_paths(g, {xt, st, zt}, "quantize+dequantize", false);
      // The reference itself: round half to even on the f32 quotient.
      Graph g2;
      Builder b2(g2);
      ValueId x2 = b2.input("x", DType::f32, Shape{3});
      b2.output(b2.op1(OpKind::QuantizeAffine, {x2, b2.input("s", DType::f32, Shape{}), b2.input("z", DType::i8, Shape{})}));
      Tensor q2 = reference_run(g2, {Tensor::from(DType::f32, {3}, std::vector<float>{2.5f, 3.5f, -2.5f}),
                                     Tensor::from(DType::f32, {}, std::vector<float>{1.0f}),
                                     Tensor::from(DType::i8, {}, std::vector<int>{0})})[0];
      EXPECT_EQ(q2.get(0), 2);
      EXPECT_EQ(q2.get(1), 4);
      EXPECT_EQ(q2.get(2), -2);
    }
  }
}

TEST(QuantAffine, RequantizeMatchesDecomposition) {
  for (const char* r : {"half_even", "half_away"}) {
    for (int64_t axis : {int64_t{-1}, int64_t{1}}) {
      Graph g;
      Builder b(g);
      ValueId x = b.input("acc", DType::i32, Shape{4, 3});
      std::vector<int64_t> m = {1 << 30}, s = {9};
      if (axis >= 0) m = {1 << 30, 1395864371, 2147483647}, s = {9, 4, -2};
      Attrs a = requant_attrs(m, s, axis < 0 ? 0 : 7, axis < 0 ? DType::i8 : DType::u8, r);
      a["axis"] = axis;
      b.output(b.op1(OpKind::Requantize, {x}, a));
      Tensor acc = rand_t(DType::i32, {4, 3}, 5);
      acc.set(0, 512);   // 512 * 2^30 / 2^40 = 0.5: a tie
      acc.set(3, -1536);  // -1.5
      check_all_paths(g, {acc}, r, false);
    }
  }
}

TEST(QuantAffine, QMatMulMatchesDecompositionAndCpu) {
  for (DType adt : {DType::u8, DType::i8}) {
    for (DType bdt : {DType::i8, DType::u8}) {
      Graph g;
      Builder b(g);
      ValueId a = b.input("a", adt, Shape{2, 7, 19});
      ValueId w = b.input("b", bdt, Shape{19, 21});
      ValueId az = b.input("az", adt, Shape{}), bz = b.input("bz", bdt, Shape{21});
      b.output(b.op1(OpKind::QMatMul, {a, w, az, bz}));
      Tensor bzt = rand_t(bdt, {21}, 4);
      check_all_paths(g, {rand_t(adt, {2, 7, 19}, 1), rand_t(bdt, {19, 21}, 2), rand_t(adt, {}, 3), bzt}, "qmatmul", true);
    }
  }
}

// qlinear as the cpu device runs it at the ISA level in use (the ISA matrix runs every level):
// i8/u8 inputs, per-tensor and per-channel requantize, f32 output, relu, bias, weight zero points.
TEST(GemmInt8, QLinearCpuMatchesReference) {
  std::mt19937 g(11);
  for (int variant = 0; variant < 6; ++variant) {
    SCOPED_TRACE(variant);
    DType xdt = variant % 2 ? DType::i8 : DType::u8;
    int64_t M = 1 + variant * 9, K = 3 + variant * 13, N = 5 + variant * 7;
    Graph gr;
    Builder b(gr);
    ValueId x = b.input("x", xdt, Shape{M, K});
    ValueId w = b.input("w", DType::i8, Shape{N, K});
    ValueId bias = b.input("bias", DType::i32, Shape{N});
    std::vector<int64_t> mul, sh, wz;
    std::vector<double> sc;
    bool per = variant >= 2;
    for (int64_t n = 0; n < (per ? N : 1); ++n) {
      int32_t mm = 0, ss = 0;
      ASSERT_TRUE(quant::quantize_multiplier(1e-3 * (1 + n % 5), &mm, &ss));
      mul.push_back(mm), sh.push_back(ss), sc.push_back(1e-3 * (1 + n % 3));
      wz.push_back(variant == 5 ? static_cast<int64_t>(n % 7) - 3 : 0);
    }
    DType odt = variant == 4 ? DType::f32 : (variant == 3 ? DType::u8 : DType::i8);
    Attrs a = requant_attrs(mul, sh, odt == DType::u8 ? 120 : -3, odt, variant % 3 ? "half_even" : "half_away");
    a["x_zero_point"] = int64_t{xdt == DType::u8 ? 131 : -5};
    a["w_zero_point"] = wz;
    a["scale"] = sc;
    a["relu"] = int64_t{variant >= 3};
    b.output(b.op1(OpKind::QLinear, {x, w, bias}, a));
    Tensor bt = rand_t(DType::i32, {N}, 8);
    check_all_paths(gr, {rand_t(xdt, {M, K}, 6), rand_t(DType::i8, {N, K}, 7), bt}, "qlinear", true);
  }
}

// Every GEMM path the host runs, bit-exact against plain integer loops, with tails in every dim, for
// three kinds of operands (after the flips): 8-bit both (AVX2: the s16 tile), activations <= 127 and
// weights in [-64, 64] (AVX2: the vpmaddubsw tile), the latter with the extremes that put a pair sum
// at +-32640, next to vpmaddubsw's saturation.
TEST(GemmInt8, PathsBitExact) {
  using namespace rlx::cpu::qgemm;
  std::mt19937 g(1);
  std::vector<Path> paths = host_paths();
  ASSERT_FALSE(paths.empty());
  for (auto [M, N, K] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {7, 13, 5}, {6, 16, 8}, {13, 33, 31}, {17, 100, 384}})
    for (int kind = 0; kind < 3; ++kind)
      for (int fa = 0; fa < 2; ++fa)
        for (int fb = 0; fb < 2; ++fb) {
          std::vector<int> av(static_cast<size_t>(M * K)), bv(static_cast<size_t>(N * K));  // after the flips
          for (auto& v : av) v = kind == 1 ? static_cast<int>(g() % 128) : (g() % 3 == 0 ? 255 : static_cast<int>(g() % 256));
          for (auto& v : bv)
            v = kind == 2 ? (g() % 3 == 0 ? (g() % 2 ? 64 : -64) : static_cast<int>(g() % 129) - 64) : static_cast<int>(g() % 256) - 128;
          std::vector<uint8_t> A(av.size()), B(bv.size());  // B stored [K, N]
          for (size_t i = 0; i < av.size(); ++i) A[i] = static_cast<uint8_t>(av[i] ^ (fa ? 0x80 : 0));
          for (int64_t n = 0; n < N; ++n)
            for (int64_t k = 0; k < K; ++k)
              B[static_cast<size_t>(k * N + n)] = static_cast<uint8_t>(static_cast<uint8_t>(bv[static_cast<size_t>(n * K + k)]) ^ (fb ? 0x80 : 0));
          std::vector<int32_t> want(static_cast<size_t>(M * N));
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
              int64_t s = 0;
              for (int64_t k = 0; k < K; ++k) s += av[static_cast<size_t>(m * K + k)] * bv[static_cast<size_t>(n * K + k)];
              want[static_cast<size_t>(m * N + n)] = static_cast<int32_t>(s);
            }
          for (Path p : paths) {
            PackedA pa = pack_a(A.data(), M, K, K, fa, p);
            PackedB pb = pack_b(B.data(), N, K, 1, N, fb, p);
            if (p == Path::Avx2 && M * K > 16 && N * K > 16) {
              EXPECT_EQ(avx2_u8s8_exact(pa, pb), kind != 0) << kind;
            }
            std::vector<int32_t> C(static_cast<size_t>(M * N), -7);
            gemm(pa, pb, 0, M, C.data(), N);
            ASSERT_EQ(C, want) << path_name(p) << " kind " << kind << " M" << M << " N" << N << " K" << K;
          }
        }
  std::string names;
  for (Path p : paths) names += std::string(path_name(p)) + " ";
  RecordProperty("paths", names);
}

// The AVX2 epilogue row kernels give the scalar ones' bits: zero-point correction (mod 2^32), f32
// scale + relu, and requantize on every shift from -30 to 31, both roundings, exact ties (m = 2^30,
// odd acc at shift 0 is x.5), saturation at both ends, u8 and i8 ranges.
TEST(GemmInt8, EpilogueAvx2MatchesScalar) {
  if (!rlx::cpu::simd::cpu_has_avx2()) GTEST_SKIP() << "AVX2 not in use (host without it, or RLX_CPU_ISA=generic): only the scalar epilogue runs here";
  using namespace rlx::cpu::qepi;
  std::mt19937 g(3);
  const int64_t N = 67;
  std::vector<int32_t> c(N), c2, y1(N), y2(N);
  std::vector<uint32_t> wz(N), ct(N);
  std::vector<float> sc(N), f1(N), f2(N);
  for (int64_t n = 0; n < N; ++n) c[n] = static_cast<int32_t>(g()), wz[n] = g(), ct[n] = g(), sc[n] = static_cast<float>(g() % 1000) * 1e-4f - 0.05f;
  c2 = c;
  correct_scalar(c.data(), N, wz.data(), 12345u, ct.data());
  correct_avx2(c2.data(), N, wz.data(), 12345u, ct.data());
  ASSERT_EQ(c, c2);
  for (bool relu : {false, true}) {
    scale_scalar(c.data(), N, sc.data(), relu, f1.data());
    scale_avx2(c.data(), N, sc.data(), relu, f2.data());
    ASSERT_EQ(f1, f2);
  }
  int checked = 0;
  for (int sh = rlx::quant::kMinShift; sh <= rlx::quant::kMaxShift; ++sh)
    for (auto mode : {rlx::quant::Rounding::HalfEven, rlx::quant::Rounding::HalfAway})
      for (bool u8 : {false, true}) {
        Requant q;
        q.mode = mode;
        rlx::quant::int8_range(u8, &q.lo, &q.hi);
        q.zp = u8 ? 128 : -3;
        for (int64_t n = 0; n < N; ++n) {
          bool tie = n % 3 == 0;
          q.mul.push_back(tie ? 1 << 30 : static_cast<int32_t>((1u << 30) + g() % (1u << 30)));
          q.shift.push_back(tie ? 0 : sh);
          int32_t a = static_cast<int32_t>(g());
          if (n % 5 == 1) a = static_cast<int32_t>(g() % 2001) - 1000;  // in range for small scales
          c[n] = tie ? (a % 1001) | 1 : a;
        }
        q.prepare();
        requant_scalar(c.data(), N, q, y1.data());
        requant_avx2(c.data(), N, q, y2.data());
        ASSERT_EQ(y1, y2) << "shift " << sh << " u8 " << u8;
        checked += static_cast<int>(N);
      }
  RecordProperty("requantized", checked);
}

// fuse-qdq before/after: Q -> DQ -> matmul(., DQ(const w)) + const bias -> Q -> DQ becomes one
// qlinear with u8 output and an i32 bias; a matmul of two activations stays float, and says why.
TEST(QuantAffine, FuseQdqRewritesContractions) {
  Graph g;
  Builder b(g);
  const int64_t M = 6, K = 24, N = 10;
  ValueId x = b.input("x", DType::f32, Shape{M, K});
  auto scalar_f = [&](float v) { return b.constant(Tensor::from(DType::f32, {}, std::vector<float>{v})); };
  auto scalar_q = [&](DType dt, int v) { return b.constant(Tensor::from(dt, {}, std::vector<int>{v})); };
  ValueId sx = scalar_f(0.02f), zx = scalar_q(DType::u8, 128);
  ValueId xd = b.op1(OpKind::DequantizeAffine, {b.op1(OpKind::QuantizeAffine, {x, sx, zx}), sx, zx});
  Tensor wq = rand_t(DType::i8, {K, N}, 3);
  Tensor ws(DType::f32, {N});
  for (int64_t j = 0; j < N; ++j) ws.set(j, 0.01 + 0.001 * j);
  ValueId wd = b.op1(OpKind::DequantizeAffine, {b.constant(wq), b.constant(ws), b.constant(Tensor(DType::i8, {N}))},
                     {{"axis", int64_t{1}}});
  ValueId mmv = b.matmul(xd, wd);
  g.nodes[static_cast<size_t>(g.values[static_cast<size_t>(mmv)].producer)].name = "fc";
  ValueId y = b.add(mmv, b.constant(rand_t(DType::f32, {N}, 4, -0.5, 0.5)));
  ValueId sy = scalar_f(0.05f), zy = scalar_q(DType::u8, 100);
  ValueId yd = b.op1(OpKind::DequantizeAffine, {b.op1(OpKind::QuantizeAffine, {y, sy, zy}), sy, zy});
  b.output(yd);
  b.output(b.matmul(xd, b.transpose(xd, {1, 0})));  // activation x activation: stays float
  std::vector<std::string> rep;
  Graph f = fuse_qdq(g, &rep);
  int ql = 0, mm = 0;
  for (const Node& n : f.nodes) {
    ql += n.op == OpKind::QLinear;
    mm += n.op == OpKind::MatMul;
    if (n.op == OpKind::QLinear) {
      EXPECT_EQ(attr_dtype(n, "dtype"), DType::u8);
      EXPECT_EQ(n.inputs.size(), 3u);  // the bias became i32
    }
  }
  EXPECT_EQ(ql, 1);
  EXPECT_EQ(mm, 1);
  ASSERT_EQ(rep.size(), 2u);
  EXPECT_NE(rep[0].find("fuse-qdq: int8 'fc' (matmul) -> qlinear (u8 out, i32 bias)"), std::string::npos) << rep[0];
  EXPECT_NE(rep[1].find("fuse-qdq: float"), std::string::npos) << rep[1];
  // the dequantize sinks below the transpose, so the weight is dequantized but not a constant
  EXPECT_NE(rep[1].find("weight is not a constant i8/u8 matrix"), std::string::npos) << rep[1];
  Tensor xt = rand_t(DType::f32, {M, K}, 9, -2, 2);
  auto want = reference_run(g, {xt}), got = reference_run(f, {xt});
  // Float requantization vs exact fixed point (and the bias rounded to the accumulator grid): at
  // most one output step apart.
  int same = 0;
  for (int64_t i = 0; i < want[0].numel(); ++i) {
    EXPECT_LE(std::abs(want[0].get(i) - got[0].get(i)), 0.05 + 1e-6) << i;
    same += want[0].get(i) == got[0].get(i);
  }
  EXPECT_GE(same, want[0].numel() * 8 / 10);
  expect_same(got[1], want[1], "float matmul");
}

// qconv on every path (reference, decomposition, cpu native, cpu through the decomposition):
// u8/i8 activations, groups (incl. depthwise), strides, padding, dilation, per-tensor and per-channel
// requantize, both roundings, relu and a ReLU6 cap, f32 output, weight zero points, no bias.
TEST(QConv, CpuAndDecompositionMatchReference) {
  struct V {
    DType x;
    int64_t c, o, groups, k, stride, pad, dil;
    bool per, bias;
    DType out;
    int relu;  // 0, 1 (relu), 6 (relu + max_q)
  };
  const std::vector<V> vs{{DType::u8, 1, 8, 1, 3, 1, 0, 1, false, true, DType::i8, 1},
                          {DType::i8, 4, 6, 2, 3, 2, 1, 1, true, true, DType::i8, 0},
                          {DType::u8, 4, 4, 4, 3, 1, 1, 1, true, true, DType::u8, 6},   // depthwise
                          {DType::i8, 3, 5, 1, 2, 1, 2, 2, true, false, DType::f32, 1},
                          {DType::i8, 8, 8, 8, 5, 2, 2, 1, true, true, DType::i8, 6}};  // depthwise 5x5
  for (size_t vi = 0; vi < vs.size(); ++vi) {
    const V& v = vs[vi];
    SCOPED_TRACE(vi);
    const int64_t H = 9, W = 7;
    Graph gr;
    Builder b(gr);
    ValueId x = b.input("x", v.x, Shape{2, v.c, H, W});
    ValueId w = b.input("w", DType::i8, Shape{v.o, v.c / v.groups, v.k, v.k});
    std::vector<ValueId> ins{x, w};
    if (v.bias) ins.push_back(b.input("bias", DType::i32, Shape{v.o}));
    std::vector<int64_t> mul, sh, wz;
    std::vector<double> sc;
    for (int64_t n = 0; n < (v.per ? v.o : 1); ++n) {
      int32_t mm = 0, ss = 0;
      ASSERT_TRUE(quant::quantize_multiplier(2e-3 * (1 + n % 5), &mm, &ss));
      mul.push_back(mm), sh.push_back(ss), sc.push_back(1e-3 * (1 + n % 3));
      wz.push_back(vi == 1 ? static_cast<int64_t>(n % 5) - 2 : 0);
    }
    int64_t zp = v.out == DType::u8 ? 110 : -4;
    Attrs a = requant_attrs(mul, sh, zp, v.out, vi % 2 ? "half_away" : "half_even");
    a["strides"] = std::vector<int64_t>{v.stride, v.stride};
    a["pads"] = std::vector<int64_t>{v.pad, v.pad, v.pad, v.pad};
    a["dilations"] = std::vector<int64_t>{v.dil, v.dil};
    a["groups"] = v.groups;
    a["x_zero_point"] = int64_t{v.x == DType::u8 ? 129 : -7};
    a["w_zero_point"] = wz;
    a["scale"] = sc;
    a["relu"] = int64_t{v.relu != 0};
    if (v.relu == 6) a["max_q"] = zp + 60;
    b.output(b.op1(OpKind::QConv, ins, a));
    std::vector<Tensor> in{rand_t(v.x, {2, v.c, H, W}, 20 + static_cast<uint32_t>(vi)),
                           rand_t(DType::i8, {v.o, v.c / v.groups, v.k, v.k}, 40 + static_cast<uint32_t>(vi))};
    if (v.bias) in.push_back(rand_t(DType::i32, {v.o}, 60));
    check_all_paths(gr, in, "qconv", true);
    if (v.relu == 6) {  // the cap is reached and the floor too, so both clamps are exercised
      Tensor y = reference_run(gr, in)[0];
      bool top = false, bottom = false;
      for (int64_t i = 0; i < y.numel(); ++i) top |= y.get(i) == zp + 60, bottom |= y.get(i) == zp;
      EXPECT_TRUE(top && bottom);
    }
  }
}

TEST(QConv, ShapeRuleRejectsBadOperands) {
  auto build = [](Shape xs, Shape ws, DType bias_dt) {
    Graph gr;
    Builder b(gr);
    ValueId x = b.input("x", DType::i8, xs);
    ValueId w = b.input("w", DType::i8, ws);
    ValueId bias = b.input("b", bias_dt, Shape{ws[0]});
    b.op1(OpKind::QConv, {x, w, bias}, requant_attrs({1 << 30}, {8}, 0, DType::i8, "half_even"));
  };
  EXPECT_NO_THROW(build(Shape{1, 2, 5, 5}, Shape{4, 2, 3, 3}, DType::i32));
  EXPECT_THROW(build(Shape{1, 3, 5, 5}, Shape{4, 2, 3, 3}, DType::i32), Error);  // channels
  EXPECT_THROW(build(Shape{1, 2, 5, 5}, Shape{4, 2, 3, 3}, DType::f32), Error);  // bias dtype
  EXPECT_THROW(build(Shape{1, 2, 2, 2}, Shape{4, 2, 3, 3}, DType::i32), Error);  // kernel > input
}

// fuse-qdq on a QDQ CNN block: Q -> DQ -> convolution(DQ(const w per channel), DQ(const i32 bias))
// -> relu -> Q -> DQ -> max pool -> Q (same params) -> DQ -> flatten -> linear becomes quantize ->
// qconv (i8 out, relu, i32 bias) -> i8 reduce_window -> reshape -> qlinear (f32 out); the fused graph
// stays within a quantization step of the float QDQ graph and the cpu device runs it bit-exactly.
TEST(QConv, FuseQdqConvPoolFlattenLinear) {
  Graph g;
  Builder b(g);
  auto scalar_f = [&](float v) { return b.constant(Tensor::from(DType::f32, {}, std::vector<float>{v})); };
  auto scalar_q = [&](int v) { return b.constant(Tensor::from(DType::i8, {}, std::vector<int>{v})); };
  auto qdq = [&](ValueId t, float s, int z) {
    ValueId sv = scalar_f(s), zv = scalar_q(z);
    return b.op1(OpKind::DequantizeAffine, {b.op1(OpKind::QuantizeAffine, {t, sv, zv}), sv, zv});
  };
  ValueId x = b.input("x", DType::f32, Shape{2, 1, 10, 10});
  ValueId xd = qdq(x, 1.0f / 255, -128);
  const int64_t O = 4;
  Tensor ws(DType::f32, {O}), bs(DType::f32, {O});
  for (int64_t j = 0; j < O; ++j) ws.set(j, 0.004 + 0.001 * j), bs.set(j, static_cast<float>(ws.get(j) / 255));
  ValueId wd = b.op1(OpKind::DequantizeAffine, {b.constant(rand_t(DType::i8, {O, 1, 3, 3}, 5)), b.constant(ws),
                                                b.constant(Tensor(DType::i8, {O}))}, {{"axis", int64_t{0}}});
  ValueId bd = b.op1(OpKind::DequantizeAffine, {b.constant(rand_t(DType::i32, {O}, 6)), b.constant(bs),
                                                b.constant(Tensor(DType::i32, {O}))}, {{"axis", int64_t{0}}});
  ValueId c = b.op1(OpKind::Convolution, {xd, wd, bd}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  ValueId r = qdq(b.max(c, scalar_f(0)), 0.02f, -128);
  ValueId p = b.op1(OpKind::ReduceWindow, {r}, {{"kind", std::string("max")}, {"window", std::vector<int64_t>{1, 1, 2, 2}},
                                              {"strides", std::vector<int64_t>{1, 1, 2, 2}}});
  ValueId pd = qdq(p, 0.02f, -128);
  ValueId f = b.reshape(pd, Shape{2, O * 25});
  Tensor fs(DType::f32, {3});
  for (int64_t j = 0; j < 3; ++j) fs.set(j, 0.01);
  ValueId fw = b.op1(OpKind::DequantizeAffine, {b.constant(rand_t(DType::i8, {3, O * 25}, 7)), b.constant(fs),
                                                b.constant(Tensor(DType::i8, {3}))}, {{"axis", int64_t{0}}});
  b.output(b.op1(OpKind::Linear, {f, fw, b.constant(rand_t(DType::f32, {3}, 8, -0.1, 0.1))}));
  std::vector<std::string> rep;
  Graph fz = fuse_qdq(g, &rep);
  std::map<OpKind, int> count;
  for (const Node& n : fz.nodes) {
    ++count[n.op];
    if (n.op == OpKind::QConv) {
      EXPECT_EQ(attr_dtype(n, "dtype"), DType::i8);
      EXPECT_EQ(attr_int(n, "relu"), 1);
      EXPECT_EQ(n.inputs.size(), 3u);
    }
    if (n.op == OpKind::ReduceWindow) {
      EXPECT_EQ(fz.type(n.inputs[0]).dtype, DType::i8);
    }
  }
  EXPECT_EQ(count[OpKind::QConv], 1);
  EXPECT_EQ(count[OpKind::QLinear], 1);
  EXPECT_EQ(count[OpKind::Convolution], 0);
  EXPECT_EQ(count[OpKind::QuantizeAffine], 1);  // only the input's
  ASSERT_EQ(rep.size(), 2u);
  EXPECT_NE(rep[0].find("-> qconv (i8 out, i32 bias, relu)"), std::string::npos) << rep[0];
  EXPECT_NE(rep[1].find("-> qlinear (f32 out)"), std::string::npos) << rep[1];
  Tensor xt = rand_t(DType::f32, {2, 1, 10, 10}, 9, 0, 1);
  Tensor want = reference_run(g, {xt})[0], got = reference_run(fz, {xt})[0];
  for (int64_t i = 0; i < want.numel(); ++i) EXPECT_NEAR(want.get(i), got.get(i), 0.25) << i;
  CompiledModel m(fz, CompileOptions{});
  expect_same(m.run({xt})[0], got, "fused cnn on cpu");
}
