// The rocm device entry: status from the HIP runtime probe (libamdhip64 + a GPU), and the
// capability set of the kernels render_hip has (the CUDA renderer's non-PTX kernels: elementwise,
// movement, reductions, dot_general as a plain kernel, softmax, layer/rms norm, conv/window/sort);
// every claimed conformance case is built for offline_targets() in tests/unit/test_rocm.cpp.
#include "backends/rocm/rocm.h"
#include "rlx/device.h"

namespace rlx {

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

}  // namespace rlx
