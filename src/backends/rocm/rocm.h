// The rocm device: the CUDA renderer's kernels (src/backends/cuda/render*.cpp) in the HIP dialect,
// built offline with hipcc to AMD code objects, and a HIP runtime executor (libamdhip64 dlopen'ed).
#pragma once
#include <string>
#include <vector>

#include "rlx/lir.h"

namespace rlx::rocm {

// The HIP spelling of a CUDA C translation unit rendered by src/backends/cuda: the HIP runtime
// header, warp shuffles on 32-lane segments of the wavefront (the CUDA kernels' warp size), and
// the f16 conversions without PTX. Returns "" when the kernel uses PTX that has no HIP form
// (tensor-core mma.sync, cp.async, ldmatrix): such kernels are not claimed for rocm.
std::string hip_from_cuda(const std::string& cuda_source);

struct HipKernel {
  std::string label, source;  // source: a HIP translation unit with entry `rlx_kernel`
  unsigned grid = 1, grid_y = 1, block = 256, smem = 0;
  int num_params = 0;
  size_t scratch_bytes = 0;  // > 0: one more parameter, a zero-filled block (cuda::KernelSource)
};
// The HIP kernels of a (scheduled or not) LIR program, one per LIR kernel, in order; fails naming
// the kernel when one has no HIP form.
std::vector<HipKernel> render_hip(const LirProgram& p);
// Several HIP kernels in one translation unit (one hipcc run): entry i becomes `rlx_kernel_<i>`,
// each kernel's helpers in its own namespace.
std::string hip_batch(const std::vector<std::string>& sources);
// hipcc on PATH (or ""), and the code-object targets built offline.
std::string hipcc_path();
const std::vector<std::string>& offline_targets();
// The run-time probe: 0 = an AMD GPU is there, 1 = no HIP runtime, 2 = runtime but no GPU.
int hip_runtime_probe(std::string* why);
// Runs hipcc --genco for `arch` on `source`; returns "" on success, else hipcc's message.
std::string hipcc_compile(const std::string& source, const std::string& arch, const std::string& out_path);

}  // namespace rlx::rocm
