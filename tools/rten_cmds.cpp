// [issue 4] .rten models on the command line: `rlx inspect/run/compile MODEL.rten` (src/formats/rten).
#include <iostream>

#include "commands.h"
#include "formats/rten/rten.h"
#include "rlx/npy.h"

namespace rlx::cli {

std::vector<std::string> split(const std::string& s, char sep);  // tools/main.cpp

bool is_rten_file(const std::string& path) { return rten::is_rten_path(path); }

// As load_model_file for ONNX: --bind sizes symbolic dims; the arrays given with --input fix input
// shapes (and small ones their values) so shape computations in the model fold at import.
Graph load_rten_file(const std::string& path, const Args& a) {
  onnx::ImportOptions o;
  for (auto& v : a.all("bind"))
    for (auto& kv : split(v, ',')) {
      auto eq = kv.find('=');
      if (eq != std::string::npos) o.bind[kv.substr(0, eq)] = std::stoll(kv.substr(eq + 1));
    }
  for (auto& v : a.all("input")) {
    auto eq = v.find('=');
    if (eq == std::string::npos) continue;
    std::string name = v.substr(0, eq), p = v.substr(eq + 1);
    try {
      Tensor t = p.size() > 4 && p.substr(p.size() - 4) == ".npz" ? read_npz(p).at(name) : read_npy(p);
      o.input_shapes[name] = t.shape();
      if (t.numel() <= 64) o.input_values[name] = t;
    } catch (const std::exception&) {
      // cmd_run reports unreadable inputs with its own message.
    }
  }
  return rten::load_rten(path, o);
}

int inspect_rten_file(const Args& a) {
  RLX_CHECK(a.positional.size() == 1, "[cli] usage: rlx inspect MODEL.rten");
  std::cout << rten::inspect_rten(a.positional[0]);
  return 0;
}

}  // namespace rlx::cli
