// HIP from the CUDA renderer: the kernel bodies are the CUDA ones (src/backends/cuda/render*.cpp,
// one-thread-per-element loops, block reductions, warp shuffles); only the dialect differs, so
// the translation is a fixed prelude plus three PTX conversion helpers rewritten to _Float16.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "backends/cuda/render.h"
#include "backends/rocm/rocm.h"
#include "runtime/disk_cache.h"

namespace rlx::rocm {

namespace {

// HIP's shuffles take a width: 32 keeps the CUDA kernels' warp-of-32 reductions exact on a
// 64-lane wavefront (two independent halves).
const char* kHipPrelude = R"(#include <hip/hip_runtime.h>
#define __shfl_xor_sync(m_, v_, o_) __shfl_xor((v_), (o_), 32)
#define __shfl_sync(m_, v_, l_) __shfl((v_), (l_), 32)
#define __syncwarp() __builtin_amdgcn_wave_barrier()
#define __any_sync(m_, p_) __any(p_)
)";

struct Rewrite {
  const char* fn;  // the helper whose CUDA definition uses PTX
  const char* hip;
};
const Rewrite kRewrites[] = {
    {"float h2f(unsigned short h)",
     "__device__ __forceinline__ float h2f(unsigned short h) { return (float)__builtin_bit_cast(_Float16, h); }"},
    {"unsigned short f2h(float f)",
     "__device__ __forceinline__ unsigned short f2h(float f) { return __builtin_bit_cast(unsigned short, (_Float16)f); }"},
    {"unsigned short d2h(double f)",
     "__device__ __forceinline__ unsigned short d2h(double f) { return __builtin_bit_cast(unsigned short, (_Float16)f); }"},
};

}  // namespace

std::string hip_from_cuda(const std::string& src) {
  std::istringstream in(src);
  std::ostringstream out;
  out << kHipPrelude;
  for (std::string line; std::getline(in, line);) {
    bool done = false;
    for (auto& r : kRewrites)
      if (line.find(r.fn) != std::string::npos && line.find("asm(") != std::string::npos) {
        out << r.hip << "\n";
        done = true;
        break;
      }
    if (done) continue;
    if (line.find("asm(") != std::string::npos || line.find("asm volatile") != std::string::npos) return "";
    out << line << "\n";
  }
  return out.str();
}

std::vector<HipKernel> render_hip(const LirProgram& p) {
  std::vector<HipKernel> r;
  for (auto& k : p.kernels) {
    std::vector<ValueType> in, out;
    for (int b : k.in) in.push_back(p.buffers[b].type);
    for (int b : k.out) out.push_back(p.buffers[b].type);
    if (!out.empty() && numel(out[0].shape) == 0) continue;
    cuda::KernelSource ks;
    bool ok = true;
    if (k.kind == KernelKind::Generated) ks = cuda::render_fused(k.body, out[0]);
    else ok = cuda::render_library(k, in, out, &ks);
    RLX_CHECK(ok && !ks.code.empty(), "[rocm] no HIP kernel for ", k.label());
    std::string hip = hip_from_cuda(ks.code);
    RLX_CHECK(!hip.empty(), "[rocm] kernel ", k.label(), " uses PTX with no HIP form");
    r.push_back({k.label(), hip, ks.grid, ks.grid_y, ks.block, ks.smem, ks.num_params, ks.scratch_bytes});
  }
  return r;
}

std::string hip_batch(const std::vector<std::string>& sources) {
  std::ostringstream os;
  os << kHipPrelude;
  const std::string prelude = kHipPrelude;
  for (size_t i = 0; i < sources.size(); ++i) {
    std::string s = sources[i];
    if (s.rfind(prelude, 0) == 0) s = s.substr(prelude.size());
    // the entry leaves the namespace by name: extern "C" keeps it unmangled and unique
    for (size_t at = s.find("rlx_kernel"); at != std::string::npos; at = s.find("rlx_kernel", at + 1))
      s.replace(at, 10, "rlx_kernel_" + std::to_string(i)), at += 1;
    os << "namespace k" << i << " {\n" << s << "}\n";
  }
  return os.str();
}

std::string hipcc_path() {
  for (const char* d : {"/usr/bin/hipcc", "/opt/rocm/bin/hipcc"})
    if (::access(d, X_OK) == 0) return d;
  return "";
}

const std::vector<std::string>& offline_targets() {
  // MI200 (gfx90a) and the MI300 family: Debian's hipcc (clang 15) knows gfx940, not yet gfx942.
  static const std::vector<std::string> t = {"gfx90a", "gfx940"};
  return t;
}

std::string hipcc_compile(const std::string& source, const std::string& arch, const std::string& out_path) {
  std::string hipcc = hipcc_path();
  if (hipcc.empty()) return "hipcc not found (Debian package hipcc)";
  std::string src = temp_path_for(out_path) + ".hip", log = temp_path_for(out_path) + ".log";
  if (!write_file_atomic(src, source)) return "cannot write " + src;
  // ROCM_TARGET_LST: hipcc would otherwise ask rocm_agent_enumerator (no GPU here) for a default
  std::string cmd = "ROCM_TARGET_LST=/dev/null " + hipcc + " --genco -O2 -w --offload-arch=" + arch + " -o '" + out_path +
                    "' '" + src + "' > '" + log + "' 2>&1";
  int rc = std::system(cmd.c_str());
  std::string msg;
  if (rc != 0) {
    if (FILE* f = std::fopen(log.c_str(), "r")) {
      char b[4096];
      size_t n = std::fread(b, 1, sizeof b, f);
      msg.assign(b, n);
      std::fclose(f);
    }
    msg = "hipcc failed for " + arch + ": " + (msg.empty() ? "exit " + std::to_string(rc) : msg);
  }
  ::unlink(src.c_str());
  ::unlink(log.c_str());
  return msg;
}

}  // namespace rlx::rocm
