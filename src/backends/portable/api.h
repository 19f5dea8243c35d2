// The portable GPU executor's view of an API (Vulkan, OpenGL, OpenCL): buffers, programs built
// from rendered kernel source, launches in order, and a wait. The executor (executable.cpp) is
// written once against this; each API file is only the API plumbing, with its loader dlopen'ed.
#pragma once
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "codegen/renderer.h"
#include "rlx/dtype.h"  // DTypeSet

namespace rlx {
class Executable;
}

namespace rlx::gpu {

// What the device reports about itself, queried when the API is opened (Vulkan physical-device
// features/properties, GL extensions, OpenCL device info). `rlx devices` prints it; capability
// claims that need a feature in the rendered kernels are gated on it (OpenCL f64 needs fp64).
// The GLSL renderer packs 8/16-bit values into 32-bit words and computes in 32 bits, so it needs
// none of these; they are reported for what the hardware could do.
struct Features {
  bool fp16 = false;       // half arithmetic in kernels (Vulkan shaderFloat16, cl_khr_fp16, GL half-float ext)
  bool fp64 = false;       // double arithmetic (Vulkan shaderFloat64, cl_khr_fp64, GL 4.0 core fp64)
  bool int64 = false;      // 64-bit integer arithmetic (Vulkan shaderInt64, OpenCL long, GL_ARB_gpu_shader_int64)
  bool int8 = false;       // 8-bit arithmetic/storage (Vulkan shaderInt8 / storageBuffer8BitAccess, OpenCL char)
  int subgroup_size = 0;   // 0: no subgroup operations in compute; -1: yes, size chosen per kernel
  std::string str() const;  // "fp16 yes, fp64 no, int64 yes, int8 yes, subgroups 8"
};

class Api {
 public:
  virtual ~Api() = default;
  Features features;  // filled by make_*_api
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
  // What the API measured about the last submit of `rec`, for Executable::profile ("" if nothing).
  virtual std::string timing(int rec) const { return ""; }
};

// The executor over an API (executable.cpp), for devices outside this folder that implement one.
std::unique_ptr<Executable> make_portable_executable(Api& api, const LirProgram& p);

// Returns the shared API instance for `device`, or nullptr with `why` set when it cannot run here.
// Probing is cheap and cached; `rlx devices` uses it for the status line.
Api* api_for(const std::string& device, std::string* why);

std::unique_ptr<Api> make_vulkan_api(std::string* why);
// The Vulkan executor with another kernel language compiled to SPIR-V: `directx` runs its HLSL
// through glslang's HLSL front end on the same Vulkan device (src/backends/directx).
struct VulkanFlavor {
  std::string device;                                            // the name the API reports
  std::function<std::unique_ptr<codegen::CLikeRenderer>()> renderer;
  std::string compiler_env, compiler, flags, ext;                // "RLX_GLSLC", "glslc", its flags, source suffix
  std::string note;                                              // put before the device description
};
std::unique_ptr<Api> make_vulkan_api_with(const VulkanFlavor& flavor, std::string* why);
std::unique_ptr<Api> make_directx_api(std::string* why);  // HLSL -> SPIR-V -> Vulkan
std::unique_ptr<Api> make_webgpu_api(std::string* why);   // WGSL through wgpu-native (webgpu.h)
// metal without an Apple GPU: the MSL kernels compiled as C++ against a Metal shim and run on the
// host CPU (src/backends/metal/msl_shim_api.cpp); api_for("metal") uses it when RLX_METAL_SHIM=1.
std::unique_ptr<Api> make_metal_shim_api(std::string* why);
std::unique_ptr<Api> make_metal_api(std::string* why);  // Apple only (metal_api.mm, RLX_HAVE_METAL)
std::unique_ptr<Api> make_opengl_api(std::string* why);
std::unique_ptr<Api> make_opencl_api(std::string* why);

// GEMM strategy for a device (see CLikeRenderer::set_tiled_gemm): direct on CPU-emulated
// Vulkan/GL devices, tiled elsewhere; RLX_GPU_GEMM=tiled|direct overrides.
inline void choose_gemm(codegen::CLikeRenderer& r, bool cpu_emulated) {
  const char* e = std::getenv("RLX_GPU_GEMM");
  std::string v = e ? e : "";
  r.set_tiled_gemm(v == "tiled" ? true : v == "direct" ? false : !cpu_emulated);
}

// Program-cache keys hash the kernel source with rlx::fnv1a64 (runtime/disk_cache.h);
// vulkan's on-disk SPIR-V cache is the shared runtime/disk_cache (cache_dir("spirv")).

}  // namespace rlx::gpu

namespace rlx {
struct DeviceInfo;
struct CapabilitySet;
// The (op, dtype) pairs `r` has kernels for, over the buffer dtypes `storage` (constants: every
// storage dtype; select: keyed by its boolean predicate).
CapabilitySet renderer_caps(const codegen::CLikeRenderer& r, DTypeSet storage);
// `rlx devices` entry for vulkan/opengl/gpu: status from a run-time probe of loader + device
// (+ glslc for vulkan); capabilities = exactly the (op, dtype) pairs the renderer has kernels for.
// probing=false: no loader is opened; status/reason are not probed and the capability set
// is the API's nominal one (with the dtypes of portable_gpu_driver_dtypes claimed).
DeviceInfo portable_gpu_device_info(const std::string& name, bool probing = true);
// The dtypes the API has kernels for but a driver may lack, so the probed set may drop
// them: {f64} for "gpu" (OpenCL C's double needs cl_khr_fp64), none for the GLSL devices.
DTypeSet portable_gpu_driver_dtypes(const std::string& name);
}  // namespace rlx
