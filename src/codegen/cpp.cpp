// C++ for the cpu JIT (src/backends/cpu/jit.cpp): fused elementwise kernels as plain loops that
// GCC vectorizes at -O3 -march=native. Expressions, conversions and literals come from the
// C-like base; this file adds the loop nest over a range of output elements (collapsed broadcast
// indexing, innermost dim contiguous, __restrict pointers), the C++ types and a prelude whose math
// overloads resolve the base's C spellings (exp, erf, isnan, max, ...) to what the cpu evaluator
// computes: vmath.h's exp/tanh/erf for f32, libm in double for the rest (as the reference does).
#include <sstream>

#include "codegen/renderer.h"

namespace rlx::codegen {

namespace {

std::string storage(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::i8: return "int8_t";
    case DType::u8: case DType::boolean: return "uint8_t";
    case DType::i16: return "int16_t";
    case DType::i32: return "int32_t";
    case DType::i64: return "int64_t";
    default: return "";
  }
}

// Overloads in namespace rlxk hide the global C functions, so the base's "exp(x)" picks the f32
// or f64 version by argument type.
const char* kMath = R"(#define NAN_F __builtin_nanf("")
#define INF_F __builtin_inff()
namespace rlxk {
namespace vm = rlx::cpu::vm;
RLX_INLINE float exp(float x) { return vm::exp(x); }
RLX_INLINE float tanh(float x) { return vm::tanh(x); }
RLX_INLINE float erf(float x) { return vm::erf(x); }
RLX_INLINE float log(float x) { return std::log(x); }
RLX_INLINE float sqrt(float x) { return __builtin_sqrtf(x); }
RLX_INLINE float rsqrt(float x) { return 1.f / __builtin_sqrtf(x); }
RLX_INLINE float sin(float x) { return static_cast<float>(std::sin(static_cast<double>(x))); }
RLX_INLINE float cos(float x) { return static_cast<float>(std::cos(static_cast<double>(x))); }
RLX_INLINE float pow(float a, float b) { return static_cast<float>(std::pow(static_cast<double>(a), static_cast<double>(b))); }
RLX_INLINE float fmod(float a, float b) { return static_cast<float>(std::fmod(static_cast<double>(a), static_cast<double>(b))); }
RLX_INLINE float fabs(float x) { return __builtin_fabsf(x); }
RLX_INLINE float floor(float x) { return __builtin_floorf(x); }
RLX_INLINE float ceil(float x) { return __builtin_ceilf(x); }
RLX_INLINE float rint(float x) { return __builtin_rintf(x); }
RLX_INLINE bool isnan(float x) { return x != x; }
RLX_INLINE double exp(double x) { return std::exp(x); }
RLX_INLINE double tanh(double x) { return std::tanh(x); }
RLX_INLINE double erf(double x) { return std::erf(x); }
RLX_INLINE double log(double x) { return std::log(x); }
RLX_INLINE double sqrt(double x) { return __builtin_sqrt(x); }
RLX_INLINE double rsqrt(double x) { return 1.0 / __builtin_sqrt(x); }
RLX_INLINE double sin(double x) { return std::sin(x); }
RLX_INLINE double cos(double x) { return std::cos(x); }
RLX_INLINE double pow(double a, double b) { return std::pow(a, b); }
RLX_INLINE double fmod(double a, double b) { return std::fmod(a, b); }
RLX_INLINE double fabs(double x) { return __builtin_fabs(x); }
RLX_INLINE double floor(double x) { return __builtin_floor(x); }
RLX_INLINE double ceil(double x) { return __builtin_ceil(x); }
RLX_INLINE double rint(double x) { return __builtin_rint(x); }
RLX_INLINE bool isnan(double x) { return x != x; }
template <class T> RLX_INLINE T max(T a, T b) { return a > b ? a : b; }
template <class T> RLX_INLINE T min(T a, T b) { return a < b ? a : b; }
// f64 max/min as the reference: NaN wins, max(-0, +0) = +0, min(-0, +0) = -0.
RLX_INLINE double fmax_ref(double a, double b) {
  if (a != a || b != b) return __builtin_nan("");
  if (a == b) return __builtin_signbit(a) ? b : a;
  return a > b ? a : b;
}
RLX_INLINE double fmin_ref(double a, double b) {
  if (a != a || b != b) return __builtin_nan("");
  if (a == b) return __builtin_signbit(a) ? a : b;
  return a < b ? a : b;
}
}  // namespace rlxk
)";

class CppRenderer : public CLikeRenderer {
 public:
  std::string language() const override { return "c++"; }
  std::string ctype(DType t) const override {
    switch (t) {
      case DType::f32: return "float";
      case DType::f64: return "double";
      // Narrow ints keep their own type so each "vN = ..." wraps as the reference's stores do;
      // bool stays int: every op yielding bool gives 0/1 (the reference stores v != 0).
      case DType::i8: return "int8_t";
      case DType::u8: return "uint8_t";
      case DType::i16: return "int16_t";
      case DType::i32: case DType::boolean: return "int";
      case DType::i64: return "int64_t";
      default: return "";
    }
  }

  bool render_fused(const Graph& body, const std::vector<ValueType>& in, const ValueType& out, const std::string& name,
                    CppKernel& k, std::string* why) const;

 protected:
  std::string cast(const std::string& type, const std::string& e) const override { return c_cast(type, e); }
  std::string flit(double v) const override { return suffixed_flit(v); }  // f32 literals get an f suffix (1.0 would promote to double)
  std::string expr(const Node& n, const std::vector<std::string>& a, const std::vector<DType>& at, DType ot) const override {
    DType t = at.empty() ? ot : at[0];
    if ((n.op == OpKind::Max || n.op == OpKind::Min) && t == DType::f32) {  // the cpu evaluator's form
      const char* cmp = n.op == OpKind::Max ? " > " : " < ";
      return "((" + a[0] + " != " + a[0] + " || " + a[0] + cmp + a[1] + ") ? " + a[0] + " : " + a[1] + ")";
    }
    if ((n.op == OpKind::Max || n.op == OpKind::Min) && t == DType::f64)
      return std::string(n.op == OpKind::Max ? "fmax_ref(" : "fmin_ref(") + a[0] + ", " + a[1] + ")";
    if (n.op == OpKind::Pow && !is_float(t)) fail("[codegen] c++: pow on ", dtype_name(t));
    return CLikeRenderer::expr(n, a, at, ot);
  }
  // The GPU-style hooks are unused: render_fused writes whole functions.
  std::string prelude(const std::vector<KernelArg>&) const override { return ""; }
  std::string kernel_open(const RenderedKernel&, const std::string&) const override { return ""; }
  std::string shared_decl(const std::string&, const std::string&, int) const override { return ""; }
  bool shared_in_body() const override { return true; }
};

bool CppRenderer::render_fused(const Graph& body, const std::vector<ValueType>& in, const ValueType& out,
                               const std::string& name, CppKernel& k, std::string* why) const {
  auto no = [&](const std::string& w) {
    if (why) *why = w;
    return false;
  };
  if (body.outputs.size() != 1 || in.size() != body.inputs.size()) return no("not a one-output body");
  for (auto& v : body.values)
    if (ctype(v.type.dtype).empty()) return no(std::string("dtype ") + std::string(dtype_name(v.type.dtype)));
  for (auto& t : in)
    if (storage(t.dtype).empty()) return no(std::string("dtype ") + std::string(dtype_name(t.dtype)));
  if (storage(out.dtype).empty() || out.dtype != body.type(body.outputs[0]).dtype) return no("output dtype");
  for (auto& n : body.nodes)
    if (n.outputs.size() != 1) return no(std::string("multi-output ") + std::string(op_name(n.op)));

  // Which output dims each input varies along (numpy broadcasting, aligned at the right).
  const auto od = dims_of(out);
  const size_t r = od.size(), ni = in.size();
  std::vector<std::vector<bool>> pat(ni, std::vector<bool>(r, false));
  for (size_t i = 0; i < ni; ++i) {
    auto id = dims_of(in[i]);
    if (id.size() > r) return no("input rank above the output's");
    size_t off = r - id.size();
    for (size_t j = 0; j < id.size(); ++j) {
      if (id[j] == 1) continue;
      if (id[j] != od[off + j]) return no("input does not broadcast to the output");
      pat[i][off + j] = true;
    }
  }
  // Collapse: drop size-1 dims, merge neighbours every input treats alike.
  std::vector<int64_t> cd;
  std::vector<std::vector<bool>> cp(ni);
  for (size_t d = 0; d < r; ++d) {
    if (od[d] == 1) continue;
    bool merge = !cd.empty();
    for (size_t i = 0; merge && i < ni; ++i) merge = cp[i].back() == pat[i][d];
    if (merge) {
      cd.back() *= od[d];
      continue;
    }
    cd.push_back(od[d]);
    for (size_t i = 0; i < ni; ++i) cp[i].push_back(pat[i][d]);
  }
  if (cd.empty()) {  // one element
    cd.push_back(1);
    for (size_t i = 0; i < ni; ++i) cp[i].assign(1, false);
  }
  const size_t R = cd.size();
  k.dims = cd;
  k.total = numel(out.shape);

  std::vector<std::string> val(body.values.size());
  std::ostringstream row, fn;
  // The row function: n contiguous outputs; an input either advances with them (pointer) or is
  // one value for the whole row (scalar argument).
  row << "static void " << name << "_row(int64_t n, " << storage(out.dtype) << "* __restrict y";
  for (size_t i = 0; i < ni; ++i) {
    if (cp[i][R - 1]) row << ", const " << storage(in[i].dtype) << "* __restrict p" << i;
    else row << ", " << storage(in[i].dtype) << " s" << i;
  }
  row << ") {\n";
  for (size_t i = 0; i < ni; ++i)
    if (!cp[i][R - 1]) row << "  const " << ctype(in[i].dtype) << " c" << i << " = (" << ctype(in[i].dtype) << ")s" << i << ";\n";
  row << "  for (int64_t j = 0; j < n; ++j) {\n";
  std::ostringstream loads;
  for (size_t i = 0; i < ni; ++i) {
    ValueId v = body.inputs[i];
    val[v] = "v" + std::to_string(v);
    if (cp[i][R - 1]) loads << ctype(in[i].dtype) << " " << val[v] << " = (" << ctype(in[i].dtype) << ")p" << i << "[j];\n";
    else val[v] = "c" + std::to_string(i);
  }
  std::string nodes = body_nodes(body, val);
  std::string res = val[body.outputs[0]];
  if (out.dtype == DType::boolean) res = "(" + res + " != 0)";
  std::string all = loads.str() + nodes + "y[j] = (" + storage(out.dtype) + ")(" + res + ");\n";
  std::istringstream lines(all);
  for (std::string l; std::getline(lines, l);) row << "    " << l << "\n";
  row << "  }\n}\n";

  fn << "extern \"C\" void " << name << "(void* const* b, const int64_t* d, int64_t begin, int64_t end) {\n";
  for (size_t i = 0; i < ni; ++i)
    fn << "  const " << storage(in[i].dtype) << "* i" << i << " = (const " << storage(in[i].dtype) << "*)b[" << i << "];\n";
  fn << "  " << storage(out.dtype) << "* o = (" << storage(out.dtype) << "*)b[" << ni << "];\n";
  fn << "  const int64_t inner = d[" << R - 1 << "];\n";
  // Per input, its stride along each outer collapsed dim (inputs are dense in their own shape).
  for (size_t i = 0; i < ni; ++i) {
    fn << "  int64_t z" << i << " = " << (cp[i][R - 1] ? "inner" : "1") << ";\n";
    for (size_t dd = R - 1; dd-- > 0;) {
      if (!cp[i][dd]) continue;
      fn << "  const int64_t t" << i << "_" << dd << " = z" << i << "; z" << i << " *= d[" << dd << "];\n";
    }
  }
  fn << "  for (int64_t i = begin; i < end;) {\n";
  fn << "    const int64_t row = i / inner, col = i - row * inner;\n";
  fn << "    const int64_t n = inner - col < end - i ? inner - col : end - i;\n";
  if (R > 1) {
    fn << "    int64_t q = row;\n";
    for (size_t dd = R - 1; dd-- > 0;) {
      if (dd > 0) fn << "    const int64_t x" << dd << " = q % d[" << dd << "]; q /= d[" << dd << "];\n";
      else fn << "    const int64_t x0 = q;\n";
    }
  }
  fn << "    " << name << "_row(n, o + i";
  for (size_t i = 0; i < ni; ++i) {
    std::string off;
    for (size_t dd = 0; dd + 1 < R; ++dd)
      if (cp[i][dd]) off += " + x" + std::to_string(dd) + " * t" + std::to_string(i) + "_" + std::to_string(dd);
    if (cp[i][R - 1]) fn << ", i" << i << off << " + col";
    else fn << ", i" << i << "[0" << off << "]";
  }
  fn << ");\n    i += n;\n  }\n}\n";
  k.source = "namespace rlxk {\n" + row.str() + fn.str() + "}  // namespace rlxk\n";
  return true;
}

}  // namespace

bool render_cpp_fused(const Graph& body, const std::vector<ValueType>& in, const ValueType& out, const std::string& name,
                      CppKernel& k, std::string* why) {
  static const CppRenderer r;
  try {
    return r.render_fused(body, in, out, name, k, why);
  } catch (const std::exception& e) {  // an op the expressions do not cover
    if (why) *why = e.what();
    return false;
  }
}

std::string cpp_prelude(const std::string& vmath) {
  return "#include <cstdint>\n#include <cmath>\n#define RLX_NO_CLONES 1\n" + vmath + "\n" + kMath;
}

}  // namespace rlx::codegen
