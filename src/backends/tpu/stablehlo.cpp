#include "backends/tpu/stablehlo.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "runtime/env.h"

namespace rlx::pjrt {

using graph_api::FlatNode;
using graph_api::FlatProgram;

namespace {

std::string elem(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f64: return "f64";
    case DType::i8: return "i8";
    case DType::u8: return "ui8";
    case DType::i16: return "i16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::boolean: return "i1";
    default: break;
  }
  fail("[tpu] no StableHLO element type for ", dtype_name(t));
}

std::string tensor_type(const std::vector<int64_t>& d, DType t) {
  std::string s = "tensor<";
  for (auto x : d) s += std::to_string(x) + "x";
  return s + elem(t) + ">";
}

std::string i64_array(const std::vector<int64_t>& v) {
  std::string s = "array<i64";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : ": ") + std::to_string(v[i]);
  return s + ">";
}
std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// A scalar literal of dtype t for a dense<> attribute (floats as exact hex bits).
std::string literal(double v, DType t) {
  char b[64];
  if (t == DType::boolean) return v != 0 ? "true" : "false";
  if (t == DType::f32) {
    float f = static_cast<float>(v);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    std::snprintf(b, sizeof b, "0x%08" PRIX32, u);
    return b;
  }
  if (t == DType::f16 || t == DType::bf16) {
    float f = static_cast<float>(v);
    uint16_t h = t == DType::f16 ? f32_to_f16(f) : f32_to_bf16(f);
    std::snprintf(b, sizeof b, "0x%04X", static_cast<unsigned>(h));
    return b;
  }
  if (t == DType::f64) {
    uint64_t u;
    std::memcpy(&u, &v, 8);
    std::snprintf(b, sizeof b, "0x%016" PRIX64, u);
    return b;
  }
  RLX_CHECK(is_int(t), "[tpu] no literal for ", dtype_name(t));
  if (v <= -9.2233720368547758e18) return "-9223372036854775808";
  std::snprintf(b, sizeof b, "%" PRId64, static_cast<int64_t>(v));
  return b;
}

struct Emitter {
  const FlatProgram& f;
  std::ostringstream os;
  std::vector<std::string> name;  // SSA name per flat value
  int tmp = 0;

  std::string fresh() { return "%t" + std::to_string(tmp++); }
  std::string type(int v) const { return tensor_type(f.dims(v), f.values[v].dtype); }

  // `res = "op"(args) {attrs} : (arg types) -> res type`; returns res.
  std::string op(const std::string& o, const std::vector<std::pair<std::string, std::string>>& args,
                 const std::string& attrs, const std::string& rt, std::string res = "") {
    if (res.empty()) res = fresh();
    os << "    " << res << " = \"" << o << "\"(";
    for (size_t i = 0; i < args.size(); ++i) os << (i ? ", " : "") << args[i].first;
    os << ")" << (attrs.empty() ? "" : " {" + attrs + "}") << " : (";
    for (size_t i = 0; i < args.size(); ++i) os << (i ? ", " : "") << args[i].second;
    os << ") -> " << rt << "\n";
    return res;
  }
  std::string constant(double v, DType t) {
    std::string ty = tensor_type({}, t);
    return op("stablehlo.constant", {}, "value = dense<" + literal(v, t) + "> : " + ty, ty);
  }
  // Operand i of n, broadcast numpy-style to `od` when its shape differs.
  std::pair<std::string, std::string> operand(const FlatNode& n, size_t i, const std::vector<int64_t>& od) {
    int v = n.in[i];
    auto d = f.dims(v);
    if (d == od) return {name[v], type(v)};
    std::string rt = tensor_type(od, f.values[v].dtype);
    return {op("stablehlo.broadcast_in_dim", {{name[v], type(v)}},
               "broadcast_dimensions = " + i64_array(graph_api::broadcast_dims(d.size(), od.size())), rt),
            rt};
  }
  // A reduce over `axes` with the binary body `body_op` and init `init`.
  std::string reduce(const std::pair<std::string, std::string>& x, DType t, const std::vector<int64_t>& xd,
                     const std::vector<int64_t>& axes, const std::string& body_op, double init) {
    std::string c = constant(init, t), st = tensor_type({}, t);
    std::vector<int64_t> rd;
    for (size_t i = 0; i < xd.size(); ++i)
      if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) == axes.end()) rd.push_back(xd[i]);
    std::string res = fresh(), rt = tensor_type(rd, t);
    os << "    " << res << " = \"stablehlo.reduce\"(" << x.first << ", " << c << ") ({\n"
       << "    ^bb0(%a: " << st << ", %b: " << st << "):\n"
       << "      %r = \"" << body_op << "\"(%a, %b) : (" << st << ", " << st << ") -> " << st << "\n"
       << "      \"stablehlo.return\"(%r) : (" << st << ") -> ()\n"
       << "    }) {dimensions = " << i64_array(axes) << "} : (" << x.second << ", " << st << ") -> " << rt << "\n";
    return res;
  }
  std::string compare(const std::string& dir, const std::pair<std::string, std::string>& a,
                      const std::pair<std::string, std::string>& b, const std::vector<int64_t>& od) {
    return op("stablehlo.compare", {a, b}, "comparison_direction = #stablehlo<comparison_direction " + dir + ">",
              tensor_type(od, DType::boolean));
  }

  void node(const FlatNode& n);
  void argreduce(const FlatNode& n, const std::string& res);
};

double lowest(DType t) {
  if (t == DType::i32) return std::numeric_limits<int32_t>::min();
  if (t == DType::i64) return -9.3e18;  // literal() prints INT64_MIN
  return -std::numeric_limits<double>::infinity();
}
double highest(DType t) {
  if (t == DType::i32) return std::numeric_limits<int32_t>::max();
  if (t == DType::i64) return static_cast<double>(std::numeric_limits<int64_t>::max() - 1023);  // exact in double
  return std::numeric_limits<double>::infinity();
}

// argmax/argmin: a variadic reduce over (x, iota) keeping the first index of the extremum.
void Emitter::argreduce(const FlatNode& n, const std::string& res) {
  int x = n.in[0];
  auto xd = f.dims(x);
  DType t = f.values[x].dtype;
  int64_t ax = norm_axis(graph_api::attr_i(n, "axis"), static_cast<int64_t>(xd.size()), "argmax");
  bool mx = n.op == OpKind::ArgMax;
  std::string it = tensor_type(xd, DType::i64);
  std::string iota = op("stablehlo.iota", {}, "iota_dimension = " + std::to_string(ax) + " : i64", it);
  std::string cv = constant(mx ? lowest(t) : highest(t), t), ci = constant(0, DType::i64);
  std::string st = tensor_type({}, t), si = tensor_type({}, DType::i64), sb = tensor_type({}, DType::boolean);
  std::vector<int64_t> rd;
  for (size_t i = 0; i < xd.size(); ++i)
    if (static_cast<int64_t>(i) != ax) rd.push_back(xd[i]);
  std::string r = fresh();
  os << "    " << r << ":2 = \"stablehlo.reduce\"(" << name[x] << ", " << iota << ", " << cv << ", " << ci << ") ({\n"
     << "    ^bb0(%a: " << st << ", %ai: " << si << ", %b: " << st << ", %bi: " << si << "):\n"
     << "      %g = \"stablehlo.compare\"(%a, %b) {comparison_direction = #stablehlo<comparison_direction "
     << (mx ? "GT" : "LT") << ">} : (" << st << ", " << st << ") -> " << sb << "\n"
     << "      %e = \"stablehlo.compare\"(%a, %b) {comparison_direction = #stablehlo<comparison_direction EQ>} : ("
     << st << ", " << st << ") -> " << sb << "\n"
     << "      %l = \"stablehlo.compare\"(%ai, %bi) {comparison_direction = #stablehlo<comparison_direction LT>} : ("
     << si << ", " << si << ") -> " << sb << "\n"
     << "      %el = \"stablehlo.and\"(%e, %l) : (" << sb << ", " << sb << ") -> " << sb << "\n"
     << "      %k = \"stablehlo.or\"(%g, %el) : (" << sb << ", " << sb << ") -> " << sb << "\n"
     << "      %v = \"stablehlo.select\"(%k, %a, %b) : (" << sb << ", " << st << ", " << st << ") -> " << st << "\n"
     << "      %i = \"stablehlo.select\"(%k, %ai, %bi) : (" << sb << ", " << si << ", " << si << ") -> " << si << "\n"
     << "      \"stablehlo.return\"(%v, %i) : (" << st << ", " << si << ") -> ()\n"
     << "    }) {dimensions = " << i64_array({ax}) << "} : (" << type(x) << ", " << it << ", " << st << ", " << si
     << ") -> (" << tensor_type(rd, t) << ", " << tensor_type(rd, DType::i64) << ")\n";
  int o = n.out[0];
  std::string idx = r + "#1";
  std::string rt = tensor_type(rd, f.values[o].dtype);
  if (f.values[o].dtype != DType::i64) idx = op("stablehlo.convert", {{idx, tensor_type(rd, DType::i64)}}, "", rt);
  op("stablehlo.reshape", {{idx, rt}}, "", type(o), res);
}

void Emitter::node(const FlatNode& n) {
  using K = OpKind;
  RLX_CHECK(n.out.size() == 1, "[tpu] ", op_name(n.op), ": multi-output ops are not lowered");
  int o = n.out[0];
  const std::string res = name[o] = "%v" + std::to_string(o);
  auto od = f.dims(o);
  DType odt = f.values[o].dtype;
  const std::string ot = type(o);
  auto un = [&](const char* s) { op(s, {{name[n.in[0]], type(n.in[0])}}, "", ot, res); };
  auto bin = [&](const char* s) { op(s, {operand(n, 0, od), operand(n, 1, od)}, "", ot, res); };
  auto cmp = [&](const char* dir) {
    op("stablehlo.compare", {operand(n, 0, od), operand(n, 1, od)},
       std::string("comparison_direction = #stablehlo<comparison_direction ") + dir + ">", ot, res);
  };
  switch (n.op) {
    case K::Neg: return un("stablehlo.negate");
    case K::Abs: return un("stablehlo.abs");
    case K::Exp: return un("stablehlo.exponential");
    case K::Log: return un("stablehlo.log");
    case K::Sqrt: return un("stablehlo.sqrt");
    case K::Rsqrt: return un("stablehlo.rsqrt");
    case K::Tanh: return un("stablehlo.tanh");
    case K::Erf: return un("chlo.erf");
    case K::Sin: return un("stablehlo.sine");
    case K::Cos: return un("stablehlo.cosine");
    case K::Logistic: return un("stablehlo.logistic");
    case K::Floor: return un("stablehlo.floor");
    case K::Ceil: return un("stablehlo.ceil");
    case K::Round: return un("stablehlo.round_nearest_even");
    case K::Sign: return un("stablehlo.sign");
    case K::Not: return un("stablehlo.not");
    case K::Convert: return un("stablehlo.convert");
    case K::IsNan: {
      auto x = std::make_pair(name[n.in[0]], type(n.in[0]));
      op("stablehlo.compare", {x, x}, "comparison_direction = #stablehlo<comparison_direction NE>", ot, res);
      return;
    }
    case K::Add: return bin("stablehlo.add");
    case K::Sub: return bin("stablehlo.subtract");
    case K::Mul: return bin("stablehlo.multiply");
    case K::Div: return bin("stablehlo.divide");
    case K::Pow: return bin("stablehlo.power");
    case K::Max: return bin("stablehlo.maximum");
    case K::Min: return bin("stablehlo.minimum");
    case K::And: return bin("stablehlo.and");
    case K::Or: return bin("stablehlo.or");
    case K::Xor: return bin("stablehlo.xor");
    case K::Eq: return cmp("EQ");
    case K::Ne: return cmp("NE");
    case K::Lt: return cmp("LT");
    case K::Le: return cmp("LE");
    case K::Gt: return cmp("GT");
    case K::Ge: return cmp("GE");
    case K::Select: {
      op("stablehlo.select", {operand(n, 0, od), operand(n, 1, od), operand(n, 2, od)}, "", ot, res);
      return;
    }
    case K::ReduceSum:
    case K::ReduceMax:
    case K::ReduceMin:
    case K::ReduceProd: {
      int x = n.in[0];
      auto xd = f.dims(x);
      auto axes = graph_api::reduce_axes(n, static_cast<int64_t>(xd.size()));
      const char* body = n.op == K::ReduceSum ? "stablehlo.add" : n.op == K::ReduceMax ? "stablehlo.maximum"
                         : n.op == K::ReduceMin ? "stablehlo.minimum" : "stablehlo.multiply";
      double init = n.op == K::ReduceSum ? 0 : n.op == K::ReduceProd ? 1 : n.op == K::ReduceMax ? lowest(odt) : highest(odt);
      std::vector<int64_t> rd;
      for (size_t i = 0; i < xd.size(); ++i)
        if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) == axes.end()) rd.push_back(xd[i]);
      std::string r = reduce({name[x], type(x)}, odt, xd, axes, body, init);
      op("stablehlo.reshape", {{r, tensor_type(rd, odt)}}, "", ot, res);  // keepdims: the unit dims
      return;
    }
    case K::ArgMax:
    case K::ArgMin: return argreduce(n, res);
    case K::DotGeneral: {
      std::string dn = "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = " +
                       list(graph_api::attr_is(n, "lhs_batch")) + ", rhs_batching_dimensions = " +
                       list(graph_api::attr_is(n, "rhs_batch")) + ", lhs_contracting_dimensions = " +
                       list(graph_api::attr_is(n, "lhs_contract")) + ", rhs_contracting_dimensions = " +
                       list(graph_api::attr_is(n, "rhs_contract")) + ">";
      // XLA's GPU compiler runs an f32 dot at DEFAULT precision on TF32 tensor cores (10-bit
      // mantissa); RLX's f32 means f32, so ask for HIGHEST unless RLX_ALLOW_TF32=1 opts in, as on cuda.
      if ((odt == DType::f32 || odt == DType::f64) && !env_is_1("RLX_ALLOW_TF32"))
        dn += ", precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]";
      op("stablehlo.dot_general", {{name[n.in[0]], type(n.in[0])}, {name[n.in[1]], type(n.in[1])}}, dn, ot, res);
      return;
    }
    case K::BroadcastInDim:
      op("stablehlo.broadcast_in_dim", {{name[n.in[0]], type(n.in[0])}},
         "broadcast_dimensions = " + i64_array(graph_api::attr_is(n, "dims")), ot, res);
      return;
    case K::Reshape: return un("stablehlo.reshape");
    case K::Transpose:
      op("stablehlo.transpose", {{name[n.in[0]], type(n.in[0])}}, "permutation = " + i64_array(graph_api::attr_is(n, "perm")),
         ot, res);
      return;
    case K::Slice: {
      auto st = graph_api::attr_is(n, "start"), lim = graph_api::attr_is(n, "limit"), str = graph_api::attr_is(n, "stride");
      if (str.empty()) str.assign(st.size(), 1);
      op("stablehlo.slice", {{name[n.in[0]], type(n.in[0])}},
         "start_indices = " + i64_array(st) + ", limit_indices = " + i64_array(lim) + ", strides = " + i64_array(str), ot, res);
      return;
    }
    case K::Pad: {
      DType t = f.values[n.in[0]].dtype;
      std::string pv = constant(graph_api::attr_f(n, "value"), t);
      auto low = graph_api::attr_is(n, "low");
      op("stablehlo.pad", {{name[n.in[0]], type(n.in[0])}, {pv, tensor_type({}, t)}},
         "edge_padding_low = " + i64_array(low) + ", edge_padding_high = " + i64_array(graph_api::attr_is(n, "high")) +
             ", interior_padding = " + i64_array(std::vector<int64_t>(low.size(), 0)),
         ot, res);
      return;
    }
    case K::Concatenate: {
      std::vector<std::pair<std::string, std::string>> a;
      for (auto v : n.in) a.push_back({name[v], type(v)});
      int64_t ax = norm_axis(graph_api::attr_i(n, "axis"), static_cast<int64_t>(od.size()), "concatenate");
      op("stablehlo.concatenate", a, "dimension = " + std::to_string(ax) + " : i64", ot, res);
      return;
    }
    case K::Gather: {
      int x = n.in[0], ix = n.in[1];
      auto xd = f.dims(x), id = f.dims(ix);
      DType it = f.values[ix].dtype;
      int64_t r = static_cast<int64_t>(xd.size()), ir = static_cast<int64_t>(id.size());
      int64_t ax = norm_axis(graph_api::attr_i(n, "axis"), r, "gather");
      // Negative indices count from the end (the reference's take_index).
      std::string ity = type(ix), sit = tensor_type({}, it);
      auto bc = [&](const std::string& s) {
        return op("stablehlo.broadcast_in_dim", {{s, sit}}, "broadcast_dimensions = array<i64>", ity);
      };
      std::string zero = bc(constant(0, it)), len = bc(constant(static_cast<double>(xd[ax]), it));
      std::string neg = compare("LT", {name[ix], ity}, {zero, ity}, id);
      std::string wrapped = op("stablehlo.add", {{name[ix], ity}, {len, ity}}, "", ity);
      std::string idx = op("stablehlo.select", {{neg, tensor_type(id, DType::boolean)}, {wrapped, ity}, {name[ix], ity}}, "", ity);
      std::vector<int64_t> offset, sizes = xd;
      for (int64_t i = 0; i < r; ++i)
        if (i != ax) offset.push_back(i < ax ? i : i - 1 + ir);
      sizes[ax] = 1;
      std::string dn = "dimension_numbers = #stablehlo.gather<" +
                       (offset.empty() ? std::string() : "offset_dims = " + list(offset) + ", ") +
                       "collapsed_slice_dims = " + list({ax}) + ", start_index_map = " + list({ax}) +
                       ", index_vector_dim = " + std::to_string(ir) + ">, slice_sizes = " + i64_array(sizes) +
                       ", indices_are_sorted = false";
      op("stablehlo.gather", {{name[x], type(x)}, {idx, ity}}, dn, ot, res);
      return;
    }
    case K::Iota: {
      int64_t d = graph_api::attr_i(n, "dim");
      op("stablehlo.iota", {}, "iota_dimension = " + std::to_string(d) + " : i64", ot, res);
      return;
    }
    default: break;
  }
  fail("[tpu] no StableHLO lowering for ", op_name(n.op), " ('", n.origin, "')");
}

}  // namespace

std::string mlir_type(const ValueType& t) { return tensor_type(static_dims(t.shape), t.dtype); }

std::string emit_stablehlo(const FlatProgram& f) {
  Emitter e{f, {}, std::vector<std::string>(f.values.size()), 0};
  std::vector<int> args = f.inputs;
  for (auto& c : f.constants) args.push_back(c.first);
  std::ostringstream head;
  head << "module @rlx attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n"
       << "  func.func public @main(";
  for (size_t i = 0; i < args.size(); ++i) {
    e.name[args[i]] = "%arg" + std::to_string(i);
    head << (i ? ", " : "") << e.name[args[i]] << ": " << e.type(args[i]);
  }
  head << ") -> (";
  for (size_t i = 0; i < f.outputs.size(); ++i) head << (i ? ", " : "") << e.type(f.outputs[i]);
  head << ") {\n";
  for (auto& n : f.nodes) e.node(n);
  e.os << "    \"func.return\"(";
  for (size_t i = 0; i < f.outputs.size(); ++i) e.os << (i ? ", " : "") << e.name[f.outputs[i]];
  e.os << ") : (";
  for (size_t i = 0; i < f.outputs.size(); ++i) e.os << (i ? ", " : "") << e.type(f.outputs[i]);
  e.os << ") -> ()\n  }\n}\n";
  return head.str() + e.os.str();
}

}  // namespace rlx::pjrt
