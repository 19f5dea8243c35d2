// The portable GPU executor's view of an API (Vulkan, OpenGL, OpenCL): buffers, programs built
// from rendered kernel source, launches in order, and a wait. The executor (executable.cpp) is
// written once against this; each API file is only the API plumbing, with its loader dlopen'ed.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "codegen/renderer.h"

namespace rlx::gpu {

class Api {
 public:
  virtual ~Api() = default;
  virtual std::string name() const = 0;    // device name: "vulkan", "opengl", "gpu"
  virtual std::string device() const = 0;  // driver/device description
  virtual const codegen::CLikeRenderer& renderer() const = 0;
  virtual int buffer(size_t bytes) = 0;  // returns a handle; contents zeroed
  virtual void free_buffer(int buf) = 0;
  virtual void upload(int buf, const void* src, size_t bytes) = 0;
  virtual void download(int buf, void* dst, size_t bytes) = 0;
  // Builds (or finds in the API's cache) the program for a rendered kernel.
  virtual int program(const codegen::RenderedKernel& k) = 0;
  struct Launch {
    int prog;
    int64_t groups;
    int local;
    std::vector<int> bufs;
  };
  // Records a schedule once (Vulkan: one command buffer); launches run in order, each seeing the
  // previous one's writes. submit() runs it and waits.
  virtual int record(const std::vector<Launch>& launches) = 0;
  virtual void submit(int rec) = 0;
  virtual void free_recording(int rec) = 0;
};

// Returns the shared API instance for `device`, or nullptr with `why` set when it cannot run here.
// Probing is cheap and cached; `rlx devices` uses it for the status line.
Api* api_for(const std::string& device, std::string* why);

std::unique_ptr<Api> make_vulkan_api(std::string* why);
std::unique_ptr<Api> make_opengl_api(std::string* why);
std::unique_ptr<Api> make_opencl_api(std::string* why);

// Stable 64-bit hash of kernel source, for the on-disk shader cache.
uint64_t fnv1a(const std::string& s);
std::string cache_dir(const std::string& sub);  // $XDG_CACHE_HOME or ~/.cache, /rlx/<sub>, created

}  // namespace rlx::gpu

namespace rlx {
struct DeviceInfo;
// `rlx devices` entry for vulkan/opengl/gpu: status from a run-time probe of loader + device
// (+ glslc for vulkan); capabilities = exactly the (op, dtype) pairs the renderer has kernels for.
DeviceInfo portable_gpu_device_info(const std::string& name);
void register_portable_gpu_backends();
}  // namespace rlx
