// The device build has no protobuf, so the ONNX commands are replaced by ones that say so.
#include "commands.h"
#include "rlx/text.h"

namespace rlx::cli {

Graph load_model_file(const std::string& path, const Args&) {
  RLX_CHECK(path.size() < 5 || path.substr(path.size() - 5) != ".onnx",
            "[cli] this build has no ONNX importer (device build without protobuf): ", path);
  return load_graph_file(path);
}
int cmd_inspect(const Args&) { fail("[cli] this build has no ONNX importer (device build without protobuf)"); }
int cmd_onnx_suite(const Args&) { fail("[cli] this build has no ONNX importer (device build without protobuf)"); }

}  // namespace rlx::cli
