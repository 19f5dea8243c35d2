// .rten models on the command line: `rlx inspect MODEL.rten`; run/compile load
// .rten files through load_model_file (tools/onnx_cmds.cpp) like ONNX ones.
#include <iostream>

#include "commands.h"
#include "formats/rten/rten.h"

namespace rlx::cli {

int inspect_rten_file(const std::string& path) {
  std::cout << rten::inspect_rten(path);
  return 0;
}

}  // namespace rlx::cli
