#include <map>
#include <mutex>

#include "rlx/device.h"
#include "runtime/backend.h"

namespace rlx {

void register_cpu_backend();
namespace cuda {
void register_cuda_backend();  // src/backends/cuda (issue 7)
}
void register_portable_gpu_backends();  // vulkan, opengl, gpu: src/backends/gpu (issue 8)

static std::map<std::string, BackendFactory>& registry() {
  static std::map<std::string, BackendFactory> r;
  return r;
}

bool register_backend(const std::string& device, BackendFactory f) {
  registry()[device] = std::move(f);
  return true;
}

std::unique_ptr<Executable> make_executable(const std::string& device, const LirProgram& p) {
  // Built-in backends are registered explicitly: static registrars in a static library get dropped.
  static std::once_flag once;
  std::call_once(once, [] {
    register_cpu_backend();
    cuda::register_cuda_backend();  // cuda (issue 7): registered always; device_info says whether it can run
    register_portable_gpu_backends();  // issue 8: registered always; device_info probes loader + device
  });
  const DeviceInfo& d = device_info(device);
  auto it = registry().find(device);
  if (!d.can_execute() || it == registry().end())
    fail("[run] device '", device, "' cannot execute on this machine: ", device_status_name(d.status), " (", d.reason,
         "). Compile-only commands (rlx compile --report/--dump) still work for it.");
  return it->second(p);
}

}  // namespace rlx
