// The backend interface: a device turns an LIR program into an executable that runs it.
#pragma once
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dispatch/registry.h"
#include "lir/rewrite/pass.h"
#include "rlx/lir.h"
#include "rlx/tensor.h"

namespace rlx {

class Executable {
 public:
  virtual ~Executable() = default;
  // Inputs are the graph inputs in order; outputs are allocated by the executable.
  virtual std::vector<Tensor> run(const std::vector<Tensor>& inputs) = 0;
  virtual std::string profile() const { return ""; }
  // Runs writing the outputs into caller-owned tensors of the output types (they must
  // not alias the inputs). Backends that can bind them as their output buffers, so a training step
  // allocates nothing; this default runs and copies.
  virtual void run_into(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
    auto r = run(inputs);
    RLX_CHECK(r.size() == outputs.size(), "[run_into] expected ", r.size(), " outputs, got ", outputs.size());
    for (size_t i = 0; i < r.size(); ++i) {
      RLX_CHECK(r[i].nbytes() == outputs[i].nbytes(), "[run_into] output ", i, " size mismatch");
      if (r[i].nbytes()) std::memcpy(outputs[i].raw(), r[i].raw(), r[i].nbytes());
    }
  }

  // Resident runs: the executable holds every input between runs (a GPU in its device memory),
  // so a training step's parameters and optimizer state never cross the host and only what the
  // caller reads is downloaded. The one resident API of every backend; train::Trainer and the
  // benchmarks drive it.
  //   resident_feedback(pairs): after each run, output pairs[k].first becomes input pairs[k].second
  //     (same dtype and size), e.g. new parameters -> parameters. Set before the first run.
  //   resident_upload(inputs): all inputs, once (before the first run).
  //   resident_write(i, t): replaces input i for the next runs (a data batch, an lr scalar). On the
  //     host a tensor written to a feedback target is taken over: later runs write into it.
  //   resident_run(n): n runs back to back (feedback applied after each). A device may queue them
  //     and return before they finish (0 then); the host runs them and returns ms per run.
  //   resident_time(n): the same, waiting for the last; ms per run (device events on a GPU).
  //   resident_time_each(warmup, iters): warmup runs, then iters runs each waited for; ms of each.
  //   resident_read_output(i) / resident_read_input(i): one tensor of the last run / current input
  //     (waits for queued runs). Valid until the next run (the host default returns the
  //     executable's own buffer, no copy).
  // The default is the host implementation (every backend that runs on host memory): inputs and
  // outputs live in two sets of tensors; each run writes the outputs with run_into and feedback
  // swaps the output tensor into the input slot (no copy, no allocation after the first run).
  // A device backend overrides them (src/backends/cuda: CUDA graph + device-side feedback).
  virtual void resident_feedback(const std::vector<std::pair<int, int>>& out_to_in);
  virtual void resident_upload(const std::vector<Tensor>& inputs);
  virtual void resident_write(int i, const Tensor& t);
  virtual double resident_run(int n);
  virtual double resident_time(int n) { return resident_run(n); }
  virtual std::vector<double> resident_time_each(int warmup, int iters);
  virtual Tensor resident_read_output(int i);
  virtual Tensor resident_read_input(int i);
  // One line on what was built ("N kernels (G GEMMs, ...), graph on, arena X KiB"); "" if nothing.
  virtual std::string summary() const { return ""; }

 private:
  std::vector<Tensor> res_in_, res_out_;              // host default of the resident API
  std::vector<std::pair<int, int>> res_fb_;
};

// A backend: one folder src/backends/<folder>/ whose backend.cpp defines a Backend and registers
// it with RLX_REGISTER_BACKEND (src/backends/null is the template). The DeviceEntry half
// (dispatch/registry.h) gives dispatch and `rlx devices` its name, rank, probe and capability set.
class Backend : public DeviceEntry {
 public:
  // The LIR passes it runs on a lowered program and what its kernels absorb (LirAbsorbs); read
  // when a program is scheduled, so the backend's environment switches apply per compile.
  virtual LirSchedule schedule() const { return {}; }
  // The executable of a scheduled program; called only where info(true) says it can execute.
  virtual std::unique_ptr<Executable> compile(const LirProgram& p) const = 0;
};

// The backend of `device`; nullptr for a code-generation-only target or an unknown name.
const Backend* find_backend(const std::string& device);
// The device's LIR schedule (no passes for a device without a backend or without a schedule).
LirSchedule backend_schedule(const std::string& device);
// Builds the executable of a scheduled program (CompiledModel schedules it: lower -> passes ->
// plan). A program that has not been scheduled (p.scheduled false, e.g. straight from
// lower_to_lir) gets the device's schedule first, on a copy.
std::unique_ptr<Executable> make_executable(const std::string& device, const LirProgram& p);

}  // namespace rlx

// In src/backends/<folder>/backend.cpp, at global scope: registers `Type(args...)`. The folder's
// name makes the function cmake/backends.cmake's generated list calls (dispatch/registry.cpp).
#define RLX_REGISTER_BACKEND(folder, Type, ...) \
  void rlx_register_backend_##folder() { ::rlx::register_device(std::make_unique<Type>(__VA_ARGS__)); }
