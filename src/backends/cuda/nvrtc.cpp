// NVRTC compilation for the current device's architecture, cached in memory and on disk by a hash
// of (source, architecture, NVRTC version): a rerun loads cubins instead of compiling.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_api.h"

namespace rlx::cuda {

namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string cache_dir() {
  std::string d;
  if (const char* e = std::getenv("RLX_CACHE_DIR")) d = e;
  else if (const char* x = std::getenv("XDG_CACHE_HOME")) d = std::string(x) + "/rlx";
  else if (const char* h = std::getenv("HOME")) d = std::string(h) + "/.cache/rlx";
  else d = "/tmp/rlx-cache";
  d += "/cuda";
  std::string cur;
  std::stringstream ss(d);
  std::string part;
  while (std::getline(ss, part, '/')) {
    cur += part + "/";
    if (!part.empty()) ::mkdir(cur.c_str(), 0755);
  }
  return d;
}

}  // namespace

std::string nvrtc_compile(const std::string& source, bool* from_disk_cache) {
  Api& a = api();
  return nvrtc_compile_for(a, "sm_" + std::to_string(a.cc_major) + std::to_string(a.cc_minor), source, from_disk_cache);
}

std::string nvrtc_compile_for(Api& a, const std::string& arch, const std::string& source, bool* from_disk_cache) {
  int maj = 0, min = 0;
  a.nvrtcVersion(&maj, &min);
  std::string key = arch + "|nvrtc" + std::to_string(maj) + "." + std::to_string(min) + "|" + source;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(key)));
  static std::mutex mu;
  static std::map<std::string, std::string> mem;
  std::lock_guard<std::mutex> g(mu);
  if (from_disk_cache) *from_disk_cache = false;
  auto it = mem.find(hex);
  if (it != mem.end()) return it->second;
  bool disk = !std::getenv("RLX_CUDA_NO_DISK_CACHE");
  std::string path = disk ? cache_dir() + "/" + hex + ".cubin" : "";
  if (disk) {
    std::ifstream f(path, std::ios::binary);
    if (f.good()) {
      std::string bin((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      if (!bin.empty()) {
        if (from_disk_cache) *from_disk_cache = true;
        return mem[hex] = bin;
      }
    }
  }
  nvrtcProgram prog = nullptr;
  RLX_CHECK(a.nvrtcCreateProgram(&prog, source.c_str(), "rlx_kernel.cu", 0, nullptr, nullptr) == 0,
            "[cuda] nvrtcCreateProgram failed");
  std::string arch_opt = "--gpu-architecture=" + arch;
  const char* opts[] = {arch_opt.c_str(), "--std=c++17", "-default-device"};
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
  if (disk) {  // write then rename: a concurrent reader never sees half a cubin
    std::string tmp = path + ".tmp" + std::to_string(::getpid());
    std::ofstream f(tmp, std::ios::binary);
    f.write(bin.data(), static_cast<std::streamsize>(bin.size()));
    f.close();
    std::rename(tmp.c_str(), path.c_str());
  }
  return mem[hex] = bin;
}

}  // namespace rlx::cuda
