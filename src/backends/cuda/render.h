// The CUDA C renderer: turns LIR kernels into self-contained CUDA C translation units (no headers,
// so NVRTC needs no include path) specialized on their shapes, and says how to launch them.
// Kept self-contained here because src/codegen's shared C-like base did not exist yet when this
// backend was written; the expression rules (c_type, load/store, op_expr) are the parts to lift.
#pragma once
#include <string>
#include <vector>

#include "rlx/lir.h"

namespace rlx::cuda {

struct KernelSource {
  std::string code;               // full translation unit; entry point `rlx_kernel`
  unsigned grid = 1, block = 256;  // 1-D launch
  unsigned grid_y = 1;
  unsigned smem = 0;               // dynamic shared memory bytes
  int num_params = 0;              // pointer parameters: inputs in order, then outputs
};

// Generated (fused elementwise) kernel: body's inputs broadcast (numpy rules) to `out`.
KernelSource render_fused(const Graph& body, const ValueType& out);
// A library kernel other than GEMM; `in`/`out` are the buffer types in kernel order.
// Returns false (leaving `ks` untouched) when this renderer has no kernel for it. `sm_count` (the
// device's multiprocessors) picks launch shapes that fill the GPU.
bool render_library(const LirKernel& k, const std::vector<ValueType>& in, const std::vector<ValueType>& out,
                    KernelSource* ks, int64_t sm_count = 132);
// In-place activation ("gelu" = erf form, "silu") over a GEMM output that cuBLASLt's epilogues
// cannot compute exactly; f32 math, rounded once, 16-byte accesses when the size allows.
KernelSource render_activation(const std::string& act, const ValueType& t);
// The CUDA C spelling of a dtype's storage.
std::string c_type(DType t);

}  // namespace rlx::cuda
