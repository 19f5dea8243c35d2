// CUDA C rendering of fused elementwise kernels and shape-specialized library kernels.
#include "backends/cuda/render.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace rlx::cuda {

namespace {

using O = OpKind;

// Half/bf16 live as 16-bit integers; conversions use PTX so no cuda_fp16.h is needed.
const char* kPrelude = R"(typedef unsigned short rlx_f16;
typedef unsigned short rlx_bf16;
__device__ __forceinline__ float h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ unsigned short f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ unsigned short d2h(double f) { unsigned short h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(f)); return h; }
__device__ __forceinline__ float bf2f(unsigned short h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ unsigned short f2bf(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
__device__ __forceinline__ float rf16(float x) { return h2f(f2h(x)); }
__device__ __forceinline__ float rbf16(float x) { return bf2f(f2bf(x)); }
__device__ __forceinline__ float qnanf() { return __int_as_float(0x7fc00000); }
__device__ __forceinline__ double qnan() { return __longlong_as_double(0x7ff8000000000000LL); }
__device__ __forceinline__ float fmaxr(float a, float b) { if (a != a || b != b) return qnanf(); if (a == b) return __float_as_int(a) < 0 ? b : a; return a > b ? a : b; }
__device__ __forceinline__ float fminr(float a, float b) { if (a != a || b != b) return qnanf(); if (a == b) return __float_as_int(a) < 0 ? a : b; return a < b ? a : b; }
__device__ __forceinline__ double fmaxr(double a, double b) { if (a != a || b != b) return qnan(); if (a == b) return __double_as_longlong(a) < 0 ? b : a; return a > b ? a : b; }
__device__ __forceinline__ double fminr(double a, double b) { if (a != a || b != b) return qnan(); if (a == b) return __double_as_longlong(a) < 0 ? a : b; return a < b ? a : b; }
__device__ __forceinline__ long long f2i(double v, double lo, double hi, long long ilo, long long ihi) {
  if (v != v) return 0; if (v <= lo) return ilo; if (v >= hi) return ihi; return (long long)v;
}
__device__ __forceinline__ long long wadd(long long a, long long b) { return (long long)((unsigned long long)a + (unsigned long long)b); }
__device__ __forceinline__ long long wsub(long long a, long long b) { return (long long)((unsigned long long)a - (unsigned long long)b); }
__device__ __forceinline__ long long wmul(long long a, long long b) { return (long long)((unsigned long long)a * (unsigned long long)b); }
__device__ __forceinline__ long long idiv(long long a, long long b) { return b == 0 ? 0 : (b == -1 ? wsub(0, a) : a / b); }
__device__ __forceinline__ long long irem(long long a, long long b) { return (b == 0 || b == -1) ? 0 : a % b; }
__device__ __forceinline__ float warp_sum(float v) { for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o); return v; }
__device__ __forceinline__ float warp_max(float v) { for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o)); return v; }
__device__ __forceinline__ double warp_sum(double v) { for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o); return v; }
__device__ __forceinline__ double warp_max(double v) { for (int o = 16; o; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o)); return v; }
)";

enum class Dm { F, D, I, B };  // compute domain: float, double, int64, bool
Dm dom(DType t) {
  if (t == DType::f64) return Dm::D;
  if (is_float(t)) return Dm::F;
  if (t == DType::boolean) return Dm::B;
  return Dm::I;
}
std::string ctype_compute(DType t) {
  switch (dom(t)) {
    case Dm::F: return "float";
    case Dm::D: return "double";
    case Dm::I: return "long long";
    case Dm::B: return "int";
  }
  return "?";
}
std::string load(DType t, const std::string& e) {
  if (t == DType::f16) return "h2f(" + e + ")";
  if (t == DType::bf16) return "bf2f(" + e + ")";
  return "(" + ctype_compute(t) + ")(" + e + ")";
}
std::string store(DType t, const std::string& e) {
  if (t == DType::f16) return "f2h(" + e + ")";
  if (t == DType::bf16) return "f2bf(" + e + ")";
  if (t == DType::boolean) return "(unsigned char)((" + e + ") != 0)";
  return "(" + c_type(t) + ")(" + e + ")";
}
// The value of `e` (already in compute type) rounded/wrapped to dtype t, as the reference does per node.
std::string wrap(DType t, const std::string& e) {
  switch (t) {
    case DType::f16: return "rf16(" + e + ")";
    case DType::bf16: return "rbf16(" + e + ")";
    case DType::f32: return "(float)(" + e + ")";
    case DType::f64: return "(double)(" + e + ")";
    case DType::boolean: return "((" + e + ") != 0)";
    case DType::i64: return "(long long)(" + e + ")";
    default: return "(long long)(" + c_type(t) + ")(" + e + ")";
  }
}
std::string num(double v) {
  if (std::isnan(v)) return "qnan()";
  if (std::isinf(v)) return v > 0 ? "__longlong_as_double(0x7ff0000000000000LL)" : "__longlong_as_double(0xfff0000000000000LL)";
  char b[64];
  std::snprintf(b, sizeof b, "%.17g", v);
  std::string s = b;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}
void int_range(DType t, long long* lo, long long* hi) {
  switch (t) {
    case DType::i8: *lo = -128, *hi = 127; break;
    case DType::u8: *lo = 0, *hi = 255; break;
    case DType::i16: *lo = -32768, *hi = 32767; break;
    case DType::i32: *lo = -2147483648LL, *hi = 2147483647LL; break;
    default: *lo = (-9223372036854775807LL - 1), *hi = 9223372036854775807LL; break;
  }
}
std::string ll(long long v) {
  if (v == (-9223372036854775807LL - 1)) return "(-9223372036854775807LL - 1)";
  return std::to_string(v) + "LL";
}

// Conversion of compute value `e` of dtype `from` to the compute value of dtype `to`.
std::string convert_expr(DType from, DType to, const std::string& e) {
  Dm f = dom(from);
  if (to == DType::boolean) return "((" + e + ") != 0)";
  if (is_float(to)) {
    if (to == DType::f16 && f == Dm::D) return "h2f(d2h(" + e + "))";
    return wrap(to, "(" + std::string(to == DType::f64 ? "double" : "float") + ")(" + e + ")");
  }
  if (f == Dm::F || f == Dm::D) {
    long long lo, hi;
    int_range(to, &lo, &hi);
    return "f2i((double)(" + e + "), " + num(static_cast<double>(lo)) + ", " + num(static_cast<double>(hi)) + ", " +
           ll(lo) + ", " + ll(hi) + ")";
  }
  return wrap(to, e);
}

std::string fn(DType t, const char* name) { return t == DType::f64 ? name : std::string(name) + "f"; }

std::string unary_expr(O k, DType t, const std::string& x) {
  Dm d = dom(t);
  if (d == Dm::F || d == Dm::D) {
    std::string one = d == Dm::D ? "1.0" : "1.0f", zero = d == Dm::D ? "0.0" : "0.0f";
    switch (k) {
      case O::Neg: return "(-" + x + ")";
      case O::Abs: return fn(t, "fabs") + "(" + x + ")";
      case O::Exp: return fn(t, "exp") + "(" + x + ")";
      case O::Log: return fn(t, "log") + "(" + x + ")";
      case O::Sqrt: return fn(t, "sqrt") + "(" + x + ")";
      case O::Rsqrt: return "(" + one + " / " + fn(t, "sqrt") + "(" + x + "))";
      case O::Tanh: return fn(t, "tanh") + "(" + x + ")";
      case O::Erf: return fn(t, "erf") + "(" + x + ")";
      case O::Sin: return fn(t, "sin") + "(" + x + ")";
      case O::Cos: return fn(t, "cos") + "(" + x + ")";
      case O::Logistic: return "(" + one + " / (" + one + " + " + fn(t, "exp") + "(-" + x + ")))";
      case O::Floor: return fn(t, "floor") + "(" + x + ")";
      case O::Ceil: return fn(t, "ceil") + "(" + x + ")";
      case O::Round: return fn(t, "rint") + "(" + x + ")";
      case O::Sign: return "(" + x + " != " + x + " ? " + x + " : (" + x + " > " + zero + " ? " + one + " : (" + x +
                           " < " + zero + " ? -" + one + " : " + zero + ")))";
      case O::IsNan: return "(" + x + " != " + x + ")";
      default: break;
    }
  } else if (d == Dm::I) {
    switch (k) {
      case O::Neg: return "wsub(0, " + x + ")";
      case O::Abs: return "(" + x + " < 0 ? wsub(0, " + x + ") : " + x + ")";
      case O::Sign: return "(" + x + " > 0 ? 1LL : (" + x + " < 0 ? -1LL : 0LL))";
      case O::Not: return "(~" + x + ")";
      default: break;
    }
  } else if (k == O::Not) {
    return "(" + x + " ? 0 : 1)";
  }
  return "";
}

std::string binary_expr(O k, DType t, const std::string& a, const std::string& b) {
  Dm d = dom(t);
  switch (k) {
    case O::Eq: return "(" + a + " == " + b + ")";
    case O::Ne: return "(" + a + " != " + b + ")";
    case O::Lt: return "(" + a + " < " + b + ")";
    case O::Le: return "(" + a + " <= " + b + ")";
    case O::Gt: return "(" + a + " > " + b + ")";
    case O::Ge: return "(" + a + " >= " + b + ")";
    default: break;
  }
  if (d == Dm::F || d == Dm::D) {
    switch (k) {
      case O::Add: return "(" + a + " + " + b + ")";
      case O::Sub: return "(" + a + " - " + b + ")";
      case O::Mul: return "(" + a + " * " + b + ")";
      case O::Div: return "(" + a + " / " + b + ")";
      case O::Pow: return fn(t, "pow") + "(" + a + ", " + b + ")";
      case O::Max: return "fmaxr(" + a + ", " + b + ")";
      case O::Min: return "fminr(" + a + ", " + b + ")";
      case O::Rem: return fn(t, "fmod") + "(" + a + ", " + b + ")";
      default: return "";
    }
  }
  switch (k) {
    case O::Add: return d == Dm::B ? "(" + a + " + " + b + ")" : "wadd(" + a + ", " + b + ")";
    case O::Sub: return d == Dm::B ? "" : "wsub(" + a + ", " + b + ")";
    case O::Mul: return d == Dm::B ? "(" + a + " * " + b + ")" : "wmul(" + a + ", " + b + ")";
    case O::Div: return d == Dm::B ? "" : "idiv(" + a + ", " + b + ")";
    case O::Rem: return d == Dm::B ? "" : "irem(" + a + ", " + b + ")";
    case O::Max: return "(" + a + " > " + b + " ? " + a + " : " + b + ")";
    case O::Min: return "(" + a + " < " + b + " ? " + a + " : " + b + ")";
    case O::And: return "(" + a + " & " + b + ")";
    case O::Or: return "(" + a + " | " + b + ")";
    case O::Xor: return "(" + a + " ^ " + b + ")";
    default: return "";
  }
}

std::string idx_type(int64_t n) { return n < (int64_t{1} << 31) - 1 ? "int" : "long long"; }

// Emits code that unravels `var` (row-major over `dims`) into c0..c{r-1}.
std::string unravel(const std::vector<int64_t>& dims, const std::string& var, const std::string& it,
                    const std::string& pre = "c") {
  std::ostringstream os;
  os << "    " << it << " r_ = " << var << ";\n";
  for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
    os << "    " << it << " " << pre << d << " = r_ % " << dims[d] << "; r_ /= " << dims[d] << ";\n";
  }
  os << "    (void)r_;\n";
  return os.str();
}
std::vector<int64_t> strides(const std::vector<int64_t>& d) {
  std::vector<int64_t> s(d.size(), 1);
  for (int64_t i = static_cast<int64_t>(d.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * d[i + 1];
  return s;
}
int64_t prod(const std::vector<int64_t>& d) {
  int64_t p = 1;
  for (auto x : d) p *= x;
  return p;
}
unsigned grid_for(int64_t n, unsigned block) {
  int64_t g = (n + block - 1) / block;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(g, 1 << 20)));
}

std::string header(const std::vector<ValueType>& in, const std::vector<ValueType>& out) {
  std::ostringstream os;
  os << kPrelude << "extern \"C\" __global__ void rlx_kernel(";
  for (size_t i = 0; i < in.size(); ++i)
    os << (i ? ", " : "") << "const " << c_type(in[i].dtype) << "* __restrict__ in" << i;
  for (size_t i = 0; i < out.size(); ++i)
    os << (in.size() + i ? ", " : "") << c_type(out[i].dtype) << "* __restrict__ out" << i;
  os << ") {\n";
  return os.str();
}

// Offset expression of a numpy-broadcast input of shape `s` at output coords c0..c{r-1}.
std::string bcast_offset(const std::vector<int64_t>& s, const std::vector<int64_t>& od) {
  int64_t r = static_cast<int64_t>(od.size()), tr = static_cast<int64_t>(s.size());
  auto st = strides(s);
  std::string e;
  for (int64_t d = 0; d < r; ++d) {
    int64_t td = d - (r - tr);
    if (td < 0 || s[td] == 1) continue;
    e += (e.empty() ? "" : " + ") + ("c" + std::to_string(d)) + (st[td] == 1 ? "" : " * " + std::to_string(st[td]));
  }
  return e.empty() ? "0" : e;
}

// Grid-stride loop over N output elements; `body` sees index `i` (and coords when `coords`).
std::string elementwise_loop(int64_t n, const std::vector<int64_t>& od, bool coords, const std::string& body) {
  std::string it = idx_type(n);
  std::ostringstream os;
  os << "  for (" << it << " i = blockIdx.x * (" << it << ")blockDim.x + threadIdx.x; i < " << n << "; i += ("
     << it << ")gridDim.x * blockDim.x) {\n";
  if (coords) os << unravel(od, "i", it);
  os << body << "  }\n}\n";
  return os.str();
}

}  // namespace

std::string c_type(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f16: return "rlx_f16";
    case DType::bf16: return "rlx_bf16";
    case DType::f64: return "double";
    case DType::i8: return "signed char";
    case DType::u8: return "unsigned char";
    case DType::i16: return "short";
    case DType::i32: return "int";
    case DType::i64: return "long long";
    case DType::boolean: return "unsigned char";
    default: fail("[cuda] dtype ", dtype_name(t), " has no CUDA storage type here");
  }
}

KernelSource render_fused(const Graph& body, const ValueType& out) {
  std::vector<ValueType> in;
  for (auto v : body.inputs) in.push_back(body.type(v));
  auto od = static_dims(out.shape);
  int64_t n = prod(od);
  bool coords = false;
  for (auto& t : in) coords |= static_dims(t.shape) != od;
  std::ostringstream b;
  std::vector<std::string> var(body.values.size());
  for (size_t i = 0; i < body.inputs.size(); ++i) {
    auto s = static_dims(in[i].shape);
    std::string off = s == od ? "i" : bcast_offset(s, od);
    var[body.inputs[i]] = "v" + std::to_string(body.inputs[i]);
    b << "    " << ctype_compute(in[i].dtype) << " " << var[body.inputs[i]] << " = "
      << load(in[i].dtype, "in" + std::to_string(i) + "[" + off + "]") << ";\n";
  }
  for (auto& nd : body.nodes) {
    DType it = body.type(nd.inputs[0]).dtype, ot = body.type(nd.outputs[0]).dtype;
    std::string e;
    if (nd.op == O::Convert) e = convert_expr(it, ot, var[nd.inputs[0]]);
    else if (nd.op == O::Select) e = "(" + var[nd.inputs[0]] + " ? " + var[nd.inputs[1]] + " : " + var[nd.inputs[2]] + ")";
    else if (nd.inputs.size() == 1) e = unary_expr(nd.op, it, var[nd.inputs[0]]);
    else e = binary_expr(nd.op, it, var[nd.inputs[0]], var[nd.inputs[1]]);
    RLX_CHECK(!e.empty(), "[cuda] renderer: no CUDA expression for ", op_name(nd.op), " on ", dtype_name(it));
    var[nd.outputs[0]] = "v" + std::to_string(nd.outputs[0]);
    b << "    " << ctype_compute(ot) << " " << var[nd.outputs[0]] << " = " << wrap(ot, e) << ";\n";
  }
  b << "    out0[i] = " << store(out.dtype, var[body.outputs[0]]) << ";\n";
  KernelSource ks;
  ks.code = header(in, {out}) + elementwise_loop(n, od, coords, b.str());
  ks.grid = grid_for(n, ks.block);
  ks.num_params = static_cast<int>(in.size()) + 1;
  return ks;
}

namespace {

// out[i] = in0[offset(c)] (or a fill value when `guard` is false): transpose, broadcast, slice, pad.
KernelSource index_kernel(const std::vector<ValueType>& in, const ValueType& out, const std::string& offset,
                          const std::string& guard = "", const std::string& fill = "") {
  auto od = static_dims(out.shape);
  int64_t n = prod(od);
  std::ostringstream b;
  if (guard.empty()) {
    b << "    out0[i] = in0[" << offset << "];\n";
  } else {
    b << "    if (" << guard << ") out0[i] = in0[" << offset << "]; else out0[i] = " << fill << ";\n";
  }
  KernelSource ks;
  ks.code = header(in, {out}) + elementwise_loop(n, od, true, b.str());
  ks.grid = grid_for(n, ks.block);
  ks.num_params = static_cast<int>(in.size()) + 1;
  return ks;
}

std::string join_terms(const std::vector<std::string>& t) {
  std::string e;
  for (auto& x : t) e += (e.empty() ? "" : " + ") + x;
  return e.empty() ? "0" : e;
}

KernelSource reduce_kernel(const LirKernel& k, const ValueType& x, const ValueType& out) {
  auto xd = static_dims(x.shape);
  int64_t r = static_cast<int64_t>(xd.size());
  std::vector<bool> red(r, false);
  Node nd{k.op, {}, {}, k.attrs, ""};  // attr_ints returns a reference into the node: keep it alive
  for (auto a : attr_ints(nd, "axes")) red[norm_axis(a, r, "reduce")] = true;
  std::vector<int64_t> kept, kdims, rdims, rst;
  auto xs = strides(xd);
  std::vector<int64_t> kst;
  for (int64_t d = 0; d < r; ++d) {
    if (red[d]) rdims.push_back(xd[d]), rst.push_back(xs[d]);
    else kdims.push_back(xd[d]), kst.push_back(xs[d]);
  }
  int64_t n = prod(kdims), m = prod(rdims);
  DType t = x.dtype;
  Dm d = dom(t);
  std::string acc = d == Dm::I ? "long long" : (d == Dm::B ? "long long" : "double");
  std::string init, step;
  switch (k.op) {
    case O::ReduceSum: init = "0"; step = d == Dm::I ? "a = wadd(a, v);" : "a += v;"; break;
    case O::ReduceProd: init = "1"; step = d == Dm::I ? "a = wmul(a, v);" : "a *= v;"; break;
    case O::ReduceMax:
      init = d == Dm::I || d == Dm::B ? ll(-9223372036854775807LL - 1) : "__longlong_as_double(0xfff0000000000000LL)";
      step = d == Dm::I || d == Dm::B ? "a = v > a ? v : a;" : "a = fmaxr(a, v);";
      break;
    default:
      init = d == Dm::I || d == Dm::B ? ll(9223372036854775807LL) : "__longlong_as_double(0x7ff0000000000000LL)";
      step = d == Dm::I || d == Dm::B ? "a = v < a ? v : a;" : "a = fminr(a, v);";
      break;
  }
  std::ostringstream b;
  std::vector<std::string> base;
  for (size_t j = 0; j < kdims.size(); ++j) base.push_back("c" + std::to_string(j) + " * " + std::to_string(kst[j]));
  b << "    long long base = " << join_terms(base) << ";\n    " << acc << " a = " << init << ";\n";
  b << "    for (long long j = 0; j < " << m << "; ++j) {\n      long long rr = j, off = base;\n";
  for (int64_t q = static_cast<int64_t>(rdims.size()) - 1; q >= 0; --q)
    b << "      off += (rr % " << rdims[q] << ") * " << rst[q] << "; rr /= " << rdims[q] << ";\n";
  b << "      " << acc << " v = (" << acc << ")" << load(t, "in0[off]") << ";\n      " << step << "\n    }\n";
  b << "    out0[i] = " << store(out.dtype, d == Dm::F ? "(float)a" : "a") << ";\n";
  KernelSource ks;
  ks.code = header({x}, {out}) + elementwise_loop(n, kdims.empty() ? std::vector<int64_t>{1} : kdims, true, b.str());
  ks.grid = grid_for(std::max<int64_t>(n, 1), ks.block);
  ks.num_params = 2;
  return ks;
}

KernelSource arg_kernel(const LirKernel& k, const ValueType& x, const ValueType& out) {
  auto xd = static_dims(x.shape);
  int64_t r = static_cast<int64_t>(xd.size());
  Node nd{k.op, {}, {}, k.attrs, ""};
  int64_t ax = norm_axis(attr_int(nd, "axis"), r, "argmax");
  auto xs = strides(xd);
  std::vector<int64_t> kdims, kst;
  for (int64_t d = 0; d < r; ++d)
    if (d != ax) kdims.push_back(xd[d]), kst.push_back(xs[d]);
  if (kdims.empty()) kdims.push_back(1), kst.push_back(0);
  int64_t n = prod(kdims);
  bool is_max = k.op == O::ArgMax;
  bool fl = is_float(x.dtype);
  std::vector<std::string> base;
  for (size_t j = 0; j < kdims.size(); ++j) base.push_back("c" + std::to_string(j) + " * " + std::to_string(kst[j]));
  std::ostringstream b;
  std::string ct = ctype_compute(x.dtype);
  b << "    long long base = " << join_terms(base) << ", best = 0;\n";
  b << "    " << ct << " bv = " << load(x.dtype, "in0[base]") << ";\n";
  b << "    for (long long j = 1; j < " << xd[ax] << "; ++j) {\n";
  b << "      " << ct << " v = " << load(x.dtype, "in0[base + j * " + std::to_string(xs[ax]) + "]") << ";\n";
  if (fl) b << "      if (bv == bv && (v != v || v " << (is_max ? ">" : "<") << " bv)) { bv = v; best = j; }\n";
  else b << "      if (v " << (is_max ? ">" : "<") << " bv) { bv = v; best = j; }\n";
  b << "    }\n    out0[i] = " << store(out.dtype, "best") << ";\n";
  KernelSource ks;
  ks.code = header({x}, {out}) + elementwise_loop(n, kdims, true, b.str());
  ks.grid = grid_for(n, ks.block);
  ks.num_params = 2;
  return ks;
}

// dot_general by one thread per output element (integers, f64, and layouts cuBLASLt cannot take).
KernelSource dot_kernel(const LirKernel& k, const std::vector<ValueType>& in, const ValueType& out) {
  Node nd{k.op, {}, {}, k.attrs, ""};
  auto ld = static_dims(in[0].shape), rd = static_dims(in[1].shape);
  auto ls = strides(ld), rs = strides(rd);
  const auto &lb = attr_ints(nd, "lhs_batch"), &rb = attr_ints(nd, "rhs_batch"), &lc = attr_ints(nd, "lhs_contract"),
             &rc = attr_ints(nd, "rhs_contract");
  auto od = static_dims(out.shape);
  std::vector<std::string> lo, ro;
  size_t oc = 0;
  for (size_t j = 0; j < lb.size(); ++j, ++oc) {
    lo.push_back("c" + std::to_string(oc) + " * " + std::to_string(ls[lb[j]]));
    ro.push_back("c" + std::to_string(oc) + " * " + std::to_string(rs[rb[j]]));
  }
  auto free_dims = [&](const std::vector<int64_t>& d, const std::vector<int64_t>& b, const std::vector<int64_t>& c) {
    std::vector<int64_t> f;
    for (int64_t i = 0; i < static_cast<int64_t>(d.size()); ++i)
      if (std::find(b.begin(), b.end(), i) == b.end() && std::find(c.begin(), c.end(), i) == c.end()) f.push_back(i);
    return f;
  };
  for (auto f : free_dims(ld, lb, lc)) lo.push_back("c" + std::to_string(oc++) + " * " + std::to_string(ls[f]));
  for (auto f : free_dims(rd, rb, rc)) ro.push_back("c" + std::to_string(oc++) + " * " + std::to_string(rs[f]));
  int64_t m = 1;
  for (auto c : lc) m *= ld[c];
  DType t = in[0].dtype;
  Dm d = dom(t);
  std::string acc = d == Dm::I || d == Dm::B ? "long long" : (d == Dm::D ? "double" : "float");
  std::ostringstream b;
  b << "    long long lo = " << join_terms(lo) << ", ro = " << join_terms(ro) << ";\n    " << acc << " a = 0;\n";
  b << "    for (long long j = 0; j < " << m << "; ++j) {\n      long long rr = j, lo2 = lo, ro2 = ro;\n";
  for (int64_t q = static_cast<int64_t>(lc.size()) - 1; q >= 0; --q)
    b << "      { long long cc = rr % " << ld[lc[q]] << "; rr /= " << ld[lc[q]] << "; lo2 += cc * " << ls[lc[q]]
      << "; ro2 += cc * " << rs[rc[q]] << "; }\n";
  std::string x = "(" + acc + ")" + load(t, "in0[lo2]"), y = "(" + acc + ")" + load(in[1].dtype, "in1[ro2]");
  if (d == Dm::I || d == Dm::B) b << "      a = wadd(a, wmul(" << x << ", " << y << "));\n";
  else b << "      a += " << x << " * " << y << ";\n";
  b << "    }\n    out0[i] = " << store(out.dtype, "a") << ";\n";
  KernelSource ks;
  ks.code = header(in, {out}) + elementwise_loop(prod(od), od.empty() ? std::vector<int64_t>{1} : od, true, b.str());
  ks.grid = grid_for(prod(od), ks.block);
  ks.num_params = 3;
  return ks;
}

// Softmax along an axis: one warp per (outer, inner) row.
KernelSource softmax_kernel(const LirKernel& k, const ValueType& x, const ValueType& out) {
  auto xd = static_dims(x.shape);
  int64_t r = static_cast<int64_t>(xd.size());
  int64_t ax = norm_axis(attr_int(Node{k.op, {}, {}, k.attrs, ""}, "axis"), r, "softmax");
  int64_t len = xd[ax], inner = strides(xd)[ax], rows = prod(xd) / std::max<int64_t>(len, 1);
  std::string ct = ctype_compute(x.dtype), ninf = x.dtype == DType::f64 ? "(-1.0/0.0)" : "(-1.0f/0.0f)";
  std::ostringstream b;
  b << kPrelude << "extern \"C\" __global__ void rlx_kernel(const " << c_type(x.dtype) << "* __restrict__ in0, "
    << c_type(out.dtype) << "* __restrict__ out0) {\n"
    << "  long long row = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; int lane = threadIdx.x & 31;\n"
    << "  if (row >= " << rows << ") return;\n"
    << "  long long base = (row / " << inner << ") * " << len * inner << " + row % " << inner << ";\n"
    << "  " << ct << " m = " << ninf << "; bool nan_ = false;\n"
    << "  for (int j = lane; j < " << len << "; j += 32) { " << ct << " v = " << load(x.dtype, "in0[base + (long long)j * " + std::to_string(inner) + "]")
    << "; nan_ |= v != v; m = v > m ? v : m; }\n"
    << "  m = warp_max(m); nan_ = __any_sync(0xffffffffu, nan_);\n"
    << "  " << ct << " s = 0;\n"
    << "  for (int j = lane; j < " << len << "; j += 32) s += " << fn(x.dtype, "exp") << "(" << load(x.dtype, "in0[base + (long long)j * " + std::to_string(inner) + "]") << " - m);\n"
    << "  s = warp_sum(s);\n"
    << "  for (int j = lane; j < " << len << "; j += 32) { " << ct << " v = " << load(x.dtype, "in0[base + (long long)j * " + std::to_string(inner) + "]")
    << "; " << ct << " y = nan_ ? (" << ct << ")(0.0/0.0) : " << fn(x.dtype, "exp") << "(v - m) / s; out0[base + (long long)j * " << inner << "] = "
    << store(out.dtype, "y") << "; }\n}\n";
  KernelSource ks;
  ks.code = b.str();
  ks.block = 256;
  ks.grid = grid_for(rows * 32, ks.block);
  ks.num_params = 2;
  return ks;
}

// LayerNorm / RmsNorm over the trailing dims from `axis`: one warp per row. With attr cuda_residual
// (set by the backend's fold-residual-add rewrite) the row is in0 + in1, rounded to the dtype as the
// add would have stored it, and gamma/beta follow as in2/in3.
KernelSource norm_kernel(const LirKernel& k, const std::vector<ValueType>& in, const ValueType& out) {
  const ValueType& x = in[0];
  auto xd = static_dims(x.shape);
  int64_t r = static_cast<int64_t>(xd.size());
  bool layer = k.op == O::LayerNorm, res = k.attrs.count("cuda_residual") > 0;
  Node nd{k.op, {}, {}, k.attrs, ""};
  int64_t ax = layer ? norm_axis(attr_int(nd, "axis"), r, "layer_norm") : r - 1;
  double eps = attr_float(nd, "eps");
  int64_t inner = 1;
  for (int64_t i = ax; i < r; ++i) inner *= xd[i];
  int64_t rows = inner ? prod(xd) / inner : 0;
  size_t gi = res ? 2 : 1;
  bool beta = in.size() > gi + 1;
  std::string ct = ctype_compute(x.dtype);
  auto X = [&](const std::string& idx) {
    if (!res) return load(x.dtype, "in0[" + idx + "]");
    return wrap(x.dtype, load(x.dtype, "in0[" + idx + "]") + " + " + load(in[1].dtype, "in1[" + idx + "]"));
  };
  std::ostringstream b;
  b << header(in, {out})
    << "  long long row = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; int lane = threadIdx.x & 31;\n"
    << "  if (row >= " << rows << ") return;\n  long long base = row * " << inner << ";\n"
    << "  " << ct << " s = 0;\n";
  if (layer) {
    b << "  for (int j = lane; j < " << inner << "; j += 32) s += " << X("base + j") << ";\n"
      << "  " << ct << " mean = warp_sum(s) / " << inner << ";\n  s = 0;\n"
      << "  for (int j = lane; j < " << inner << "; j += 32) { " << ct << " d = " << X("base + j")
      << " - mean; s += d * d; }\n";
  } else {
    b << "  " << ct << " mean = 0;\n"
      << "  for (int j = lane; j < " << inner << "; j += 32) { " << ct << " d = " << X("base + j") << "; s += d * d; }\n";
  }
  std::string g = "in" + std::to_string(gi), bt = "in" + std::to_string(gi + 1);
  b << "  " << ct << " inv = " << (x.dtype == DType::f64 ? "1.0 / sqrt" : "1.0f / sqrtf") << "(warp_sum(s) / " << inner
    << " + (" << ct << ")" << num(eps) << ");\n"
    << "  for (int j = lane; j < " << inner << "; j += 32) { " << ct << " y = (" << X("base + j")
    << " - mean) * inv * " << load(in[gi].dtype, g + "[j]") << (beta ? " + " + load(in[gi + 1].dtype, bt + "[j]") : "")
    << "; out0[base + j] = " << store(out.dtype, "y") << "; }\n}\n";
  KernelSource ks;
  ks.code = b.str();
  ks.grid = grid_for(rows * 32, 256);
  ks.num_params = static_cast<int>(in.size()) + 1;
  return ks;
}

// Attention geometry, with the layout each tensor is stored in: [B,H,S,D] by default, [B,S,H,D]
// when the backend folded the neighbouring transpose into the kernel (attr cuda_<t>_bshd).
struct AttnGeom {
  int64_t B, H, S, D, Hkv, T, Dv;
  bool q_bshd, k_bshd, v_bshd, o_bshd;
  // Offset (in elements) of row (b, h, s) of a tensor with `heads` heads, `rows` rows, `dim` width.
  static std::string row(bool bshd, const std::string& b, const std::string& h, const std::string& s, int64_t heads,
                         int64_t rows, int64_t dim) {
    if (bshd) return "((" + b + " * " + std::to_string(rows) + " + " + s + ") * " + std::to_string(heads) + " + " + h +
                     ") * " + std::to_string(dim);
    return "((" + b + " * " + std::to_string(heads) + " + " + h + ") * " + std::to_string(rows) + " + " + s + ") * " +
           std::to_string(dim);
  }
};

AttnGeom attn_geom(const LirKernel& k, const std::vector<ValueType>& in) {
  auto flag = [&](const char* n) { return k.attrs.count(n) > 0; };
  AttnGeom g{};
  g.q_bshd = flag("cuda_q_bshd"), g.k_bshd = flag("cuda_k_bshd"), g.v_bshd = flag("cuda_v_bshd");
  g.o_bshd = flag("cuda_out_bshd");
  auto qd = static_dims(in[0].shape), kd = static_dims(in[1].shape), vd = static_dims(in[2].shape);
  g.B = qd[0], g.D = qd[3], g.H = g.q_bshd ? qd[2] : qd[1], g.S = g.q_bshd ? qd[1] : qd[2];
  g.Hkv = g.k_bshd ? kd[2] : kd[1], g.T = g.k_bshd ? kd[1] : kd[2], g.Dv = vd[3];
  return g;
}

// Mask/bias code shared by both attention kernels: sets `ok` for key `j` of query row `srow`
// and adds the bias (times `bias_scale`) to `sc`.
std::string attn_mask_code(const LirKernel& k, const std::vector<ValueType>& in, const AttnGeom& g,
                           const std::string& bias_scale) {
  Node nd{k.op, {}, {}, k.attrs, ""};
  const std::string& kind = attr_str(nd, "mask");
  bool causal = kind == "causal" || kind == "causal_padding", padding = kind == "padding" || kind == "causal_padding",
       bias = kind == "bias";
  RLX_CHECK(causal || padding || bias || kind == "none", "[cuda] attention: unknown mask kind '", kind, "'");
  std::ostringstream b;
  if (causal) b << "      ok = ok && j <= srow + (" << g.T - g.S << ");\n";
  if (padding) b << "      ok = ok && (j < " << g.T << " ? " << load(in[3].dtype, "in3[bb * " + std::to_string(g.T) + " + j]") << " != 0 : false);\n";
  if (bias) {
    auto bd = static_dims(in[3].shape);
    auto bst = strides(bd);
    std::vector<std::string> terms;
    const char* cv[] = {"bb", "hh", "(long long)srow", "(long long)j"};
    int64_t off = 4 - static_cast<int64_t>(bd.size());
    for (int64_t q = 0; q < 4; ++q) {
      int64_t bq = q - off;
      if (bq < 0 || bd[bq] == 1) continue;
      terms.push_back(std::string(cv[q]) + " * " + std::to_string(bst[bq]));
    }
    b << "      if (ok && srow < " << g.S << ") sc += " << bias_scale << " * "
      << load(in[3].dtype, "in3[" + join_terms(terms) + "]") << ";\n";
  }
  b << "      if (sc == -1.0f/0.0f) ok = false;\n";
  return b.str();
}

// Thread-per-query-row attention (head dims <= 64): each thread keeps its query row and output
// accumulators in registers and streams K/V through shared memory 64 keys at a time with an online
// (exp2-based) softmax over blocks of 8 keys; no cross-lane reductions on the critical path.
KernelSource attention_rows_kernel(const LirKernel& k, const std::vector<ValueType>& in, const ValueType& out,
                                   const AttnGeom& g, double scale, int64_t sm_count) {
  // RLX_CUDA_ATTN_VEC=1: float4 shared-memory reads (broadcast LDS.128, a quarter of the loads) and
  // 32-row blocks when 64-row ones leave most multiprocessors idle. Compile-checked, not yet run on
  // the H200, so it is opt-in; the default is the variant that passed conformance there.
  const bool tuned = std::getenv("RLX_CUDA_ATTN_VEC") && std::string(std::getenv("RLX_CUDA_ATTN_VEC")) == "1";
  const int kRows = tuned && g.B * g.H * ((g.S + 63) / 64) < 2 * sm_count ? 32 : 64, kChunk = 64;
  const bool vec = tuned && g.D % 4 == 0 && g.Dv % 4 == 0;
  DType t = in[0].dtype;
  const double log2e = 1.4426950408889634;
  std::ostringstream b;
  b << header(in, {out});
  b << "  const int D = " << g.D << ", DV = " << g.Dv << ", T = " << g.T << ", S = " << g.S << ";\n"
    << "  __shared__ __align__(16) float ks[" << kChunk << "][D];\n  __shared__ __align__(16) float vs[" << kChunk << "][DV];\n"
    << "  long long bh = blockIdx.y, bb = bh / " << g.H << ", hh = bh % " << g.H << ", hk = hh / " << g.H / g.Hkv << ";\n"
    << "  int srow = blockIdx.x * " << kRows << " + threadIdx.x;\n"
    << "  float q[D], acc[DV];\n"
    << "  long long qo = " << AttnGeom::row(g.q_bshd, "bb", "hh", "(long long)srow", g.H, g.S, g.D) << ";\n"
    << "  #pragma unroll\n  for (int d = 0; d < D; ++d) q[d] = srow < S ? " << load(t, "in0[qo + d]") << " * "
    << num(scale * log2e) << "f : 0.0f;\n"
    << "  #pragma unroll\n  for (int d = 0; d < DV; ++d) acc[d] = 0.0f;\n"
    << "  float m = -1.0f/0.0f, l = 0.0f;\n"
    << "  for (int t0 = 0; t0 < T; t0 += " << kChunk << ") {\n"
    << "    __syncthreads();\n"
    << "    for (int e = threadIdx.x; e < " << kChunk << " * D; e += blockDim.x) { int jj = e / D, dd = e % D;"
    << " ks[jj][dd] = t0 + jj < T ? " << load(t, "in1[" + AttnGeom::row(g.k_bshd, "bb", "hk", "(long long)(t0 + jj)", g.Hkv, g.T, g.D) + " + dd]")
    << " : 0.0f; }\n"
    << "    for (int e = threadIdx.x; e < " << kChunk << " * DV; e += blockDim.x) { int jj = e / DV, dd = e % DV;"
    << " vs[jj][dd] = t0 + jj < T ? " << load(t, "in2[" + AttnGeom::row(g.v_bshd, "bb", "hk", "(long long)(t0 + jj)", g.Hkv, g.T, g.Dv) + " + dd]")
    << " : 0.0f; }\n"
    << "    __syncthreads();\n"
    << "    for (int j0 = 0; j0 < " << kChunk << " && t0 + j0 < T; j0 += 8) {\n"
    << "      float s8[8];\n"
    << "      #pragma unroll\n      for (int u = 0; u < 8; ++u) {\n"
    << "        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;\n";
  if (vec)
    b << "        const float4* kr = reinterpret_cast<const float4*>(&ks[j0 + u][0]);\n"
      << "        #pragma unroll\n        for (int d4 = 0; d4 < D / 4; ++d4) { float4 kk = kr[d4]; a0 += q[4 * d4] * kk.x;"
      << " a1 += q[4 * d4 + 1] * kk.y; a2 += q[4 * d4 + 2] * kk.z; a3 += q[4 * d4 + 3] * kk.w; }\n";
  else
    b << "        #pragma unroll\n        for (int d = 0; d + 3 < D; d += 4) { a0 += q[d] * ks[j0 + u][d]; a1 += q[d + 1] * ks[j0 + u][d + 1];"
      << " a2 += q[d + 2] * ks[j0 + u][d + 2]; a3 += q[d + 3] * ks[j0 + u][d + 3]; }\n"
      << "        #pragma unroll\n        for (int d = D & ~3; d < D; ++d) a0 += q[d] * ks[j0 + u][d];\n";
  b << "        float sc = (a0 + a1) + (a2 + a3);\n"
    << "        int j = t0 + j0 + u;\n        bool ok = j < T;\n"
    << attn_mask_code(k, in, g, num(log2e) + "f")
    << "        s8[u] = ok ? sc : -1.0f/0.0f;\n      }\n"
    << "      float mx = s8[0];\n      #pragma unroll\n      for (int u = 1; u < 8; ++u) mx = fmaxf(mx, s8[u]);\n"
    << "      float mn = fmaxf(m, mx);\n      if (mn == -1.0f/0.0f) continue;\n"
    << "      float corr = exp2f(m - mn), ps = 0.0f;\n"
    << "      #pragma unroll\n      for (int u = 0; u < 8; ++u) { s8[u] = exp2f(s8[u] - mn); ps += s8[u]; }\n"
    << "      l = l * corr + ps;\n      m = mn;\n";
  if (vec)
    b << "      #pragma unroll\n      for (int d = 0; d < DV; ++d) acc[d] *= corr;\n"
      << "      #pragma unroll\n      for (int u = 0; u < 8; ++u) {\n"
      << "        const float4* vr = reinterpret_cast<const float4*>(&vs[j0 + u][0]);\n"
      << "        #pragma unroll\n        for (int d4 = 0; d4 < DV / 4; ++d4) { float4 vv = vr[d4]; acc[4 * d4] += s8[u] * vv.x;"
      << " acc[4 * d4 + 1] += s8[u] * vv.y; acc[4 * d4 + 2] += s8[u] * vv.z; acc[4 * d4 + 3] += s8[u] * vv.w; }\n      }\n";
  else
    b << "      #pragma unroll\n      for (int d = 0; d < DV; ++d) {\n"
      << "        float a = acc[d] * corr;\n"
      << "        #pragma unroll\n        for (int u = 0; u < 8; ++u) a += s8[u] * vs[j0 + u][d];\n"
      << "        acc[d] = a;\n      }\n";
  b << "    }\n  }\n"
    << "  if (srow >= S) return;\n"
    << "  float inv = l > 0.0f ? 1.0f / l : 0.0f;\n"
    << "  long long oo = " << AttnGeom::row(g.o_bshd, "bb", "hh", "(long long)srow", g.H, g.S, g.Dv) << ";\n"
    << "  #pragma unroll\n  for (int d = 0; d < DV; ++d) out0[oo + d] = " << store(out.dtype, "acc[d] * inv") << ";\n}\n";
  KernelSource ks;
  ks.code = b.str();
  ks.block = kRows;
  ks.grid = static_cast<unsigned>((g.S + kRows - 1) / kRows);
  ks.grid_y = static_cast<unsigned>(g.B * g.H);
  ks.num_params = static_cast<int>(in.size()) + 1;
  return ks;
}

// Flash-style attention for wide heads: K/V stream through shared memory 32 keys at a time; each
// warp owns four query rows (one key per lane) and keeps an online softmax in registers.
KernelSource attention_kernel(const LirKernel& k, const std::vector<ValueType>& in, const ValueType& out,
                              int64_t sm_count) {
  Node nd{k.op, {}, {}, k.attrs, ""};
  AttnGeom g = attn_geom(k, in);
  int64_t S = g.S, D = g.D, T = g.T, Dv = g.Dv;
  RLX_CHECK(Dv <= 256 && D <= 256, "[cuda] attention: head dim above 256 is not supported");
  double scale = attr_float(nd, "scale");
  if (scale == 0) scale = 1.0 / std::sqrt(static_cast<double>(D));
  if (D <= 64 && Dv <= 64 && !std::getenv("RLX_CUDA_ATTN_WARP")) return attention_rows_kernel(k, in, out, g, scale, sm_count);
  const int kWarps = 8, kRows = 4, kRowsPerBlock = kWarps * kRows;
  int64_t dv_slots = (Dv + 31) / 32;
  DType t = in[0].dtype;
  std::ostringstream b;
  b << header(in, {out});
  b << "  const int D = " << D << ", DV = " << Dv << ", T = " << T << ", S = " << S << ", DVS = " << dv_slots << ";\n"
    << "  __shared__ float qs[" << kRowsPerBlock << "][D];\n  __shared__ float ks[32][D + 1];\n  __shared__ float vs[32][DV + 1];\n"
    << "  int warp = threadIdx.x / 32, lane = threadIdx.x & 31;\n"
    << "  long long bh = blockIdx.y; long long bb = bh / " << g.H << ", hh = bh % " << g.H << ", hk = hh / " << g.H / g.Hkv << ";\n"
    << "  int s0 = blockIdx.x * " << kRowsPerBlock << ";\n"
    << "  for (int e = threadIdx.x; e < " << kRowsPerBlock << " * D; e += blockDim.x) { int rr = e / D, dd = e % D;"
    << " qs[rr][dd] = s0 + rr < S ? " << load(t, "in0[" + AttnGeom::row(g.q_bshd, "bb", "hh", "(long long)(s0 + rr)", g.H, g.S, g.D) + " + dd]") << " : 0.0f; }\n"
    << "  float m[" << kRows << "], l[" << kRows << "], acc[" << kRows << "][DVS];\n"
    << "  #pragma unroll\n  for (int r = 0; r < " << kRows << "; ++r) { m[r] = -1.0f/0.0f; l[r] = 0.0f;"
    << " for (int q = 0; q < DVS; ++q) acc[r][q] = 0.0f; }\n"
    << "  for (int t0 = 0; t0 < T; t0 += 32) {\n"
    << "    __syncthreads();\n"
    << "    for (int e = threadIdx.x; e < 32 * D; e += blockDim.x) { int jj = e / D, dd = e % D;"
    << " ks[jj][dd] = t0 + jj < T ? " << load(t, "in1[" + AttnGeom::row(g.k_bshd, "bb", "hk", "(long long)(t0 + jj)", g.Hkv, g.T, g.D) + " + dd]") << " : 0.0f; }\n"
    << "    for (int e = threadIdx.x; e < 32 * DV; e += blockDim.x) { int jj = e / DV, dd = e % DV;"
    << " vs[jj][dd] = t0 + jj < T ? " << load(t, "in2[" + AttnGeom::row(g.v_bshd, "bb", "hk", "(long long)(t0 + jj)", g.Hkv, g.T, g.Dv) + " + dd]") << " : 0.0f; }\n"
    << "    __syncthreads();\n"
    << "    int j = t0 + lane;\n"
    << "    #pragma unroll\n    for (int r = 0; r < " << kRows << "; ++r) {\n"
    << "      int srow = s0 + warp * " << kRows << " + r;\n"
    << "      bool ok = j < T;\n"
    << "      float sc = 0.0f;\n      #pragma unroll 8\n      for (int dd = 0; dd < D; ++dd) sc += qs[warp * " << kRows
    << " + r][dd] * ks[lane][dd];\n      sc *= " << num(scale) << "f;\n"
    << attn_mask_code(k, in, g, "1.0f")
    << "      float mc = warp_max(ok ? sc : -1.0f/0.0f);\n"
    << "      float mn = fmaxf(m[r], mc);\n"
    << "      if (mn == -1.0f/0.0f) continue;\n"
    << "      float p = ok ? __expf(sc - mn) : 0.0f;\n"
    << "      float corr = __expf(m[r] - mn);\n"
    << "      l[r] = l[r] * corr + warp_sum(p);\n      m[r] = mn;\n"
    << "      #pragma unroll\n      for (int q = 0; q < DVS; ++q) acc[r][q] *= corr;\n"
    << "      #pragma unroll 8\n      for (int jj = 0; jj < 32; ++jj) {\n"
    << "        float pj = __shfl_sync(0xffffffffu, p, jj);\n"
    << "        #pragma unroll\n        for (int q = 0; q < DVS; ++q) { int dd = lane + 32 * q; if (dd < DV) acc[r][q] += pj * vs[jj][dd]; }\n"
    << "      }\n    }\n  }\n"
    << "  #pragma unroll\n  for (int r = 0; r < " << kRows << "; ++r) {\n"
    << "    int srow = s0 + warp * " << kRows << " + r;\n    if (srow >= S) continue;\n"
    << "    float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;\n"
    << "    long long oo = " << AttnGeom::row(g.o_bshd, "bb", "hh", "(long long)srow", g.H, g.S, g.Dv) << ";\n"
    << "    for (int q = 0; q < DVS; ++q) { int dd = lane + 32 * q; if (dd < DV) out0[oo + dd] = "
    << store(out.dtype, "acc[r][q] * inv") << "; }\n  }\n}\n";
  KernelSource ks;
  ks.code = b.str();
  ks.block = 32 * kWarps;
  ks.grid = static_cast<unsigned>((S + kRowsPerBlock - 1) / kRowsPerBlock);
  ks.grid_y = static_cast<unsigned>(g.B * g.H);
  ks.num_params = static_cast<int>(in.size()) + 1;
  return ks;
}

}  // namespace

bool render_library(const LirKernel& k, const std::vector<ValueType>& in, const std::vector<ValueType>& out,
                    KernelSource* ks, int64_t sm_count) {
  Node nd{k.op, {}, {}, k.attrs, ""};
  const ValueType& o = out[0];
  auto od = static_dims(o.shape);
  int64_t r = static_cast<int64_t>(od.size());
  if (is_elementwise(k.op)) {
    Graph body;
    std::vector<ValueId> ins;
    for (size_t i = 0; i < in.size(); ++i) ins.push_back(body.add_input("a" + std::to_string(i), in[i].dtype, in[i].shape));
    body.outputs.push_back(body.add_node(k.op, ins, k.attrs)[0]);
    *ks = render_fused(body, o);
    return true;
  }
  switch (k.op) {
    case O::Reshape: case O::Transpose: case O::BroadcastInDim: case O::Slice: case O::Expand: case O::Squeeze:
    case O::Unsqueeze: {
      auto xd = static_dims(in[0].shape);
      auto xs = strides(xd);
      std::vector<std::string> t;
      if (k.op == O::Reshape || k.op == O::Squeeze || k.op == O::Unsqueeze) {
        *ks = index_kernel(in, o, "i");
        return true;
      }
      if (k.op == O::Transpose) {
        const auto& perm = attr_ints(nd, "perm");
        for (int64_t d = 0; d < r; ++d) t.push_back("c" + std::to_string(d) + " * " + std::to_string(xs[perm[d]]));
      } else if (k.op == O::BroadcastInDim) {
        const auto& dims = attr_ints(nd, "dims");
        for (size_t j = 0; j < dims.size(); ++j)
          if (xd[j] != 1) t.push_back("c" + std::to_string(dims[j]) + " * " + std::to_string(xs[j]));
      } else if (k.op == O::Expand) {
        *ks = index_kernel(in, o, bcast_offset(xd, od));
        return true;
      } else {  // slice
        const auto& st = attr_ints(nd, "start");
        auto stride = attr_ints(nd, "stride");
        if (stride.empty()) stride.assign(r, 1);
        for (int64_t d = 0; d < r; ++d)
          t.push_back("(" + std::to_string(st[d]) + " + c" + std::to_string(d) + " * " + std::to_string(stride[d]) +
                      ") * " + std::to_string(xs[d]));
      }
      *ks = index_kernel(in, o, join_terms(t));
      return true;
    }
    case O::Pad: {
      auto xd = static_dims(in[0].shape);
      auto xs = strides(xd);
      const auto& lo = attr_ints(nd, "low");
      std::vector<std::string> t, g;
      for (int64_t d = 0; d < r; ++d) {
        std::string p = "(c" + std::to_string(d) + " - (" + std::to_string(lo[d]) + "))";
        g.push_back(p + " >= 0 && " + p + " < " + std::to_string(xd[d]));
        t.push_back(p + " * " + std::to_string(xs[d]));
      }
      std::string guard;
      for (auto& x : g) guard += (guard.empty() ? "" : " && ") + x;
      std::string fill = store(o.dtype, convert_expr(DType::f64, o.dtype, num(attr_float(nd, "value"))));
      *ks = index_kernel(in, o, join_terms(t), guard.empty() ? "true" : guard, fill);
      return true;
    }
    case O::Concatenate: {
      int64_t ax = norm_axis(attr_int(nd, "axis"), r, "concatenate");
      std::ostringstream b;
      int64_t start = 0;
      for (size_t j = 0; j < in.size(); ++j) {
        auto xd = static_dims(in[j].shape);
        auto xs = strides(xd);
        std::vector<std::string> t;
        for (int64_t d = 0; d < r; ++d)
          t.push_back((d == ax ? "(c" + std::to_string(d) + " - " + std::to_string(start) + ")" : "c" + std::to_string(d)) +
                      " * " + std::to_string(xs[d]));
        b << "    " << (j ? "else " : "") << "if (c" << ax << " < " << start + xd[ax] << ") out0[i] = in" << j << "["
          << join_terms(t) << "];\n";
        start += xd[ax];
      }
      ks->code = header(in, {o}) + elementwise_loop(prod(od), od, true, b.str());
      ks->grid = grid_for(prod(od), 256);
      ks->num_params = static_cast<int>(in.size()) + 1;
      return true;
    }
    case O::Gather: case O::Embedding: {
      auto xd = static_dims(in[0].shape), id = static_dims(in[1].shape);
      int64_t ax = k.op == O::Embedding ? 0 : norm_axis(attr_int(nd, "axis"), static_cast<int64_t>(xd.size()), "gather");
      int64_t inner = 1, ni = prod(id), len = xd[ax];
      for (size_t d = ax + 1; d < xd.size(); ++d) inner *= xd[d];
      std::ostringstream b;
      std::string it = idx_type(prod(od));
      b << "    " << it << " kk = i % " << inner << ", jj = (i / " << inner << ") % " << ni << ", oo = i / " << inner * ni
        << ";\n    long long p = (long long)in1[jj]; if (p < 0) p += " << len << "; p = p < 0 ? 0 : (p >= " << len
        << " ? " << len - 1 << " : p);\n    out0[i] = in0[(oo * " << len << " + p) * " << inner << " + kk];\n";
      ks->code = header(in, {o}) + elementwise_loop(prod(od), od, false, b.str());
      ks->grid = grid_for(prod(od), 256);
      ks->num_params = 3;
      return true;
    }
    case O::Iota: {
      int64_t dim = attr_int(nd, "dim");
      *ks = KernelSource{};
      ks->code = header({}, {o}) + elementwise_loop(prod(od), od, true,
                                                      "    out0[i] = " + store(o.dtype, "c" + std::to_string(dim)) + ";\n");
      ks->grid = grid_for(prod(od), 256);
      ks->num_params = 1;
      return true;
    }
    case O::ReduceSum: case O::ReduceMax: case O::ReduceMin: case O::ReduceProd:
      *ks = reduce_kernel(k, in[0], o);
      return true;
    case O::ArgMax: case O::ArgMin: *ks = arg_kernel(k, in[0], o); return true;
    case O::DotGeneral: *ks = dot_kernel(k, in, o); return true;
    case O::Softmax: *ks = softmax_kernel(k, in[0], o); return true;
    case O::LayerNorm: case O::RmsNorm: *ks = norm_kernel(k, in, o); return true;
    case O::Attention: *ks = attention_kernel(k, in, o, sm_count); return true;
    default: return false;
  }
}

}  // namespace rlx::cuda
