// Helpers shared by the CUDA C renderer's files (render.cpp, render_attention.cpp); not a public
// surface: the backend's other files use render.h.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backends/cuda/render.h"

namespace rlx::cuda::detail {

extern const char* kPrelude;  // typedefs and device helpers (half/bf16 conversion, warp reductions)
// `e` (an element of dtype t) as its compute value / compute value `e` stored as dtype t.
std::string load(DType t, const std::string& e);
std::string store(DType t, const std::string& e);
std::string num(double v);  // a C literal that round-trips v (NaN/inf spelled out)
std::vector<int64_t> strides(const std::vector<int64_t>& d);  // row-major
std::string join_terms(const std::vector<std::string>& t);    // "a + b + c", "0" when empty
// The prelude plus `extern "C" __global__ void rlx_kernel(const T* in0, ..., T* out0, ...) {`.
std::string header(const std::vector<ValueType>& in, const std::vector<ValueType>& out);

// Attention (render_attention.cpp): tensor-core kernel for halves, fp32 kernels otherwise.
KernelSource attention_kernel(const LirKernel& k, const std::vector<ValueType>& in, const ValueType& out,
                              int64_t sm_count);

}  // namespace rlx::cuda::detail
