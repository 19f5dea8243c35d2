// The cuda backend's entry points beside Executable (whose resident API and summary() it
// implements): NVRTC compilation and the kernels it would launch, for tests without a GPU.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/render.h"
#include "rlx/device.h"
#include "runtime/backend.h"

namespace rlx::cuda {

// Compiles CUDA C with NVRTC for the current device (cached in memory and on disk by hash) and
// returns a loadable cubin; exposed for tests.
std::string nvrtc_compile(const std::string& source, bool* from_disk_cache = nullptr);

struct Api;
// The same for a given NVRTC table and architecture ("sm_90"): usable without a GPU (nvrtc_only()).
std::string nvrtc_compile_for(Api& a, const std::string& arch, const std::string& source,
                              bool* from_disk_cache = nullptr);

// What the executable would launch for `p` (after the backend's LIR rewrites and merge-launches),
// without a GPU: (label, kernel); GEMMs and copies have an empty kernel. For compile checks.
std::vector<std::pair<std::string, KernelSource>> render_for_check(const LirProgram& p);

// The executable of a scheduled program (executable.cpp); backend.cpp registers it.
std::unique_ptr<Executable> make_cuda_executable(const LirProgram& p);
// The (op, dtype) pairs the cuda renderer's kernels and the library kernels run (backend.cpp);
// rocm starts from the same set (its kernels are the renderer's, in the HIP dialect).
CapabilitySet cuda_kernel_caps();
// 0: cuda runs here, 1: no driver, 2: a driver but no usable GPU or libraries (cuda_api.cpp).
int runtime_probe(std::string* why);

}  // namespace rlx::cuda
