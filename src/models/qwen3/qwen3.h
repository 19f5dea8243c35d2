// Qwen3 names for the llama-family decoder (src/models/llm): a Qwen3 model is a DecoderModel whose
// config has qk_norm set. Kept so callers written against Qwen3 keep compiling.
#pragma once
#include "models/llm/decoder.h"

namespace rlx::models {

using Qwen3Config = DecoderConfig;
using Qwen3Layer = DecoderLayer;
using Qwen3Weights = DecoderWeights;
using Qwen3Model = DecoderModel;

inline Qwen3Weights load_qwen3(const std::string& path, const LoadOptions& o = {}) { return load_decoder(path, o); }
inline Qwen3Config read_qwen3_config(const std::string& path) { return read_decoder_config(path); }
inline Graph qwen3_step_graph(const Qwen3Weights& w, int64_t B, int64_t S, int64_t cap, bool all_logits = false) {
  return decoder_step_graph(w, B, S, cap, all_logits);
}

}  // namespace rlx::models
