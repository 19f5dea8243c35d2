// The rocm backend: status from the HIP runtime probe (libamdhip64 + a GPU), and the
// capability set of the kernels render_hip has (the CUDA renderer's non-PTX kernels: elementwise,
// movement, reductions, dot_general as a plain kernel, softmax, layer/rms norm, conv/window/sort);
// every claimed conformance case is built for offline_targets() in tests/unit/test_rocm.cpp.
#include "backends/cuda/cuda_backend.h"
#include "backends/rocm/rocm.h"
#include "rlx/device.h"
#include "runtime/backend.h"

namespace rlx {

std::unique_ptr<Executable> make_rocm_executable(const LirProgram& p);  // hip_api.cpp

namespace {

// The CUDA renderer's kernels without cuBLASLt, cuSOLVER and the tensor-core (PTX) kernels:
// contractions run as dot_general's plain kernel.
CapabilitySet rocm_caps() {
  CapabilitySet c = cuda::cuda_kernel_caps();
  for (auto k : {OpKind::MatMul, OpKind::Linear, OpKind::Attention, OpKind::Cholesky}) c.ops.erase(k);
  return c;
}

DeviceInfo rocm_device_info(bool probing, CapabilitySet caps) {
  std::string why = "not probed";
  DeviceStatus st = DeviceStatus::NoHardware;
  if (probing) {
    int s = rocm::hip_runtime_probe(&why);
    st = s == 0 ? DeviceStatus::Available : s == 1 ? DeviceStatus::NoDriver : DeviceStatus::NoHardware;
    why += std::string("; kernels built offline by ") + (rocm::hipcc_path().empty() ? "hipcc (not installed)" : "hipcc") +
           " for gfx90a and gfx940";
  }
  return DeviceInfo{"rocm", "HIP kernels (the CUDA renderer's, HIP dialect) for AMD GPUs", st, why, std::move(caps)};
}

class RocmBackend : public Backend {
 public:
  std::string name() const override { return "rocm"; }
  int rank() const override { return 5; }
  DeviceInfo info(bool probing) const override { return rocm_device_info(probing, rocm_caps()); }
  std::unique_ptr<Executable> compile(const LirProgram& p) const override { return make_rocm_executable(p); }
};

}  // namespace
}  // namespace rlx

RLX_REGISTER_BACKEND(rocm, rlx::RocmBackend)
