// Small helpers every file of the cuda backend shares (one copy each): environment switches, the
// activation attribute of a kernel, the reduction-op predicate, and the process-wide module cache
// that turns a rendered kernel into a loaded CUfunction.
#pragma once
#include <cstdlib>
#include <string>

#include "backends/cuda/cuda_api.h"
#include "backends/cuda/render.h"
#include "rlx/lir.h"

namespace rlx::cuda {

// An environment switch: unset -> dflt, "0" -> false, anything else -> true.
inline bool env_on(const char* name, bool dflt) {
  const char* e = std::getenv(name);
  if (!e) return dflt;
  return std::string(e) != "0";
}
// Set to exactly "1" (the measurement switches: RLX_CUDA_GEMM_OWN_ONLY, RLX_ALLOW_TF32, ...).
inline bool env_is_1(const char* name) {
  const char* e = std::getenv(name);
  return e && std::string(e) == "1";
}

// A kernel's "activation" attribute ("none" when absent).
inline std::string activation_of(const LirKernel& k) {
  if (!k.attrs.count("activation")) return "none";
  Node nd{k.op, {}, {}, k.attrs, ""};
  return attr_str(nd, "activation");
}

inline bool is_reduce_op(OpKind op) {
  return op == OpKind::ReduceSum || op == OpKind::ReduceMax || op == OpKind::ReduceMin || op == OpKind::ReduceProd;
}

// NVRTC-compiles `ks` (nvrtc_compile's caches), loads its module once per process (keyed by the
// source) and returns its rlx_kernel, with the dynamic shared-memory limit raised when ks.smem
// needs more than the default 48 KiB. `disk_hit`: the cubin came from the disk cache. (nvrtc.cpp)
CUfunction load_function(const KernelSource& ks, bool* disk_hit = nullptr);

}  // namespace rlx::cuda
