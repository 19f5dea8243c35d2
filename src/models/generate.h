// Autoregressive generation for decoder LMs: a preallocated KV cache (no re-prefill per token) and
// seeded sampling (greedy, temperature, top-k, top-p).
#pragma once
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "rlx/tensor.h"

namespace rlx::models {

// Per layer K and V, f32 [B, Hkv, capacity, D]; positions [0, len) are filled.
struct KvCache {
  int64_t batch = 0, capacity = 0, len = 0;
  std::vector<Tensor> k, v;
  KvCache() = default;
  KvCache(int64_t layers, int64_t batch, int64_t kv_heads, int64_t capacity, int64_t head_dim);
  // Appends new_k/new_v [B, Hkv, S, D] of every layer at position len (len += S).
  void append(const std::vector<Tensor>& new_k, const std::vector<Tensor>& new_v);
  // f32 [B, capacity + S]: 1 for cached positions < len, 1 for the S new ones, 0 otherwise.
  Tensor keep_mask(int64_t S) const;
  // Row-wise use, rows at different lengths (continuous batching; `len` is not used): writes row
  // `src_row` of new_k/new_v [B', Hkv, S, D] into row `row` at slots [at, at + S).
  void write_row(int64_t row, int64_t at, const std::vector<Tensor>& new_k, const std::vector<Tensor>& new_v,
                 int64_t src_row = 0);
  // Copies slots [0, n) of row `src_row` of `src` (same layers, heads, head size) into row `row`.
  void copy_row(int64_t row, const KvCache& src, int64_t src_row, int64_t n);
  // The first `rows` rows, sharing these bytes (no copy).
  KvCache first_rows(int64_t rows) const;
};

struct StepOutput {
  Tensor logits;                   // f32 [B, V] of the last new position
  std::vector<Tensor> new_k, new_v;  // per layer [B, Hkv, S, D]
};

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  virtual int64_t num_layers() const = 0;
  virtual int64_t kv_heads() const = 0;
  virtual int64_t head_dim() const = 0;
  virtual int64_t vocab() const = 0;
  // Runs ids i64 [B,S] at positions pos..pos+S-1 against `cache` (nullptr: no past).
  virtual StepOutput step(const Tensor& ids, int64_t pos, const KvCache* cache) = 0;
};

struct SamplingOptions {
  double temperature = 0;  // 0 = greedy
  int64_t top_k = 0;       // 0 = all
  double top_p = 1.0;      // nucleus mass
  double min_p = 0;        // drop tokens below min_p x the top token's probability
  double repeat_penalty = 1.0;  // > 1 discourages tokens seen in the last repeat_last_n
  int64_t repeat_last_n = 64;
  uint64_t seed = 0;
};

// Divides positive (multiplies negative) logits of tokens in `recent` by `penalty` (CTRL-style).
void apply_repeat_penalty(float* logits, int64_t V, const std::vector<int64_t>& recent, double penalty);

// Picks a token from logits[0..V). Greedy when temperature is 0 (lowest index on ties).
int64_t sample_token(const float* logits, int64_t V, const SamplingOptions& o, std::mt19937_64& rng);

struct GenerateStats {
  double compile_ms = 0;  // compiling the prefill and decode graphs ahead (text sessions), not in the others
  double prefill_ms = 0, decode_ms = 0;
  int64_t decode_tokens = 0;  // tokens produced by decode steps (excludes the prefill's one)
  double decode_tokens_per_s() const { return decode_ms > 0 ? decode_tokens * 1000.0 / decode_ms : 0; }
};

// Called with (row, token) as each token is chosen; returning false stops generation.
using TokenCallback = std::function<bool(int64_t, int64_t)>;

// prompts: B rows of equal length. Returns B rows of up to max_new generated ids (stops early per
// row at eos when eos >= 0, or at any id in `stop`; finished rows are padded with eos).
std::vector<std::vector<int64_t>> generate(CausalLM& m, const std::vector<std::vector<int64_t>>& prompts,
                                           int64_t max_new, const SamplingOptions& o, int64_t eos = -1,
                                           GenerateStats* stats = nullptr, const TokenCallback& on_token = {},
                                           const std::vector<int64_t>& stop = {});

}  // namespace rlx::models
