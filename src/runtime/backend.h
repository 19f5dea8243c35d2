// The backend interface: a device turns an LIR program into an executable that runs it.
#pragma once
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

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

  // Resident runs: the executable holds every input between runs (a GPU in
  // its device memory), so a training step's parameters and optimizer state never cross the host
  // and only what the caller reads is downloaded. Device-neutral; train::Trainer uses it.
  //   resident_feedback(pairs): after each run, output pairs[k].first becomes input pairs[k].second
  //     (same dtype and size), e.g. new parameters -> parameters.
  //   resident_upload(inputs): all inputs, once (before the first run).
  //   resident_write(i, t): replaces input i for the next runs (a data batch, an lr scalar). On the
  //     host a tensor written to a feedback target is taken over: later runs write into it.
  //   resident_run(n): n runs back to back (feedback applied after each); ms per run.
  //   resident_read_output(i) / resident_read_input(i): one tensor of the last run / current input.
  //     Valid until the next run (the host default returns the executable's own buffer, no copy).
  // The default is the host implementation (every backend that runs on host memory): inputs and
  // outputs live in two sets of tensors; each run writes the outputs with run_into and feedback
  // swaps the output tensor into the input slot (no copy, no allocation after the first run).
  // A device backend overrides all six (src/backends/cuda: CUDA graph + device-side feedback).
  virtual void resident_feedback(const std::vector<std::pair<int, int>>& out_to_in);
  virtual void resident_upload(const std::vector<Tensor>& inputs);
  virtual void resident_write(int i, const Tensor& t);
  virtual double resident_run(int n);
  virtual Tensor resident_read_output(int i);
  virtual Tensor resident_read_input(int i);

 private:
  std::vector<Tensor> res_in_, res_out_;              // host default of the resident API
  std::vector<std::pair<int, int>> res_fb_;
};

using BackendFactory = std::function<std::unique_ptr<Executable>(const LirProgram&)>;
// The LIR passes a backend runs on a lowered program, read when a program is scheduled (so the
// backend's environment switches apply per compile).
using ScheduleFactory = std::function<LirSchedule()>;
// Backends register themselves (src/backends/<name>/); a device without one cannot execute.
bool register_backend(const std::string& device, BackendFactory f, ScheduleFactory s = {});
// The device's LIR schedule (no passes for a device without a backend or without a schedule).
LirSchedule backend_schedule(const std::string& device);
// Builds the executable of a scheduled program (CompiledModel schedules it: lower -> passes ->
// plan). A program that has not been scheduled (p.scheduled false, e.g. straight from
// lower_to_lir) gets the device's schedule first, on a copy.
std::unique_ptr<Executable> make_executable(const std::string& device, const LirProgram& p);

}  // namespace rlx
