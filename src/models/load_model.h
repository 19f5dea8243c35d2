// One entry point that turns any model file or folder RLX reads into a graph: .rlx text, .onnx,
// .rten, a Qwen3 .gguf, and Hugging Face folders (config.json model_type bert or qwen3). Used by
// the Python `rlx.load` and `rlx bench`.
#pragma once
#include <string>
#include <vector>

#include "formats/onnx/onnx.h"
#include "rlx/graph.h"

namespace rlx::models {

struct ModelLoadOptions {
  onnx::ImportOptions import;  // .onnx / .rten: symbol bindings, input shapes and values
  // Decoder models (Qwen3 .gguf / HF): one forward step over `seq` tokens of `batch` sequences, no
  // KV cache; outputs the logits of every position [batch, seq, vocab] then each layer's new K/V.
  int64_t batch = 1, seq = 8;
};

// "rlx", "onnx", "rten", "gguf", "hf-bert", "hf-qwen3"; UsageError-style rlx::Error naming the
// known formats for anything else (a .safetensors alone is weights, not a model).
std::string model_kind(const std::string& path);
Graph load_model(const std::string& path, const ModelLoadOptions& o = {});

}  // namespace rlx::models
