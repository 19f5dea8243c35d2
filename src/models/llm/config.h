// Llama-family decoder configuration: one struct for llama, mistral, qwen2 and qwen3, filled from
// GGUF metadata (`general.architecture` + `<arch>.*` keys) or a Hugging Face config.json. The
// per-architecture differences (q/k norm, QKV bias, sliding window, RoPE layout) are data in
// `ArchSpec`, read by one graph builder (decoder.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace rlx::gguf {
class File;
}

namespace rlx::models {

// What an architecture adds to the plain llama block.
struct ArchSpec {
  const char* name;       // general.architecture / config.json model_type
  bool qk_norm;           // per-head RMSNorm on q and k before RoPE (qwen3)
  bool qkv_bias;          // q/k/v projections carry a bias (qwen2)
  bool sliding_window;    // attention limited to the last `sliding_window` keys (mistral)
  bool gguf_interleaved;  // GGUF files of this arch store q/k rows for interleaved-pair RoPE
};
// The supported architectures, or nullptr.
const ArchSpec* find_arch(const std::string& name);
std::string supported_arch_names();  // "llama, mistral, qwen2, qwen3"

struct DecoderConfig {
  std::string arch;  // a name from find_arch
  int64_t vocab = 0, hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, intermediate = 0;
  int64_t context = 0;  // positions the model was trained for; 0: not stated
  double rope_theta = 10000, rms_eps = 1e-6;
  bool tied = false;
  bool attention_bias = false;  // q/k/v bias present
  bool qk_norm = false;
  bool rope_interleaved = false;  // pairs (2i, 2i+1) rotate together (GGUF llama); else rotate-half
  int64_t sliding_window = 0;     // 0: full causal attention
  // RoPE scaling. "none" | "linear" | "llama3"; factors as in HF `rope_scaling`.
  std::string rope_scaling = "none";
  double rope_factor = 1, rope_low_freq = 1, rope_high_freq = 4;
  int64_t rope_original_context = 0;
  // Per-dimension divisors of the RoPE frequencies (GGUF `rope_freqs.weight`, Llama 3); empty: none.
  std::vector<float> rope_freq_factors;

  // The D/2 inverse frequencies RoPE uses, scaling applied.
  std::vector<double> inv_freq() const;
  // True when inv_freq() is theta^(-2i/D) exactly, so the native rope op applies.
  bool plain_rope() const { return rope_scaling == "none" && rope_freq_factors.empty(); }
};

// Empty when `arch` (with these metadata keys) can run; otherwise the reason, for `rlx inspect`.
std::string gguf_support(const gguf::File& g);
DecoderConfig config_from_gguf(const gguf::File& g, const std::string& file);
DecoderConfig config_from_hf(const std::string& dir);
// config.json in a directory, or a .gguf header (no weights read).
DecoderConfig read_decoder_config(const std::string& path);
bool is_gguf_path(const std::string& path);

}  // namespace rlx::models
