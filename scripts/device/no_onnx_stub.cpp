// The device build has no protobuf, so the ONNX commands are replaced by ones that say so.
#include "commands.h"
#include "rlx/npy.h"
#include "rlx/text.h"

namespace rlx::cli {

// --input name=path.npy (no .npz here: its reader lives with the ONNX commands).
std::map<std::string, Tensor> read_inputs(const Args& a) {
  std::map<std::string, Tensor> inputs;
  for (auto& v : a.all("input")) {
    auto eq = v.find('=');
    RLX_CHECK(eq != std::string::npos, "[cli] --input expects name=path.npy, got '", v, "'");
    inputs[v.substr(0, eq)] = read_npy(v.substr(eq + 1));
  }
  return inputs;
}

Graph load_model_file(const std::string& path, const Args&, const std::map<std::string, Tensor>&) {
  RLX_CHECK(path.size() < 5 || path.substr(path.size() - 5) != ".onnx",
            "[cli] this build has no ONNX importer (device build without protobuf): ", path);
  return load_graph_file(path);
}
int cmd_inspect(const Args&) { fail("[cli] this build has no ONNX importer (device build without protobuf)"); }
int cmd_onnx_suite(const Args&) { fail("[cli] this build has no ONNX importer (device build without protobuf)"); }

}  // namespace rlx::cli
