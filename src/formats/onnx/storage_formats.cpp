// Storage-only ONNX element types emulated in f32/i32: decoding and the rounding onto each format's
// value grid (a binary search over the grid's rounding thresholds, emitted as gather/compare/select).
#include "formats/onnx/storage_formats.h"

#include <cmath>
#include <limits>

namespace rlx::onnx {

namespace {

using TP = ::onnx::TensorProto;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct FloatFmt {
  int ebits, mbits, bias;
  bool fnuz;      // no -0, no inf; code 0x80 is the only NaN
  bool ieee_inf;  // all-ones exponent is inf (m = 0) / NaN (E5M2)
};

bool float_fmt(int t, FloatFmt* f) {
  switch (t) {
    case TP::FLOAT8E4M3FN: *f = {4, 3, 7, false, false}; return true;
    case TP::FLOAT8E4M3FNUZ: *f = {4, 3, 8, true, false}; return true;
    case TP::FLOAT8E5M2: *f = {5, 2, 15, false, true}; return true;
    case TP::FLOAT8E5M2FNUZ: *f = {5, 2, 16, true, false}; return true;
    case TP::FLOAT4E2M1: *f = {2, 1, 1, false, false}; return true;
    default: return false;
  }
}

bool int_range(int t, int64_t* lo, int64_t* hi) {
  switch (t) {
    case TP::INT4: *lo = -8, *hi = 7; return true;
    case TP::UINT4: *lo = 0, *hi = 15; return true;
    case TP::INT2: *lo = -2, *hi = 1; return true;
    case TP::UINT2: *lo = 0, *hi = 3; return true;
    default: return false;
  }
}

// Rounding as a search: result magnitude = val[#{k : |x| passes thr[k]}], where a threshold is
// passed when |x| > thr (strict) or |x| >= thr (inclusive: the tie goes to the upper neighbour).
struct Table {
  std::vector<double> thr;
  std::vector<bool> incl;
  std::vector<double> val;  // thr.size() + 1 entries
  bool sign = true;         // restore the sign of x
  double clamp = kInf;      // |x| is clamped here first (saturation)
  double nan_value = kNaN;  // what NaN becomes
  bool inf_is_nan = false;  // ±inf becomes NaN (E8M0)
};

Table make_table(int t, bool saturate, const std::string& rm) {
  Table tb;
  if (t == TP::FLOAT8E8M0) {
    tb.sign = false;
    tb.inf_is_nan = true;
    for (int i = 0; i <= 254; ++i) tb.val.push_back(std::ldexp(1.0, i - 127));
    tb.val.push_back(saturate ? std::ldexp(1.0, 127) : kNaN);
    for (int k = 0; k <= 254; ++k) {
      if (rm == "down") {
        tb.thr.push_back(std::ldexp(1.0, k - 126));
        tb.incl.push_back(true);
      } else if (rm == "nearest") {
        tb.thr.push_back(k == 0 ? std::ldexp(1.0, -127) : 1.5 * std::ldexp(1.0, k - 127));
        tb.incl.push_back(k != 0);
      } else {  // "up" (the default): the next power of two at or above |x|; 0 -> 2^-127
        tb.thr.push_back(k == 0 ? 0.0 : std::ldexp(1.0, k - 127));
        tb.incl.push_back(false);
      }
    }
    return tb;
  }
  FloatFmt f{};
  RLX_CHECK(float_fmt(t, &f), "[onnx] no float grid for ", onnx_dtype_name(t));
  std::vector<uint32_t> codes;
  uint32_t half = 1u << (f.ebits + f.mbits);
  for (uint32_t code = 0; code < half; ++code) {
    double v = narrow_decode(t, code);
    if (std::isfinite(v)) {
      tb.val.push_back(v);
      codes.push_back(code);
    }
  }
  for (size_t k = 0; k + 1 < tb.val.size(); ++k) {
    tb.thr.push_back((tb.val[k] + tb.val[k + 1]) / 2);
    tb.incl.push_back(codes[k + 1] % 2 == 0);  // round half to even
  }
  double top = tb.val.back();
  if (t == TP::FLOAT4E2M1) {
    tb.clamp = top;  // no inf/NaN encodings: always saturates; NaN becomes 0
    tb.nan_value = 0.0;
  } else if (saturate) {
    tb.clamp = top;
  } else {  // overflow: past the tie between the top value and the (missing) next one
    double next = 2 * top - tb.val[tb.val.size() - 2];
    tb.thr.push_back((top + next) / 2);
    tb.incl.push_back((codes.back() + 1) % 2 == 0);
    tb.val.push_back(t == TP::FLOAT8E5M2 ? kInf : kNaN);
  }
  return tb;
}

template <class F>
F below(F m) {
  return std::nextafter(m, -std::numeric_limits<F>::infinity());
}

}  // namespace

bool is_narrow_float(int t) {
  FloatFmt f;
  return float_fmt(t, &f) || t == TP::FLOAT8E8M0;
}

bool is_narrow_type(int t, DType* carrier) {
  int64_t lo, hi;
  if (is_narrow_float(t)) {
    if (carrier) *carrier = DType::f32;
    return true;
  }
  if (int_range(t, &lo, &hi)) {
    if (carrier) *carrier = DType::i32;
    return true;
  }
  return false;
}

int narrow_bits(int t) {
  switch (t) {
    case TP::FLOAT4E2M1: case TP::INT4: case TP::UINT4: return 4;
    case TP::INT2: case TP::UINT2: return 2;
    default: return 8;
  }
}

double narrow_decode(int t, uint32_t code) {
  int bits = narrow_bits(t);
  code &= (1u << bits) - 1;
  int64_t lo, hi;
  if (int_range(t, &lo, &hi)) {
    int64_t v = code;
    if (lo < 0 && (code >> (bits - 1))) v -= int64_t{1} << bits;  // two's complement
    return static_cast<double>(v);
  }
  if (t == TP::FLOAT8E8M0) return code == 0xff ? kNaN : std::ldexp(1.0, static_cast<int>(code) - 127);
  FloatFmt f{};
  RLX_CHECK(float_fmt(t, &f), "[onnx] cannot decode ", onnx_dtype_name(t));
  uint32_t sign = code >> (f.ebits + f.mbits);
  uint32_t e = (code >> f.mbits) & ((1u << f.ebits) - 1), m = code & ((1u << f.mbits) - 1);
  uint32_t emax = (1u << f.ebits) - 1, mmax = (1u << f.mbits) - 1;
  if (f.fnuz && sign && e == 0 && m == 0) return kNaN;  // 0x80: the only NaN, no -0
  if (f.ieee_inf && e == emax) return m == 0 ? (sign ? -kInf : kInf) : kNaN;
  if (!f.fnuz && !f.ieee_inf && bits == 8 && e == emax && m == mmax) return kNaN;  // E4M3FN: S.1111.111
  double mag = e == 0 ? std::ldexp(static_cast<double>(m), 1 - f.bias - f.mbits)
                      : std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -f.mbits), static_cast<int>(e) - f.bias);
  return sign ? -mag : mag;
}

Tensor narrow_tensor_from_bytes(int t, const std::vector<int64_t>& dims, const uint8_t* bytes, size_t nbytes,
                                const std::string& where) {
  DType carrier;
  RLX_CHECK(is_narrow_type(t, &carrier), "[onnx] ", where, ": not a storage-only dtype");
  Tensor out(carrier, dims);
  int64_t n = out.numel();
  int bits = narrow_bits(t), per = 8 / bits;
  size_t need = static_cast<size_t>((n + per - 1) / per);
  RLX_CHECK(nbytes == need, "[onnx] ", where, ": ", onnx_dtype_name(t), " data has ", nbytes, " bytes, expected ", need);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t code = (bytes[i / per] >> ((i % per) * bits)) & ((1u << bits) - 1);
    double v = narrow_decode(t, code);
    if (carrier == DType::i32) out.data<int32_t>()[i] = static_cast<int32_t>(v);
    else out.data<float>()[i] = static_cast<float>(v);
  }
  return out;
}

std::vector<double> narrow_grid(int t) {
  Table tb = make_table(t, true, "up");
  std::vector<double> g;
  for (double v : tb.val)
    if (std::isfinite(v) && (g.empty() || v != g.back())) g.push_back(v);
  return g;
}

double narrow_round_value(int t, double x, bool saturate, const std::string& rm) {
  int64_t lo, hi;
  if (int_range(t, &lo, &hi)) {
    if (std::isnan(x)) return 0;
    if (saturate) return std::min(std::max(std::nearbyint(x), static_cast<double>(lo)), static_cast<double>(hi));
    // A float source, as Cast from a float in emit_narrow_cast: truncate, then saturate.
    return std::trunc(std::min(std::max(x, static_cast<double>(lo)), static_cast<double>(hi)));
  }
  Table tb = make_table(t, saturate, rm);
  if (std::isnan(x)) return tb.nan_value;
  if (tb.inf_is_nan && std::isinf(x)) return kNaN;
  double a = std::min(std::fabs(x), tb.clamp);
  size_t idx = 0;
  for (size_t k = 0; k < tb.thr.size(); ++k) idx += tb.incl[k] ? a >= tb.thr[k] : a > tb.thr[k];
  double v = tb.val[idx];
  return tb.sign && x < 0 ? -v : v;
}

V emit_narrow_cast(Ctx& c, V x, int t, bool saturate, const std::string& rm) {
  DType xt = c.dtype(x);
  int64_t lo, hi;
  if (int_range(t, &lo, &hi) && !saturate) {
    if (is_float(xt)) {
      // Cast from a float: truncate toward zero. ONNX leaves out-of-range values undefined; RLX
      // saturates them to [lo, hi] (as ONNX Runtime does) and maps NaN to 0 (docs/onnx.md).
      V r = c.bin(OpKind::Min, c.bin(OpKind::Max, x, c.scalar(lo, xt)), c.scalar(hi, xt));
      r = c.select(c.bin(OpKind::Ne, x, x), c.scalar(0, xt), r);
      return c.convert(c.convert(r, DType::i64), DType::i32);
    }
    // Cast from an integer: keep the low bits (two's complement), as the spec says for fixed point.
    int bits = narrow_bits(t);
    V v = c.bin(OpKind::And, c.convert(x, DType::i64), c.scalar(static_cast<double>((int64_t{1} << bits) - 1), DType::i64));
    if (lo < 0) {
      V high = c.bin(OpKind::Ge, v, c.scalar(static_cast<double>(int64_t{1} << (bits - 1)), DType::i64));
      v = c.select(high, c.bin(OpKind::Sub, v, c.scalar(static_cast<double>(int64_t{1} << bits), DType::i64)), v);
    }
    return c.convert(v, DType::i32);
  }
  if (int_range(t, &lo, &hi)) {
    // QuantizeLinear: round half to even, then saturate (ONNX's saturate_cast for 4-/2-bit integers).
    if (is_float(xt)) {
      V r = c.unary(OpKind::Round, x);
      r = c.bin(OpKind::Min, c.bin(OpKind::Max, r, c.scalar(lo, xt)), c.scalar(hi, xt));
      return c.convert(r, DType::i32);
    }
    V xi = c.convert(x, DType::i64);
    xi = c.bin(OpKind::Min, c.bin(OpKind::Max, xi, c.scalar(lo, DType::i64)), c.scalar(hi, DType::i64));
    return c.convert(xi, DType::i32);
  }
  DType ct = xt == DType::f64 ? DType::f64 : DType::f32;
  Table tb = make_table(t, saturate, rm);
  // Thresholds in the compute dtype; an inclusive one becomes the next value below it, strict.
  size_t p = 1;
  while (p < tb.thr.size() + 1) p *= 2;
  Tensor thr(ct, {static_cast<int64_t>(p)}), val(DType::f32, {static_cast<int64_t>(p)});
  for (size_t k = 0; k < p; ++k) {
    double th = kInf;
    if (k < tb.thr.size()) {
      if (ct == DType::f32) {
        float m = static_cast<float>(tb.thr[k]);
        th = tb.incl[k] ? below(m) : m;
      } else {
        th = tb.incl[k] ? below(tb.thr[k]) : tb.thr[k];
      }
    }
    thr.set(static_cast<int64_t>(k), th);
    val.set(static_cast<int64_t>(k), tb.val[std::min(k, tb.val.size() - 1)]);
  }
  V xf = c.convert(x, ct);
  V a = c.unary(OpKind::Abs, xf);
  if (std::isfinite(tb.clamp)) a = c.bin(OpKind::Min, a, c.scalar(tb.clamp, ct));
  V T = c.constant(thr), Vals = c.constant(val);
  V idx = c.broadcast_to(c.scalar(0, DType::i64), c.shape(xf));
  for (size_t step = p / 2; step >= 1; step /= 2) {
    V probe = c.bin(OpKind::Add, idx, c.scalar(static_cast<double>(step - 1), DType::i64));
    V tv = c.op1(OpKind::Gather, {T, probe}, {{"axis", int64_t{0}}});
    V up = c.bin(OpKind::Gt, a, tv);
    idx = c.select(up, c.bin(OpKind::Add, idx, c.scalar(static_cast<double>(step), DType::i64)), idx);
  }
  V v = c.op1(OpKind::Gather, {Vals, idx}, {{"axis", int64_t{0}}});
  if (tb.sign) v = c.select(c.bin(OpKind::Lt, xf, c.scalar(0, ct)), c.unary(OpKind::Neg, v), v);
  V special = c.unary(OpKind::IsNan, xf);
  if (tb.inf_is_nan) {
    V inf = c.bin(OpKind::Eq, c.unary(OpKind::Abs, xf), c.scalar(kInf, ct));
    special = c.bin(OpKind::Or, special, inf);
  }
  return c.select(special, c.scalar(tb.inf_is_nan ? kNaN : tb.nan_value, DType::f32), v);
}

}  // namespace rlx::onnx
