// The backend interface: a device turns an LIR program into an executable that runs it.
#pragma once
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rlx/lir.h"
#include "rlx/tensor.h"

namespace rlx {

class Executable {
 public:
  virtual ~Executable() = default;
  // Inputs are the graph inputs in order; outputs are allocated by the executable.
  virtual std::vector<Tensor> run(const std::vector<Tensor>& inputs) = 0;
  virtual std::string profile() const { return ""; }
  // [training] Runs writing the outputs into caller-owned tensors of the output types (they must
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
};

using BackendFactory = std::function<std::unique_ptr<Executable>(const LirProgram&)>;
// Backends register themselves (src/backends/<name>/); a device without one cannot execute.
bool register_backend(const std::string& device, BackendFactory f);
std::unique_ptr<Executable> make_executable(const std::string& device, const LirProgram& p);

}  // namespace rlx
