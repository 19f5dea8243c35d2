// .rten models on the command line: `rlx inspect MODEL.rten`; run/compile load
// .rten files through load_model_file (tools/onnx_cmds.cpp) like ONNX ones.
#include <iostream>

#include "commands.h"
#include "formats/rten/rten.h"

namespace rlx::cli {

bool is_rten_file(const std::string& path) { return rten::is_rten_path(path); }

int inspect_rten_file(const Args& a) {
  RLX_CHECK(a.positional.size() == 1, "[cli] usage: rlx inspect MODEL.rten");
  std::cout << rten::inspect_rten(a.positional[0]);
  return 0;
}

}  // namespace rlx::cli
