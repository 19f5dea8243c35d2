// dlopen-based loading of libcuda.so.1, NVRTC and cuBLASLt (see cuda_api.h).
#include "backends/cuda/cuda_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "rlx/error.h"

namespace rlx::cuda {

namespace {

void* open_first(const std::vector<std::string>& names, std::string* found) {
  for (auto& n : names) {
    if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      *found = n;
      return h;
    }
  }
  return nullptr;
}

// Library candidates: the plain soname first (LD_LIBRARY_PATH / ldconfig), then the toolkit.
std::vector<std::string> candidates(const char* stem, const char* const* versions) {
  std::vector<std::string> dirs = {""};
  if (const char* d = std::getenv("RLX_CUDA_LIB_DIR")) dirs.insert(dirs.begin(), std::string(d) + "/");
  if (const char* d = std::getenv("CUDA_HOME")) dirs.push_back(std::string(d) + "/lib64/");
  dirs.push_back("/usr/local/cuda/lib64/");
  dirs.push_back("/usr/local/cuda/targets/x86_64-linux/lib/");
  std::vector<std::string> r;
  for (auto& d : dirs)
    for (const char* const* v = versions; *v; ++v) r.push_back(d + stem + *v);
  return r;
}

template <class F>
bool sym(void* h, F*& f, const char* name, std::string* missing) {
  f = reinterpret_cast<F*>(dlsym(h, name));
  if (!f && missing->empty()) *missing = name;
  return f != nullptr;
}

struct Loaded {
  Api api{};
  std::string error;  // empty when usable
};

Loaded load() {
  Loaded L;
  Api& a = L.api;
  std::string found, miss;
  void* cu = open_first({"libcuda.so.1", "libcuda.so"}, &found);
  if (!cu) {
    L.error = "no NVIDIA driver: libcuda.so.1 not found (install the NVIDIA driver; the toolkit alone is not enough)";
    return L;
  }
#define DRV(field, name) sym(cu, a.field, name, &miss)
  DRV(cuInit, "cuInit"), DRV(cuDriverGetVersion, "cuDriverGetVersion"), DRV(cuDeviceGetCount, "cuDeviceGetCount"),
      DRV(cuDeviceGet, "cuDeviceGet"), DRV(cuDeviceGetName, "cuDeviceGetName"),
      DRV(cuDeviceGetAttribute, "cuDeviceGetAttribute"), DRV(cuDeviceTotalMem, "cuDeviceTotalMem_v2"),
      DRV(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"), DRV(cuCtxSetCurrent, "cuCtxSetCurrent"),
      DRV(cuGetErrorString, "cuGetErrorString"), DRV(cuMemAlloc, "cuMemAlloc_v2"), DRV(cuMemFree, "cuMemFree_v2"),
      DRV(cuMemAllocHost, "cuMemAllocHost_v2"), DRV(cuMemFreeHost, "cuMemFreeHost"),
      DRV(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"), DRV(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
      DRV(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"), DRV(cuMemsetD8Async, "cuMemsetD8Async"),
      DRV(cuStreamCreate, "cuStreamCreate"), DRV(cuStreamSynchronize, "cuStreamSynchronize"),
      DRV(cuModuleLoadData, "cuModuleLoadData"), DRV(cuModuleGetFunction, "cuModuleGetFunction"),
      DRV(cuFuncSetAttribute, "cuFuncSetAttribute"), DRV(cuLaunchKernel, "cuLaunchKernel"),
      DRV(cuStreamBeginCapture, "cuStreamBeginCapture_v2"), DRV(cuStreamEndCapture, "cuStreamEndCapture"),
      DRV(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags"), DRV(cuGraphLaunch, "cuGraphLaunch"),
      DRV(cuGraphDestroy, "cuGraphDestroy"), DRV(cuGraphExecDestroy, "cuGraphExecDestroy"),
      DRV(cuEventCreate, "cuEventCreate"), DRV(cuEventRecord, "cuEventRecord"),
      DRV(cuEventSynchronize, "cuEventSynchronize"), DRV(cuEventElapsedTime, "cuEventElapsedTime_v2");
  DRV(cuEventDestroy, "cuEventDestroy_v2");
#undef DRV
  if (!a.cuEventElapsedTime) {  // older drivers export only the unversioned name
    miss.clear();
    sym(cu, a.cuEventElapsedTime, "cuEventElapsedTime", &miss);
  }
  if (!miss.empty()) {
    L.error = "driver " + found + " lacks " + miss;
    return L;
  }
  {  // optional entry points
    std::string opt;
    sym(cu, a.cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor", &opt);
    sym(cu, a.cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel", &opt);
  }
  CUresult r = a.cuInit(0);
  if (r != 0) {
    const char* s = nullptr;
    a.cuGetErrorString(r, &s);
    L.error = std::string("driver found but cuInit failed: ") + (s ? s : "error " + std::to_string(r)) +
              " (no usable NVIDIA GPU)";
    return L;
  }
  a.cuDriverGetVersion(&a.driver_version);
  a.cuDeviceGetCount(&a.device_count);
  if (a.device_count == 0) {
    L.error = "driver found (" + std::to_string(a.driver_version) + ") but no CUDA device";
    return L;
  }
  a.cuDeviceGet(&a.dev, 0);
  char name[256] = {0};
  a.cuDeviceGetName(name, sizeof name, a.dev);
  a.device_name = name;
  a.cuDeviceGetAttribute(&a.sm_count, kAttrSmCount, a.dev);
  a.cuDeviceGetAttribute(&a.cc_major, kAttrCcMajor, a.dev);
  a.cuDeviceGetAttribute(&a.cc_minor, kAttrCcMinor, a.dev);
  a.cuDeviceGetAttribute(&a.cooperative_launch, kAttrCooperativeLaunch, a.dev);
  a.cuDeviceTotalMem(&a.total_mem, a.dev);

  static const char* const nvrtc_v[] = {".so.13", ".so.12", ".so", nullptr};
  void* nv = open_first(candidates("libnvrtc", nvrtc_v), &a.nvrtc_path);
  if (!nv) {
    L.error = "GPU found (" + a.device_name + ") but NVRTC (libnvrtc.so) not found; set RLX_CUDA_LIB_DIR";
    return L;
  }
#define NV(field) sym(nv, a.field, #field, &miss)
  NV(nvrtcVersion), NV(nvrtcCreateProgram), NV(nvrtcCompileProgram), NV(nvrtcGetCUBINSize), NV(nvrtcGetCUBIN),
      NV(nvrtcGetProgramLogSize), NV(nvrtcGetProgramLog), NV(nvrtcDestroyProgram);
#undef NV
  static const char* const blas_v[] = {".so.13", ".so.12", ".so", nullptr};
  void* bl = open_first(candidates("libcublasLt", blas_v), &a.cublaslt_path);
  if (!bl) {
    L.error = "GPU found (" + a.device_name + ") but cuBLASLt (libcublasLt.so) not found; set RLX_CUDA_LIB_DIR";
    return L;
  }
#define BL(field) sym(bl, a.field, #field, &miss)
  BL(cublasLtCreate), BL(cublasLtMatmulDescCreate), BL(cublasLtMatmulDescDestroy), BL(cublasLtMatmulDescSetAttribute),
      BL(cublasLtMatrixLayoutCreate), BL(cublasLtMatrixLayoutDestroy), BL(cublasLtMatrixLayoutSetAttribute),
      BL(cublasLtMatmulPreferenceCreate), BL(cublasLtMatmulPreferenceDestroy),
      BL(cublasLtMatmulPreferenceSetAttribute), BL(cublasLtMatmulAlgoGetHeuristic), BL(cublasLtMatmul);
#undef BL
  if (!miss.empty()) {
    L.error = "NVRTC/cuBLASLt lack " + miss;
    return L;
  }
  return L;
}

Loaded& loaded() {
  static Loaded L = load();
  return L;
}

}  // namespace

Api* nvrtc_only(std::string* why) {
  static Api a{};
  static std::string err;
  static std::once_flag once;
  std::call_once(once, [] {
    static const char* const v[] = {".so.13", ".so.12", ".so", nullptr};
    void* nv = open_first(candidates("libnvrtc", v), &a.nvrtc_path);
    if (!nv) {
      err = "libnvrtc not found (CUDA toolkit not installed; set RLX_CUDA_LIB_DIR)";
      return;
    }
    std::string miss;
#define NV(field) sym(nv, a.field, #field, &miss)
    NV(nvrtcVersion), NV(nvrtcCreateProgram), NV(nvrtcCompileProgram), NV(nvrtcGetCUBINSize), NV(nvrtcGetCUBIN),
        NV(nvrtcGetProgramLogSize), NV(nvrtcGetProgramLog), NV(nvrtcDestroyProgram);
#undef NV
    if (!miss.empty()) err = "libnvrtc lacks " + miss;
  });
  *why = err;
  return err.empty() ? &a : nullptr;
}

Probe probe() {
  Loaded& L = loaded();
  if (!L.error.empty()) return {false, L.error};
  const Api& a = L.api;
  return {true, a.device_name + ", sm_" + std::to_string(a.cc_major) + std::to_string(a.cc_minor) + ", " +
                    std::to_string(a.device_count) + " device(s), driver " + std::to_string(a.driver_version)};
}

Api& api() {
  Loaded& L = loaded();
  if (!L.error.empty()) fail("[cuda] cannot run: ", L.error);
  static std::once_flag once;
  std::call_once(once, [&] {
    check(L.api.cuDevicePrimaryCtxRetain(&L.api.ctx, L.api.dev), "cuDevicePrimaryCtxRetain");
  });
  check(L.api.cuCtxSetCurrent(L.api.ctx), "cuCtxSetCurrent");
  return L.api;
}

void check(CUresult r, const char* what) {
  if (r == 0) return;
  const char* s = nullptr;
  if (loaded().api.cuGetErrorString) loaded().api.cuGetErrorString(r, &s);
  fail("[cuda] ", what, " failed: ", s ? s : "error", " (", r, ")");
}

void check_blas(cublasStatus_t r, const char* what) {
  if (r != 0) fail("[cuda] cuBLASLt ", what, " failed: status ", r);
}

// 0 = cuda runs here, 1 = no driver, 2 = driver but no usable GPU/libraries (cuda_backend.h).
int runtime_probe(std::string* why) {
  cuda::Probe p = cuda::probe();
  *why = p.reason;
  if (p.ok) return 0;
  return p.reason.rfind("no NVIDIA driver", 0) == 0 ? 1 : 2;
}

}  // namespace rlx::cuda
