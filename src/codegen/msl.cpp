// Metal Shading Language (C++14-based) compute kernels, for metal. Typed `device` pointers for every
// dtype Metal has: half for f16 (loads widen, stores round to nearest even), bf16 as ushort bits,
// char/uchar/short/int/long; i64 computes in `long` (MSL's 64-bit integer). Metal has no double,
// so no f64. Threadgroup memory is declared inside the kernel; grids are exact (dispatchThreadgroups
// with the kernel's group count), so no group guard. MSL has no erf: the same A&S 7.1.26 as GLSL.
#include <sstream>

#include "codegen/renderer.h"

namespace rlx::codegen {

namespace {

const char* kHelpers = R"(#include <metal_stdlib>
using namespace metal;
#define GRP ((int)rlx_tg.x)
#define LID ((int)rlx_lt.x)
#define BARRIER threadgroup_barrier(mem_flags::mem_threadgroup)
#define NAN_F as_type<float>(0x7fc00000u)
#define INF_F as_type<float>(0x7f800000u)
#define erf rlx_erf
inline float rlx_erf(float x) {  // Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7)
  float t = 1.0f / (1.0f + 0.3275911f * fabs(x));
  float y = 1.0f - (((((1.061405429f * t - 1.453152027f) * t) + 1.421413741f) * t - 0.284496736f) * t + 0.254829592f) * t * exp(-x * x);
  return x < 0.0f ? -y : y;
}
inline ushort f2bf(float f) {  // f32 -> bf16 bits, round to nearest even
  uint x = as_type<uint>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (ushort)((x >> 16) | 0x40u);
  return (ushort)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
)";

class MslRenderer : public CLikeRenderer {
 public:
  std::string language() const override { return "msl"; }
  std::string ctype(DType t) const override { return c_ctype(t, false); }

 protected:
  std::string cast(const std::string& type, const std::string& e) const override { return c_cast(type, e); }
  std::string flit(double v) const override { return suffixed_flit(v); }  // float literals, so halves and ints promote to float, not double

  static std::string storage(DType t) {
    switch (t) {
      case DType::f32: return "float";
      case DType::f16: return "half";
      case DType::bf16: return "ushort";
      case DType::i8: return "char";
      case DType::u8: case DType::boolean: return "uchar";
      case DType::i16: return "short";
      case DType::i32: return "int";
      case DType::i64: return "long";
      default: fail("[codegen] msl has no ", dtype_name(t), " buffers");
    }
  }

  std::string prelude(const std::vector<KernelArg>& args) const override {
    std::ostringstream os;
    os << kHelpers;
    for (size_t i = 0; i < args.size(); ++i) {
      std::string b = "b" + std::to_string(i), I = std::to_string(i);
      if (args[i].dtype == DType::bf16)
        os << "#define LD" << I << "(I_) as_type<float>(((uint)" << b << "[(I_)]) << 16)\n#define ST" << I << "(I_, V_) " << b
           << "[(I_)] = f2bf(V_)\n";
      else
        os << "#define LD" << I << "(I_) ((" << ctype(args[i].dtype) << ")" << b << "[(I_)])\n#define ST" << I << "(I_, V_) "
           << b << "[(I_)] = (" << storage(args[i].dtype) << ")(V_)\n";
    }
    return os.str();
  }
  std::string kernel_open(const RenderedKernel& k, const std::string& shared) const override {
    std::string s = "#define GID (GRP * " + std::to_string(k.local) + " + LID)\nkernel void " + k.name + "(";
    for (size_t i = 0; i < k.args.size(); ++i)
      s += std::string(i ? ", " : "") + (k.args[i].written ? "device " : "const device ") + storage(k.args[i].dtype) +
           "* b" + std::to_string(i) + " [[buffer(" + std::to_string(i) + ")]]";
    return s + ", uint3 rlx_tg [[threadgroup_position_in_grid]], uint3 rlx_lt [[thread_position_in_threadgroup]]) {\n" +
           shared;
  }
  std::string shared_decl(const std::string& type, const std::string& name, int n) const override {
    return "threadgroup " + type + " " + name + "[" + std::to_string(n) + "];\n";
  }
  bool shared_in_body() const override { return true; }
};

}  // namespace

std::unique_ptr<CLikeRenderer> make_msl_renderer() { return std::make_unique<MslRenderer>(); }

}  // namespace rlx::codegen
