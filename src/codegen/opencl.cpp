// OpenCL C 1.2: typed __global pointers for every dtype; f16 through vload_half/vstore_half_rte
// (core 1.2, no cl_khr_fp16 needed), bf16 as ushort bits, f64 with cl_khr_fp64, i64 as long.
#include <sstream>

#include "codegen/renderer.h"

namespace rlx::codegen {

namespace {

const char* kHelpers = R"(#define GRP ((int)get_group_id(0))
#define LID ((int)get_local_id(0))
#define GID ((int)get_global_id(0))
#define BARRIER barrier(CLK_LOCAL_MEM_FENCE)
#define NAN_F NAN
#define INF_F INFINITY
inline ushort f2bf(float f) {
  uint x = as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (ushort)((x >> 16) | 0x40u);
  return (ushort)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
)";

class OpenClRenderer : public CLikeRenderer {
 public:
  std::string language() const override { return "opencl"; }
  std::string ctype(DType t) const override { return c_ctype(t, true); }

 protected:
  std::string cast(const std::string& type, const std::string& e) const override { return c_cast(type, e); }
  std::string flit(double v) const override { return suffixed_flit(v); }

  static std::string storage(DType t) {
    switch (t) {
      case DType::f32: return "float";
      case DType::f64: return "double";
      case DType::f16: return "half";
      case DType::bf16: return "ushort";
      case DType::i8: return "char";
      case DType::u8: case DType::boolean: return "uchar";
      case DType::i16: return "short";
      case DType::i32: return "int";
      case DType::i64: return "long";
      default: fail("[codegen] opencl has no ", dtype_name(t), " buffers");
    }
  }

  std::string prelude(const std::vector<KernelArg>& args) const override {
    std::ostringstream os;
    bool fp64 = false;
    for (auto& a : args) fp64 |= a.dtype == DType::f64;
    if (fp64) os << "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
    os << kHelpers;
    for (size_t i = 0; i < args.size(); ++i) {
      std::string b = "b" + std::to_string(i), I = std::to_string(i);
      switch (args[i].dtype) {
        case DType::f16:
          os << "#define LD" << I << "(I_) vload_half((I_), " << b << ")\n#define ST" << I << "(I_, V_) vstore_half_rte((V_), (I_), "
             << b << ")\n";
          break;
        case DType::bf16:
          os << "#define LD" << I << "(I_) as_float(((uint)" << b << "[(I_)]) << 16)\n#define ST" << I << "(I_, V_) " << b
             << "[(I_)] = f2bf(V_)\n";
          break;
        default:
          os << "#define LD" << I << "(I_) ((" << ctype(args[i].dtype) << ")" << b << "[(I_)])\n#define ST" << I << "(I_, V_) "
             << b << "[(I_)] = (" << storage(args[i].dtype) << ")(V_)\n";
      }
    }
    return os.str();
  }
  std::string kernel_open(const RenderedKernel& k, const std::string& shared) const override {
    std::string s = "__kernel void " + k.name + "(";
    for (size_t i = 0; i < k.args.size(); ++i)
      s += std::string(i ? ", " : "") + "__global " + (k.args[i].written ? "" : "const ") + storage(k.args[i].dtype) +
           "* b" + std::to_string(i);
    return s + ") {\n" + shared;
  }
  std::string shared_decl(const std::string& type, const std::string& name, int n) const override {
    return "__local " + type + " " + name + "[" + std::to_string(n) + "];\n";
  }
  bool shared_in_body() const override { return true; }
};

}  // namespace

std::unique_ptr<CLikeRenderer> make_opencl_renderer() { return std::make_unique<OpenClRenderer>(); }

}  // namespace rlx::codegen
