// CUDA C as a language of the shared C-like code generator (src/codegen/renderer.h): only the
// language hooks live here (prelude with LDi/STi, kernel signature, shared memory, casts); the
// conv / reduce_window / sort / topk / scatter_add bodies are src/codegen's kernels_window.cpp and
// kernels_reduce.cpp, the same text vulkan, opengl and gpu run.
#include "backends/cuda/render_window.h"

#include <algorithm>
#include <sstream>

#include "backends/cuda/render_internal.h"

namespace rlx::cuda {

namespace {

using O = OpKind;

const char* kMacros = R"(#define GRP ((int)blockIdx.x)
#define LID ((int)threadIdx.x)
#define GID ((int)(blockIdx.x * blockDim.x + threadIdx.x))
#define BARRIER __syncthreads()
#define NAN_F __int_as_float(0x7fc00000)
#define INF_F __int_as_float(0x7f800000)
)";

class CudaCRenderer : public codegen::CLikeRenderer {
 public:
  std::string language() const override { return "cuda"; }
  std::string ctype(DType t) const override { return c_ctype(t, true); }

 protected:
  std::string cast(const std::string& type, const std::string& e) const override { return c_cast(type, e); }
  std::string flit(double v) const override { return suffixed_flit(v); }  // f32 literals stay f32 ("(0.5f)"), as OpenCL C
  std::string prelude(const std::vector<codegen::KernelArg>& args) const override {
    std::ostringstream os;
    os << detail::kPrelude << kMacros;
    for (size_t i = 0; i < args.size(); ++i) {
      std::string b = "b" + std::to_string(i), I = std::to_string(i);
      DType t = args[i].dtype;
      os << "#define LD" << I << "(I_) " << cast(ctype(t), detail::load(t, b + "[(I_)]")) << "\n";
      os << "#define ST" << I << "(I_, V_) " << b << "[(I_)] = " << detail::store(t, "(V_)") << "\n";
    }
    return os.str();
  }
  std::string kernel_open(const codegen::RenderedKernel& k, const std::string& shared) const override {
    std::string s = "extern \"C\" __global__ void " + k.name + "(";
    for (size_t i = 0; i < k.args.size(); ++i)
      s += std::string(i ? ", " : "") + (k.args[i].written ? "" : "const ") + c_type(k.args[i].dtype) + "* __restrict__ b" +
           std::to_string(i);
    return s + ") {\n" + shared;
  }
  std::string shared_decl(const std::string& type, const std::string& name, int n) const override {
    return "__shared__ " + type + " " + name + "[" + std::to_string(n) + "];\n";
  }
  bool shared_in_body() const override { return true; }  // exact grids: no surplus-group guard
};

}  // namespace

std::unique_ptr<codegen::CLikeRenderer> make_cuda_c_renderer() { return std::make_unique<CudaCRenderer>(); }

bool is_shared_family(OpKind op) {
  return op == O::Conv || op == O::ReduceWindow || op == O::Sort || op == O::TopK || op == O::ScatterAdd;
}

bool render_shared_family(const LirKernel& k, const std::vector<ValueType>& in, const std::vector<ValueType>& out,
                          KernelSource* ks) {
  if (!is_shared_family(k.op)) return false;
  static const std::unique_ptr<codegen::CLikeRenderer> r = make_cuda_c_renderer();
  codegen::RenderedKernel rk = r->render(k, in, out, "rlx_kernel");
  // The shared bodies index with int (GID/gid): fail clearly rather than wrap past 2^31 threads.
  RLX_CHECK(rk.groups * rk.local < (int64_t{1} << 31), "[cuda] ", k.label(), ": ", rk.groups * rk.local,
            " threads exceed the 32-bit indexing of the shared codegen kernels");
  KernelSource s;
  s.code = rk.source;
  s.grid = static_cast<unsigned>(std::max<int64_t>(1, rk.groups));
  s.block = static_cast<unsigned>(rk.local);
  s.num_params = static_cast<int>(in.size() + out.size());
  *ks = std::move(s);
  return true;
}

}  // namespace rlx::cuda
