#pragma once
#include <map>
#include <string>
#include <vector>

#include "rlx/session.h"

namespace rlx::cli {

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> flags;
  bool has(const std::string& k) const { return flags.count(k) > 0; }
  std::string get(const std::string& k, const std::string& def = "") const;
  std::vector<std::string> all(const std::string& k) const {
    auto it = flags.find(k);
    return it == flags.end() ? std::vector<std::string>{} : it->second;
  }
};

Bindings bind_map(const Graph& g, const std::map<std::string, Tensor>& inputs);
int cmd_ops(const Args& a);
// ONNX (tools/onnx_cmds.cpp): .onnx/.rten/.rlx by extension; `inputs` (the arrays about to be fed)
// fix input shapes, and small ones their values, at import; inspect; the node-suite runner.
Graph load_model_file(const std::string& path, const Args& a, const std::map<std::string, Tensor>& inputs = {});
// The arrays given with --input name=file.npy|file.npz, each file read once; fails naming a bad one.
std::map<std::string, Tensor> read_inputs(const Args& a);
int cmd_inspect(const Args& a);
int cmd_onnx_suite(const Args& a);
// Training (tools/train_mnist.cpp).
int cmd_train_mnist(const Args& a);

// GGUF + Qwen3 (tools/generate.cpp).
bool is_gguf_path(const std::string& p);
int inspect_gguf(const Args& a);
int cmd_generate(const Args& a);

}  // namespace rlx::cli
