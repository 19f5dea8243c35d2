// CUDA C rendering of fused elementwise kernels and shape-specialized library kernels.
#include "backends/cuda/render.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

#include "backends/cuda/render_internal.h"
#include "backends/cuda/render_window.h"  // issue 7 (cudaops)

namespace rlx::cuda {

namespace detail {  // shared with render_attention.cpp through render_internal.h

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

// double -> float rounded to odd, so a later rounding to f16/bf16 equals one direct rounding (as the
// reference's to_float_odd).
const char* kRoundOdd = R"(__device__ __forceinline__ float odd_f(double v) {
  float f = __double2float_rz(v);
  if (f == f && (double)f != v && !isinf(f)) f = __int_as_float(__float_as_int(f) | 1);
  return f;
}
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


std::string join_terms(const std::vector<std::string>& t) {
  std::string e;
  for (auto& x : t) e += (e.empty() ? "" : " + ") + x;
  return e.empty() ? "0" : e;
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


// A reduction's input dims split into the kept ones (kdims, strides kst; n outputs) and the reduced
// ones (rdims, rst; m elements per output); inner: the innermost dim is reduced (a row reduction).
struct ReduceSplit {
  std::vector<int64_t> kdims, kst, rdims, rst;
  int64_t n, m;
  bool inner;
};
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

KernelSource reduce_kernel(const LirKernel& k, const ValueType& x, const ValueType& out) {
  auto xd = static_dims(x.shape);
  auto [kdims, kst, rdims, rst, n, m, inner] = split_reduce(k, xd);
  DType t = x.dtype;
  Dm d = dom(t);
  std::string acc, init, step;
  reduce_init_step(k.op, d, &acc, &init, &step);
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
  if (m >= 64 && n >= 1) {
    // Parallel form: the reduced range is split over threads and the partials combined in shared
    // memory. Rows (innermost dim reduced): one 256-thread block per output, consecutive threads
    // read consecutive elements. Columns: 32 outputs x 16 slices per block, the lanes of a warp
    // on consecutive outputs. The combination order differs from the serial loop (sums round
    // differently, within the reduction tolerance; integer sums wrap identically).
    bool rows = inner;
    const int tx = rows ? 1 : 32, ty = rows ? 256 : 16;
    std::ostringstream p;
    p << header({x}, {out}) << "  __shared__ " << acc << " sh[" << tx * ty << "];\n"
      << "  const int tx = " << (rows ? "0" : "threadIdx.x % 32") << ", ty = " << (rows ? "threadIdx.x" : "threadIdx.x / 32")
      << ";\n"
      << "  long long i = (long long)blockIdx.x * " << tx << " + tx;\n"
      << "  " << acc << " a = " << init << ";\n"
      << "  if (i < " << n << ") {\n";
    auto kd = kdims.empty() ? std::vector<int64_t>{1} : kdims;
    p << unravel(kd, "i", "long long");
    p << "    long long base = " << join_terms(base) << ";\n"
      << "    for (long long j = ty; j < " << m << "; j += " << ty << ") {\n      long long rr = j, off = base;\n";
    for (int64_t q = static_cast<int64_t>(rdims.size()) - 1; q >= 0; --q)
      p << "      off += (rr % " << rdims[q] << ") * " << rst[q] << "; rr /= " << rdims[q] << ";\n";
    p << "      " << acc << " v = (" << acc << ")" << load(t, "in0[off]") << ";\n      " << step << "\n    }\n  }\n"
      << "  sh[ty * " << tx << " + tx] = a;\n  __syncthreads();\n"
      << "  for (int h = " << ty / 2 << "; h > 0; h >>= 1) {\n"
      << "    if (ty < h) { " << acc << " v = sh[(ty + h) * " << tx << " + tx]; a = sh[ty * " << tx << " + tx]; " << step
      << " sh[ty * " << tx << " + tx] = a; }\n"
      << "    __syncthreads();\n  }\n"
      << "  if (ty == 0 && i < " << n << ") out0[i] = " << store(out.dtype, d == Dm::F ? "(float)sh[tx]" : "sh[tx]") << ";\n}\n";
    ks.code = p.str();
    ks.block = static_cast<unsigned>(tx * ty);
    ks.grid = static_cast<unsigned>((n + tx - 1) / tx);
    ks.num_params = 2;
    return ks;
  }
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
  std::string g = "in" + std::to_string(gi), bt = "in" + std::to_string(gi + 1);
  bool same_dt = true;
  for (auto& t : in) same_dt &= t.dtype == x.dtype;
  bool vec_dt = x.dtype == DType::f16 || x.dtype == DType::bf16 || x.dtype == DType::f32;
  if (inner <= 1024 && inner % 128 == 0 && same_dt && vec_dt && out.dtype == x.dtype) {
    // Row in registers, 4 elements per lane per 128-wide chunk: 8- or 16-byte loads and stores.
    int64_t nc = inner / 128;
    std::string el = c_type(x.dtype), vt = x.dtype == DType::f32 ? "float4" : "uint2";
    auto ldv = [&](const std::string& ptr, const std::string& name) {
      return "      " + vt + " " + name + "_v = *reinterpret_cast<const " + vt + "*>(" + ptr + " + o);\n      const " + el +
             "* " + name + " = reinterpret_cast<const " + el + "*>(&" + name + "_v);\n";
    };
    b << "  float xv[" << nc * 4 << "];\n"
      << "  #pragma unroll\n  for (int c = 0; c < " << nc << "; ++c) {\n"
      << "    long long o = base + c * 128 + lane * 4;\n    {\n" << ldv("in0", "xa");
    if (res) b << ldv("in1", "xb");
    b << "      #pragma unroll\n      for (int e = 0; e < 4; ++e) xv[c * 4 + e] = "
      << (res ? wrap(x.dtype, load(x.dtype, "xa[e]") + " + " + load(x.dtype, "xb[e]")) : load(x.dtype, "xa[e]")) << ";\n    }\n  }\n";
    if (layer)
      b << "  #pragma unroll\n  for (int q = 0; q < " << nc * 4 << "; ++q) s += xv[q];\n"
        << "  float mean = warp_sum(s) / " << inner << ";\n  s = 0;\n"
        << "  #pragma unroll\n  for (int q = 0; q < " << nc * 4 << "; ++q) { float d = xv[q] - mean; s += d * d; }\n";
    else
      b << "  float mean = 0;\n  #pragma unroll\n  for (int q = 0; q < " << nc * 4 << "; ++q) s += xv[q] * xv[q];\n";
    b << "  float inv = 1.0f / sqrtf(warp_sum(s) / " << inner << " + (float)" << num(eps) << ");\n"
      << "  #pragma unroll\n  for (int c = 0; c < " << nc << "; ++c) {\n"
      << "    long long o = c * 128 + lane * 4;\n    {\n" << ldv(g, "ga");
    if (beta) b << ldv(bt, "be");
    b << "      " << vt << " y_v; " << el << "* y = reinterpret_cast<" << el << "*>(&y_v);\n"
      << "      #pragma unroll\n      for (int e = 0; e < 4; ++e) y[e] = "
      << store(x.dtype, "(xv[c * 4 + e] - mean) * inv * " + load(x.dtype, "ga[e]") + (beta ? " + " + load(x.dtype, "be[e]") : ""))
      << ";\n      *reinterpret_cast<" << vt << "*>(out0 + base + o) = y_v;\n    }\n  }\n}\n";
    KernelSource ks;
    ks.code = b.str();
    ks.grid = grid_for(rows * 32, 256);
    ks.num_params = static_cast<int>(in.size()) + 1;
    return ks;
  }
  if (inner <= 1024) {  // the row lives in registers: one read of x (and the residual) instead of three
    int64_t npl = (inner + 31) / 32;
    b << "  " << ct << " xv[" << npl << "];\n"
      << "  #pragma unroll\n  for (int q = 0; q < " << npl << "; ++q) { int j = lane + 32 * q; xv[q] = j < " << inner
      << " ? " << X("base + j") << " : (" << ct << ")0; }\n";
    if (layer)
      b << "  #pragma unroll\n  for (int q = 0; q < " << npl << "; ++q) s += xv[q];\n"
        << "  " << ct << " mean = warp_sum(s) / " << inner << ";\n  s = 0;\n"
        << "  #pragma unroll\n  for (int q = 0; q < " << npl << "; ++q) if (lane + 32 * q < " << inner << ") { " << ct
        << " d = xv[q] - mean; s += d * d; }\n";
    else
      b << "  " << ct << " mean = 0;\n"
        << "  #pragma unroll\n  for (int q = 0; q < " << npl << "; ++q) s += xv[q] * xv[q];\n";
    b << "  " << ct << " inv = " << (x.dtype == DType::f64 ? "1.0 / sqrt" : "1.0f / sqrtf") << "(warp_sum(s) / " << inner
      << " + (" << ct << ")" << num(eps) << ");\n"
      << "  #pragma unroll\n  for (int q = 0; q < " << npl << "; ++q) { int j = lane + 32 * q; if (j < " << inner
      << ") { " << ct << " y = (xv[q] - mean) * inv * " << load(in[gi].dtype, g + "[j]")
      << (beta ? " + " + load(in[gi + 1].dtype, bt + "[j]") : "") << "; out0[base + j] = " << store(out.dtype, "y")
      << "; } }\n}\n";
    KernelSource ks;
    ks.code = b.str();
    ks.grid = grid_for(rows * 32, 256);
    ks.num_params = static_cast<int>(in.size()) + 1;
    return ks;
  }
  if (layer) {
    b << "  for (int j = lane; j < " << inner << "; j += 32) s += " << X("base + j") << ";\n"
      << "  " << ct << " mean = warp_sum(s) / " << inner << ";\n  s = 0;\n"
      << "  for (int j = lane; j < " << inner << "; j += 32) { " << ct << " d = " << X("base + j")
      << " - mean; s += d * d; }\n";
  } else {
    b << "  " << ct << " mean = 0;\n"
      << "  for (int j = lane; j < " << inner << "; j += 32) { " << ct << " d = " << X("base + j") << "; s += d * d; }\n";
  }
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

}  // namespace

// In-place activation after a GEMM whose epilogue cuBLASLt cannot fuse exactly (erf-GELU, SiLU),
// computed in f32 and rounded once; 16-byte loads/stores when the size allows.
KernelSource render_activation(const std::string& act, const ValueType& t) {
  RLX_CHECK(act == "gelu" || act == "silu", "[cuda] linear: unknown activation '", act, "'");
  std::string f = act == "gelu" ? "0.5f * x * (1.0f + erff(x * 0.70710678118654752f))" : "x / (1.0f + expf(-x))";
  Graph body;
  body.outputs.push_back(body.add_input("a0", t.dtype, t.shape));
  KernelSource base = render_fused(body, t);  // for the prelude
  std::string pre = base.code.substr(0, base.code.find("extern \"C\""));
  int64_t n = numel(t.shape);
  bool half = t.dtype == DType::f16 || t.dtype == DType::bf16;
  int width = half ? 8 : (t.dtype == DType::f32 ? 4 : 1);
  if (n % width) width = 1;
  std::string ld = t.dtype == DType::f16 ? "h2f(e)" : t.dtype == DType::bf16 ? "bf2f(e)" : "(float)e";
  std::string st = t.dtype == DType::f16 ? "f2h(y)" : t.dtype == DType::bf16 ? "f2bf(y)" : "y";
  std::string elem = c_type(t.dtype);
  int64_t nv = n / width;
  std::ostringstream c;
  c << pre << "extern \"C\" __global__ void rlx_kernel(" << elem << "* out0) {\n"
    << "  for (long long v = blockIdx.x * (long long)blockDim.x + threadIdx.x; v < " << nv
    << "; v += (long long)gridDim.x * blockDim.x) {\n";
  if (width > 1)
    c << "    uint4 u = reinterpret_cast<uint4*>(out0)[v];\n    " << elem << "* p = reinterpret_cast<" << elem
      << "*>(&u);\n";
  else
    c << "    " << elem << "* p = out0 + v;\n";
  c << "    #pragma unroll\n    for (int q = 0; q < " << width << "; ++q) { " << elem << " e = p[q]; float x = " << ld
    << "; float y = " << f << "; p[q] = " << st << "; }\n";
  if (width > 1) c << "    reinterpret_cast<uint4*>(out0)[v] = u;\n";
  c << "  }\n}\n";
  KernelSource ks;
  ks.code = c.str();
  ks.block = 256;
  ks.grid = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((nv + 255) / 256, 1 << 20)));
  ks.num_params = 1;
  return ks;
}

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
    case O::Cumsum: {  // one thread per line along the axis; floats accumulate in double like the reference
      if (in[0].dtype == DType::boolean) return false;
      auto xd = static_dims(in[0].shape);
      int64_t ax = norm_axis(attr_int(nd, "axis"), r, "cumsum");
      bool rev = nd.attrs.count("reverse") && attr_int(nd, "reverse") != 0;
      bool excl = nd.attrs.count("exclusive") && attr_int(nd, "exclusive") != 0;
      int64_t len = xd[ax], inner = strides(xd)[ax], lines = len ? prod(xd) / len : 0;
      Dm d = dom(in[0].dtype);
      std::string acc = d == Dm::I ? "long long" : "double";
      std::ostringstream b;
      b << "    long long base = (i / " << inner << ") * " << len * inner << " + i % " << inner << ";\n"
        << "    " << acc << " a = 0;\n"
        << "    for (long long s = 0; s < " << len << "; ++s) {\n"
        << "      long long f = base + (" << (rev ? std::to_string(len - 1) + " - s" : "s") << ") * " << inner << ";\n"
        << "      " << acc << " v = (" << acc << ")" << load(in[0].dtype, "in0[f]") << ";\n";
      std::string add = d == Dm::I ? "a = wadd(a, v);" : "a += v;";
      std::string put = d == Dm::I ? store(o.dtype, wrap(o.dtype, "a")) : (o.dtype == DType::f16 || o.dtype == DType::bf16
                                                                             ? store(o.dtype, "odd_f(a)") : store(o.dtype, "a"));
      if (!excl) b << "      " << add << "\n";
      b << "      out0[f] = " << put << ";\n";
      if (excl) b << "      " << add << "\n";
      b << "    }\n";
      ks->code = header(in, {o}) + elementwise_loop(std::max<int64_t>(lines, 0), {std::max<int64_t>(lines, 1)}, false, b.str());
      ks->code.insert(ks->code.find("extern \"C\""), kRoundOdd);
      ks->grid = grid_for(std::max<int64_t>(lines, 1), 256);
      ks->num_params = 2;
      return true;
    }
    case O::RngUniform: {  // splitmix64 per element, as src/ir/rng.h; halves rounded through f32 by round-to-odd
      if (!is_float(o.dtype)) return false;
      uint64_t seed = static_cast<uint64_t>(attr_int(nd, "seed"));
      double lo = attr_float(nd, "low"), hi = attr_float(nd, "high");
      std::ostringstream b;
      b << "    unsigned long long z = " << seed << "ull + ((unsigned long long)i + 1ull) * 0x9E3779B97F4A7C15ull;\n"
        << "    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;\n    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;\n"
        << "    z ^= z >> 31;\n"
        << "    double v = " << num(lo) << " + (" << num(hi) << " - " << num(lo) << ") * ((double)(z >> 11) * 1.1102230246251565e-16);\n"
        << "    out0[i] = " << (o.dtype == DType::f64 ? "v" : o.dtype == DType::f32 ? "(float)v" : store(o.dtype, "odd_f(v)"))
        << ";\n";
      *ks = KernelSource{};
      ks->code = header({}, {o}) + elementwise_loop(prod(od), od.empty() ? std::vector<int64_t>{1} : od, false, b.str());
      ks->code.insert(ks->code.find("extern \"C\""), kRoundOdd);
      ks->grid = grid_for(std::max<int64_t>(prod(od), 1), 256);
      ks->num_params = 1;
      return true;
    }
    case O::DotGeneral: *ks = dot_kernel(k, in, o); return true;
    case O::Softmax: *ks = softmax_kernel(k, in[0], o); return true;
    case O::LayerNorm: case O::RmsNorm: *ks = norm_kernel(k, in, o); return true;
    case O::Attention: *ks = attention_kernel(k, in, o, sm_count); return true;
    // issue 7 (cudaops): window/ordering families through src/codegen (render_window.cpp)
    case O::Conv: case O::ReduceWindow: case O::Sort: case O::TopK: case O::ScatterAdd:
      return render_shared_family(k, in, out, ks);
    default: return false;
  }
}

}  // namespace rlx::cuda

// ---- merged launches (executable.cpp's merge-launches) -------------------------------------------
namespace rlx::cuda {

namespace {

bool index_op(OpKind op) {
  switch (op) {
    case O::Reshape: case O::Transpose: case O::BroadcastInDim: case O::Slice: case O::Expand: case O::Squeeze:
    case O::Unsqueeze: case O::Pad: case O::Concatenate: case O::Iota: case O::Gather: case O::Embedding:
    case O::ArgMax: case O::ArgMin:
      return true;
    default: return false;
  }
}

bool is_reduce(OpKind op) {
  return op == O::ReduceSum || op == O::ReduceMax || op == O::ReduceMin || op == O::ReduceProd;
}

// A reduction run by the whole block of a sequential merged launch: `threads` threads split as S
// slices (a power of two) x threads/S outputs; partials combined by a shared-memory tree.
std::string block_reduce_part(const LirKernel& k, const ValueType& x, const ValueType& out, const std::string& name,
                              int threads, bool rows, int64_t rows_per_block) {
  auto xd = static_dims(x.shape);
  auto [kdims, kst, rdims, rst, n, m, inner] = split_reduce(k, xd);
  DType t = x.dtype;
  Dm d = dom(t);
  std::string acc, init, step;
  reduce_init_step(k.op, d, &acc, &init, &step);
  int64_t S = 1, nb = rows ? std::max<int64_t>(1, n / std::max<int64_t>(xd[0], 1) * rows_per_block) : n;
  while (S * 2 * std::max<int64_t>(nb, 1) <= threads && S * 2 <= std::max<int64_t>(m, 1)) S *= 2;
  int64_t OC = threads / S;
  std::vector<std::string> base;
  for (size_t j = 0; j < kdims.size(); ++j) base.push_back("c" + std::to_string(j) + " * " + std::to_string(kst[j]));
  std::ostringstream p;
  std::string lo = rows ? "lo_" : "0", hi = rows ? "hi_" : std::to_string(n);
  p << "__device__ __forceinline__ void " << name
    << "(const int bid_, const int nblk_, unsigned long long* rsh_, const long long lo_, const long long hi_, const "
    << c_type(x.dtype) << "* in0, " << c_type(out.dtype) << "* out0) {\n"
    << "  " << acc << "* sh = reinterpret_cast<" << acc << "*>(rsh_);\n"
    << "  const int tx = threadIdx.x % " << OC << ", s = threadIdx.x / " << OC << ";\n"
    << "  for (long long o0 = " << lo << "; o0 < " << (rows ? "hi_" : std::to_string(std::max<int64_t>(n, 1))) << "; o0 += " << OC << ") {\n"
    << "    long long i = o0 + tx;\n    " << acc << " a = " << init << ";\n"
    << "    if (i < " << hi << " && s < " << S << ") {\n";
  p << unravel(kdims.empty() ? std::vector<int64_t>{1} : kdims, "i", "long long");
  p << "    long long base = " << join_terms(base) << ";\n"
    << "    for (long long j = s; j < " << m << "; j += " << S << ") {\n      long long rr = j, off = base;\n";
  for (int64_t q = static_cast<int64_t>(rdims.size()) - 1; q >= 0; --q)
    p << "      off += (rr % " << rdims[q] << ") * " << rst[q] << "; rr /= " << rdims[q] << ";\n";
  p << "      " << acc << " v = (" << acc << ")" << load(t, "in0[off]") << ";\n      " << step << "\n    }\n    }\n";
  if (S > 1) {
    p << "    sh[threadIdx.x] = a;\n    __syncthreads();\n"
      << "    for (int h = " << S / 2 << "; h > 0; h >>= 1) {\n"
      << "      if (s < h) { " << acc << " v = sh[(s + h) * " << OC << " + tx]; a = sh[s * " << OC << " + tx]; " << step
      << " sh[s * " << OC << " + tx] = a; }\n      __syncthreads();\n    }\n"
      << "    a = sh[tx];\n";
  }
  p << "    if (s == 0 && i < " << hi << ") out0[i] = " << store(out.dtype, d == Dm::F ? "(float)a" : "a") << ";\n";
  if (S > 1) p << "    __syncthreads();\n";
  p << "  }\n}\n";
  return p.str();
}

// A rendered grid-stride kernel as a device function `name(bid_, nblk_, rsh_, lo_, hi_, params...)`:
// the launch's block index and count become parameters; no __restrict__ (a merged launch passes one
// buffer to several parts, and a part may read what an earlier part of a sequential launch wrote).
// block_threads > 0: one block of that size runs it (trip counts become constants); `rows`: the
// loop covers output elements [lo_, hi_) only (a row-block launch).
std::string as_part(const std::string& code, const std::string& name, int block_threads, bool rows,
                    const ValueType& out) {
  const std::string entry = "extern \"C\" __global__ void rlx_kernel(";
  size_t at = code.find(entry);
  RLX_CHECK(at != std::string::npos, "[cuda] merge: rendered kernel without entry point");
  std::string s = "__device__ __forceinline__ void " + name +
                  "(const int bid_, const int nblk_, unsigned long long* rsh_, const long long lo_, const long long hi_, " +
                  code.substr(at + entry.size());
  auto repl = [&](const std::string& from, const std::string& to) {
    int n = 0;
    for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to), ++n;
    return n;
  };
  repl("__restrict__ ", "");
  repl("blockIdx.x", "bid_");
  repl("gridDim.x", "nblk_");
  if (block_threads > 0) {  // one block of known size: loop trip counts are constants, unroll for loads in flight
    std::string t = std::to_string(block_threads);
    repl("blockDim.x", t);
    if (rows) {
      int64_t n = numel(out.shape);
      std::string it = idx_type(n);
      RLX_CHECK(repl("i = bid_ * (" + it + ")" + t + " + threadIdx.x; i < " + std::to_string(n) + ";",
                     "i = lo_ + threadIdx.x; i < hi_;") == 1,
                "[cuda] merge: no row loop in a part");
    }
    repl("  for (int i = ", "  #pragma unroll 4\n  for (int i = ");
    repl("  for (long long i = ", "  #pragma unroll 4\n  for (long long i = ");
  }
  return s;
}

}  // namespace

bool mergeable(const LirKernel& k, const std::vector<ValueType>& in, const std::vector<ValueType>& out, bool sequential) {
  if (out.size() != 1) return false;
  for (auto& t : in)
    if (t.dtype == DType::c64) return false;
  if (out[0].dtype == DType::c64) return false;
  if (k.kind == KernelKind::Generated) return true;
  if (is_elementwise(k.op)) return true;
  if (index_op(k.op)) return k.op != O::Reshape || in.size() == 1;
  return sequential && is_reduce(k.op) && in.size() == 1;
}

namespace {

struct TailRed {
  std::string init, step;  // on `a` and `v` (double)
  int64_t n = 1, C = 1;    // outputs; row length
};

TailRed tail_red(const LirKernel& k, const ValueType& in, int64_t rows) {
  TailRed t;
  auto d = static_dims(in.shape);
  t.C = numel(in.shape) / std::max<int64_t>(rows, 1);
  Node nd{k.op, {}, {}, k.attrs, ""};
  int64_t r = static_cast<int64_t>(d.size());
  std::set<int64_t> ax;
  for (auto a : attr_ints(nd, "axes")) ax.insert(norm_axis(a, r, "reduce"));
  t.n = static_cast<int64_t>(ax.size()) == r ? 1 : t.C;
  switch (k.op) {
    case O::ReduceSum: t.init = "0.0"; t.step = "a += v;"; break;
    case O::ReduceMax: t.init = "__longlong_as_double(0xfff0000000000000LL)"; t.step = "a = fmaxr(a, v);"; break;
    default: t.init = "__longlong_as_double(0x7ff0000000000000LL)"; t.step = "a = fminr(a, v);"; break;
  }
  return t;
}

}  // namespace

bool tail_reduction(const LirKernel& k, const ValueType& in, int64_t rows) {
  if (k.kind != KernelKind::Library || !(k.op == O::ReduceSum || k.op == O::ReduceMax || k.op == O::ReduceMin)) return false;
  if (!is_float(in.dtype) || in.dtype == DType::f64 || k.in.size() != 1) return false;
  auto d = static_dims(in.shape);
  if (d.empty() || d.size() > 2 || d[0] != rows) return false;
  Node nd{k.op, {}, {}, k.attrs, ""};
  int64_t r = static_cast<int64_t>(d.size());
  std::set<int64_t> ax;
  for (auto a : attr_ints(nd, "axes")) ax.insert(norm_axis(a, r, "reduce"));
  // Column sums need one thread per column in the partial (threads / S >= columns).
  bool all = static_cast<int64_t>(ax.size()) == r;
  return ax.count(0) && (all || (ax.size() == 1 && numel(in.shape) / rows <= kRowThreads));
}

int64_t rows_per_block(int64_t max_row_elems, int64_t rows, bool tail) {
  int64_t r = std::max<int64_t>(1, kRowThreads / std::max<int64_t>(max_row_elems, 1));
  if (tail) r = std::max<int64_t>(r, (rows + kMaxTailBlocks - 1) / kMaxTailBlocks);  // few partials to combine
  return r;
}

KernelSource render_merged(const std::vector<MergePart>& parts, MergeMode mode, int64_t rows, int64_t sm_count) {
  const bool sequential = mode != MergeMode::Concurrent, row_mode = mode == MergeMode::Rows;
  const int threads = mode == MergeMode::Sequential ? kSequentialThreads : (row_mode ? kRowThreads : 256);
  int64_t max_inner = 1;
  if (row_mode)
    for (auto& mp : parts)
      if (!mp.tail) max_inner = std::max<int64_t>(max_inner, numel(mp.out[0].shape) / rows);
  std::ostringstream tail_partial, tail_finish, tail_rest;
  int64_t tail_doubles = 0;
  bool any_tail = false;
  for (auto& mp : parts) any_tail |= mp.tail;
  const int64_t rpb = row_mode ? rows_per_block(max_inner, rows, any_tail) : 0;
  std::ostringstream fns, call;
  std::vector<std::string> params;
  std::vector<int64_t> grids;
  int np = 0;
  int64_t smem_bytes = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const MergePart& mp = parts[i];
    std::string name = "part" + std::to_string(i);
    KernelSource ks;
    bool red = mp.k->kind != KernelKind::Generated && is_reduce(mp.k->op);
    if (mp.tail && red) {  // per-block partial over this block's rows, finished by the last block
      RLX_CHECK(row_mode && tail_reduction(*mp.k, mp.in[0], rows), "[cuda] merge: bad tail reduction");
      TailRed t = tail_red(*mp.k, mp.in[0], rows);
      std::string x = "p" + std::to_string(np), y = "p" + std::to_string(np + 1);
      int64_t off_in = mp.smem.size() > 0 ? mp.smem[0] : -1;
      std::string ct = c_type(mp.in[0].dtype);
      std::string src = off_in >= 0 ? "(reinterpret_cast<" + ct + "*>(smem_ + " + std::to_string(off_in) + ") - r0_ * " +
                                          std::to_string(t.C) + ")"
                                    : x;
      params.push_back("const " + ct + "* " + x);
      params.push_back(c_type(mp.out[0].dtype) + "* " + y);
      np += 2;
      std::string base = std::to_string(tail_doubles);
      int64_t S = 1;
      while (S * 2 * t.n <= threads) S *= 2;
      int64_t OC = threads / S;
      tail_partial << "  { // " << mp.k->label() << ": partial of this block's rows\n"
                   << "    const " << ct << "* src = " << src << ";\n"
                   << "    const int tx = threadIdx.x % " << OC << ", s = threadIdx.x / " << OC << ";\n"
                   << "    double a = " << t.init << ";\n";
      if (t.n == 1)
        tail_partial << "    for (long long e = r0_ * " << t.C << " + threadIdx.x; e < r1_ * " << t.C << "; e += " << threads
                     << ") { double v = " << load(mp.in[0].dtype, "src[e]") << "; " << t.step << " }\n";
      else
        tail_partial << "    if (tx < " << t.n << ") for (long long r = r0_ + s; r < r1_; r += " << S << ") { double v = "
                     << load(mp.in[0].dtype, "src[r * " + std::to_string(t.C) + " + tx]") << "; " << t.step << " }\n";
      tail_partial << "    double* sh = reinterpret_cast<double*>(rsh_);\n    sh[threadIdx.x] = a;\n    __syncthreads();\n"
                   << "    for (int h = " << S / 2 << "; h > 0; h >>= 1) {\n"
                   << "      if (s < h) { double v = sh[(s + h) * " << OC << " + tx]; a = sh[s * " << OC << " + tx]; " << t.step
                   << " sh[s * " << OC << " + tx] = a; }\n      __syncthreads();\n    }\n"
                   << "    if (s == 0 && tx < " << t.n << ") part_[" << base << " + blockIdx.x * " << t.n << " + tx] = sh[tx];\n"
                   << "    __syncthreads();\n  }\n";
      // Finish: S slices of the blocks' partials per output, combined by a shared-memory tree
      // (the same order on every run: deterministic).
      tail_finish << "  { // " << mp.k->label() << ": combine the blocks' partials\n"
                  << "    const int tx = threadIdx.x % " << OC << ", s = threadIdx.x / " << OC << ";\n"
                  << "    double a = " << t.init << ";\n"
                  << "    if (tx < " << t.n << ") {\n      #pragma unroll 8\n      for (int b = s; b < gridDim.x; b += " << S
                  << ") { double v = __ldcg(part_ + " << base << " + b * " << t.n << " + tx); " << t.step << " }\n    }\n"
                  << "    double* sh = reinterpret_cast<double*>(rsh_);\n    sh[threadIdx.x] = a;\n    __syncthreads();\n"
                  << "    for (int h = " << S / 2 << "; h > 0; h >>= 1) {\n"
                  << "      if (s < h) { double v = sh[(s + h) * " << OC << " + tx]; a = sh[s * " << OC << " + tx]; " << t.step
                  << " sh[s * " << OC << " + tx] = a; }\n      __syncthreads();\n    }\n"
                  << "    if (s == 0 && tx < " << t.n << ") " << y << "[tx] = " << store(mp.out[0].dtype, "(float)sh[tx]") << ";\n"
                  << "    __syncthreads();\n  }\n";
      tail_doubles += t.n * ((rows + rpb - 1) / rpb);  // one partial per block and output
      grids.push_back(0);
      continue;
    }
    if (mp.k->kind == KernelKind::Generated) {
      ks = render_fused(mp.k->body, mp.out[0]);
    } else if (!red) {
      RLX_CHECK(render_library(*mp.k, mp.in, mp.out, &ks, sm_count), "[cuda] merge: no kernel for ", mp.k->label());
    }
    RLX_CHECK(!red || sequential, "[cuda] merge: a reduction in a concurrent launch");
    if (red) fns << block_reduce_part(*mp.k, mp.in[0], mp.out[0], name, threads, row_mode, rpb);
    else fns << as_part(ks.code, name, sequential ? threads : 0, row_mode && !mp.tail, mp.out[0]);
    grids.push_back(ks.grid);
    std::vector<std::string> args;
    auto arg = [&](size_t slot, const ValueType& t, bool is_const) {
      params.push_back((is_const ? "const " : "") + c_type(t.dtype) + "* p" + std::to_string(np));
      int64_t off = slot < mp.smem.size() ? mp.smem[slot] : -1;
      if (off >= 0) {
        int64_t inner = row_mode ? numel(t.shape) / rows : 0;  // a row block keeps its own rows only
        args.push_back("(reinterpret_cast<" + c_type(t.dtype) + "*>(smem_ + " + std::to_string(off) + ")" +
                       (row_mode ? " - r0_ * " + std::to_string(inner) : "") + ")");
        smem_bytes = std::max<int64_t>(smem_bytes, off + (row_mode ? rpb * inner : numel(t.shape)) * static_cast<int64_t>(dtype_size(t.dtype)));
      } else {
        args.push_back("p" + std::to_string(np));
      }
      ++np;
    };
    for (size_t j = 0; j < mp.in.size(); ++j) arg(j, mp.in[j], true);
    arg(mp.in.size(), mp.out[0], false);
    std::string a;
    for (auto& x : args) a += ", " + x;
    if (row_mode && mp.tail) {
      tail_rest << "  __syncthreads();\n  " << name << "(0, 1, rsh_, 0, 0" << a << ");\n";
    } else if (row_mode) {
      std::string inner = std::to_string(numel(mp.out[0].shape) / rows);
      call << "  " << (i ? "__syncthreads();\n  " : "") << name << "(0, 1, rsh_, r0_ * " << inner << ", r1_ * " << inner << a
           << ");\n";
    } else if (sequential) {
      call << "  " << (i ? "__syncthreads();\n  " : "") << name << "(0, 1, rsh_, 0, 0" << a << ");\n";
    } else {
      call << "  if (b < " << ks.grid << ") { " << name << "(b, " << ks.grid << ", rsh_, 0, 0" << a << "); return; }\n  b -= "
           << ks.grid << ";\n";
    }
  }
  std::ostringstream c;
  const bool tails = tail_doubles > 0 || !tail_rest.str().empty();
  if (tails) params.push_back("unsigned char* scratch_");
  c << kPrelude << fns.str() << "extern \"C\" __global__ void __launch_bounds__(" << threads << ") rlx_kernel(";
  for (size_t i = 0; i < params.size(); ++i) c << (i ? ", " : "") << params[i];
  c << ") {\n";
  if (sequential)
    c << "  __shared__ unsigned long long rsh_[" << threads << "];\n"
      << "  extern __shared__ __align__(16) unsigned char smem_[];\n";
  else c << "  unsigned long long* rsh_ = 0;\n  int b = blockIdx.x;\n";
  if (row_mode)
    c << "  const long long r0_ = (long long)blockIdx.x * " << rpb << ", r1_ = r0_ + " << rpb << " < " << rows << " ? r0_ + "
      << rpb << " : " << rows << ";\n";
  c << call.str();
  if (tails) {
    RLX_CHECK(row_mode, "[cuda] merge: tail parts outside a row launch");
    c << "  __syncthreads();\n  unsigned* count_ = reinterpret_cast<unsigned*>(scratch_);\n"
      << "  double* part_ = reinterpret_cast<double*>(scratch_ + 16);\n"
      << tail_partial.str()
      << "  __shared__ int last_;\n  __threadfence();\n  __syncthreads();\n"
      << "  if (threadIdx.x == 0) last_ = atomicAdd(count_, 1u) == gridDim.x - 1;\n  __syncthreads();\n"
      << "  if (!last_) return;\n  __threadfence();\n"
      << tail_finish.str() << tail_rest.str()
      << "  if (threadIdx.x == 0) *count_ = 0u;\n";
  }
  c << "}\n";
  KernelSource ks;
  if (tails) ks.scratch_bytes = static_cast<size_t>(16 + 8 * std::max<int64_t>(tail_doubles, 1));
  ks.code = c.str();
  ks.block = static_cast<unsigned>(threads);
  int64_t g = 0;
  for (auto x : grids) g += x;
  ks.grid = row_mode ? static_cast<unsigned>((rows + rpb - 1) / rpb) : (sequential ? 1u : static_cast<unsigned>(g));
  ks.smem = static_cast<unsigned>(smem_bytes);
  ks.num_params = np;
  return ks;
}

}  // namespace rlx::cuda
