// Decompositions of the affine int8 ops (incl. qlinear, qconv) into MIR, for devices without an int8 kernel. The fixed-point
// requantize becomes exact i64 arithmetic: p = acc * m; q = p / 2^(31+shift) truncated; the remainder
// decides the one rounding step (src/quant/fixed_point.h defines the result these graphs reproduce).
#include "passes/decompose/common.h"
#include "quant/fixed_point.h"

namespace rlx {

using namespace decomp;

namespace {

// A rank-0 or [C] per-channel value broadcast to `d` (the channel at `axis`).
ValueId per_channel(Builder& b, ValueId v, const Ints& d, int64_t axis) {
  if (b.rank(v) == 0) return broadcast_to(b, v, d);
  return b.broadcast_in_dim(v, to_shape(d), {axis});
}

// i64 constant of 1 (per tensor, rank 0) or C entries broadcast along `axis` of `d`.
ValueId i64_channels(Builder& b, const Ints& vals, const Ints& d, int64_t axis) {
  if (vals.size() == 1) return b.scalar(static_cast<double>(vals[0]), DType::i64);
  Tensor t(DType::i64, {static_cast<int64_t>(vals.size())});
  for (size_t i = 0; i < vals.size(); ++i) t.data<int64_t>()[i] = vals[i];
  return b.broadcast_in_dim(b.constant(t), to_shape(d), {axis});
}

ValueId cmp(Builder& b, OpKind k, ValueId x, ValueId y) { return b.op1(k, {x, y}); }

// saturate(round(acc * m / 2^(31+shift)) + zp) into [lo, hi] as `dt`.
ValueId requantize_graph(Builder& b, ValueId acc, const Ints& mul, const Ints& shift, int64_t axis, int64_t zp,
                         int64_t lo, int64_t hi, DType dt, quant::Rounding mode) {
  Ints d = dims_of(b, acc);
  Ints den(shift.size());
  for (size_t i = 0; i < shift.size(); ++i) den[i] = int64_t{1} << (31 + shift[i]);
  ValueId p = b.mul(b.convert(acc, DType::i64), i64_channels(b, mul, d, axis));
  ValueId D = i64_channels(b, den, d, axis);
  ValueId zero = b.scalar(0, DType::i64), two = b.scalar(2, DType::i64);
  ValueId q = b.div(p, D);  // truncates toward zero
  ValueId r2 = b.mul(b.unary(OpKind::Abs, b.op1(OpKind::Rem, {p, D})), two);
  ValueId bump;
  if (mode == quant::Rounding::HalfAway) {
    bump = cmp(b, OpKind::Ge, r2, D);
  } else {
    ValueId odd = cmp(b, OpKind::Ne, b.op1(OpKind::Rem, {q, two}), zero);
    bump = b.op1(OpKind::Or, {cmp(b, OpKind::Gt, r2, D), b.op1(OpKind::And, {cmp(b, OpKind::Eq, r2, D), odd})});
  }
  ValueId sgn = broadcast_to(b, b.unary(OpKind::Sign, p), d);
  q = b.add(q, b.select(bump, sgn, broadcast_to(b, zero, d, true)));
  q = b.add(q, b.scalar(static_cast<double>(zp), DType::i64));
  q = b.max(q, b.scalar(static_cast<double>(lo), DType::i64));
  q = b.op1(OpKind::Min, {q, b.scalar(static_cast<double>(hi), DType::i64)});
  return b.convert(q, dt);
}

quant::Rounding rounding_of(const Node& n) {
  quant::Rounding r = quant::Rounding::HalfEven;
  RLX_CHECK(quant::parse_rounding(attr_str(n, "rounding"), &r), "[decompose] ", op_name(n.op), ": bad rounding");
  return r;
}

ValueId centered_i32(Builder& b, ValueId v, ValueId zp) {
  ValueId x = b.convert(v, DType::i32);
  return zp < 0 ? x : b.sub(x, b.convert(zp, DType::i32));
}

// The output stage qlinear and qconv share: acc i32 with channels along `axis` -> f32 (acc * scale,
// relu at 0) or the requantized integer (relu clamps at zero_point, max_q caps it).
ValueId finish_accumulator(Builder& b, const Node& n, ValueId acc, int64_t axis) {
  DType dt = attr_dtype(n, "dtype");
  bool relu = attr_int(n, "relu") != 0;
  if (dt == DType::f32) {
    const auto& sc = attr_floats(n, "scale");
    Tensor t(DType::f32, {static_cast<int64_t>(sc.size())});
    for (size_t i = 0; i < sc.size(); ++i) t.data<float>()[i] = static_cast<float>(sc[i]);
    ValueId s = sc.size() == 1 ? b.reshape(b.constant(t), Shape{}) : b.broadcast_in_dim(b.constant(t), to_shape(dims_of(b, acc)), {axis});
    ValueId y = b.mul(b.convert(acc, DType::f32), s);
    if (relu) y = b.max(y, b.scalar(0, DType::f32));
    return y;
  }
  int64_t zp = attr_int(n, "zero_point");
  int32_t lo, hi;
  quant::int8_range(dt == DType::u8, &lo, &hi);
  int64_t top = hi;
  if (n.op == OpKind::QConv) top = std::min<int64_t>(hi, attr_int(n, "max_q"));
  return requantize_graph(b, acc, attr_ints(n, "multiplier"), attr_ints(n, "shift"), axis, zp,
                          relu ? std::max<int64_t>(zp, lo) : lo, top, dt, rounding_of(n));
}

}  // namespace

std::vector<int32_t> decompose_quantize_affine(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  Ints d = dims_of(b, in[0]);
  int64_t axis = attr_int(n, "axis");
  DType dt = b.dtype(in[2]);
  int32_t lo, hi;
  quant::int8_range(dt == DType::u8, &lo, &hi);
  ValueId v = b.unary(OpKind::Round, b.div(in[0], per_channel(b, in[1], d, axis)));  // nearest, ties to even
  v = b.add(v, per_channel(b, b.convert(in[2], DType::f32), d, axis));
  v = b.max(v, b.scalar(lo, DType::f32));
  v = b.op1(OpKind::Min, {v, b.scalar(hi, DType::f32)});
  return {b.convert(v, dt)};
}

std::vector<int32_t> decompose_dequantize_affine(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  Ints d = dims_of(b, in[0]);
  int64_t axis = attr_int(n, "axis");
  DType wide = b.dtype(in[0]) == DType::i32 ? DType::i64 : DType::i32;
  ValueId c = b.sub(b.convert(in[0], wide), per_channel(b, b.convert(in[2], wide), d, axis));
  return {b.mul(b.convert(c, DType::f32), per_channel(b, in[1], d, axis))};
}

std::vector<int32_t> decompose_qmatmul(Builder& b, const Node&, const std::vector<int32_t>& in) {
  ValueId a = centered_i32(b, in[0], in.size() > 2 ? in[2] : -1);
  ValueId w = centered_i32(b, in[1], in.size() > 3 ? in[3] : -1);  // a [N] zero point broadcasts over K
  return {b.dot_general(a, w, {}, {}, {b.rank(a) - 1}, {0})};
}

std::vector<int32_t> decompose_requantize(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  DType dt = attr_dtype(n, "dtype");
  int32_t lo, hi;
  quant::int8_range(dt == DType::u8, &lo, &hi);
  return {requantize_graph(b, in[0], attr_ints(n, "multiplier"), attr_ints(n, "shift"), attr_int(n, "axis"),
                           attr_int(n, "zero_point"), lo, hi, dt, rounding_of(n))};
}

std::vector<int32_t> decompose_qlinear(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  int64_t xzp = attr_int(n, "x_zero_point");
  const Ints& wzp = attr_ints(n, "w_zero_point");
  ValueId x = b.convert(in[0], DType::i32);
  if (xzp != 0) x = b.sub(x, b.scalar(static_cast<double>(xzp), DType::i32));
  ValueId w = b.convert(in[1], DType::i32);
  Ints wd = dims_of(b, w);
  bool any_wzp = false;
  for (int64_t z : wzp) any_wzp |= z != 0;
  if (any_wzp) {
    Tensor t(DType::i32, {static_cast<int64_t>(wzp.size())});
    for (size_t i = 0; i < wzp.size(); ++i) t.data<int32_t>()[i] = static_cast<int32_t>(wzp[i]);
    ValueId z = b.constant(t);
    w = b.sub(w, wzp.size() == 1 ? b.reshape(z, Shape{}) : b.broadcast_in_dim(z, to_shape(wd), {0}));
  }
  ValueId acc = b.dot_general(x, w, {}, {}, {b.rank(x) - 1}, {1});
  if (in.size() > 2) acc = b.add(acc, in[2]);  // bias [N] broadcasts over the rows
  return {finish_accumulator(b, n, acc, b.rank(acc) - 1)};
}

// qconv: centered operands in f64 (8-bit products summed over a window are exact in f64 far past any
// real kernel size), MIR conv with zero padding (= x_zero_point padding), the exact sum back in i32.
std::vector<int32_t> decompose_qconv(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  int64_t xzp = attr_int(n, "x_zero_point");
  const Ints& wzp = attr_ints(n, "w_zero_point");
  ValueId x = b.convert(in[0], DType::f64);
  if (xzp != 0) x = b.sub(x, b.scalar(static_cast<double>(xzp), DType::f64));
  ValueId w = b.convert(in[1], DType::f64);
  bool any_wzp = false;
  for (int64_t z : wzp) any_wzp |= z != 0;
  if (any_wzp) {
    Tensor t(DType::f64, {static_cast<int64_t>(wzp.size())});
    for (size_t i = 0; i < wzp.size(); ++i) t.data<double>()[i] = static_cast<double>(wzp[i]);
    ValueId z = b.constant(t);
    w = b.sub(w, wzp.size() == 1 ? b.reshape(z, Shape{}) : b.broadcast_in_dim(z, to_shape(dims_of(b, w)), {0}));
  }
  Attrs a{{"strides", attr_ints(n, "strides")},
          {"pads", attr_ints(n, "pads")},
          {"dilations", attr_ints(n, "dilations")},
          {"groups", attr_int(n, "groups")}};
  ValueId acc = b.convert(b.op1(OpKind::Conv, {x, w}, std::move(a)), DType::i32);
  if (in.size() > 2) acc = b.add(acc, b.broadcast_in_dim(in[2], to_shape(dims_of(b, acc)), {1}));
  return {finish_accumulator(b, n, acc, 1)};
}

}  // namespace rlx
