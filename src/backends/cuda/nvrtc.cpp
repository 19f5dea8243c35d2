// NVRTC compilation for the current device's architecture, cached in memory and on disk by a hash
// of (source, NVRTC version, options incl. architecture) under cache_dir("cuda") (runtime/disk_cache.h):
// a rerun loads cubins instead of compiling.
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_api.h"
#include "backends/cuda/cuda_util.h"
#include "runtime/disk_cache.h"

namespace rlx::cuda {

std::string nvrtc_compile(const std::string& source, bool* from_disk_cache) {
  Api& a = api();
  return nvrtc_compile_for(a, "sm_" + std::to_string(a.cc_major) + std::to_string(a.cc_minor), source, from_disk_cache);
}

std::string nvrtc_compile_for(Api& a, const std::string& arch, const std::string& source, bool* from_disk_cache) {
  int maj = 0, min = 0;
  a.nvrtcVersion(&maj, &min);
  std::string arch_opt = "--gpu-architecture=" + arch;
  const char* opts[] = {arch_opt.c_str(), "--std=c++17", "-default-device"};
  std::string key = "nvrtc" + std::to_string(maj) + "." + std::to_string(min);
  for (const char* o : opts) key += std::string("|") + o;
  const std::string hex = hex64(fnv1a64(key + "|" + source));
  static std::mutex mu;
  static std::map<std::string, std::string> mem;
  std::lock_guard<std::mutex> g(mu);
  if (from_disk_cache) *from_disk_cache = false;
  auto it = mem.find(hex);
  if (it != mem.end()) return it->second;
  bool disk = !env_is_1("RLX_CUDA_NO_DISK_CACHE");
  std::string path = disk ? cache_dir("cuda") + "/" + hex + ".cubin" : "";
  if (disk) {
    std::ifstream f(path, std::ios::binary);
    if (f.good()) {
      std::string bin((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      if (!bin.empty()) {
        cache_touch(path);  // a hit: most recently used
        if (from_disk_cache) *from_disk_cache = true;
        return mem[hex] = bin;
      }
    }
  }
  nvrtcProgram prog = nullptr;
  RLX_CHECK(a.nvrtcCreateProgram(&prog, source.c_str(), "rlx_kernel.cu", 0, nullptr, nullptr) == 0,
            "[cuda] nvrtcCreateProgram failed");
  int rc = a.nvrtcCompileProgram(prog, 3, opts);
  if (rc != 0) {
    size_t n = 0;
    a.nvrtcGetProgramLogSize(prog, &n);
    std::string log(n, '\0');
    a.nvrtcGetProgramLog(prog, log.data());
    a.nvrtcDestroyProgram(&prog);
    fail("[cuda] NVRTC failed to compile a generated kernel (", arch, "):\n", log, "\n--- source ---\n", source);
  }
  size_t n = 0;
  a.nvrtcGetCUBINSize(prog, &n);
  std::string bin(n, '\0');
  a.nvrtcGetCUBIN(prog, bin.data());
  a.nvrtcDestroyProgram(&prog);
  // best effort: a failed write only costs a recompile; then evict over RLX_CACHE_MAX_MB
  if (disk && write_file_atomic(path, bin)) cache_inserted(path);
  return mem[hex] = bin;
}

// The one module cache of the backend (executable launches and GEMM plans alike).
CUfunction load_function(const KernelSource& ks, bool* disk_hit) {
  static std::mutex mu;
  static std::map<std::string, CUfunction> loaded;
  Api& a = api();
  // Raised per request: the same source may be launched with more dynamic shared memory later.
  auto smem = [&](CUfunction fn) {
    if (ks.smem > 48 * 1024)
      check(a.cuFuncSetAttribute(fn, kFuncAttrMaxDynSmem, static_cast<int>(ks.smem)), "cuFuncSetAttribute(dynamic smem)");
    return fn;
  };
  {  // loaded already: no hashing, no compile-cache lookup
    std::lock_guard<std::mutex> g(mu);
    auto it = loaded.find(ks.code);
    if (it != loaded.end()) {
      if (disk_hit) *disk_hit = false;
      return smem(it->second);
    }
  }
  std::string bin = nvrtc_compile(ks.code, disk_hit);  // outside the module lock
  std::lock_guard<std::mutex> g(mu);
  auto it = loaded.find(ks.code);
  if (it != loaded.end()) return smem(it->second);
  CUmodule mod = nullptr;
  CUfunction fn = nullptr;
  check(a.cuModuleLoadData(&mod, bin.data()), "cuModuleLoadData");
  check(a.cuModuleGetFunction(&fn, mod, "rlx_kernel"), "cuModuleGetFunction");
  return loaded[ks.code] = smem(fn);
}

}  // namespace rlx::cuda
