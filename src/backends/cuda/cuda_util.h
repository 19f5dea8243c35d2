// Small helpers every file of the cuda backend shares (one copy each): the activation attribute of
// a kernel, the reduction-op predicate, and the process-wide module cache that turns a rendered
// kernel into a loaded CUfunction. Environment switches are runtime/env.h's env_on / env_is_1.
#pragma once
#include <string>

#include "backends/cuda/cuda_api.h"
#include "backends/cuda/render.h"
#include "rlx/lir.h"
#include "runtime/env.h"

namespace rlx::cuda {

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
