// The C-like renderer base: dispatch to kernel families, scalar expressions, conversions and the
// fused elementwise kernel. Expressions use C spellings; each language's prelude maps the few that
// differ (GLSL: rsqrt -> inversesqrt, rint -> roundEven, erf/fmod helpers).
#include <cmath>
#include <cstdio>
#include <sstream>

#include "codegen/renderer.h"

namespace rlx::codegen {

using O = OpKind;

std::vector<int64_t> dims_of(const ValueType& t) { return static_dims(t.shape); }
std::vector<int64_t> strides_of(const std::vector<int64_t>& d) {
  std::vector<int64_t> s(d.size(), 1);
  for (int64_t i = static_cast<int64_t>(d.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * d[i + 1];
  return s;
}
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::string unravel(const std::string& flat, const std::vector<int64_t>& d, const std::string& p) {
  std::ostringstream os;
  // remainder named "<p>_r", not "<p>r" ("or" is a C++ keyword; CUDA C is C++)
  const std::string r = p + "_r";
  os << "int " << r << " = " << flat << ";";
  for (int64_t i = static_cast<int64_t>(d.size()) - 1; i >= 0; --i) {
    if (i == 0) os << " int " << p << i << " = " << r << ";";
    else os << " int " << p << i << " = " << r << " % " << d[i] << "; " << r << " = " << r << " / " << d[i] << ";";
  }
  return os.str() + "\n";
}

std::string CLikeRenderer::flit(double v) const {
  if (std::isnan(v)) return "NAN_F";
  if (std::isinf(v)) return v > 0 ? "INF_F" : "(-INF_F)";
  char b[64];
  std::snprintf(b, sizeof b, "%.9g", v);
  std::string s = b;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return "(" + s + ")";
}

std::string CLikeRenderer::suffixed_flit(double v) const {
  std::string s = CLikeRenderer::flit(v);
  return s[0] == '(' && s.back() == ')' && s.find_first_of("NI") == std::string::npos ? "(" + s.substr(1, s.size() - 2) + "f)" : s;
}

std::string CLikeRenderer::c_ctype(DType t, bool has_f64) {
  switch (t) {
    case DType::f32: case DType::f16: case DType::bf16: return "float";
    case DType::f64: return has_f64 ? "double" : "";
    case DType::i8: case DType::u8: case DType::i16: case DType::i32: case DType::boolean: return "int";
    case DType::i64: return "long";
    default: return "";
  }
}

std::string CLikeRenderer::lit(DType t, double v) const {
  char b[64];
  if (t == DType::f64 && std::isfinite(v)) {
    std::snprintf(b, sizeof b, "%.17g", v);
    std::string s = b;
    return cast("double", s.find_first_of(".e") == std::string::npos ? s + ".0" : s);
  }
  if (is_float(t)) return t == DType::f64 ? cast("double", flit(v)) : flit(v);
  std::snprintf(b, sizeof b, "%lld", static_cast<long long>(v));
  return cast(ctype(t), std::string("(") + b + ")");
}

namespace {
bool is_movement(O op) {
  return op == O::BroadcastInDim || op == O::Transpose || op == O::Slice || op == O::Pad ||
         op == O::Concatenate || op == O::Gather || op == O::Reshape || op == O::Iota;
}
bool is_reduce(O op) {
  return op == O::ReduceSum || op == O::ReduceMax || op == O::ReduceMin || op == O::ReduceProd ||
         op == O::ArgMax || op == O::ArgMin || op == O::Cumsum;
}
}  // namespace

bool CLikeRenderer::has_kernel(OpKind op, DType t) const {
  if (ctype(t).empty()) return false;
  // GLSL keeps i64 in buffers only (low word read, sign-extended write): convert is its one kernel;
  // dispatch narrows other i64 ops to i32.
  if (t == DType::i64 && ctype(t) != "long") return op == O::Convert;
  if (t == DType::c64) return false;
  const bool compute = t == DType::f32 || t == DType::i32 || (t == DType::f64 && ctype(t) == "double") ||
                       (t == DType::i64 && ctype(t) == "long");
  if (op == O::Convert) return true;
  if (is_movement(op)) return true;
  if (is_elementwise(op)) return compute || t == DType::boolean;
  if (is_reduce(op) || op == O::DotGeneral || op == O::ScatterAdd) return compute;
  if (op == O::Softmax || op == O::LayerNorm || op == O::Attention || op == O::Conv) return is_float(t) && compute;
  if (op == O::ReduceWindow || op == O::Sort || op == O::TopK) return compute;
  return false;
}

std::string CLikeRenderer::convert(const std::string& x, DType from, DType to) const {
  if (to == DType::boolean) return "(" + x + " != " + lit(from, 0) + " ? 1 : 0)";
  std::string ct = ctype(to);
  if (is_float(from) && is_int(to)) {  // truncate, saturate, NaN -> 0
    double lo = -128, hi = 127;
    if (to == DType::u8) lo = 0, hi = 255;
    if (to == DType::i16) lo = -32768, hi = 32767;
    if (to == DType::i32) lo = -2147483648.0, hi = 2147483647.0;
    if (to == DType::i64) lo = -9223372036854775808.0, hi = 9223372036854775807.0;
    std::string hs = to == DType::i32 ? "2147483647" : to == DType::i64 ? "9223372036854775807L" : lit(to, hi);
    std::string ls = to == DType::i32 ? "(-2147483647-1)" : to == DType::i64 ? "(-9223372036854775807L-1L)" : lit(to, lo);
    std::string d = from == DType::f64 ? "double" : "float";
    return "(isnan(" + x + ") ? " + cast(ct, "0") + " : (" + x + " >= " + cast(d, flit(hi)) + " ? " + cast(ct, hs) +
           " : (" + x + " <= " + cast(d, flit(lo)) + " ? " + cast(ct, ls) + " : " + cast(ct, x) + ")))";
  }
  if (ctype(from) == ct) return x;
  return cast(ct, x);
}

std::string CLikeRenderer::expr(const Node& n, const std::vector<std::string>& a, const std::vector<DType>& at,
                                DType ot) const {
  DType t = at.empty() ? ot : at[0];
  const bool f = is_float(t), b = t == DType::boolean;
  auto un = [&](const char* fn) { return std::string(fn) + "(" + a[0] + ")"; };
  auto bin = [&](const char* op) { return "(" + a[0] + " " + op + " " + a[1] + ")"; };
  auto cmp = [&](const char* op) { return "(" + a[0] + " " + op + " " + a[1] + " ? 1 : 0)"; };
  std::string one = lit(t, 1), zero = lit(t, 0);
  switch (n.op) {
    case O::Neg: return "(-" + a[0] + ")";
    case O::Abs: return f ? un("fabs") : "(" + a[0] + " < " + zero + " ? -" + a[0] + " : " + a[0] + ")";
    case O::Exp: return un("exp");
    case O::Log: return un("log");
    case O::Sqrt: return un("sqrt");
    case O::Rsqrt: return un("rsqrt");
    case O::Tanh: return un("tanh");
    case O::Erf: return un("erf");
    case O::Sin: return un("sin");
    case O::Cos: return un("cos");
    case O::Logistic: return "(" + one + " / (" + one + " + exp(-" + a[0] + ")))";
    case O::Floor: return un("floor");
    case O::Ceil: return un("ceil");
    case O::Round: return un("rint");
    case O::Sign:
      return "(" + a[0] + " > " + zero + " ? " + one + " : (" + a[0] + " < " + zero + " ? -" + one + " : " + a[0] + "))";
    case O::Not: return b ? "(" + a[0] + " == 0 ? 1 : 0)" : "(~" + a[0] + ")";
    case O::IsNan: return "(isnan(" + a[0] + ") ? 1 : 0)";
    case O::Convert: return convert(a[0], t, ot);
    case O::Add: return bin("+");
    case O::Sub: return bin("-");
    case O::Mul: return bin("*");
    case O::Div:
      if (f) return bin("/");
      return "(" + a[1] + " == " + zero + " ? " + zero + " : (" + a[1] + " == -" + one + " ? -" + a[0] + " : " + a[0] +
             " / " + a[1] + "))";
    case O::Rem:
      if (f) return "fmod(" + a[0] + ", " + a[1] + ")";
      return "((" + a[1] + " == " + zero + " || " + a[1] + " == -" + one + ") ? " + zero + " : " + a[0] + " - " + a[1] +
             " * (" + a[0] + " / " + a[1] + "))";
    case O::Pow: return "pow(" + a[0] + ", " + a[1] + ")";
    case O::Max:
    case O::Min: {
      std::string m = std::string(n.op == O::Max ? "max" : "min") + "(" + a[0] + ", " + a[1] + ")";
      if (!f) return m;
      return "((isnan(" + a[0] + ") || isnan(" + a[1] + ")) ? " + cast(ctype(t), "NAN_F") + " : " + m + ")";
    }
    case O::And: return bin("&");
    case O::Or: return bin("|");
    case O::Xor: return bin("^");
    case O::Eq: return cmp("==");
    case O::Ne: return cmp("!=");
    case O::Lt: return cmp("<");
    case O::Le: return cmp("<=");
    case O::Gt: return cmp(">");
    case O::Ge: return cmp(">=");
    case O::Select: return "(" + a[0] + " != 0 ? " + a[1] + " : " + a[2] + ")";
    default: break;
  }
  fail("[codegen] ", language(), ": no expression for ", op_name(n.op));
}

std::string CLikeRenderer::body_nodes(const Graph& body, std::vector<std::string>& val) const {
  std::ostringstream os;
  for (auto& n : body.nodes) {
    std::vector<std::string> a;
    std::vector<DType> at;
    for (auto v : n.inputs) a.push_back(val[v]), at.push_back(body.type(v).dtype);
    DType ot = body.type(n.outputs[0]).dtype;
    os << ctype(ot) << " v" << n.outputs[0] << " = " << expr(n, a, at, ot) << ";\n";
    val[n.outputs[0]] = "v" + std::to_string(n.outputs[0]);
  }
  return os.str();
}

// One thread per output element; each input is read through its broadcast index.
std::string CLikeRenderer::body_fused(const Graph& body, const std::vector<ValueType>& in, const ValueType& out,
                                      RenderedKernel& k) const {
  auto od = dims_of(out);
  int64_t N = numel(out.shape);
  k.groups = ceil_div(N, k.local);
  std::ostringstream os;
  os << "int gid = GID;\nif (gid >= " << N << ") return;\n" << unravel("gid", od, "o");
  std::vector<std::string> val(body.values.size());
  for (size_t i = 0; i < body.inputs.size(); ++i) {
    auto d = dims_of(in[i]);
    auto st = strides_of(d);
    std::string idx = "0";
    size_t off = od.size() - d.size();
    for (size_t j = 0; j < d.size(); ++j)
      if (d[j] != 1) idx += " + o" + std::to_string(off + j) + " * " + std::to_string(st[j]);
    if (numel(in[i].shape) == N) idx = "gid";
    os << ctype(in[i].dtype) << " v" << body.inputs[i] << " = LD" << i << "(" << idx << ");\n";
    val[body.inputs[i]] = "v" + std::to_string(body.inputs[i]);
  }
  os << body_nodes(body, val);
  os << "ST" << in.size() << "(gid, " << val[body.outputs[0]] << ");\n";
  return os.str();
}

std::string CLikeRenderer::body_library(const LirKernel& k, const std::vector<ValueType>& in,
                                        const std::vector<ValueType>& out, RenderedKernel& rk,
                                        std::string& shared) const {
  if (is_movement(k.op)) return k_movement(k, in, out, rk);
  if (is_reduce(k.op) || k.op == O::ScatterAdd) return k_reduce(k, in, out, rk, shared);
  if (k.op == O::DotGeneral) return k_dot(k, in, out, rk, shared);
  if (k.op == O::Softmax || k.op == O::LayerNorm || k.op == O::Attention) return k_nn(k, in, out, rk, shared);
  if (k.op == O::Conv || k.op == O::ReduceWindow || k.op == O::Sort || k.op == O::TopK) return k_window(k, in, out, rk);
  if (is_elementwise(k.op)) {  // an unfused elementwise op: a one-node body
    Graph g;
    std::vector<ValueId> ins;
    for (size_t i = 0; i < in.size(); ++i) ins.push_back(g.add_input("a" + std::to_string(i), in[i].dtype, in[i].shape));
    auto outs = g.add_node(k.op, ins, k.attrs, "");
    g.outputs.push_back(outs[0]);
    return body_fused(g, in, out[0], rk);
  }
  fail("[codegen] ", language(), ": no kernel for ", op_name(k.op));
}

RenderedKernel CLikeRenderer::render(const LirKernel& k, const std::vector<ValueType>& in,
                                     const std::vector<ValueType>& out, const std::string& name) const {
  RenderedKernel rk;
  rk.name = name;
  for (auto& t : in) rk.args.push_back({t.dtype, false});
  for (auto& t : out) rk.args.push_back({t.dtype, true});
  for (auto& a : rk.args)
    RLX_CHECK(!ctype(a.dtype).empty(), "[codegen] ", language(), " has no buffers of ", dtype_name(a.dtype), " (kernel ",
              k.label(), ")");
  std::string shared;
  std::string body = k.kind == KernelKind::Generated ? body_fused(k.body, in, out[0], rk)
                                                     : body_library(k, in, out, rk, shared);
  // Large grids are split in 2-D by the API; surplus workgroups leave at once (uniformly, so no
  // barrier is skipped by part of a group).
  // OpenCL launches exact grids, and PoCL's work-item loops dislike a return ahead of barriers.
  std::string guard = shared_in_body() ? "" : "if (GRP >= " + std::to_string(rk.groups) + ") return;\n";
  rk.source = prelude(rk.args) + kernel_open(rk, shared) + guard + body + "}\n";
  finish(rk);
  return rk;
}

}  // namespace rlx::codegen
