// The cuda executable's extra surface, for benchmarks and tests that hold one through
// make_executable("cuda", ...): device-resident timing and a description of what was built.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/render.h"
#include "runtime/backend.h"

namespace rlx::cuda {

class CudaExecutableApi : public Executable {
 public:
  // Uploads `inputs` once, then times `iters` runs of the kernel schedule alone (inputs and outputs
  // stay on the device; CUDA graph replay unless RLX_CUDA_GRAPHS=0), each run synchronized.
  // Returns milliseconds per run.
  virtual std::vector<double> time_device(const std::vector<Tensor>& inputs, int warmup, int iters) = 0;
  // "N kernels (G cuBLASLt GEMMs, F NVRTC modules, C from the disk cache), graph on, arena X MiB".
  virtual std::string summary() const = 0;
  // After every run of the schedule, output out_to_in[i].first is copied (device to
  // device, inside the CUDA graph) into input out_to_in[i].second, so a training step's new
  // parameters become the next step's inputs without leaving the GPU. When the elementwise kernel
  // producing the output is the input's last reader, it writes into the input directly (no copy).
  virtual void set_feedback(const std::vector<std::pair<int, int>>& out_to_in) = 0;
  // Uploads every input once (they then stay on the device).
  virtual void upload_inputs(const std::vector<Tensor>& inputs) = 0;
  // Runs the schedule `n` times back to back with no host synchronization in between; returns the
  // milliseconds per run (CUDA events around the whole batch).
  virtual double run_resident(int n) = 0;
  // Downloads the outputs of the last run and the current value of each input.
  virtual std::vector<Tensor> read_outputs() = 0;
  virtual std::vector<Tensor> read_inputs() = 0;
};

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

void register_cuda_backend();

}  // namespace rlx::cuda
