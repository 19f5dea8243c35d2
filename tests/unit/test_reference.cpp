// The reference interpreter against hand-computed expectations.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ir/rng.h"
#include "rlx/builder.h"
#include "rlx/reference.h"

using namespace rlx;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

Tensor T(DType dt, std::vector<int64_t> shape, std::vector<double> v) { return Tensor::from(dt, std::move(shape), v); }

Tensor I64(std::vector<int64_t> shape, std::vector<int64_t> v) {
  Tensor t(DType::i64, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) t.set_int(static_cast<int64_t>(i), v[i]);
  return t;
}

std::vector<double> vals(const Tensor& t) {
  std::vector<double> r;
  for (int64_t i = 0; i < t.numel(); ++i) r.push_back(t.get(i));
  return r;
}

std::vector<int64_t> ivals(const Tensor& t) {
  std::vector<int64_t> r;
  for (int64_t i = 0; i < t.numel(); ++i) r.push_back(t.get_int(i));
  return r;
}

// Runs one op through reference_run: graph inputs typed from the given tensors.
std::vector<Tensor> run(OpKind k, const std::vector<Tensor>& ins, Attrs a = {}) {
  Graph g;
  Builder b(g);
  std::vector<ValueId> ids;
  for (size_t i = 0; i < ins.size(); ++i)
    ids.push_back(b.input("in" + std::to_string(i), ins[i].dtype(), to_shape(ins[i].shape())));
  for (auto v : b.op(k, ids, std::move(a))) b.output(v);
  return reference_run(g, ins);
}
Tensor run1(OpKind k, const std::vector<Tensor>& ins, Attrs a = {}) { return run(k, ins, std::move(a))[0]; }

void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) EXPECT_TRUE(std::isnan(got[i])) << "at " << i << ": " << got[i];
    else if (std::isinf(want[i])) EXPECT_EQ(got[i], want[i]) << "at " << i;
    else EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
  }
}

std::vector<int64_t> shape_of(const Tensor& t) { return t.shape(); }

}  // namespace

TEST(Reference, IntegerArithmeticWraps) {
  auto a = T(DType::i8, {4}, {100, -128, 16, 0}), b = T(DType::i8, {4}, {100, -1, 16, 1});
  EXPECT_EQ(ivals(run1(OpKind::Add, {a, b})), (std::vector<int64_t>{-56, 127, 32, 1}));
  EXPECT_EQ(ivals(run1(OpKind::Mul, {a, b})), (std::vector<int64_t>{16, -128, 0, 0}));
  EXPECT_EQ(ivals(run1(OpKind::Neg, {a})), (std::vector<int64_t>{-100, -128, -16, 0}));
  EXPECT_EQ(ivals(run1(OpKind::Abs, {a})), (std::vector<int64_t>{100, -128, 16, 0}));
  auto u = T(DType::u8, {2}, {0, 200}), v = T(DType::u8, {2}, {1, 100});
  EXPECT_EQ(ivals(run1(OpKind::Sub, {u, v})), (std::vector<int64_t>{255, 100}));
  EXPECT_EQ(ivals(run1(OpKind::Add, {u, v})), (std::vector<int64_t>{1, 44}));
  // i64 is exact at the extremes (no trip through double).
  int64_t mx = std::numeric_limits<int64_t>::max();
  auto r = run1(OpKind::Add, {I64({2}, {mx, mx - 1}), I64({2}, {1, 0})});
  EXPECT_EQ(ivals(r), (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), mx - 1}));
}

TEST(Reference, IntegerDivRemTruncateAndByZero) {
  auto a = T(DType::i32, {6}, {7, -7, 7, 5, -2147483648.0, -7});
  auto b = T(DType::i32, {6}, {-2, 2, 2, 0, -1, 0});
  EXPECT_EQ(ivals(run1(OpKind::Div, {a, b})), (std::vector<int64_t>{-3, -3, 3, 0, -2147483648LL, 0}));
  EXPECT_EQ(ivals(run1(OpKind::Rem, {a, b})), (std::vector<int64_t>{1, -1, 1, 0, 0, 0}));
  auto f = run1(OpKind::Rem, {T(DType::f32, {2}, {-7, 7}), T(DType::f32, {2}, {2, -2})});
  expect_near(vals(f), {-1, 1});
}

TEST(Reference, NaNPropagatesThroughMaxMin) {
  auto a = T(DType::f32, {4}, {kNaN, 1, 3, -0.0}), b = T(DType::f32, {4}, {1, kNaN, 2, 0.0});
  expect_near(vals(run1(OpKind::Max, {a, b})), {kNaN, kNaN, 3, 0});
  expect_near(vals(run1(OpKind::Min, {a, b})), {kNaN, kNaN, 2, 0});
  auto m = run1(OpKind::ReduceMax, {T(DType::f32, {2, 2}, {1, kNaN, 2, 3})}, {{"axes", std::vector<int64_t>{1}}});
  expect_near(vals(m), {kNaN, 3});
  auto mn = run1(OpKind::ReduceMin, {T(DType::f64, {3}, {5, kNaN, -1})}, {{"axes", std::vector<int64_t>{0}}});
  expect_near(vals(mn), {kNaN});
}

TEST(Reference, BinaryBroadcasting) {
  auto r = run1(OpKind::Sub, {T(DType::f32, {2, 1}, {10, 20}), T(DType::f32, {3}, {1, 2, 3})});
  EXPECT_EQ(shape_of(r), (std::vector<int64_t>{2, 3}));
  expect_near(vals(r), {9, 8, 7, 19, 18, 17});
  auto p = T(DType::boolean, {2, 1}, {1, 0});
  auto s = run1(OpKind::Select, {p, T(DType::i32, {3}, {1, 2, 3}), T(DType::i32, {}, {-5})});
  EXPECT_EQ(ivals(s), (std::vector<int64_t>{1, 2, 3, -5, -5, -5}));
  auto c = run1(OpKind::Lt, {T(DType::f32, {3}, {1, kNaN, 3}), T(DType::f32, {1}, {2})});
  EXPECT_EQ(c.dtype(), DType::boolean);
  EXPECT_EQ(vals(c), (std::vector<double>{1, 0, 0}));
  EXPECT_EQ(vals(run1(OpKind::Ne, {T(DType::f32, {1}, {kNaN}), T(DType::f32, {1}, {kNaN})})), (std::vector<double>{1}));
}

TEST(Reference, LogicalAndBitwise) {
  auto a = T(DType::boolean, {4}, {0, 0, 1, 1}), b = T(DType::boolean, {4}, {0, 1, 0, 1});
  EXPECT_EQ(vals(run1(OpKind::And, {a, b})), (std::vector<double>{0, 0, 0, 1}));
  EXPECT_EQ(vals(run1(OpKind::Or, {a, b})), (std::vector<double>{0, 1, 1, 1}));
  EXPECT_EQ(vals(run1(OpKind::Xor, {a, b})), (std::vector<double>{0, 1, 1, 0}));
  EXPECT_EQ(vals(run1(OpKind::Not, {a})), (std::vector<double>{1, 1, 0, 0}));
  auto x = T(DType::i32, {2}, {12, -1}), y = T(DType::i32, {2}, {10, 5});
  EXPECT_EQ(ivals(run1(OpKind::And, {x, y})), (std::vector<int64_t>{8, 5}));
  EXPECT_EQ(ivals(run1(OpKind::Or, {x, y})), (std::vector<int64_t>{14, -1}));
  EXPECT_EQ(ivals(run1(OpKind::Xor, {x, y})), (std::vector<int64_t>{6, -6}));
  EXPECT_EQ(ivals(run1(OpKind::Not, {x})), (std::vector<int64_t>{-13, 0}));
  EXPECT_EQ(ivals(run1(OpKind::Not, {T(DType::u8, {2}, {0, 15})})), (std::vector<int64_t>{255, 240}));
}

TEST(Reference, ConvertRules) {
  auto f = T(DType::f32, {5}, {300, -3.7, kNaN, -1000, 0.5});
  EXPECT_EQ(ivals(run1(OpKind::Convert, {f}, {{"to", DType::i8}})), (std::vector<int64_t>{127, -3, 0, -128, 0}));
  EXPECT_EQ(vals(run1(OpKind::Convert, {f}, {{"to", DType::boolean}})), (std::vector<double>{1, 1, 1, 1, 1}));
  EXPECT_EQ(ivals(run1(OpKind::Convert, {T(DType::i32, {2}, {300, -129})}, {{"to", DType::i8}})),
            (std::vector<int64_t>{44, 127}));
  Tensor c(DType::c64, {1});
  c.setc(0, {2.5, -1});
  EXPECT_EQ(vals(run1(OpKind::Convert, {c}, {{"to", DType::f32}})), (std::vector<double>{2.5}));
  auto back = run1(OpKind::Convert, {T(DType::f32, {1}, {3})}, {{"to", DType::c64}});
  EXPECT_EQ(back.getc(0), std::complex<double>(3, 0));
  // f64 -> f16 rounds once from double: 1 + 2^-11 + 2^-40 is just above the tie, so it rounds up,
  // where a trip through f32 would land on the tie and round down to 1.
  auto h = run1(OpKind::Convert, {T(DType::f64, {3}, {1 + std::ldexp(1, -11) + std::ldexp(1, -40),
                                                       1 + std::ldexp(1, -11), 1 + 3 * std::ldexp(1, -11)})},
                {{"to", DType::f16}});
  EXPECT_EQ(vals(h), (std::vector<double>{1 + std::ldexp(1, -10), 1, 1 + std::ldexp(1, -9)}));
}

TEST(Reference, UnaryMath) {
  expect_near(vals(run1(OpKind::Round, {T(DType::f32, {5}, {0.5, 1.5, 2.5, -0.5, -2.6})})), {0, 2, 2, 0, -3});
  expect_near(vals(run1(OpKind::Sign, {T(DType::f32, {4}, {kNaN, -3, 0, 7})})), {kNaN, -1, 0, 1});
  EXPECT_EQ(ivals(run1(OpKind::Sign, {T(DType::i16, {3}, {-9, 0, 4})})), (std::vector<int64_t>{-1, 0, 1}));
  expect_near(vals(run1(OpKind::Logistic, {T(DType::f64, {2}, {0, std::log(3.0)})})), {0.5, 0.75}, 1e-12);
  expect_near(vals(run1(OpKind::Rsqrt, {T(DType::f32, {1}, {4})})), {0.5});
  expect_near(vals(run1(OpKind::Erf, {T(DType::f64, {1}, {1})})), {0.8427007929497149}, 1e-12);
  EXPECT_EQ(vals(run1(OpKind::IsNan, {T(DType::bf16, {2}, {kNaN, 1})})), (std::vector<double>{1, 0}));
  Tensor c(DType::c64, {1});
  c.setc(0, {0, M_PI});
  auto e = run1(OpKind::Exp, {c});
  EXPECT_NEAR(e.getc(0).real(), -1, 1e-6);
  EXPECT_NEAR(e.getc(0).imag(), 0, 1e-6);
  c.setc(0, {3, -4});
  EXPECT_EQ(vals(run1(OpKind::Imag, {c})), (std::vector<double>{-4}));
  EXPECT_EQ(run1(OpKind::Conj, {c}).getc(0), std::complex<double>(3, 4));
  EXPECT_EQ(run1(OpKind::Sqrt, {c}).getc(0), std::complex<double>(2, -1));
}

TEST(Reference, Reductions) {
  auto x = T(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto s = run1(OpKind::ReduceSum, {x}, {{"axes", std::vector<int64_t>{-1}}, {"keepdims", 1}});
  EXPECT_EQ(shape_of(s), (std::vector<int64_t>{2, 1}));
  expect_near(vals(s), {6, 15});
  expect_near(vals(run1(OpKind::ReduceProd, {x}, {{"axes", std::vector<int64_t>{0}}})), {4, 10, 18});
  auto id = run1(OpKind::ReduceSum, {x}, {{"axes", std::vector<int64_t>{}}});
  EXPECT_EQ(shape_of(id), (std::vector<int64_t>{2, 3}));
  expect_near(vals(id), {1, 2, 3, 4, 5, 6});
  expect_near(vals(run1(OpKind::ReduceMean, {x}, {{"axes", std::vector<int64_t>{0, 1}}})), {3.5});
  // Zero-size extent: identities.
  auto z = Tensor(DType::f32, {2, 0});
  Attrs ax1{{"axes", std::vector<int64_t>{1}}};
  expect_near(vals(run1(OpKind::ReduceSum, {z}, ax1)), {0, 0});
  expect_near(vals(run1(OpKind::ReduceProd, {z}, ax1)), {1, 1});
  expect_near(vals(run1(OpKind::ReduceMax, {z}, ax1)), {-kInf, -kInf});
  expect_near(vals(run1(OpKind::ReduceMin, {z}, ax1)), {kInf, kInf});
  auto zi = Tensor(DType::i8, {1, 0});
  EXPECT_EQ(ivals(run1(OpKind::ReduceMax, {zi}, ax1)), (std::vector<int64_t>{-128}));
  EXPECT_EQ(ivals(run1(OpKind::ReduceMin, {zi}, ax1)), (std::vector<int64_t>{127}));
  // Integer sums wrap.
  EXPECT_EQ(ivals(run1(OpKind::ReduceSum, {T(DType::i8, {3}, {100, 100, 1})}, {{"axes", std::vector<int64_t>{0}}})),
            (std::vector<int64_t>{-55}));
}

TEST(Reference, ArgMaxFirstIndex) {
  auto x = T(DType::f32, {2, 4}, {1, 5, 5, 0, 2, kNaN, 9, kNaN});
  auto am = run1(OpKind::ArgMax, {x}, {{"axis", 1}});
  EXPECT_EQ(am.dtype(), DType::i64);
  EXPECT_EQ(ivals(am), (std::vector<int64_t>{1, 1}));
  auto an = run1(OpKind::ArgMin, {T(DType::i32, {2, 3}, {3, 1, 1, 0, 0, 2})}, {{"axis", -1}, {"keepdims", 1}});
  EXPECT_EQ(shape_of(an), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(ivals(an), (std::vector<int64_t>{1, 0}));
}

TEST(Reference, CumsumReverseExclusive) {
  auto x = T(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  expect_near(vals(run1(OpKind::Cumsum, {x}, {{"axis", 1}})), {1, 3, 6, 4, 9, 15});
  expect_near(vals(run1(OpKind::Cumsum, {x}, {{"axis", 1}, {"reverse", 1}})), {6, 5, 3, 15, 11, 6});
  expect_near(vals(run1(OpKind::Cumsum, {x}, {{"axis", 0}, {"exclusive", 1}})), {0, 0, 0, 1, 2, 3});
  expect_near(vals(run1(OpKind::Cumsum, {x}, {{"axis", 1}, {"reverse", 1}, {"exclusive", 1}})), {5, 3, 0, 11, 6, 0});
}

TEST(Reference, DotGeneralDimOrder) {
  // lhs [k=2, m=3], rhs [n=2, k=2]: out[m, n] = sum_k lhs[k, m] * rhs[n, k].
  auto l = T(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6}), r = T(DType::f32, {2, 2}, {1, 10, 100, 1000});
  auto o = run1(OpKind::DotGeneral, {l, r}, {{"lhs_contract", std::vector<int64_t>{0}}, {"rhs_contract", std::vector<int64_t>{-1}}});
  EXPECT_EQ(shape_of(o), (std::vector<int64_t>{3, 2}));
  expect_near(vals(o), {41, 4100, 52, 5200, 63, 6300});
  // Batch dim last in rhs: lhs [b=2, m=1, k=2], rhs [k=2, n=1, b=2] -> out [b, m, n].
  auto lb = T(DType::i64, {2, 1, 2}, {1, 2, 3, 4}), rb = T(DType::i64, {2, 1, 2}, {10, 100, 20, 200});
  auto ob = run1(OpKind::DotGeneral, {lb, rb},
                 {{"lhs_batch", std::vector<int64_t>{0}}, {"rhs_batch", std::vector<int64_t>{2}},
                  {"lhs_contract", std::vector<int64_t>{2}}, {"rhs_contract", std::vector<int64_t>{0}}});
  EXPECT_EQ(shape_of(ob), (std::vector<int64_t>{2, 1, 1}));
  // b=0: 1*10 + 2*20 = 50; b=1: 3*100 + 4*200 = 1100.
  EXPECT_EQ(ivals(ob), (std::vector<int64_t>{50, 1100}));
}

TEST(Reference, MatmulPromotionAndBroadcast) {
  auto a = T(DType::f32, {2}, {1, 2}), m = T(DType::f32, {2, 2}, {1, 2, 3, 4});
  auto v = run1(OpKind::MatMul, {a, m});
  EXPECT_EQ(shape_of(v), (std::vector<int64_t>{2}));
  expect_near(vals(v), {7, 10});
  expect_near(vals(run1(OpKind::MatMul, {m, a})), {5, 11});
  auto bt = T(DType::f32, {2, 1, 2}, {1, 0, 0, 1});  // batch of two row vectors
  auto o = run1(OpKind::MatMul, {bt, m});
  EXPECT_EQ(shape_of(o), (std::vector<int64_t>{2, 1, 2}));
  expect_near(vals(o), {1, 2, 3, 4});
}

TEST(Reference, LinearWithActivation) {
  auto x = T(DType::f32, {1, 2}, {1, 2}), w = T(DType::f32, {2, 2}, {1, 1, -1, -1}), b = T(DType::f32, {2}, {0.5, 0});
  Graph g;
  Builder bl(g);
  auto xi = bl.input("x", DType::f32, {1, 2}), wi = bl.input("w", DType::f32, {2, 2}), bi = bl.input("b", DType::f32, {2});
  bl.output(bl.linear(xi, wi, bi, "relu"));
  bl.output(bl.linear(xi, wi, -1, "silu"));
  auto r = reference_run(g, {x, w, b});
  expect_near(vals(r[0]), {3.5, 0});
  expect_near(vals(r[1]), {3 / (1 + std::exp(-3.0)), -3 / (1 + std::exp(3.0))});
}

TEST(Reference, ConvGroupsPaddingDilation) {
  auto x = T(DType::f32, {1, 2, 5}, {1, 2, 3, 4, 5, 10, 20, 30, 40, 50});
  auto w = T(DType::f32, {2, 1, 2}, {1, 2, 3, 4});
  Attrs a{{"pads", std::vector<int64_t>{1, 1}}, {"dilations", std::vector<int64_t>{2}}, {"groups", 2}};
  auto o = run1(OpKind::Conv, {x, w}, a);
  EXPECT_EQ(shape_of(o), (std::vector<int64_t>{1, 2, 5}));
  expect_near(vals(o), {4, 7, 10, 13, 4, 80, 150, 220, 290, 120});
  auto ob = run1(OpKind::Convolution, {x, w, T(DType::f32, {2}, {0.5, -1})}, a);
  expect_near(vals(ob), {4.5, 7.5, 10.5, 13.5, 4.5, 79, 149, 219, 289, 119});
  // 2-D, stride 2, one group mixing both channels: w sums the two channels' single tap.
  auto x2 = T(DType::f32, {1, 2, 2, 3}, {1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60});
  auto w2 = T(DType::f32, {1, 2, 1, 1}, {1, -1});
  auto o2 = run1(OpKind::Conv, {x2, w2}, {{"strides", std::vector<int64_t>{1, 2}}});
  EXPECT_EQ(shape_of(o2), (std::vector<int64_t>{1, 1, 2, 2}));
  expect_near(vals(o2), {-9, -27, -36, -54});
}

TEST(Reference, PoolingPads) {
  auto x = T(DType::f32, {1, 1, 2, 2}, {1, 2, 3, 4});
  Attrs a{{"kernel", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  expect_near(vals(run1(OpKind::MaxPool, {x}, a)), {1, 2, 2, 3, 4, 4, 3, 4, 4});
  expect_near(vals(run1(OpKind::AvgPool, {x}, a)), {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4});
  Attrs inc = a;
  inc["count_include_pad"] = 1;
  expect_near(vals(run1(OpKind::AvgPool, {x}, inc)), {0.25, 0.75, 0.5, 1, 2.5, 1.5, 0.75, 1.75, 1});
  // Max padding is -inf: negative inputs still win at the borders.
  auto neg = T(DType::f32, {1, 1, 2, 2}, {-1, -2, -3, -4});
  expect_near(vals(run1(OpKind::MaxPool, {neg}, a)), {-1, -1, -2, -1, -1, -2, -3, -3, -4});
  auto gp = run1(OpKind::GlobalAvgPool, {x});
  EXPECT_EQ(shape_of(gp), (std::vector<int64_t>{1, 1, 1, 1}));
  expect_near(vals(gp), {2.5});
  // reduce_window over every dim, stride 2, pads [begin 1, end 0].
  auto rw = run1(OpKind::ReduceWindow, {T(DType::i32, {4}, {1, 2, 3, 4})},
                 {{"kind", "sum"}, {"window", std::vector<int64_t>{2}}, {"strides", std::vector<int64_t>{2}},
                  {"pads", std::vector<int64_t>{1, 1}}});
  EXPECT_EQ(ivals(rw), (std::vector<int64_t>{1, 5, 4}));
  auto rmin = run1(OpKind::ReduceWindow, {T(DType::f32, {3}, {5, 6, 7})},
                   {{"kind", "min"}, {"window", std::vector<int64_t>{2}}, {"pads", std::vector<int64_t>{1, 0}}});
  expect_near(vals(rmin), {5, 5, 6});
}

TEST(Reference, AttentionCausalShortQueryAndMaskedRows) {
  // S=2 < T=3, scores all 0: weights uniform over the allowed keys.
  auto q = T(DType::f32, {1, 1, 2, 1}, {1, 1}), k = T(DType::f32, {1, 1, 3, 1}, {0, 0, 0});
  auto v = T(DType::f32, {1, 1, 3, 1}, {1, 2, 4});
  expect_near(vals(run1(OpKind::Attention, {q, k, v}, {{"mask", "causal"}})), {1.5, 7.0 / 3});
  expect_near(vals(run1(OpKind::Attention, {q, k, v})), {7.0 / 3, 7.0 / 3});
  auto pm = T(DType::boolean, {1, 3}, {1, 0, 1});
  expect_near(vals(run1(OpKind::Attention, {q, k, v, pm}, {{"mask", "causal_padding"}})), {1, 2.5});
  expect_near(vals(run1(OpKind::Attention, {q, k, v, T(DType::i32, {1, 3}, {0, 0, 0})}, {{"mask", "padding"}})),
              {0, 0});
}

TEST(Reference, AttentionScaleBiasAndGQA) {
  auto q = T(DType::f64, {1, 1, 1, 1}, {1}), k = T(DType::f64, {1, 1, 2, 1}, {0, std::log(3.0)});
  auto v = T(DType::f64, {1, 1, 2, 1}, {0, 4});
  expect_near(vals(run1(OpKind::Attention, {q, k, v})), {3}, 1e-12);  // weights 1:3
  expect_near(vals(run1(OpKind::Attention, {q, k, v}, {{"scale", 2.0}})), {3.6}, 1e-12);  // 1:9
  auto bias = T(DType::f64, {2}, {std::log(3.0), 0});  // broadcast over [B,H,S,T]: cancels the scores
  expect_near(vals(run1(OpKind::Attention, {q, k, v, bias}, {{"mask", "bias"}})), {2}, 1e-12);
  // GQA: 4 query heads over 2 kv heads; heads 0,1 read kv 0 and heads 2,3 read kv 1.
  auto q4 = T(DType::f32, {1, 4, 1, 1}, {1, 1, 1, 1}), k2 = T(DType::f32, {1, 2, 1, 1}, {1, 1});
  auto v2 = T(DType::f32, {1, 2, 1, 1}, {5, 7});
  expect_near(vals(run1(OpKind::Attention, {q4, k2, v2})), {5, 5, 7, 7});
}

TEST(Reference, RopeBothLayouts) {
  auto x = T(DType::f64, {1, 1, 1, 4}, {1, 2, 3, 4});
  auto pos = T(DType::i32, {1}, {2});
  double c0 = std::cos(2.0), s0 = std::sin(2.0), c1 = std::cos(0.2), s1 = std::sin(0.2);  // theta=100
  auto half = run1(OpKind::Rope, {x, pos}, {{"theta", 100.0}});
  expect_near(vals(half), {1 * c0 - 3 * s0, 2 * c1 - 4 * s1, 3 * c0 + 1 * s0, 4 * c1 + 2 * s1}, 1e-12);
  auto inter = run1(OpKind::Rope, {x, pos}, {{"theta", 100.0}, {"interleaved", 1}});
  expect_near(vals(inter), {1 * c0 - 2 * s0, 2 * c0 + 1 * s0, 3 * c1 - 4 * s1, 4 * c1 + 3 * s1}, 1e-12);
}

TEST(Reference, SortAndTopKTies) {
  auto x = T(DType::f32, {4}, {3, 1, 3, 2});
  auto t = run(OpKind::TopK, {x}, {{"k", 2}});
  expect_near(vals(t[0]), {3, 3});
  EXPECT_EQ(ivals(t[1]), (std::vector<int64_t>{0, 2}));
  auto s = run(OpKind::TopK, {T(DType::i32, {3}, {2, 1, 1})}, {{"k", 2}, {"largest", 0}});
  EXPECT_EQ(ivals(s[0]), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(ivals(s[1]), (std::vector<int64_t>{1, 2}));
  auto srt = run(OpKind::Sort, {T(DType::f32, {4}, {kNaN, 1, -1, 1})});
  expect_near(vals(srt[0]), {-1, 1, 1, kNaN});
  EXPECT_EQ(ivals(srt[1]), (std::vector<int64_t>{2, 1, 3, 0}));
  auto d = run(OpKind::Sort, {T(DType::f32, {2, 2}, {1, 4, 2, 3})}, {{"axis", 0}, {"descending", 1}});
  expect_near(vals(d[0]), {2, 4, 1, 3});
  EXPECT_EQ(ivals(d[1]), (std::vector<int64_t>{1, 0, 0, 1}));
}

TEST(Reference, GatherScatterAndErrors) {
  auto x = T(DType::f32, {2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto g = run1(OpKind::Gather, {x, I64({2}, {-1, 1})}, {{"axis", 1}});
  EXPECT_EQ(shape_of(g), (std::vector<int64_t>{2, 2}));
  expect_near(vals(g), {4, 1, 9, 6});
  try {
    run1(OpKind::Gather, {x, I64({1}, {7})}, {{"axis", 1}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[reference] gather index 7 out of range [0,5)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(run1(OpKind::Gather, {x, I64({1}, {-6})}, {{"axis", 1}}), Error);
  auto sa = run1(OpKind::ScatterAdd, {T(DType::i32, {3}, {1, 1, 1}), I64({3}, {0, 2, 0}), T(DType::i32, {3}, {10, 20, 30})});
  EXPECT_EQ(ivals(sa), (std::vector<int64_t>{41, 1, 21}));
  auto emb = run1(OpKind::Embedding, {T(DType::f32, {3, 2}, {0, 1, 10, 11, 20, 21}), T(DType::i32, {2}, {2, 0})});
  expect_near(vals(emb), {20, 21, 0, 1});
  EXPECT_THROW(run1(OpKind::Embedding, {T(DType::f32, {3, 2}, {0, 1, 10, 11, 20, 21}), T(DType::i32, {1}, {3})}), Error);
}

TEST(Reference, Movement) {
  auto x = T(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto tr = run1(OpKind::Transpose, {x}, {{"perm", std::vector<int64_t>{1, 0}}});
  EXPECT_EQ(shape_of(tr), (std::vector<int64_t>{3, 2}));
  expect_near(vals(tr), {1, 4, 2, 5, 3, 6});
  auto sl = run1(OpKind::Slice, {x}, {{"start", std::vector<int64_t>{0, 0}}, {"limit", std::vector<int64_t>{2, 99}},
                                      {"stride", std::vector<int64_t>{1, 2}}});
  expect_near(vals(sl), {1, 3, 4, 6});
  auto pd = run1(OpKind::Pad, {x}, {{"low", std::vector<int64_t>{0, -1}}, {"high", std::vector<int64_t>{1, 1}}, {"value", 9.0}});
  EXPECT_EQ(shape_of(pd), (std::vector<int64_t>{3, 3}));
  expect_near(vals(pd), {2, 3, 9, 5, 6, 9, 9, 9, 9});
  auto cc = run1(OpKind::Concatenate, {x, T(DType::f32, {2, 1}, {7, 8})}, {{"axis", -1}});
  expect_near(vals(cc), {1, 2, 3, 7, 4, 5, 6, 8});
  auto bd = run1(OpKind::BroadcastInDim, {T(DType::f32, {2, 1}, {1, 2})},
                 {{"shape", Shape{3, 2, 2}}, {"dims", std::vector<int64_t>{1, 2}}});
  expect_near(vals(bd), {1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 2, 2});
  auto ex = run1(OpKind::Expand, {T(DType::i8, {3, 1}, {1, 2, 3})}, {{"shape", Shape{2, 1, 2}}});
  EXPECT_EQ(shape_of(ex), (std::vector<int64_t>{2, 3, 2}));
  EXPECT_EQ(ivals(ex), (std::vector<int64_t>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  auto io = run1(OpKind::Iota, {}, {{"shape", Shape{2, 3}}, {"dim", 1}, {"dtype", DType::i32}});
  EXPECT_EQ(ivals(io), (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
}

TEST(Reference, NormsAndSoftmax) {
  auto x = T(DType::f64, {1, 2}, {1, 3});
  auto ln = run1(OpKind::LayerNorm, {x, T(DType::f64, {2}, {1, 2}), T(DType::f64, {2}, {0, 1})}, {{"eps", 0.0}});
  expect_near(vals(ln), {-1, 3}, 1e-12);
  auto rms = run1(OpKind::RmsNorm, {x, T(DType::f64, {2}, {1, 1})}, {{"eps", 0.0}});
  expect_near(vals(rms), {1 / std::sqrt(5.0), 3 / std::sqrt(5.0)}, 1e-12);
  auto sm = run1(OpKind::Softmax, {T(DType::f64, {1, 2}, {1000, 1000 + std::log(3.0)})});
  expect_near(vals(sm), {0.25, 0.75});
  auto ls = run1(OpKind::LogSoftmax, {T(DType::f64, {2}, {0, std::log(3.0)})}, {{"axis", 0}});
  expect_near(vals(ls), {std::log(0.25), std::log(0.75)}, 1e-12);
  auto ge = run1(OpKind::Gelu, {T(DType::f64, {1}, {1})});
  expect_near(vals(ge), {0.8413447460685429}, 1e-12);
  auto gt = run1(OpKind::Gelu, {T(DType::f64, {1}, {1})}, {{"approximate", "tanh"}});
  expect_near(vals(gt), {0.8411919906082768}, 1e-12);
}

TEST(Reference, RngUniformIsCounterBased) {
  auto r = run1(OpKind::RngUniform, {}, {{"shape", Shape{4}}, {"dtype", DType::f64}, {"seed", 42}, {"low", -1.0}, {"high", 3.0}});
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(r.get(i), -1.0 + 4.0 * rng_uniform_at(42, i));
    EXPECT_GE(r.get(i), -1.0);
    EXPECT_LT(r.get(i), 3.0);
  }
  EXPECT_NE(r.get(0), r.get(1));
  // First value of SplitMix64 for seed 0: z = 0x9E3779B97F4A7C15 mixed -> 0xE220A8397B1DCDAF.
  EXPECT_EQ(rng_uniform_at(0, 0), static_cast<double>(0xE220A8397B1DCDAFull >> 11) * 0x1.0p-53);
}

TEST(Reference, RunBindsSymbolicDims) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, {"batch", 2});
  auto y = b.input("y", DType::f32, {"batch", 2});
  auto s = b.add(x, y);
  b.output(b.reshape(s, {"batch", 2, 1}));
  b.output(b.reduce(OpKind::ReduceSum, s, {0}, false));
  auto r = reference_run(g, {T(DType::f32, {3, 2}, {1, 2, 3, 4, 5, 6}), T(DType::f32, {3, 2}, {1, 1, 1, 1, 1, 1})});
  EXPECT_EQ(shape_of(r[0]), (std::vector<int64_t>{3, 2, 1}));
  expect_near(vals(r[0]), {2, 3, 4, 5, 6, 7});
  expect_near(vals(r[1]), {12, 15});
  // A second input disagreeing on 'batch' is named in the error.
  try {
    reference_run(g, {T(DType::f32, {3, 2}, {1, 2, 3, 4, 5, 6}), T(DType::f32, {2, 2}, {1, 1, 1, 1})});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("input 'y'"), std::string::npos) << m;
    EXPECT_NE(m.find("batch"), std::string::npos) << m;
  }
  try {
    reference_run(g, {T(DType::f32, {3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}), T(DType::f32, {3, 2}, {1, 1, 1, 1, 1, 1})});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 'x'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(reference_run(g, {T(DType::f64, {1, 2}, {1, 2}), T(DType::f32, {1, 2}, {1, 2})}), Error);
  EXPECT_THROW(reference_run(g, {T(DType::f32, {1, 2}, {1, 2})}), Error);
}

TEST(Reference, EvalInfersTypesWhenNotGiven) {
  Graph g;
  Builder b(g);
  auto a = b.input("a", DType::i32, {2});
  b.mul(a, a);
  auto out = reference_eval(g.nodes[0], {T(DType::i32, {2}, {3, -4}), T(DType::i32, {2}, {5, 6})}, {});
  EXPECT_EQ(ivals(out[0]), (std::vector<int64_t>{15, -24}));
}
