// Generated C++ for fused elementwise kernels, compiled with the host compiler at
// run time (one translation unit per compiled model, -O3 -march=native), loaded with dlopen and
// cached on disk by a hash of source + compiler + flags + CPU. When no compiler is found, the
// compile fails or RLX_CPU_JIT=0, kernels run on the evaluator (fused.cpp) instead.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "rlx/lir.h"
#include "rlx/tensor.h"

namespace rlx::cpu {

// Counters over the process, for tests and the report.
struct JitStats {
  int compiles = 0;     // compiler invocations that produced a library
  int failures = 0;     // compiler invocations that failed (or a compiler that could not start)
  int disk_hits = 0;    // libraries loaded from the disk cache
  int memory_hits = 0;  // libraries already loaded in this process
};
JitStats jit_stats();

// One line for `rlx devices`: which path fused kernels take on this machine and why.
std::string jit_probe();

class JitProgram {
 public:
  // bodies[k]: the fused body of kernel k of `p` (a generated kernel, or a lone elementwise op as
  // a one-node body), or null. Renders, compiles (or loads) and resolves every body it can.
  JitProgram(const LirProgram& p, const std::vector<const Graph*>& bodies);
  ~JitProgram();
  bool has(size_t k) const { return k < fns_.size() && fns_[k].fn != nullptr; }
  // Runs kernel k (has(k) must be true) on the thread pool.
  void run(size_t k, const std::vector<Tensor>& in, Tensor& out) const;
  // "jit: 12 of 14 fused kernels (c++ ..., cached)" or "evaluator: <why>".
  const std::string& summary() const { return summary_; }

 private:
  using Fn = void (*)(void* const*, const int64_t*, int64_t, int64_t);
  struct Entry {
    Fn fn = nullptr;
    std::vector<int64_t> dims;
    int64_t total = 0;
  };
  std::vector<Entry> fns_;
  std::shared_ptr<void> lib_;
  std::string summary_;
};

}  // namespace rlx::cpu
