// GLSL 4.50 compute, shared by vulkan (compiled to SPIR-V) and opengl (compiled by the driver).
// Every buffer is a `uint d[]` SSBO: 32-bit dtypes are bit casts, 8/16-bit dtypes are unpacked
// from their word and stored with atomicAnd/atomicOr (neighbouring elements share a word), so
// neither API needs 8/16-bit storage extensions. i64 buffers hold full 64-bit values but kernels
// see 32 bits: loads read the low word, stores write the int sign-extended. Only convert is
// claimed for i64; dispatch narrows every other i64 op to i32 (src/dispatch/legalize.cpp), exact
// while values fit in 32 bits. No f64/c64 buffers.
#include <sstream>

#include "codegen/renderer.h"

namespace rlx::codegen {

namespace {

const char* kHelpers = R"(#define GRP int(gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x)
#define LID int(gl_LocalInvocationID.x)
#define GID (GRP * int(gl_WorkGroupSize.x) + LID)
#define BARRIER memoryBarrierShared(); barrier()
#define NAN_F uintBitsToFloat(0x7fc00000u)
#define INF_F uintBitsToFloat(0x7f800000u)
#define rsqrt inversesqrt
#define rint roundEven
#define fabs abs
float erf(float x) {  // Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7)
  float t = 1.0 / (1.0 + 0.3275911 * abs(x));
  float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-x * x);
  return x < 0.0 ? -y : y;
}
float fmod(float a, float b) {  // C fmod: truncated quotient, result has the sign of a
  float r = fma(-b, trunc(a / b), a);
  if (r != 0.0 && sign(r) != sign(a)) r += abs(b) * sign(a);
  if (abs(r) >= abs(b)) r -= abs(b) * sign(a);
  return r;
}
uint f2h(float f) {  // f32 -> f16 bits, round to nearest even
  uint x = floatBitsToUint(f), s = (x >> 16) & 0x8000u, e = (x >> 23) & 0xffu, m = x & 0x7fffffu;
  if (e == 255u) return s | 0x7c00u | (m != 0u ? 0x200u : 0u);
  int ee = int(e) - 112;
  if (ee >= 31) return s | 0x7c00u;
  if (ee <= 0) {
    if (ee < -10) return s;
    m |= 0x800000u;
    uint sh = uint(14 - ee), h = m >> sh, rem = m & ((1u << sh) - 1u), hf = 1u << (sh - 1u);
    if (rem > hf || (rem == hf && (h & 1u) != 0u)) h++;
    return s | h;
  }
  uint h = (uint(ee) << 10) | (m >> 13), rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u)) h++;
  return s | h;
}
uint f2bf(float f) {  // f32 -> bf16 bits, round to nearest even
  uint x = floatBitsToUint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;
  return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}
)";

class GlslRenderer : public CLikeRenderer {
 public:
  std::string language() const override { return "glsl"; }
  std::string ctype(DType t) const override {
    switch (t) {
      case DType::f32: case DType::f16: case DType::bf16: return "float";
      case DType::i8: case DType::u8: case DType::i16: case DType::i32: case DType::boolean: case DType::i64: return "int";
      default: return "";
    }
  }

 protected:
  std::string cast(const std::string& type, const std::string& e) const override { return type + "(" + e + ")"; }

  std::string prelude(const std::vector<KernelArg>& args) const override {
    std::ostringstream os;
    os << "#version 450\n" << kHelpers;
    for (size_t i = 0; i < args.size(); ++i) {
      std::string b = "b" + std::to_string(i), I = std::to_string(i);
      os << "layout(std430, binding = " << i << ") " << (args[i].written ? "" : "readonly ") << "buffer B" << i
         << " { uint d[]; } " << b << ";\n";
      auto narrow_st = [&](int shift, const char* mask, const char* width, const std::string& v) {
        os << "#define ST" << I << "(I_, V_) { int i_ = (I_); uint s_ = uint(i_ & " << ((1 << shift) - 1) << ") * " << width
           << "; atomicAnd(" << b << ".d[i_ >> " << shift << "], ~(" << mask << " << s_)); atomicOr(" << b << ".d[i_ >> "
           << shift << "], (" << v << " & " << mask << ") << s_); }\n";
      };
      switch (args[i].dtype) {
        case DType::f32:
          os << "#define LD" << I << "(I_) uintBitsToFloat(" << b << ".d[(I_)])\n#define ST" << I << "(I_, V_) " << b
             << ".d[(I_)] = floatBitsToUint(V_)\n";
          break;
        case DType::i32:
          os << "#define LD" << I << "(I_) int(" << b << ".d[(I_)])\n#define ST" << I << "(I_, V_) " << b << ".d[(I_)] = uint(V_)\n";
          break;
        case DType::i64:
          os << "#define LD" << I << "(I_) int(" << b << ".d[2 * (I_)])\n#define ST" << I << "(I_, V_) { int i_ = (I_); int v_ = (V_); "
             << b << ".d[2 * i_] = uint(v_); " << b << ".d[2 * i_ + 1] = uint(v_ >> 31); }\n";
          break;
        case DType::f16:
          os << "#define LD" << I << "(I_) unpackHalf2x16(" << b << ".d[(I_) >> 1] >> (uint((I_) & 1) * 16u)).x\n";
          narrow_st(1, "0xffffu", "16u", "f2h(V_)");
          break;
        case DType::bf16:
          os << "#define LD" << I << "(I_) uintBitsToFloat((" << b << ".d[(I_) >> 1] >> (uint((I_) & 1) * 16u)) << 16)\n";
          narrow_st(1, "0xffffu", "16u", "f2bf(V_)");
          break;
        case DType::i16:
          os << "#define LD" << I << "(I_) (int(" << b << ".d[(I_) >> 1] << (16u - uint((I_) & 1) * 16u)) >> 16)\n";
          narrow_st(1, "0xffffu", "16u", "uint(V_)");
          break;
        case DType::i8:
          os << "#define LD" << I << "(I_) (int(" << b << ".d[(I_) >> 2] << (24u - uint((I_) & 3) * 8u)) >> 24)\n";
          narrow_st(2, "0xffu", "8u", "uint(V_)");
          break;
        case DType::u8: case DType::boolean:
          os << "#define LD" << I << "(I_) int((" << b << ".d[(I_) >> 2] >> (uint((I_) & 3) * 8u)) & 0xffu)\n";
          narrow_st(2, "0xffu", "8u", "uint(V_)");
          break;
        default: fail("[codegen] glsl has no ", dtype_name(args[i].dtype), " buffers");
      }
    }
    return os.str();
  }
  std::string kernel_open(const RenderedKernel& k, const std::string& shared) const override {
    return "layout(local_size_x = " + std::to_string(k.local) + ") in;\n" + shared + "void main() {\n";
  }
  std::string shared_decl(const std::string& type, const std::string& name, int n) const override {
    return "shared " + type + " " + name + "[" + std::to_string(n) + "];\n";
  }
  bool shared_in_body() const override { return false; }
};

}  // namespace

std::unique_ptr<CLikeRenderer> make_glsl_renderer() { return std::make_unique<GlslRenderer>(); }

}  // namespace rlx::codegen
