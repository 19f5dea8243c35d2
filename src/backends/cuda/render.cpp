// CUDA C rendering, common part: the shared helpers of the renderer files (render_internal.h: prelude,
// dtype spellings, expression rules, index arithmetic, reduction split) and fused elementwise kernels.
// Library kernels: render_library.cpp; merged launches: render_merged.cpp; attention: render_attention.cpp.
#include "backends/cuda/render.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

#include "backends/cuda/render_internal.h"

namespace rlx::cuda {

namespace detail {  // shared with the other renderer files through render_internal.h

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

// double -> float rounded to odd, so a later rounding to f16/bf16 equals one direct rounding (as the
// reference's to_float_odd).
const char* kRoundOdd = R"(__device__ __forceinline__ float odd_f(double v) {
  float f = __double2float_rz(v);
  if (f == f && (double)f != v && !isinf(f)) f = __int_as_float(__float_as_int(f) | 1);
  return f;
}
)";

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

// A reduction's accumulator type, initial value and per-element step `a = a (op) v` for inputs of
// compute domain `d` (ReduceSum/Prod/Max; anything else is ReduceMin). Shared by the standalone
// reduce kernel and the block reduction of merged launches.
void reduce_init_step(O op, Dm d, std::string* acc, std::string* init, std::string* step) {
  bool integral = d == Dm::I || d == Dm::B;
  *acc = integral ? "long long" : "double";
  switch (op) {
    case O::ReduceSum: *init = "0"; *step = d == Dm::I ? "a = wadd(a, v);" : "a += v;"; break;
    case O::ReduceProd: *init = "1"; *step = d == Dm::I ? "a = wmul(a, v);" : "a *= v;"; break;
    case O::ReduceMax:
      *init = integral ? ll(-9223372036854775807LL - 1) : "__longlong_as_double(0xfff0000000000000LL)";
      *step = integral ? "a = v > a ? v : a;" : "a = fmaxr(a, v);";
      break;
    default:
      *init = integral ? ll(9223372036854775807LL) : "__longlong_as_double(0x7ff0000000000000LL)";
      *step = integral ? "a = v < a ? v : a;" : "a = fminr(a, v);";
      break;
  }
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
                    const std::string& pre) {
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


std::string join_terms(const std::vector<std::string>& t) {
  std::string e;
  for (auto& x : t) e += (e.empty() ? "" : " + ") + x;
  return e.empty() ? "0" : e;
}

ReduceSplit split_reduce(const LirKernel& k, const std::vector<int64_t>& xd) {
  const int64_t r = static_cast<int64_t>(xd.size());
  std::vector<bool> red(r, false);
  Node nd{k.op, {}, {}, k.attrs, ""};  // attr_ints returns a reference into the node: keep it alive
  for (auto a : attr_ints(nd, "axes")) red[norm_axis(a, r, "reduce")] = true;
  ReduceSplit s;
  const auto xs = strides(xd);
  for (int64_t d = 0; d < r; ++d) {
    if (red[d]) s.rdims.push_back(xd[d]), s.rst.push_back(xs[d]);
    else s.kdims.push_back(xd[d]), s.kst.push_back(xs[d]);
  }
  s.n = prod(s.kdims);
  s.m = prod(s.rdims);
  s.inner = r > 0 && red[r - 1];
  return s;
}

ReduceCode reduce_code(const LirKernel& k, const ValueType& x) {
  ReduceCode r;
  r.s = split_reduce(k, static_dims(x.shape));
  r.t = x.dtype;
  r.d = dom(x.dtype);
  reduce_init_step(k.op, r.d, &r.acc, &r.init, &r.step);
  std::vector<std::string> base;
  for (size_t j = 0; j < r.s.kdims.size(); ++j) base.push_back("c" + std::to_string(j) + " * " + std::to_string(r.s.kst[j]));
  r.base = join_terms(base);
  return r;
}

std::string ReduceCode::loop(const std::string& from, const std::string& next) const {
  std::ostringstream p;
  p << "    for (long long j = " << from << "; j < " << s.m << "; " << next << ") {\n      long long rr = j, off = base;\n";
  for (int64_t q = static_cast<int64_t>(s.rdims.size()) - 1; q >= 0; --q)
    p << "      off += (rr % " << s.rdims[q] << ") * " << s.rst[q] << "; rr /= " << s.rdims[q] << ";\n";
  p << "      " << acc << " v = (" << acc << ")" << load(t, "in0[off]") << ";\n      " << step << "\n    }\n";
  return p.str();
}

}  // namespace detail

using namespace detail;

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

}  // namespace rlx::cuda
