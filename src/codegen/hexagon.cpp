// Hexagon C++ (freestanding, clang --target=hexagon): typed pointers for every dtype; halves are
// 16-bit patterns converted by the runtime's h2f/f2h and bf2f/f2bf; i64 computes in 64 bits.
// Hexagon is ILP32, so the programs are built with `long` defined as `long long` after the
// runtime (the base spells 64-bit integers "long", as OpenCL C and LP64 CUDA do). Work-items run
// as loops (or fibers where a kernel has barriers) in the executor's runtime (src/backends/hexagon).
#include <sstream>

#include "codegen/renderer.h"

namespace rlx::codegen {

namespace {

class HexagonRenderer : public CLikeRenderer {
 public:
  std::string language() const override { return "hexagon"; }
  std::string ctype(DType t) const override { return c_ctype(t, true); }

 protected:
  std::string cast(const std::string& type, const std::string& e) const override { return c_cast(type, e); }
  std::string flit(double v) const override { return suffixed_flit(v); }

  static std::string storage(DType t) {
    switch (t) {
      case DType::f32: return "float";
      case DType::f64: return "double";
      case DType::f16: case DType::bf16: return "unsigned short";
      case DType::i8: return "signed char";
      case DType::u8: case DType::boolean: return "unsigned char";
      case DType::i16: return "short";
      case DType::i32: return "int";
      case DType::i64: return "long";
      default: fail("[codegen] hexagon has no ", dtype_name(t), " buffers");
    }
  }

  std::string prelude(const std::vector<KernelArg>& args) const override {
    std::ostringstream os;
    for (size_t i = 0; i < args.size(); ++i) {
      std::string b = "b" + std::to_string(i), I = std::to_string(i);
      os << "#undef LD" << I << "\n#undef ST" << I << "\n";
      switch (args[i].dtype) {
        case DType::f16:
          os << "#define LD" << I << "(I_) h2f(" << b << "[(I_)])\n#define ST" << I << "(I_, V_) " << b << "[(I_)] = f2h(V_)\n";
          break;
        case DType::bf16:
          os << "#define LD" << I << "(I_) bf2f(" << b << "[(I_)])\n#define ST" << I << "(I_, V_) " << b << "[(I_)] = f2bf(V_)\n";
          break;
        default:
          os << "#define LD" << I << "(I_) ((" << ctype(args[i].dtype) << ")" << b << "[(I_)])\n#define ST" << I << "(I_, V_) "
             << b << "[(I_)] = (" << storage(args[i].dtype) << ")(V_)\n";
      }
    }
    return os.str();
  }
  std::string kernel_open(const RenderedKernel& k, const std::string& shared) const override {
    // noinline: a program holds thousands of kernels; inlining them into their callers costs
    // clang minutes and gains nothing
    std::string s = "static __attribute__((noinline)) void " + k.name + "(";
    for (size_t i = 0; i < k.args.size(); ++i)
      s += std::string(i ? ", " : "") + (k.args[i].written ? "" : "const ") + storage(k.args[i].dtype) + "* b" +
           std::to_string(i);
    return s + ") {\n" + shared;
  }
  // Work-group memory is a static array, shared by the fibers of one group (groups run in turn).
  std::string shared_decl(const std::string& type, const std::string& name, int n) const override {
    return "static " + type + " " + name + "[" + std::to_string(n) + "];\n";
  }
  bool shared_in_body() const override { return true; }
};

}  // namespace

std::unique_ptr<CLikeRenderer> make_hexagon_renderer() {
  auto r = std::make_unique<HexagonRenderer>();
  r->set_tiled_gemm(false);  // one work-item per output: no barriers in the GEMM
  return r;
}

}  // namespace rlx::codegen
