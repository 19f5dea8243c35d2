// Qwen3 decoder (HIR): RMSNorm, per-head q/k RMSNorm, RoPE (rotate-half), grouped-query causal
// attention over a KV cache, SwiGLU MLP, tied or untied LM head. Weights load from a Hugging Face
// directory (config.json + *.safetensors) or a GGUF file (llama.cpp tensor names).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/generate.h"
#include "rlx/graph.h"
#include "rlx/tensor.h"

namespace rlx::models {

struct Qwen3Config {
  int64_t vocab = 0, hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, intermediate = 0;
  int64_t context = 0;  // positions the model was trained for (max_position_embeddings); 0: not stated
  double rope_theta = 1e6, rms_eps = 1e-6;
  bool tied = false;
  bool attention_bias = false;
};

// A projection weight [out, in]: dense (any float dtype) or packed GGML blocks (u8 [out, row_bytes]).
struct Weight {
  Tensor dense;
  Tensor packed;
  std::string qtype;  // "Q4_K", ... when packed
  int64_t in = 0, out = 0;
  bool is_packed() const { return packed.defined() && !qtype.empty() && packed.numel() > 0; }
};

struct Qwen3Layer {
  Tensor attn_norm, q_norm, k_norm, ffn_norm;
  Weight q, k, v, o, gate, up, down;
  Tensor q_bias, k_bias, v_bias;  // only with attention_bias
};

struct Qwen3Weights {
  Qwen3Config cfg;
  Tensor embed;  // f32 [vocab, hidden]
  std::vector<Qwen3Layer> layers;
  Tensor norm;
  Weight lm_head;
  std::string source;  // "safetensors" or "gguf:<file type summary>"
};

struct LoadOptions {
  // GGUF: keep quantized projections packed (dequant_matmul) instead of dequantizing to f32.
  bool keep_packed = true;
};

Qwen3Weights load_qwen3(const std::string& path, const LoadOptions& o = {});
// The config alone (config.json, or the GGUF header), without reading the weights.
Qwen3Config read_qwen3_config(const std::string& path);
Qwen3Weights load_qwen3_hf(const std::string& dir);
Qwen3Weights load_qwen3_gguf(const std::string& file, const LoadOptions& o = {});

// One forward step over S new tokens with `past` cached positions (capacity `cap` slots, 0 = none).
// Inputs: ids i64 [B,S], positions i64 [S], then when cap > 0: keep f32 [B, cap+S] (nonzero = key
// visible) and per layer past_k_i, past_v_i [B, Hkv, cap, D]. Outputs: logits f32 [B, V] of the last
// position (or [B,S,V] with all_logits), then per layer new_k_i, new_v_i [B, Hkv, S, D].
Graph qwen3_step_graph(const Qwen3Weights& w, int64_t B, int64_t S, int64_t cap, bool all_logits = false);

// The CausalLM adapter generation runs on.
class Qwen3Model : public CausalLM {
 public:
  Qwen3Model(Qwen3Weights w, std::string device = "cpu");
  ~Qwen3Model() override;
  const Qwen3Weights& weights() const { return w_; }
  int64_t num_layers() const override { return w_.cfg.layers; }
  int64_t kv_heads() const override { return w_.cfg.kv_heads; }
  int64_t head_dim() const override { return w_.cfg.head_dim; }
  int64_t vocab() const override { return w_.cfg.vocab; }
  StepOutput step(const Tensor& ids, int64_t pos, const KvCache* cache) override;
  // Full-sequence logits [B,S,V] (no cache), for parity checks.
  Tensor forward_all(const Tensor& ids);

 private:
  struct Impl;
  Qwen3Weights w_;
  std::string device_;
  Impl* impl_;
};

}  // namespace rlx::models
