// ONNX integer/quantized ops: QLinearMatMul, QLinearConv, ConvInteger, DynamicQuantizeLinear. Integer products run in f64 (exact for 8-bit operands and
// any realistic reduction length: |sum| < 2^53), then are rounded (half to even) and saturated.
#include <cmath>
#include <limits>

#include "formats/onnx/importer.h"
#include "formats/onnx/ops_util.h"

namespace rlx::onnx {

namespace {

V f64(Ctx& c, V v) { return c.convert(v, DType::f64); }

// (x - zp) in f64; zp absent -> x.
V centered(Ctx& c, V x, std::optional<V> zp) {
  V xf = f64(c, x);
  return zp ? c.bin(OpKind::Sub, xf, f64(c, *zp)) : xf;
}

// Rounds half to even, adds zp, saturates to `to` (u8/i8/...), converts.
V requantize(Ctx& c, V real, std::optional<V> zp, DType to) {
  double lo = to == DType::u8 ? 0 : to == DType::i8 ? -128 : to == DType::i16 ? -32768 : -2147483648.0;
  double hi = to == DType::u8 ? 255 : to == DType::i8 ? 127 : to == DType::i16 ? 32767 : 2147483647.0;
  V y = c.unary(OpKind::Round, real);
  if (zp) y = c.bin(OpKind::Add, y, f64(c, *zp));
  y = c.bin(OpKind::Min, c.bin(OpKind::Max, y, c.scalar(lo, DType::f64)), c.scalar(hi, DType::f64));
  return c.convert(y, to);
}

// A per-channel (1-D, length n) quantization vector reshaped to broadcast over dim 1 of a rank-r conv
// tensor; scalars and one-element vectors stay as they are.
V per_channel(Ctx& c, V v, int64_t rank) {
  auto d = c.static_shape(v, "scale/zero point");
  int64_t n = 1;
  for (auto x : d) n *= x;
  if (n == 1) return c.reshape(v, {});
  std::vector<int64_t> s(static_cast<size_t>(rank), 1);
  s[1] = n;
  return c.reshape(v, s);
}

void conv_common(Ctx& c, V x, V w, Attrs* attrs) {
  Window win = conv_window(c, c.static_shape(x, "x"), c.static_shape(w, "w"));
  *attrs = {{"strides", win.st}, {"pads", win.pads}, {"dilations", win.dil}, {"groups", c.attr_i("group", 1)}};
}

// w - w_zero_point where the zero point may be per output channel (dim 0 of w).
V centered_w(Ctx& c, V w, std::optional<V> zp) {
  if (!zp) return f64(c, w);
  auto d = c.static_shape(*zp, "w_zero_point");
  int64_t n = 1;
  for (auto x : d) n *= x;
  V z = f64(c, *zp);
  if (n == 1) z = c.reshape(z, {});
  else {
    std::vector<int64_t> s(static_cast<size_t>(c.rank(w)), 1);
    s[0] = n;
    z = c.reshape(z, s);
  }
  return c.bin(OpKind::Sub, f64(c, w), z);
}

}  // namespace

void register_qlinear_ops(std::map<std::string, Converter>& r) {
  r["QLinearMatMul"] = [](Ctx& c) {
    V A = centered(c, c.in(0), c.opt_in(2)), B = centered(c, c.in(3), c.opt_in(5));
    V prod = c.op1(OpKind::MatMul, {A, B});
    V as = c.in(1), bs = c.in(4), ys = c.in(6);
    // The scale ratio is formed in the scales' own dtype (as the ONNX reference does), then applied in f64.
    V ratio = c.bin(OpKind::Div, c.bin(OpKind::Mul, as, c.convert(bs, c.dtype(as))), c.convert(ys, c.dtype(as)));
    DType to = c.has_input(7) ? c.dtype(c.in(7)) : c.dtype(c.in(0));
    c.set_output(0, requantize(c, c.bin(OpKind::Mul, prod, f64(c, ratio)), c.opt_in(7), to));
  };
  r["ConvInteger"] = [](Ctx& c) {
    V x = centered(c, c.in(0), c.opt_in(2));
    V w = centered_w(c, c.in(1), c.opt_in(3));
    Attrs a;
    conv_common(c, c.in(0), c.in(1), &a);
    c.set_output(0, c.convert(c.op1(OpKind::Convolution, {x, w}, a), DType::i32));
  };
  r["QLinearConv"] = [](Ctx& c) {
    V x = centered(c, c.in(0), c.opt_in(2));
    V w = centered_w(c, c.in(3), c.opt_in(5));
    Attrs a;
    conv_common(c, c.in(0), c.in(3), &a);
    std::vector<V> ins{x, w};
    if (c.has_input(8)) ins.push_back(f64(c, c.in(8)));
    V y = c.op1(OpKind::Convolution, ins, a);
    int64_t rk = c.rank(y);
    V ratio = c.bin(OpKind::Div, c.bin(OpKind::Mul, f64(c, per_channel(c, c.in(1), rk)), f64(c, per_channel(c, c.in(4), rk))),
                    f64(c, per_channel(c, c.in(6), rk)));
    DType to = c.has_input(7) ? c.dtype(c.in(7)) : c.dtype(c.in(0));
    std::optional<V> yz;
    if (c.has_input(7)) yz = per_channel(c, c.in(7), rk);
    c.set_output(0, requantize(c, c.bin(OpKind::Mul, y, ratio), yz, to));
  };
  r["DynamicQuantizeLinear"] = [](Ctx& c) {
    V x = c.in(0);
    DType dt = c.dtype(x);
    V xf = c.convert(x, DType::f32);
    int64_t rk = c.rank(x);
    std::vector<int64_t> all(static_cast<size_t>(rk));
    for (int64_t i = 0; i < rk; ++i) all[i] = i;
    auto k = [&](double v) { return c.scalar(v, DType::f32); };
    V mx = c.bin(OpKind::Max, c.reduce(OpKind::ReduceMax, xf, all, false), k(0));
    V mn = c.bin(OpKind::Min, c.reduce(OpKind::ReduceMin, xf, all, false), k(0));
    V rng = c.bin(OpKind::Sub, mx, mn);
    V scale = c.bin(OpKind::Div, c.select(c.bin(OpKind::Eq, mx, mn), k(1), rng), k(255));
    V zp = c.bin(OpKind::Sub, k(0), c.bin(OpKind::Div, mn, scale));
    zp = c.unary(OpKind::Round, c.bin(OpKind::Min, c.bin(OpKind::Max, zp, k(0)), k(255)));
    V y = c.bin(OpKind::Add, c.unary(OpKind::Round, c.bin(OpKind::Div, xf, scale)), zp);
    y = c.bin(OpKind::Min, c.bin(OpKind::Max, y, k(0)), k(255));
    c.set_output(0, c.convert(y, DType::u8));
    c.set_output(1, c.convert(scale, dt));
    c.set_output(2, c.convert(zp, DType::u8));
  };
}

}  // namespace rlx::onnx
