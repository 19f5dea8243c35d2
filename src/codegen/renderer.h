// Kernel renderers for the C-like GPU languages. One base (CLikeRenderer) writes every kernel —
// fused elementwise bodies and the library-kernel equivalents (tiled GEMM, workgroup-tree
// reductions, softmax, layernorm, attention, data movement) — against a handful of language hooks;
// GLSL (vulkan, opengl), OpenCL C (gpu), HLSL (directx) and MSL (metal) override only what differs;
// WGSL (webgpu) translates the C-like text in finish(). CUDA C is a further subclass. Shapes are
// static, so every index is baked into the source.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "rlx/lir.h"

namespace rlx::codegen {

struct KernelArg {
  DType dtype;
  bool written = false;
};

struct RenderedKernel {
  std::string name;
  std::string source;
  std::vector<KernelArg> args;  // buffers in binding order: kernel inputs, then outputs
  int64_t groups = 1;           // workgroups along x (the API splits very large grids)
  int local = 64;               // workgroup size (baked into GLSL; passed to OpenCL)
};

class CLikeRenderer {
 public:
  virtual ~CLikeRenderer() = default;
  virtual std::string language() const = 0;
  // Compute type for a storage dtype ("float", "int", ...), or "" when the language has none.
  virtual std::string ctype(DType t) const = 0;
  // Whether this renderer has a kernel for the op (library kernels) at input dtype `t`.
  bool has_kernel(OpKind op, DType t) const;
  // GEMM strategy: shared-memory 16x16 tiles (GPUs, PoCL), or one thread per output with a direct
  // K loop (CPU-emulated Vulkan/GL: llvmpipe runs a workgroup as one SIMD loop that every
  // barrier() splits, so barrier-free kernels are far faster there). Set by the API from the
  // device type; RLX_GPU_GEMM=tiled|direct overrides.
  void set_tiled_gemm(bool tiled) { tiled_gemm_ = tiled; }
  bool tiled_gemm() const { return tiled_gemm_; }
  // Renders one LIR kernel; `in`/`out` are the concrete buffer types of its arguments.
  RenderedKernel render(const LirKernel& k, const std::vector<ValueType>& in, const std::vector<ValueType>& out,
                        const std::string& name) const;

 protected:
  // ---- language hooks ----
  virtual std::string prelude(const std::vector<KernelArg>& args) const = 0;  // includes LDi/STi macros
  virtual std::string kernel_open(const RenderedKernel& k, const std::string& shared) const = 0;
  virtual std::string shared_decl(const std::string& type, const std::string& name, int n) const = 0;
  virtual bool shared_in_body() const = 0;  // OpenCL __local lives inside the kernel, GLSL shared outside
  virtual std::string cast(const std::string& type, const std::string& e) const = 0;
  virtual std::string flit(double v) const;  // float literal in the compute type of f32
  // C spellings several languages share: ((T)(e)) casts; f32 literals with an f suffix ("(0.5f)",
  // so an f32 expression is not promoted to double); the C compute types (float for the float
  // storage types below f64, double where the language has it, int for the small integers and
  // bool, long for i64).
  static std::string c_cast(const std::string& type, const std::string& e) { return "((" + type + ")(" + e + "))"; }
  std::string suffixed_flit(double v) const;
  static std::string c_ctype(DType t, bool has_f64);
  // Last step of render(): a language whose syntax is not C-like (WGSL) rewrites the assembled
  // source here; the others keep it as it is.
  virtual void finish(RenderedKernel&) const {}

  // ---- kernel bodies (language neutral; use LDi(i)/STi(i,v), GID, LID, GRP, BARRIER, NAN_F) ----
  std::string lit(DType t, double v) const;
  // virtual: a language may spell a few ops its own way (cpp.cpp matches the cpu evaluator's max/min)
  virtual std::string expr(const Node& n, const std::vector<std::string>& a, const std::vector<DType>& at, DType ot) const;
  std::string convert(const std::string& x, DType from, DType to) const;
  // One "<ctype> v<id> = <expr>;" line per body node; `val` maps body values to C names (inputs
  // filled by the caller) and gets the node outputs.
  std::string body_nodes(const Graph& body, std::vector<std::string>& val) const;
  std::string body_fused(const Graph& body, const std::vector<ValueType>& in, const ValueType& out, RenderedKernel& k) const;
  std::string body_library(const LirKernel& k, const std::vector<ValueType>& in, const std::vector<ValueType>& out,
                           RenderedKernel& rk, std::string& shared) const;
  // library families (kernels_*.cpp)
  std::string k_movement(const LirKernel& k, const std::vector<ValueType>& in, const std::vector<ValueType>& out, RenderedKernel& rk) const;
  std::string k_reduce(const LirKernel& k, const std::vector<ValueType>& in, const std::vector<ValueType>& out, RenderedKernel& rk, std::string& shared) const;
  std::string k_dot(const LirKernel& k, const std::vector<ValueType>& in, const std::vector<ValueType>& out, RenderedKernel& rk, std::string& shared) const;
  std::string k_nn(const LirKernel& k, const std::vector<ValueType>& in, const std::vector<ValueType>& out, RenderedKernel& rk, std::string& shared) const;
  bool tiled_gemm_ = true;
  std::string k_window(const LirKernel& k, const std::vector<ValueType>& in, const std::vector<ValueType>& out, RenderedKernel& rk) const;  // conv, reduce_window, sort, topk
};

std::unique_ptr<CLikeRenderer> make_glsl_renderer();    // GLSL 4.50 compute (vulkan + opengl)
std::unique_ptr<CLikeRenderer> make_opencl_renderer();  // OpenCL C 1.2
std::unique_ptr<CLikeRenderer> make_wgsl_renderer();    // WGSL compute (webgpu)
std::unique_ptr<CLikeRenderer> make_hlsl_renderer();    // HLSL compute, SM 5.1 (directx)
std::unique_ptr<CLikeRenderer> make_msl_renderer();     // Metal Shading Language 2.x (metal)
std::unique_ptr<CLikeRenderer> make_hexagon_renderer();  // freestanding C++ for clang --target=hexagon

// C++ for the cpu JIT (cpp.cpp): a fused elementwise kernel as
//   extern "C" void NAME(void* const* bufs, const int64_t* dims, int64_t begin, int64_t end)
// over output elements [begin, end) (so a thread pool splits the range). bufs: inputs, then the
// output. The output shape is collapsed (size-1 dims dropped, neighbours with the same broadcast
// pattern merged); the pattern is baked into the source, the sizes (`dims`) are passed at run
// time, so one source serves every shape with that pattern. The inner loop runs over the last
// collapsed dim with __restrict pointers, which GCC vectorizes.
struct CppKernel {
  std::string source;         // the function (needs cpp_prelude() before it)
  std::vector<int64_t> dims;  // collapsed output dims to pass at run time
  int64_t total = 0;          // output elements
};
// Returns false (with `why`) when the body has a dtype or op the C++ renderer does not cover.
bool render_cpp_fused(const Graph& body, const std::vector<ValueType>& in, const ValueType& out, const std::string& name,
                      CppKernel& k, std::string* why);
// Headers, math overloads and helpers the kernels use; `vmath` is the text of the cpu backend's
// vmath.h (f32 exp/tanh/erf/logistic, so JIT and evaluator compute the same functions).
std::string cpp_prelude(const std::string& vmath);

// Helpers shared by the kernel families.
std::vector<int64_t> dims_of(const ValueType& t);
std::vector<int64_t> strides_of(const std::vector<int64_t>& d);
// Emits "int <p>0 = ...; int <p>1 = ...;" unravelling `flat` over `d` (row-major).
std::string unravel(const std::string& flat, const std::vector<int64_t>& d, const std::string& p);
int64_t ceil_div(int64_t a, int64_t b);

}  // namespace rlx::codegen
