// ONNX elementwise ops: arithmetic, comparisons, logic, activations, casts.
#include <cmath>
#include <cstring>
#include <limits>

#include "formats/onnx/importer.h"
#include "formats/onnx/storage_formats.h"

namespace rlx::onnx {

namespace {

DType onnx_to(Ctx& c, int64_t t) {
  DType d;
  if (!onnx_dtype(static_cast<int>(t), &d)) c.error("unsupported dtype " + onnx_dtype_name(static_cast<int>(t)));
  return d;
}

V sc(Ctx& c, double v, V like) { return c.scalar(v, c.dtype(like)); }

void binary(std::map<std::string, Converter>& r, const char* name, OpKind k) {
  r[name] = [k](Ctx& c) {
    V a = c.in(0), b = c.in(1);
    if (c.dtype(a) != c.dtype(b)) c.error("operand dtypes differ");
    if (k == OpKind::Pow) {
      // Pow is float-only in the IR; integer bases compute in f64 and convert back.
      DType dt = c.dtype(a);
      V bf = c.convert(b, is_float(dt) ? dt : DType::f64);
      if (!is_float(dt)) return c.set_output(0, c.convert(c.bin(k, c.convert(a, DType::f64), bf), dt));
      return c.set_output(0, c.bin(k, a, bf));
    }
    c.set_output(0, c.bin(k, a, b));
  };
}

void unary(std::map<std::string, Converter>& r, const char* name, OpKind k) {
  r[name] = [k](Ctx& c) { c.set_output(0, c.unary(k, c.in(0))); };
}

// Activations written as small expression builders over x.
void act(std::map<std::string, Converter>& r, const char* name, V (*f)(Ctx&, V)) {
  r[name] = [f](Ctx& c) {
    V x = c.in(0);
    if (!is_float(c.dtype(x))) c.error("needs a float input");
    c.set_output(0, f(c, x));
  };
}

V softplus(Ctx& c, V x) {
  // log(1 + exp(x)) computed as max(x,0) + log(1 + exp(-|x|)) to avoid overflow.
  V ax = c.unary(OpKind::Abs, x);
  V t = c.unary(OpKind::Log, c.bin(OpKind::Add, sc(c, 1, x), c.unary(OpKind::Exp, c.unary(OpKind::Neg, ax))));
  return c.bin(OpKind::Add, c.bin(OpKind::Max, x, sc(c, 0, x)), t);
}

}  // namespace

void register_elementwise_ops(std::map<std::string, Converter>& r) {
  binary(r, "Add", OpKind::Add);
  binary(r, "Sub", OpKind::Sub);
  binary(r, "Mul", OpKind::Mul);
  binary(r, "Div", OpKind::Div);
  r["Pow"] = [](Ctx& c) {
    V a = c.in(0), b = c.in(1);
    DType dt = c.dtype(a);
    DType ct = is_float(dt) ? dt : DType::f64;
    V y = c.bin(OpKind::Pow, c.convert(a, ct), c.convert(b, ct));
    c.set_output(0, c.convert(y, dt));
  };
  binary(r, "Equal", OpKind::Eq);
  binary(r, "Less", OpKind::Lt);
  binary(r, "Greater", OpKind::Gt);
  binary(r, "LessOrEqual", OpKind::Le);
  binary(r, "GreaterOrEqual", OpKind::Ge);
  binary(r, "And", OpKind::And);
  binary(r, "Or", OpKind::Or);
  binary(r, "Xor", OpKind::Xor);
  binary(r, "BitwiseAnd", OpKind::And);
  binary(r, "BitwiseOr", OpKind::Or);
  binary(r, "BitwiseXor", OpKind::Xor);
  unary(r, "BitwiseNot", OpKind::Not);
  r["BitShift"] = [](Ctx& c) {
    // Exact in the operand dtype: x * 2^y / x / 2^y with 2^y from a table (the multiply wraps like
    // a shift). Shift counts outside [0, width) give 0 (left, unsigned right) or the sign fill
    // (signed right), as the ONNX reference does; signed right shifts round toward -inf.
    V x = c.in(0), y = c.in(1);
    DType dt = c.dtype(x);
    if (!is_int(dt) || c.dtype(y) != dt) c.error("BitShift needs integer operands of one dtype");
    bool is_signed = dtype_class(dt) == DClass::kSigned, left = c.attr_s("direction", "") == "LEFT";
    int64_t w = static_cast<int64_t>(8 * dtype_size(dt));
    Tensor tab(dt, {w});
    for (int64_t k = 0; k < w; ++k) {
      uint64_t bits = (!left && is_signed && k == w - 1) ? 1 : uint64_t{1} << k;  // 2^(w-1) < 0 when signed
      std::memcpy(static_cast<char*>(tab.raw()) + k * dtype_size(dt), &bits, dtype_size(dt));  // little-endian
    }
    int64_t lim = (!left && is_signed) ? w - 1 : w;  // signed x >> (w-1) is the sign fill too
    V zero = c.scalar(0, dt);
    V valid = c.bin(OpKind::Lt, y, c.scalar(static_cast<double>(lim), dt));
    if (is_signed) valid = c.bin(OpKind::And, valid, c.bin(OpKind::Ge, y, zero));
    V yi = c.convert(c.bin(OpKind::Min, c.bin(OpKind::Max, y, zero), c.scalar(static_cast<double>(w - 1), dt)), DType::i64);
    V p = c.op1(OpKind::Gather, {c.constant(tab), yi}, {{"axis", int64_t{0}}});
    V r, fill = zero;
    if (left) {
      r = c.bin(OpKind::Mul, x, p);
    } else {
      r = c.bin(OpKind::Div, x, p);
      if (is_signed) {  // floor division
        V neg = c.bin(OpKind::Lt, x, zero);
        V inexact = c.bin(OpKind::Ne, c.bin(OpKind::Mul, r, p), x);
        r = c.select(c.bin(OpKind::And, neg, inexact), c.bin(OpKind::Sub, r, c.scalar(1, dt)), r);
        fill = c.select(neg, c.scalar(-1, dt), zero);
      }
    }
    c.set_output(0, c.select(valid, r, fill));
  };
  r["Mod"] = [](Ctx& c) {
    V a = c.in(0), b = c.in(1);
    V rem = c.bin(OpKind::Rem, a, b);
    if (c.attr_i("fmod", 0)) return c.set_output(0, rem);
    // Integer mod takes the divisor's sign (Python semantics).
    V z = sc(c, 0, a);
    V fix = c.bin(OpKind::And, c.bin(OpKind::Ne, rem, z),
                  c.bin(OpKind::Ne, c.bin(OpKind::Lt, rem, z), c.bin(OpKind::Lt, b, z)));
    c.set_output(0, c.select(fix, c.bin(OpKind::Add, rem, b), rem));
  };
  for (auto [name, k] : {std::pair{"Max", OpKind::Max}, {"Min", OpKind::Min}, {"Sum", OpKind::Add}, {"Mean", OpKind::Add}}) {
    std::string nm = name;
    OpKind kk = k;
    r[name] = [nm, kk](Ctx& c) {
      V acc = c.in(0);
      for (int i = 1; i < c.num_inputs(); ++i) acc = c.bin(kk, acc, c.in(i));
      if (nm == "Mean") acc = c.bin(OpKind::Div, acc, sc(c, c.num_inputs(), acc));
      c.set_output(0, acc);
    };
  }
  unary(r, "Neg", OpKind::Neg);
  unary(r, "Exp", OpKind::Exp);
  unary(r, "Log", OpKind::Log);
  unary(r, "Sqrt", OpKind::Sqrt);
  unary(r, "Tanh", OpKind::Tanh);
  unary(r, "Erf", OpKind::Erf);
  unary(r, "Sin", OpKind::Sin);
  unary(r, "Cos", OpKind::Cos);
  unary(r, "Sigmoid", OpKind::Logistic);
  unary(r, "Floor", OpKind::Floor);
  unary(r, "Ceil", OpKind::Ceil);
  unary(r, "Round", OpKind::Round);
  unary(r, "Not", OpKind::Not);
  unary(r, "IsNaN", OpKind::IsNan);
  r["Abs"] = [](Ctx& c) {
    V x = c.in(0);
    c.set_output(0, dtype_class(c.dtype(x)) == DClass::kUnsigned ? x : c.unary(OpKind::Abs, x));
  };
  r["Sign"] = [](Ctx& c) { c.set_output(0, c.unary(OpKind::Sign, c.in(0))); };
  r["Identity"] = [](Ctx& c) { c.set_output(0, c.in(0)); };
  r["Reciprocal"] = [](Ctx& c) { V x = c.in(0); c.set_output(0, c.bin(OpKind::Div, sc(c, 1, x), x)); };
  r["Relu"] = [](Ctx& c) { V x = c.in(0); c.set_output(0, c.bin(OpKind::Max, x, sc(c, 0, x))); };
  act(r, "Tan", [](Ctx& c, V x) { return c.bin(OpKind::Div, c.unary(OpKind::Sin, x), c.unary(OpKind::Cos, x)); });
  act(r, "Sinh", [](Ctx& c, V x) {
    return c.bin(OpKind::Mul, sc(c, 0.5, x), c.bin(OpKind::Sub, c.unary(OpKind::Exp, x), c.unary(OpKind::Exp, c.unary(OpKind::Neg, x))));
  });
  act(r, "Cosh", [](Ctx& c, V x) {
    return c.bin(OpKind::Mul, sc(c, 0.5, x), c.bin(OpKind::Add, c.unary(OpKind::Exp, x), c.unary(OpKind::Exp, c.unary(OpKind::Neg, x))));
  });
  act(r, "Asinh", [](Ctx& c, V x) {
    V s = c.unary(OpKind::Sqrt, c.bin(OpKind::Add, c.bin(OpKind::Mul, x, x), sc(c, 1, x)));
    return c.unary(OpKind::Log, c.bin(OpKind::Add, x, s));
  });
  act(r, "Acosh", [](Ctx& c, V x) {
    V s = c.unary(OpKind::Sqrt, c.bin(OpKind::Sub, c.bin(OpKind::Mul, x, x), sc(c, 1, x)));
    return c.unary(OpKind::Log, c.bin(OpKind::Add, x, s));
  });
  act(r, "Atanh", [](Ctx& c, V x) {
    V q = c.bin(OpKind::Div, c.bin(OpKind::Add, sc(c, 1, x), x), c.bin(OpKind::Sub, sc(c, 1, x), x));
    return c.bin(OpKind::Mul, sc(c, 0.5, x), c.unary(OpKind::Log, q));
  });
  act(r, "Softplus", softplus);
  act(r, "Softsign", [](Ctx& c, V x) {
    return c.bin(OpKind::Div, x, c.bin(OpKind::Add, sc(c, 1, x), c.unary(OpKind::Abs, x)));
  });
  act(r, "Mish", [](Ctx& c, V x) { return c.bin(OpKind::Mul, x, c.unary(OpKind::Tanh, softplus(c, x))); });
  act(r, "LeakyRelu", [](Ctx& c, V x) {
    V neg = c.bin(OpKind::Lt, x, sc(c, 0, x));
    return c.select(neg, c.bin(OpKind::Mul, x, sc(c, c.attr_f("alpha", 0.01), x)), x);
  });
  act(r, "Elu", [](Ctx& c, V x) {
    V neg = c.bin(OpKind::Lt, x, sc(c, 0, x));
    V e = c.bin(OpKind::Mul, sc(c, c.attr_f("alpha", 1.0), x), c.bin(OpKind::Sub, c.unary(OpKind::Exp, x), sc(c, 1, x)));
    return c.select(neg, e, x);
  });
  act(r, "Selu", [](Ctx& c, V x) {
    double alpha = c.attr_f("alpha", 1.67326319217681884765625), gamma = c.attr_f("gamma", 1.05070102214813232421875);
    V neg = c.bin(OpKind::Le, x, sc(c, 0, x));
    V e = c.bin(OpKind::Mul, sc(c, alpha, x), c.bin(OpKind::Sub, c.unary(OpKind::Exp, x), sc(c, 1, x)));
    return c.bin(OpKind::Mul, sc(c, gamma, x), c.select(neg, e, x));
  });
  act(r, "Celu", [](Ctx& c, V x) {
    double alpha = c.attr_f("alpha", 1.0);
    V e = c.bin(OpKind::Mul, sc(c, alpha, x),
                c.bin(OpKind::Sub, c.unary(OpKind::Exp, c.bin(OpKind::Div, x, sc(c, alpha, x))), sc(c, 1, x)));
    return c.bin(OpKind::Add, c.bin(OpKind::Max, x, sc(c, 0, x)), c.bin(OpKind::Min, e, sc(c, 0, x)));
  });
  act(r, "HardSigmoid", [](Ctx& c, V x) {
    V y = c.bin(OpKind::Add, c.bin(OpKind::Mul, x, sc(c, c.attr_f("alpha", 0.2), x)), sc(c, c.attr_f("beta", 0.5), x));
    return c.bin(OpKind::Max, sc(c, 0, x), c.bin(OpKind::Min, sc(c, 1, x), y));
  });
  act(r, "HardSwish", [](Ctx& c, V x) {
    V y = c.bin(OpKind::Add, c.bin(OpKind::Mul, x, sc(c, 1.0 / 6, x)), sc(c, 0.5, x));
    return c.bin(OpKind::Mul, x, c.bin(OpKind::Max, sc(c, 0, x), c.bin(OpKind::Min, sc(c, 1, x), y)));
  });
  act(r, "ThresholdedRelu", [](Ctx& c, V x) {
    return c.select(c.bin(OpKind::Gt, x, sc(c, c.attr_f("alpha", 1.0), x)), x, sc(c, 0, x));
  });
  act(r, "Swish", [](Ctx& c, V x) {
    return c.bin(OpKind::Mul, x, c.unary(OpKind::Logistic, c.bin(OpKind::Mul, x, sc(c, c.attr_f("alpha", 1.0), x))));
  });
  act(r, "Gelu", [](Ctx& c, V x) {
    std::string ap = c.attr_s("approximate", "none");
    if (ap != "none" && ap != "tanh") c.error("approximate must be none|tanh");
    return c.op1(OpKind::Gelu, {x}, {{"approximate", ap}});
  });
  r["Shrink"] = [](Ctx& c) {
    V x = c.in(0);
    double l = c.attr_f("lambd", 0.5), bias = c.attr_f("bias", 0.0);
    DType dt = c.dtype(x);
    V xf = c.convert(x, is_float(dt) ? dt : DType::f64);
    V lo = c.bin(OpKind::Lt, xf, sc(c, -l, xf)), hi = c.bin(OpKind::Gt, xf, sc(c, l, xf));
    V y = c.select(lo, c.bin(OpKind::Add, xf, sc(c, bias, xf)), c.select(hi, c.bin(OpKind::Sub, xf, sc(c, bias, xf)), sc(c, 0, xf)));
    c.set_output(0, c.convert(y, dt));
  };
  r["PRelu"] = [](Ctx& c) {
    V x = c.in(0), s = c.in(1);
    c.set_output(0, c.select(c.bin(OpKind::Lt, x, sc(c, 0, x)), c.bin(OpKind::Mul, x, s), x));
  };
  r["IsInf"] = [](Ctx& c) {
    V x = c.in(0);
    double inf = std::numeric_limits<double>::infinity();
    V pos = c.bin(OpKind::Eq, x, sc(c, inf, x)), neg = c.bin(OpKind::Eq, x, sc(c, -inf, x));
    bool dp = c.attr_i("detect_positive", 1), dn = c.attr_i("detect_negative", 1);
    if (dp && dn) return c.set_output(0, c.bin(OpKind::Or, pos, neg));
    if (dp) return c.set_output(0, pos);
    if (dn) return c.set_output(0, neg);
    c.set_output(0, c.bin(OpKind::And, pos, neg));
  };
  // Casts into a storage-only type (float8/float4/int4/int2) round onto its value grid in the
  // carrier dtype (storage_formats.h); the output remembers its format.
  auto cast_to = [](Ctx& c, V x, int to) {
    if (is_narrow_type(to)) {
      // saturate applies to the float formats only (integer formats: storage_formats.h).
      bool sat = is_narrow_float(to) && c.attr_i("saturate", 1) != 0;
      V y = emit_narrow_cast(c, x, to, sat, c.attr_s("round_mode", "up"));
      c.set_storage_type(y, to);
      return c.set_output(0, y);
    }
    c.set_output(0, c.convert(x, onnx_to(c, to)));
  };
  r["Cast"] = [cast_to](Ctx& c) { cast_to(c, c.in(0), static_cast<int>(c.attr_i("to", 1))); };
  r["CastLike"] = [cast_to](Ctx& c) {
    V like = c.in(1);
    if (int st = c.storage_type(like)) return cast_to(c, c.in(0), st);
    c.set_output(0, c.convert(c.in(0), c.dtype(like)));
  };
  r["Where"] = [](Ctx& c) { c.set_output(0, c.select(c.in(0), c.in(1), c.in(2))); };
  r["Clip"] = [](Ctx& c) {
    V x = c.in(0);
    if (c.opset() < 11) {
      x = c.bin(OpKind::Max, x, sc(c, c.attr_f("min", -std::numeric_limits<double>::infinity()), x));
      return c.set_output(0, c.bin(OpKind::Min, x, sc(c, c.attr_f("max", std::numeric_limits<double>::infinity()), x)));
    }
    if (c.has_input(1)) x = c.bin(OpKind::Max, x, c.in(1));
    if (c.has_input(2)) x = c.bin(OpKind::Min, x, c.in(2));
    c.set_output(0, x);
  };
}

}  // namespace rlx::onnx
