// Helpers shared by the cuda backend's tests (tests/unit/test_cuda*.cpp).
#pragma once
#include <random>
#include <vector>

#include <string>

#include "passes/passes.h"
#include "rlx/device.h"
#include "rlx/lir.h"
#include "rlx/tensor.h"

namespace rlx::cuda_test {

// A tensor of dtype `dt` with elements uniform in [-scale, scale] (rounded to the dtype).
inline Tensor rnd(DType dt, std::vector<int64_t> s, std::mt19937& rng, double scale = 1.0) {
  Tensor t(dt, std::move(s));
  std::uniform_real_distribution<double> u(-scale, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, u(rng));
  return t;
}

// Whether a GPU runs here; `why` says why not (the skip message of GPU-only tests).
inline bool have_gpu(std::string* why) {
  const DeviceInfo& d = device_info("cuda");
  *why = d.reason;
  return d.can_execute();
}

// `g` legalized for cuda, constants folded, dead code dropped, lowered to LIR with the memory plan
// (what CompiledModel hands the cuda executable).
inline LirProgram cuda_lir(const Graph& g) {
  Legalized l = legalize(g, "cuda", {});
  return lower_to_lir(eliminate_dead_code(fold_constants(l.graph)), true);
}

}  // namespace rlx::cuda_test
