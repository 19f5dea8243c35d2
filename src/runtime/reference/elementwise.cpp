// Elementwise ops: unary math, convert, binary arithmetic (numpy broadcasting), comparisons, select.
#include <cmath>
#include <limits>

#include "runtime/reference/common.h"

namespace rlx::ref {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

[[noreturn]] void bad_dtype(const Node& n, DType t) {
  fail("[reference] ", op_name(n.op), ": dtype ", dtype_name(t), " not supported");
}

double unary_f(OpKind k, double x) {
  switch (k) {
    case OpKind::Neg: return -x;
    case OpKind::Abs: return std::fabs(x);
    case OpKind::Exp: return std::exp(x);
    case OpKind::Log: return std::log(x);
    case OpKind::Sqrt: return std::sqrt(x);
    case OpKind::Rsqrt: return 1.0 / std::sqrt(x);
    case OpKind::Tanh: return std::tanh(x);
    case OpKind::Erf: return std::erf(x);
    case OpKind::Sin: return std::sin(x);
    case OpKind::Cos: return std::cos(x);
    case OpKind::Logistic: return 1.0 / (1.0 + std::exp(-x));
    case OpKind::Floor: return std::floor(x);
    case OpKind::Ceil: return std::ceil(x);
    case OpKind::Round: return std::nearbyint(x);  // default rounding mode: half to even
    case OpKind::Sign: return std::isnan(x) ? x : (x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0));
    default: return kNaN;
  }
}

bool unary_c(OpKind k, cplx z, cplx* r) {
  switch (k) {
    case OpKind::Neg: *r = -z; return true;
    case OpKind::Exp: *r = std::exp(z); return true;
    case OpKind::Log: *r = std::log(z); return true;
    case OpKind::Sqrt: *r = std::sqrt(z); return true;
    case OpKind::Conj: *r = std::conj(z); return true;
    default: return false;
  }
}

bool unary_i(OpKind k, int64_t x, int64_t* r, bool u) {
  if (u && (k == OpKind::Abs || k == OpKind::Sign)) {  // u64: never negative
    *r = k == OpKind::Abs ? x : x != 0;
    return true;
  }
  switch (k) {
    case OpKind::Neg: *r = wsub(0, x); return true;
    case OpKind::Abs: *r = x < 0 ? wsub(0, x) : x; return true;
    case OpKind::Sign: *r = x > 0 ? 1 : (x < 0 ? -1 : 0); return true;
    case OpKind::Not: *r = ~x; return true;
    default: return false;
  }
}

}  // namespace

Outs eval_unary(const Node& n, const Ins& in, const Types& ot) {
  const Tensor& x = in[0];
  Tensor out = alloc(ot[0]);
  int64_t N = x.numel();
  OpKind k = n.op;
  Dom d = dom_of(x.dtype());
  if (k == OpKind::IsNan) {
    RLX_CHECK(d == Dom::F, "[reference] is_nan: dtype ", dtype_name(x.dtype()), " not supported");
    for (int64_t i = 0; i < N; ++i) sti(out, i, std::isnan(ld(x, i)) ? 1 : 0);
    return {out};
  }
  if (k == OpKind::Real || k == OpKind::Imag) {
    RLX_CHECK(d == Dom::C, "[reference] ", op_name(k), " needs c64");
    for (int64_t i = 0; i < N; ++i) st(out, i, k == OpKind::Real ? ldc(x, i).real() : ldc(x, i).imag());
    return {out};
  }
  switch (d) {
    case Dom::F:
      if (k == OpKind::Not || k == OpKind::Conj) bad_dtype(n, x.dtype());
      for (int64_t i = 0; i < N; ++i) st(out, i, unary_f(k, ld(x, i)));
      break;
    case Dom::C:
      for (int64_t i = 0; i < N; ++i) {
        cplx r;
        if (!unary_c(k, ldc(x, i), &r)) bad_dtype(n, x.dtype());
        stc(out, i, r);
      }
      break;
    case Dom::I:
      for (int64_t i = 0; i < N; ++i) {
        int64_t r;
        if (!unary_i(k, ldi(x, i), &r, is_u64(x.dtype()))) bad_dtype(n, x.dtype());
        sti(out, i, r);
      }
      break;
    case Dom::B:
      if (k != OpKind::Not) bad_dtype(n, x.dtype());
      for (int64_t i = 0; i < N; ++i) sti(out, i, ldi(x, i) ? 0 : 1);
      break;
  }
  return {out};
}

Outs eval_convert(const Node& n, const Ins& in, const Types& ot) {
  const Tensor& x = in[0];
  Tensor out = alloc(ot[0]);
  bool to_bool = out.dtype() == DType::boolean;
  for (int64_t i = 0; i < x.numel(); ++i) {
    switch (dom_of(x.dtype())) {
      case Dom::F: st(out, i, ld(x, i)); break;  // st: ints truncate+saturate, NaN->0; bool x != 0
      case Dom::C:
        if (to_bool) sti(out, i, ldc(x, i) != cplx(0.0, 0.0));
        else stc(out, i, ldc(x, i));  // real targets take the real part
        break;
      case Dom::I:
      case Dom::B:
        if (is_u64(x.dtype()) && dom_of(out.dtype()) != Dom::I && !to_bool) {
          uint64_t u = static_cast<uint64_t>(ldi(x, i));  // one rounding from the unsigned value
          if (out.dtype() == DType::f32) out.data<float>()[i] = static_cast<float>(u);
          else if (out.dtype() == DType::c64) stc(out, i, cplx(static_cast<double>(static_cast<float>(u)), 0.0));
          else st(out, i, static_cast<double>(u));
        } else {
          sti(out, i, ldi(x, i));  // int -> int wraps
        }
        break;
    }
  }
  return {out};
}

namespace {

double binary_f(OpKind k, double a, double b) {
  switch (k) {
    case OpKind::Add: return a + b;
    case OpKind::Sub: return a - b;
    case OpKind::Mul: return a * b;
    case OpKind::Div: return a / b;
    case OpKind::Pow: return std::pow(a, b);
    case OpKind::Max:
      if (std::isnan(a) || std::isnan(b)) return kNaN;
      if (a == b) return std::signbit(a) ? b : a;  // max(-0, +0) = +0
      return a > b ? a : b;
    case OpKind::Min:
      if (std::isnan(a) || std::isnan(b)) return kNaN;
      if (a == b) return std::signbit(a) ? a : b;  // min(-0, +0) = -0
      return a < b ? a : b;
    case OpKind::Rem: return std::fmod(a, b);
    default: return kNaN;
  }
}

bool binary_c(OpKind k, cplx a, cplx b, cplx* r) {
  switch (k) {
    case OpKind::Add: *r = a + b; return true;
    case OpKind::Sub: *r = a - b; return true;
    case OpKind::Mul: *r = a * b; return true;
    case OpKind::Div: *r = a / b; return true;
    case OpKind::Pow:
      // std::pow gives 0 for a zero base whatever the exponent; numpy's 0**0 is 1.
      if (a == cplx(0.0, 0.0) && b == cplx(0.0, 0.0)) *r = cplx(1.0, 0.0);
      else *r = std::pow(a, b);
      return true;
    default: return false;
  }
}

bool binary_u64(OpKind k, uint64_t a, uint64_t b, int64_t* r) {
  switch (k) {
    case OpKind::Div: *r = static_cast<int64_t>(b == 0 ? 0 : a / b); return true;  // x/0 = 0 as for signed
    case OpKind::Rem: *r = static_cast<int64_t>(b == 0 ? 0 : a % b); return true;
    case OpKind::Max: *r = static_cast<int64_t>(a > b ? a : b); return true;
    case OpKind::Min: *r = static_cast<int64_t>(a < b ? a : b); return true;
    default: return false;
  }
}

bool binary_i(OpKind k, int64_t a, int64_t b, int64_t* r, bool u) {
  if (u && binary_u64(k, static_cast<uint64_t>(a), static_cast<uint64_t>(b), r)) return true;
  switch (k) {
    case OpKind::Add: *r = wadd(a, b); return true;
    case OpKind::Sub: *r = wsub(a, b); return true;
    case OpKind::Mul: *r = wmul(a, b); return true;
    case OpKind::Div:  // truncates toward zero; x/0 = 0; INT64_MIN/-1 wraps
      *r = b == 0 ? 0 : (b == -1 ? wsub(0, a) : a / b);
      return true;
    case OpKind::Rem: *r = (b == 0 || b == -1) ? 0 : a % b; return true;
    case OpKind::Max: *r = a > b ? a : b; return true;
    case OpKind::Min: *r = a < b ? a : b; return true;
    case OpKind::And: *r = a & b; return true;
    case OpKind::Or: *r = a | b; return true;
    case OpKind::Xor: *r = a ^ b; return true;
    default: return false;
  }
}

bool compare(OpKind k, int c_lt, int c_eq, int c_gt, bool unordered) {
  // c_* say which ordering holds; unordered (a NaN) makes everything but ne false.
  if (unordered) return k == OpKind::Ne;
  switch (k) {
    case OpKind::Eq: return c_eq;
    case OpKind::Ne: return !c_eq;
    case OpKind::Lt: return c_lt;
    case OpKind::Le: return c_lt || c_eq;
    case OpKind::Gt: return c_gt;
    case OpKind::Ge: return c_gt || c_eq;
    default: return false;
  }
}

}  // namespace

Outs eval_binary(const Node& n, const Ins& in, const Types& ot) {
  const Tensor &a = in[0], &b = in[1];
  RLX_CHECK(a.dtype() == b.dtype(), "[reference] ", op_name(n.op), ": operand dtypes differ");
  Tensor out = alloc(ot[0]);
  auto ma = broadcast_map(a.shape(), out.shape()), mb = broadcast_map(b.shape(), out.shape());
  OpKind k = n.op;
  for (int64_t i = 0; i < out.numel(); ++i) {
    switch (dom_of(a.dtype())) {
      case Dom::F: {
        bool ok = k != OpKind::And && k != OpKind::Or && k != OpKind::Xor;
        if (!ok) bad_dtype(n, a.dtype());
        st(out, i, binary_f(k, ld(a, ma[i]), ld(b, mb[i])));
        break;
      }
      case Dom::C: {
        cplx r;
        if (!binary_c(k, ldc(a, ma[i]), ldc(b, mb[i]), &r)) bad_dtype(n, a.dtype());
        stc(out, i, r);
        break;
      }
      case Dom::I: {
        int64_t r;
        if (k == OpKind::Pow || !binary_i(k, ldi(a, ma[i]), ldi(b, mb[i]), &r, is_u64(a.dtype()))) bad_dtype(n, a.dtype());
        sti(out, i, r);
        break;
      }
      case Dom::B: {
        int64_t x = ldi(a, ma[i]), y = ldi(b, mb[i]);
        if (k == OpKind::And) sti(out, i, x && y);
        else if (k == OpKind::Or) sti(out, i, x || y);
        else if (k == OpKind::Xor) sti(out, i, x != y);
        else bad_dtype(n, a.dtype());
        break;
      }
    }
  }
  return {out};
}

Outs eval_compare(const Node& n, const Ins& in, const Types& ot) {
  const Tensor &a = in[0], &b = in[1];
  RLX_CHECK(a.dtype() == b.dtype(), "[reference] ", op_name(n.op), ": operand dtypes differ");
  Tensor out = alloc(ot[0]);
  auto ma = broadcast_map(a.shape(), out.shape()), mb = broadcast_map(b.shape(), out.shape());
  for (int64_t i = 0; i < out.numel(); ++i) {
    bool r = false;
    switch (dom_of(a.dtype())) {
      case Dom::F: {
        double x = ld(a, ma[i]), y = ld(b, mb[i]);
        r = compare(n.op, x < y, x == y, x > y, std::isnan(x) || std::isnan(y));
        break;
      }
      case Dom::C: {
        cplx x = ldc(a, ma[i]), y = ldc(b, mb[i]);
        if (n.op != OpKind::Eq && n.op != OpKind::Ne) bad_dtype(n, a.dtype());
        r = (x == y) == (n.op == OpKind::Eq);  // a NaN part compares unequal
        break;
      }
      case Dom::I:
      case Dom::B: {
        int64_t x = ldi(a, ma[i]), y = ldi(b, mb[i]);
        bool u = is_u64(a.dtype());
        r = compare(n.op, lt_i(x, y, u), x == y, lt_i(y, x, u), false);
        break;
      }
    }
    sti(out, i, r ? 1 : 0);
  }
  return {out};
}

Outs eval_select(const Node& n, const Ins& in, const Types& ot) {
  const Tensor &p = in[0], &a = in[1], &b = in[2];
  RLX_CHECK(p.dtype() == DType::boolean, "[reference] select predicate must be bool");
  RLX_CHECK(a.dtype() == b.dtype(), "[reference] select branches differ in dtype");
  Tensor out = alloc(ot[0]);
  auto mp = broadcast_map(p.shape(), out.shape()), ma = broadcast_map(a.shape(), out.shape()),
       mb = broadcast_map(b.shape(), out.shape());
  for (int64_t i = 0; i < out.numel(); ++i) {
    if (ldi(p, mp[i])) copy_elem(out, i, a, ma[i]);
    else copy_elem(out, i, b, mb[i]);
  }
  return {out};
}

}  // namespace rlx::ref
