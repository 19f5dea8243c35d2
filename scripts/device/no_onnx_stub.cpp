// The device build has no protobuf, so the ONNX commands are replaced by ones that say so.
#include <algorithm>

#include "commands.h"
#include "formats/onnx/onnx.h"
#include "rlx/npy.h"
#include "rlx/text.h"

namespace rlx::cli {

namespace {
[[noreturn]] void no_onnx(const std::string& what) {
  fail("[cli] this build has no ONNX importer (device build without protobuf): ", what);
}
}  // namespace

// --input name=path.npy (no .npz here: its reader lives with the ONNX commands).
std::map<std::string, Tensor> read_inputs(const Args& a) {
  std::map<std::string, Tensor> inputs;
  for (auto& v : a.all("input")) {
    auto eq = v.find('=');
    inputs[v.substr(0, eq)] = read_npy(v.substr(eq + 1));
  }
  return inputs;
}

Graph load_model_file(const std::string& path, const Args& a, const std::map<std::string, Tensor>&) {
  if (model_format(path, false) != ModelFormat::Rlx) no_onnx(path);
  Graph g = load_graph_file(path);
  if (a.cmd->find("bind")) {
    auto syms = g.symbols();
    for (auto& [sym, n] : bindings(a))
      if (std::find(syms.begin(), syms.end(), sym) == syms.end())
        usage_fail("--bind ", sym, "=", n, ": the model has no symbolic dim '", sym, "'");
  }
  return g;
}
int inspect_onnx_file(const std::string& path) { no_onnx(path); }
int cmd_onnx_suite(const Args&) { no_onnx("onnx-suite"); }
int cmd_quantize(const Args&) { no_onnx("quantize (it reads and writes ONNX)"); }

}  // namespace rlx::cli

// models::load_model (rlx bench) reaches the importer through this one entry point.
namespace rlx::onnx {
Graph load_onnx(const std::string& path, const ImportOptions&) {
  fail("[onnx] this build has no ONNX importer (device build without protobuf): ", path);
}
}  // namespace rlx::onnx
