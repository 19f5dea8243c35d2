// oneDNN primitives for LIR kernels: which kernels oneDNN runs (the rest run on the cpu backend's
// kernels, on the same host memory) and the prepared primitive of each.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "rlx/lir.h"
#include "rlx/tensor.h"

namespace rlx::oneapi {

// One prepared oneDNN primitive (descriptor, primitive, constant operands already reordered).
class DnnlKernel {
 public:
  virtual ~DnnlKernel() = default;
  // in/out: the kernel's buffers (host memory: the CPU engine reads and writes them in place).
  virtual void run(const std::vector<Tensor>& in, std::vector<Tensor>& out) = 0;
  // The primitive and its implementation, for the profile: "matmul(brg:avx512_core)+bias+gelu".
  virtual std::string label() const = 0;
};

// The oneDNN primitive kind that runs kernel `k` of `p` ("matmul", "convolution", ...), or "" with
// `*why` saying why the kernel stays on the cpu kernels. Decided from types, shapes and attrs alone,
// so the compile report and the executable agree.
std::string dnnl_kind(const LirKernel& k, const LirProgram& p, std::string* why = nullptr);
// Builds the primitive of a kernel dnnl_kind accepted (nullptr if oneDNN refuses the descriptor).
std::unique_ptr<DnnlKernel> make_dnnl_kernel(const LirKernel& k, const LirProgram& p);

// "oneDNN 2.6.3 (CPU runtime OpenMP, ISA ...)", the library's own version and CPU engine.
std::string dnnl_summary();

}  // namespace rlx::oneapi
