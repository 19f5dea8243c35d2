// The backend interface: a device turns an LIR program into an executable that runs it.
#pragma once
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
};

using BackendFactory = std::function<std::unique_ptr<Executable>(const LirProgram&)>;
// Backends register themselves (src/backends/<name>/); a device without one cannot execute.
bool register_backend(const std::string& device, BackendFactory f);
std::unique_ptr<Executable> make_executable(const std::string& device, const LirProgram& p);

}  // namespace rlx
