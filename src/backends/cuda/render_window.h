// Conv, reduce_window (pooling), sort/topk and scatter_add on cuda: rendered by the shared C-like
// code generator (src/codegen, the kernels vulkan/opengl/gpu run) through a CUDA C language
// subclass, so the window/ordering kernels exist once for every GPU language.
#pragma once
#include <memory>
#include <vector>

#include "backends/cuda/render.h"
#include "codegen/renderer.h"

namespace rlx::cuda {

// The CUDA C language of src/codegen: halves/bf16 computed in float (stored through the PTX
// conversions of the cuda prelude), f64 as double, i8/u8/i16/i32/bool as int, i64 as long.
std::unique_ptr<codegen::CLikeRenderer> make_cuda_c_renderer();

// Whether `op` is one of the families rendered through src/codegen here.
bool is_shared_family(OpKind op);
// Renders such a kernel (entry point `rlx_kernel`, one thread per output / input element);
// false (ks untouched) for other ops.
bool render_shared_family(const LirKernel& k, const std::vector<ValueType>& in, const std::vector<ValueType>& out,
                          KernelSource* ks);

}  // namespace rlx::cuda
