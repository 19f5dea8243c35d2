// Compile a graph for a device and run it. Symbolic dims are specialized per concrete input
// shape; each specialization is compiled once and cached (visible in the report).
#pragma once
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rlx/device.h"
#include "rlx/graph.h"
#include "rlx/tensor.h"

namespace rlx {

struct LirProgram;  // rlx/lir.h

class Executable;  // src/runtime/backend.h

struct CompileOptions {
  std::string device = "cpu";
  DispatchOptions dispatch;
  bool verify = true;  // run verifiers between passes
  bool fuse = true;    // elementwise fusion into generated kernels
  bool fuse_qdq = true;  // QDQ contractions -> int8 qlinear (src/passes/fuse_qdq.cpp)
};

class CompiledModel {
 public:
  CompiledModel(Graph g, CompileOptions opts);
  ~CompiledModel();
  CompiledModel(CompiledModel&&) noexcept;
  CompiledModel& operator=(CompiledModel&&) noexcept;

  const Graph& graph() const;
  const CompileOptions& options() const;
  // Runs with inputs in graph order. Throws rlx::Error naming the input on a dtype/shape mismatch,
  // or when the device cannot execute on this machine.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs);
  // `run({x, w})`: a braced list of tensors is the graph-order form (without this overload the
  // braces also match std::map's iterator-pair constructor and the call is ambiguous).
  std::vector<Tensor> run(std::initializer_list<Tensor> inputs) { return run(std::vector<Tensor>(inputs)); }
  // Runs writing the outputs into caller-owned tensors (dtypes and shapes must match
  // the outputs; they must not alias any input). Lets a training loop keep its state in fixed
  // buffers (ping-pong between two sets) with no per-step allocation.
  void run_into(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs);
  // The executable of the specialization for `b` (compiled on first use), for callers that
  // drive it directly, e.g. train::Trainer through Executable's resident API (backend.h).
  Executable& executable(const Bindings& b = {});
  // Legalizes and lowers for the given bindings (without running) and returns the text of a level:
  // "hir", "mir" or "lir".
  // "lir" is the final schedule: after the device's LIR passes and the memory plan.
  std::string dump(const std::string& level, const Bindings& b = {});
  // The final schedule of the specialization for b (after the device's LIR passes and the memory
  // plan), for code generators that write a project instead of running it (rlx compile --out).
  // Throws when --fallback cut the graph into segments.
  const LirProgram& lir(const Bindings& b = {});
  // The LIR right after one of the device's passes ("lower": before any), arena planned for it.
  std::string dump_after(const std::string& pass, const Bindings& b = {});
  const DispatchReport& report(const Bindings& b = {});
  int cache_size() const;  // specializations compiled so far
  std::string profile() const;  // per-kernel times of the last run when RLX_PROFILE=1

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlx
