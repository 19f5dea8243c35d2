// The unsigned dtypes u16/u32/u64 in the reference interpreter and the ONNX
// importer, and the storage-only ONNX types (float8, float4, int4, int2) emulated in f32/i32.
// Known values come from the ONNX spec's tables (docs/Operators.md Cast, onnx.proto comments).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "formats/onnx/onnx.h"
#include "formats/onnx/storage_formats.h"
#include "onnx_builders.h"
#include "rlx/builder.h"
#include "rlx/reference.h"
#include "rlx/session.h"
#include "rlx/text.h"

using namespace rlx;
using namespace onnx_test;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor u64s(std::vector<uint64_t> v) {
  Tensor t(DType::u64, {static_cast<int64_t>(v.size())});
  std::memcpy(t.raw(), v.data(), v.size() * 8);
  return t;
}

Tensor run1(OpKind k, const std::vector<Tensor>& ins, Attrs a = {}) {
  Graph g;
  Builder b(g);
  std::vector<ValueId> ids;
  for (size_t i = 0; i < ins.size(); ++i)
    ids.push_back(b.input("in" + std::to_string(i), ins[i].dtype(), to_shape(ins[i].shape())));
  b.output(b.op(k, ids, std::move(a))[0]);
  return reference_run(g, ins)[0];
}

void expect_same(double got, double want, const std::string& what) {
  if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << what << ": got " << got;
  else EXPECT_EQ(got, want) << what;
}

// y = Cast(x, to) with x f32[n]; returns the imported graph's output on `xs`.
Tensor onnx_cast(const std::vector<float>& xs, int to, int saturate) {
  auto m = model(23, 10);
  auto* g = m.mutable_graph();
  int64_t n = static_cast<int64_t>(xs.size());
  *g->add_input() = vi("x", TP::FLOAT, {n});
  *g->add_output() = vi("y", to, {n});
  auto* nd = add_node(g, "Cast", {"x"}, {"y"});
  attr_i(nd, "to", to);
  attr_i(nd, "saturate", saturate);
  return run(m, {Tensor::from<float>(DType::f32, {n}, xs)})[0];
}

}  // namespace

// ---- u16 / u32 / u64 --------------------------------------------------------------------------------

TEST(UnsignedDtypes, NamesSizesAndSets) {
  DType t;
  ASSERT_TRUE(parse_dtype("u64", &t));
  EXPECT_EQ(t, DType::u64);
  EXPECT_EQ(dtype_size(DType::u16), 2u);
  EXPECT_EQ(dtype_size(DType::u32), 4u);
  EXPECT_EQ(dtype_class(DType::u64), DClass::kUnsigned);
  EXPECT_TRUE(DTypeSet::ints().has(DType::u32));
  EXPECT_TRUE(DTypeSet::all().has(DType::u64));
}

TEST(UnsignedDtypes, U64CompareDivMaxAndConvertUseUnsignedValues) {
  const uint64_t big = (uint64_t{1} << 63) + 2;  // negative if read as int64
  Tensor a = u64s({big, 7, UINT64_MAX}), b = u64s({2, big, 1});
  Tensor q = run1(OpKind::Div, {a, b});
  EXPECT_EQ(q.get_uint(0), (uint64_t{1} << 62) + 1);
  EXPECT_EQ(q.get_uint(1), 0u);
  EXPECT_EQ(q.get_uint(2), UINT64_MAX);
  Tensor r = run1(OpKind::Rem, {a, b});
  EXPECT_EQ(r.get_uint(1), 7u);
  Tensor lt = run1(OpKind::Lt, {a, b});
  EXPECT_EQ(lt.get(0), 0);  // big < 2 is false
  EXPECT_EQ(lt.get(1), 1);  // 7 < big
  Tensor mx = run1(OpKind::Max, {a, b});
  EXPECT_EQ(mx.get_uint(0), big);
  EXPECT_EQ(mx.get_uint(1), big);
  Tensor f = run1(OpKind::Convert, {a}, {{"to", DType::f64}});
  EXPECT_EQ(f.get(2), 18446744073709551615.0);
  EXPECT_EQ(f.get(0), 9223372036854775810.0);
  Tensor back = run1(OpKind::Convert, {Tensor::from<double>(DType::f64, {2}, {1e19, -3})}, {{"to", DType::u64}});
  EXPECT_EQ(back.get_uint(0), 10000000000000000000ull);
  EXPECT_EQ(back.get_uint(1), 0u);  // saturates at 0
  // Add wraps modulo 2^64.
  Tensor s = run1(OpKind::Add, {u64s({UINT64_MAX}), u64s({2})});
  EXPECT_EQ(s.get_uint(0), 1u);
}

TEST(UnsignedDtypes, U64ReductionsAndSortOrderUnsigned) {
  Tensor a = u64s({5, uint64_t{1} << 63, 3});
  EXPECT_EQ(run1(OpKind::ReduceMax, {a}, {{"axes", std::vector<int64_t>{0}}}).get_uint(0), uint64_t{1} << 63);
  EXPECT_EQ(run1(OpKind::ReduceMin, {a}, {{"axes", std::vector<int64_t>{0}}}).get_uint(0), 3u);
  EXPECT_EQ(run1(OpKind::ArgMax, {a}, {{"axis", int64_t{0}}}).get_int(0), 1);
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::u64, to_shape({3}));
  auto o = b.op(OpKind::Sort, {x}, {{"axis", int64_t{0}}});
  b.output(o[0]);
  Tensor sorted = reference_run(g, {a})[0];
  EXPECT_EQ(sorted.get_uint(0), 3u);
  EXPECT_EQ(sorted.get_uint(2), uint64_t{1} << 63);
}

TEST(UnsignedDtypes, U32AndU16WrapAndCompile) {
  Tensor a = Tensor::from<double>(DType::u32, {2}, {4294967295.0, 3});
  Tensor one = Tensor::from<double>(DType::u32, {2}, {1, 5});
  Tensor s = run1(OpKind::Add, {a, one});
  EXPECT_EQ(s.get_int(0), 0);
  Tensor d = run1(OpKind::Sub, {one, a});  // 5 - 3 and 1 - (2^32-1) wraps to 2
  EXPECT_EQ(d.get_int(0), 2);
  EXPECT_EQ(d.get_int(1), 2);
  // The cpu device runs them (generic kernels).
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::u16, to_shape({3})), y = b.input("y", DType::u16, to_shape({3}));
  b.output(b.op(OpKind::Mul, {x, y})[0]);
  CompiledModel cm(std::move(g), CompileOptions{});
  std::vector<Tensor> ins{Tensor::from<double>(DType::u16, {3}, {300, 2, 65535}), Tensor::from<double>(DType::u16, {3}, {300, 3, 2})};
  auto out = cm.run(ins);
  EXPECT_EQ(out[0].get_int(0), (300 * 300) % 65536);
  EXPECT_EQ(out[0].get_int(1), 6);
  EXPECT_EQ(out[0].get_int(2), 65534);
}

TEST(UnsignedDtypes, TextFormRoundTripsU64PastInt64Max) {
  Graph g;
  Builder b(g);
  b.output(b.constant(u64s({UINT64_MAX, 1})));
  std::string txt = print_graph(g);
  EXPECT_NE(txt.find("18446744073709551615"), std::string::npos) << txt;
  Graph back = parse_graph(txt);
  Tensor t = reference_run(back, {})[0];
  EXPECT_EQ(t.get_uint(0), UINT64_MAX);
  EXPECT_EQ(t.get_uint(1), 1u);
}

// ---- storage-only ONNX types ------------------------------------------------------------------------

TEST(OnnxStorageTypes, DecodeKnownCodes) {
  using rlx::onnx::narrow_decode;
  // FLOAT8E4M3FN: bias 7, max 448 (S.1111.110), S.1111.111 is NaN, min subnormal 2^-9.
  EXPECT_EQ(narrow_decode(TP::FLOAT8E4M3FN, 0x7E), 448.0);
  EXPECT_EQ(narrow_decode(TP::FLOAT8E4M3FN, 0xFE), -448.0);
  EXPECT_TRUE(std::isnan(narrow_decode(TP::FLOAT8E4M3FN, 0x7F)));
  EXPECT_EQ(narrow_decode(TP::FLOAT8E4M3FN, 0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(narrow_decode(TP::FLOAT8E4M3FN, 0x38), 1.0);
  // FLOAT8E4M3FNUZ: bias 8, max 240, 0x80 is the NaN.
  EXPECT_EQ(narrow_decode(TP::FLOAT8E4M3FNUZ, 0x7F), 240.0);
  EXPECT_TRUE(std::isnan(narrow_decode(TP::FLOAT8E4M3FNUZ, 0x80)));
  EXPECT_EQ(narrow_decode(TP::FLOAT8E4M3FNUZ, 0x01), std::ldexp(1.0, -10));
  // FLOAT8E5M2: IEEE-like, max 57344, inf 0x7C, NaN 0x7D.., min subnormal 2^-16.
  EXPECT_EQ(narrow_decode(TP::FLOAT8E5M2, 0x7B), 57344.0);
  EXPECT_EQ(narrow_decode(TP::FLOAT8E5M2, 0xFC), -kInf);
  EXPECT_TRUE(std::isnan(narrow_decode(TP::FLOAT8E5M2, 0x7E)));
  EXPECT_EQ(narrow_decode(TP::FLOAT8E5M2, 0x01), std::ldexp(1.0, -16));
  // FLOAT8E5M2FNUZ: bias 16, max 57344 at 0x7F, NaN 0x80.
  EXPECT_EQ(narrow_decode(TP::FLOAT8E5M2FNUZ, 0x7F), 57344.0);
  EXPECT_TRUE(std::isnan(narrow_decode(TP::FLOAT8E5M2FNUZ, 0x80)));
  // FLOAT8E8M0: 2^(code-127), 0xFF NaN.
  EXPECT_EQ(narrow_decode(TP::FLOAT8E8M0, 127), 1.0);
  EXPECT_EQ(narrow_decode(TP::FLOAT8E8M0, 0), std::ldexp(1.0, -127));
  EXPECT_TRUE(std::isnan(narrow_decode(TP::FLOAT8E8M0, 0xFF)));
  // FLOAT4E2M1: {0, 0.5, 1, 1.5, 2, 3, 4, 6}.
  EXPECT_EQ(rlx::onnx::narrow_grid(TP::FLOAT4E2M1), (std::vector<double>{0, 0.5, 1, 1.5, 2, 3, 4, 6}));
  EXPECT_EQ(narrow_decode(TP::FLOAT4E2M1, 0xF), -6.0);
  // Two's complement int4/int2; unsigned uint4/uint2.
  EXPECT_EQ(narrow_decode(TP::INT4, 0x8), -8.0);
  EXPECT_EQ(narrow_decode(TP::INT4, 0x7), 7.0);
  EXPECT_EQ(narrow_decode(TP::UINT4, 0xF), 15.0);
  EXPECT_EQ(narrow_decode(TP::INT2, 0x2), -2.0);
  EXPECT_EQ(narrow_decode(TP::UINT2, 0x3), 3.0);
}

TEST(OnnxStorageTypes, RoundingFollowsTheSpecTables) {
  using rlx::onnx::narrow_round_value;
  // Saturating casts clamp to the largest finite value (inf included for the FN/FNUZ formats).
  expect_same(narrow_round_value(TP::FLOAT8E4M3FN, 1e9, true), 448, "e4m3fn sat");
  expect_same(narrow_round_value(TP::FLOAT8E4M3FN, -kInf, true), -448, "e4m3fn -inf sat");
  expect_same(narrow_round_value(TP::FLOAT8E5M2, kInf, true), 57344, "e5m2 inf sat");
  // Without saturation: E4M3FN/FNUZ overflow to NaN, E5M2 to inf; the top value keeps its tie.
  expect_same(narrow_round_value(TP::FLOAT8E4M3FN, 464, false), 448, "tie to even stays");
  expect_same(narrow_round_value(TP::FLOAT8E4M3FN, 465, false), kNaN, "overflow NaN");
  expect_same(narrow_round_value(TP::FLOAT8E4M3FNUZ, 248, false), kNaN, "fnuz tie goes up");
  expect_same(narrow_round_value(TP::FLOAT8E5M2, 61440, false), kInf, "e5m2 overflow inf");
  expect_same(narrow_round_value(TP::FLOAT8E5M2, -kInf, false), -kInf, "e5m2 keeps inf");
  expect_same(narrow_round_value(TP::FLOAT8E5M2FNUZ, kInf, false), kNaN, "fnuz inf NaN");
  // Round to nearest even on the grid, subnormals included.
  expect_same(narrow_round_value(TP::FLOAT8E4M3FN, 0.2, true), 0.203125, "0.2");
  expect_same(narrow_round_value(TP::FLOAT8E4M3FN, std::ldexp(1.0, -10), true), 0, "half the min subnormal");
  expect_same(narrow_round_value(TP::FLOAT8E4M3FN, std::ldexp(1.5, -9), true), std::ldexp(1.0, -8), "1.5 subnormals");
  expect_same(narrow_round_value(TP::FLOAT4E2M1, 5, true), 4, "f4 tie to even");
  expect_same(narrow_round_value(TP::FLOAT4E2M1, 100, false), 6, "f4 always saturates");
  // E8M0 rounds up to a power of two by default; 0 is its smallest value 2^-127.
  expect_same(narrow_round_value(TP::FLOAT8E8M0, 3, true), 4, "e8m0 up");
  expect_same(narrow_round_value(TP::FLOAT8E8M0, 4, true), 4, "e8m0 exact");
  expect_same(narrow_round_value(TP::FLOAT8E8M0, 3, true, "down"), 2, "e8m0 down");
  expect_same(narrow_round_value(TP::FLOAT8E8M0, 0, true), std::ldexp(1.0, -127), "e8m0 zero");
  expect_same(narrow_round_value(TP::FLOAT8E8M0, kInf, true), kNaN, "e8m0 inf");
  // Integers: round half to even, then saturate.
  expect_same(narrow_round_value(TP::INT4, 2.5, true), 2, "int4 2.5");
  expect_same(narrow_round_value(TP::INT4, -9, true), -8, "int4 clamp");
  expect_same(narrow_round_value(TP::UINT2, 7, true), 3, "uint2 clamp");
  // ... while Cast from a float truncates toward zero and saturates (ONNX: undefined out of range).
  expect_same(narrow_round_value(TP::INT4, -9, false), -8, "int4 saturate low");
  expect_same(narrow_round_value(TP::INT4, 8, false), 7, "int4 saturate high");
  expect_same(narrow_round_value(TP::INT4, -7.9, false), -7, "int4 trunc");
  expect_same(narrow_round_value(TP::UINT4, -2.5, false), 0, "uint4 trunc+saturate");
  expect_same(narrow_round_value(TP::INT2, 2.7, false), 1, "int2 trunc+saturate");
  expect_same(narrow_round_value(TP::UINT2, kNaN, false), 0, "uint2 NaN");
}

TEST(OnnxStorageTypes, ImportedCastMatchesHostRoundingOverASweep) {
  std::vector<float> xs = {0.f, -0.f, 1e-7f, -1e-3f, 0.0178f, 0.2f, 1.f, 1.0625f, 3.f, 5.f, 17.5f, 100.f, 239.f,
                           240.f, 247.f, 248.f, 300.f, 448.f, 464.f, 465.f, 500.f, 57344.f, 61440.f, 70000.f,
                           -3.5f, -460.f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN()};
  for (int t : {TP::FLOAT8E4M3FN, TP::FLOAT8E4M3FNUZ, TP::FLOAT8E5M2, TP::FLOAT8E5M2FNUZ, TP::FLOAT4E2M1,
                TP::FLOAT8E8M0, TP::INT4, TP::UINT4, TP::INT2, TP::UINT2})
    for (int sat : {0, 1}) {
      Tensor y = onnx_cast(xs, t, sat);
      ASSERT_EQ(y.numel(), static_cast<int64_t>(xs.size()));
      for (size_t i = 0; i < xs.size(); ++i) {
        bool fl = rlx::onnx::is_narrow_float(t);
        if (!std::isfinite(xs[i]) && !fl) continue;  // int formats: unspecified for NaN/inf
        expect_same(y.get(static_cast<int64_t>(i)), rlx::onnx::narrow_round_value(t, xs[i], fl && sat != 0),
                    rlx::onnx::onnx_dtype_name(t) + " sat=" + std::to_string(sat) + " x=" + std::to_string(xs[i]));
      }
    }
}

TEST(OnnxStorageTypes, PackedInitializersDecodeIntoTheCarrier) {
  ::onnx::TensorProto t;
  t.set_data_type(TP::INT4);
  t.add_dims(3);
  t.set_raw_data(std::string("\x8F\x01", 2));  // low nibble first: 0xF, 0x8, 0x1
  Tensor v = rlx::onnx::tensor_from_proto(t, "", "test");
  ASSERT_EQ(v.dtype(), DType::i32);
  EXPECT_EQ(v.get_int(0), -1);
  EXPECT_EQ(v.get_int(1), -8);
  EXPECT_EQ(v.get_int(2), 1);
  ::onnx::TensorProto u;
  u.set_data_type(TP::UINT2);
  u.add_dims(5);
  u.add_int32_data(0xE4);  // 0,1,2,3 packed two bits each; then 0x02
  u.add_int32_data(0x02);
  Tensor w = rlx::onnx::tensor_from_proto(u, "", "test");
  EXPECT_EQ(w.get_int(0), 0);
  EXPECT_EQ(w.get_int(3), 3);
  EXPECT_EQ(w.get_int(4), 2);
  ::onnx::TensorProto f;
  f.set_data_type(TP::FLOAT8E5M2);
  f.add_dims(2);
  f.add_int32_data(0x3C);  // 1.0
  f.add_int32_data(0xFC);  // -inf
  Tensor fv = rlx::onnx::tensor_from_proto(f, "", "test");
  EXPECT_EQ(fv.dtype(), DType::f32);
  EXPECT_EQ(fv.get(0), 1.0);
  EXPECT_EQ(fv.get(1), -kInf);
  ::onnx::TensorProto big;
  big.set_data_type(TP::UINT64);
  big.add_dims(1);
  big.add_uint64_data(UINT64_MAX);
  EXPECT_EQ(rlx::onnx::tensor_from_proto(big, "", "test").get_uint(0), UINT64_MAX);
}
