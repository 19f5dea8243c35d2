// HLSL compute (Shader Model 5.1 syntax), for directx. Every buffer is a RWStructuredBuffer<uint>
// (a UAV: `register(uN)` for Direct3D 12, `[[vk::binding(N)]]` for SPIR-V) holding words, as the
// GLSL renderer does: 32-bit dtypes by asfloat/asuint, 8/16-bit dtypes unpacked from their word
// and stored with InterlockedAnd/InterlockedOr; i64 buffers are word pairs read through the low
// word (convert only; dispatch narrows the rest to i32). Arithmetic is f32/i32, so no 16-bit or
// 64-bit shader feature is needed. HLSL has no erf, and C's fmod/rint are spelled out below so the
// results do not depend on a compiler's mapping of fmod/round.
#include <algorithm>
#include <sstream>

#include "codegen/renderer.h"

namespace rlx::codegen {

namespace {

const char* kHelpers = R"(#define LID ((int)rlx_lt.x)
#define BARRIER GroupMemoryBarrierWithGroupSync()
#define NAN_F asfloat(0x7fc00000u)
#define INF_F asfloat(0x7f800000u)
#define fabs abs
#define rint rlx_rint
#define fmod rlx_fmod
float erf(float x) {  // Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7)
  float t = 1.0 / (1.0 + 0.3275911 * abs(x));
  float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-x * x);
  return x < 0.0 ? -y : y;
}
float rlx_fmod(float a, float b) {  // C fmod: truncated quotient, result has the sign of a
  float r = a - b * trunc(a / b);
  float sa = a < 0.0 ? -1.0 : 1.0;
  if (r != 0.0 && (r < 0.0) != (a < 0.0)) r += abs(b) * sa;
  if (abs(r) >= abs(b)) r -= abs(b) * sa;
  return r;
}
float rlx_rint(float x) {  // round half to even
  float f = floor(x), d = x - f;
  if (d > 0.5 || (d == 0.5 && fmod(f, 2.0) != 0.0)) f += 1.0;
  return f;
}
uint f2h(float f) {  // f32 -> f16 bits, round to nearest even
  uint x = asuint(f), s = (x >> 16) & 0x8000u, e = (x >> 23) & 0xffu, m = x & 0x7fffffu;
  if (e == 255u) return s | 0x7c00u | (m != 0u ? 0x200u : 0u);
  int ee = (int)e - 112;
  if (ee >= 31) return s | 0x7c00u;
  if (ee <= 0) {
    if (ee < -10) return s;
    m |= 0x800000u;
    uint sh = (uint)(14 - ee), h = m >> sh, rem = m & ((1u << sh) - 1u), hf = 1u << (sh - 1u);
    if (rem > hf || (rem == hf && (h & 1u) != 0u)) h++;
    return s | h;
  }
  uint h = ((uint)ee << 10) | (m >> 13), rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u)) h++;
  return s | h;
}
uint f2bf(float f) {  // f32 -> bf16 bits, round to nearest even
  uint x = asuint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;
  return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}
)";

class HlslRenderer : public CLikeRenderer {
 public:
  std::string language() const override { return "hlsl"; }
  std::string ctype(DType t) const override {
    switch (t) {
      case DType::f32: case DType::f16: case DType::bf16: return "float";
      case DType::i8: case DType::u8: case DType::i16: case DType::i32: case DType::boolean: case DType::i64: return "int";
      default: return "";
    }
  }

 protected:
  std::string cast(const std::string& type, const std::string& e) const override { return c_cast(type, e); }

  std::string prelude(const std::vector<KernelArg>& args) const override {
    std::ostringstream os;
    os << kHelpers;
    for (size_t i = 0; i < args.size(); ++i) {
      std::string b = "b" + std::to_string(i), I = std::to_string(i);
      os << "[[vk::binding(" << i << ", 0)]] RWStructuredBuffer<uint> " << b << " : register(u" << i << ");\n";
      auto narrow_st = [&](int shift, const char* mask, const char* width, const std::string& v) {
        os << "#define ST" << I << "(I_, V_) { int i_ = (I_); uint s_ = (uint)(i_ & " << ((1 << shift) - 1) << ") * " << width
           << "; InterlockedAnd(" << b << "[i_ >> " << shift << "], ~(" << mask << " << s_)); InterlockedOr(" << b
           << "[i_ >> " << shift << "], (" << v << " & " << mask << ") << s_); }\n";
      };
      switch (args[i].dtype) {
        case DType::f32:
          os << "#define LD" << I << "(I_) asfloat(" << b << "[(I_)])\n#define ST" << I << "(I_, V_) " << b
             << "[(I_)] = asuint((float)(V_))\n";
          break;
        case DType::i32:
          os << "#define LD" << I << "(I_) asint(" << b << "[(I_)])\n#define ST" << I << "(I_, V_) " << b
             << "[(I_)] = asuint((int)(V_))\n";
          break;
        case DType::i64:
          os << "#define LD" << I << "(I_) asint(" << b << "[2 * (I_)])\n#define ST" << I
             << "(I_, V_) { int i_ = (I_); int v_ = (V_); " << b << "[2 * i_] = asuint(v_); " << b
             << "[2 * i_ + 1] = asuint(v_ >> 31); }\n";
          break;
        case DType::f16:
          os << "#define LD" << I << "(I_) f16tof32(" << b << "[(I_) >> 1] >> ((uint)((I_) & 1) * 16u))\n";
          narrow_st(1, "0xffffu", "16u", "f2h(V_)");
          break;
        case DType::bf16:
          os << "#define LD" << I << "(I_) asfloat(((" << b << "[(I_) >> 1] >> ((uint)((I_) & 1) * 16u)) & 0xffffu) << 16)\n";
          narrow_st(1, "0xffffu", "16u", "f2bf(V_)");
          break;
        case DType::i16:
          os << "#define LD" << I << "(I_) (asint(" << b << "[(I_) >> 1] << (16u - (uint)((I_) & 1) * 16u)) >> 16)\n";
          narrow_st(1, "0xffffu", "16u", "asuint((int)(V_))");
          break;
        case DType::i8:
          os << "#define LD" << I << "(I_) (asint(" << b << "[(I_) >> 2] << (24u - (uint)((I_) & 3) * 8u)) >> 24)\n";
          narrow_st(2, "0xffu", "8u", "asuint((int)(V_))");
          break;
        case DType::u8: case DType::boolean:
          os << "#define LD" << I << "(I_) ((int)((" << b << "[(I_) >> 2] >> ((uint)((I_) & 3) * 8u)) & 0xffu))\n";
          narrow_st(2, "0xffu", "8u", "asuint((int)(V_))");
          break;
        default: fail("[codegen] hlsl has no ", dtype_name(args[i].dtype), " buffers");
      }
    }
    return os.str();
  }
  // HLSL has no num-workgroups built-in: the x extent of the API's 2-D split is baked in.
  std::string kernel_open(const RenderedKernel& k, const std::string& shared) const override {
    const int64_t gx = std::min<int64_t>(std::max<int64_t>(k.groups, 1), 65535);
    return "#define GRP ((int)(rlx_wg.x + rlx_wg.y * " + std::to_string(gx) + "u))\n#define GID (GRP * " +
           std::to_string(k.local) + " + LID)\n" + shared + "[numthreads(" + std::to_string(k.local) +
           ", 1, 1)]\nvoid main(uint3 rlx_wg : SV_GroupID, uint3 rlx_lt : SV_GroupThreadID) {\n";
  }
  std::string shared_decl(const std::string& type, const std::string& name, int n) const override {
    return "groupshared " + type + " " + name + "[" + std::to_string(n) + "];\n";
  }
  bool shared_in_body() const override { return false; }
};

}  // namespace

std::unique_ptr<CLikeRenderer> make_hlsl_renderer() { return std::make_unique<HlslRenderer>(); }

}  // namespace rlx::codegen
