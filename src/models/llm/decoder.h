// Llama-family decoder (HIR): RMSNorm, q/k/v projections (optional bias), optional per-head q/k
// RMSNorm, RoPE (rotate-half or interleaved; scaled frequencies), grouped-query causal attention
// over a KV cache (optionally a sliding window), SwiGLU MLP, tied or untied LM head. One builder for
// every architecture in config.h; weights load from an HF directory or a GGUF file.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "models/generate.h"
#include "models/llm/config.h"
#include "rlx/graph.h"
#include "rlx/tensor.h"

namespace rlx::models {

// A projection weight [out, in]: dense (any float dtype) or packed GGML blocks (u8 [out, row_bytes]).
struct Weight {
  Tensor dense;
  Tensor packed;
  std::string qtype;  // "Q4_K", ... when packed
  int64_t in = 0, out = 0;
  bool is_packed() const { return packed.defined() && !qtype.empty() && packed.numel() > 0; }
};

struct DecoderLayer {
  Tensor attn_norm, q_norm, k_norm, ffn_norm;
  Weight q, k, v, o, gate, up, down;
  Tensor q_bias, k_bias, v_bias;  // only with attention_bias
};

struct DecoderWeights {
  DecoderConfig cfg;
  Tensor embed;  // f32 [vocab, hidden]
  std::vector<DecoderLayer> layers;
  Tensor norm;
  Weight lm_head;
  std::string source;  // "safetensors" or "gguf <type>x<count> ..."
};

struct LoadOptions {
  // GGUF: keep quantized projections packed (dequant_matmul) instead of dequantizing to f32.
  bool keep_packed = true;
};

DecoderWeights load_decoder(const std::string& path, const LoadOptions& o = {});
DecoderWeights load_decoder_hf(const std::string& dir);
DecoderWeights load_decoder_gguf(const std::string& file, const LoadOptions& o = {});

// One forward step over S new tokens with `past` cached positions (capacity `cap` slots, 0 = none).
// Inputs: ids i64 [B,S], positions i64 [S]; with non-plain RoPE rope_cos, rope_sin f32 [S, D/2];
// when cap > 0, keep f32 [B, cap+S] (nonzero = key visible) and per layer past_k_i, past_v_i
// [B, Hkv, cap, D]; with `window_bias` an additive f32 [B,1,S,T] mask replaces the causal/keep
// masks (sliding window). Outputs: logits f32 [B, V] of the last position (or [B,S,V] with
// all_logits), then per layer new_k_i, new_v_i [B, Hkv, S, D]. With `per_row` every row has its
// own positions: no `positions` input, and rope_cos, rope_sin are f32 [B, 1, S, D/2] (whatever the
// RoPE kind), so sequences at different lengths share one step.
Graph decoder_step_graph(const DecoderWeights& w, int64_t B, int64_t S, int64_t cap, bool all_logits = false,
                         bool window_bias = false, bool per_row = false);

// The CausalLM adapter generation runs on.
class DecoderModel : public CausalLM {
 public:
  DecoderModel(DecoderWeights w, std::string device = "cpu");
  ~DecoderModel() override;
  const DecoderWeights& weights() const { return w_; }
  // Applied to every step graph before it compiles (tensor parallelism: `rlx generate --tp N` sets
  // this rank's shard-tensor-parallel rewrite). Set it before the first step.
  void set_graph_transform(std::function<Graph(const Graph&)> f);
  int64_t num_layers() const override { return w_.cfg.layers; }
  int64_t kv_heads() const override { return w_.cfg.kv_heads; }
  int64_t head_dim() const override { return w_.cfg.head_dim; }
  int64_t vocab() const override { return w_.cfg.vocab; }
  StepOutput step(const Tensor& ids, int64_t pos, const KvCache* cache) override;
  // Rows at different positions in one step (continuous batching): row b's S tokens ids[b] go at
  // positions row_pos[b].., and row b of `cache` holds row_pos[b] filled slots (cache.len is not
  // read; row_pos[b] = 0 is a row with no past). Same logits as stepping each row alone.
  StepOutput step(const Tensor& ids, const std::vector<int64_t>& row_pos, const KvCache& cache);
  // Compiles the graph step() will use for S new tokens at `pos` with a cache of `cap` slots
  // (0: the prefill graph), so timing a later step() measures running, not compiling.
  void prepare(int64_t B, int64_t S, int64_t pos, int64_t cap);
  // Full-sequence logits [B,S,V] (no cache), for parity checks.
  Tensor forward_all(const Tensor& ids);

 private:
  struct Impl;
  std::vector<Tensor> extra_inputs(int64_t B, int64_t S, int64_t pos, const KvCache* cache, bool bias) const;
  std::vector<Tensor> row_inputs(int64_t S, const std::vector<int64_t>& row_pos, const KvCache& cache, bool bias) const;
  void check_ids(const Tensor& ids) const;
  DecoderWeights w_;
  std::string device_;
  Impl* impl_;
};

}  // namespace rlx::models
