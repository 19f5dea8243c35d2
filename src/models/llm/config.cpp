// Architecture table and config readers (GGUF metadata, HF config.json).
#include "models/llm/config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "rlx/error.h"
#include "rlx/gguf.h"

namespace rlx::models {

namespace fs = std::filesystem;

namespace {

// llama.cpp converts llama/mistral q/k weights for interleaved RoPE; qwen2/qwen3 keep rotate-half.
constexpr ArchSpec kArchs[] = {
    {"llama", false, false, false, true},
    {"mistral", false, false, true, true},
    {"qwen2", false, true, false, false},
    {"qwen3", true, false, false, false},
};

void check_config(const DecoderConfig& c, const std::string& src) {
  RLX_CHECK(c.vocab > 0 && c.hidden > 0 && c.layers > 0 && c.heads > 0 && c.kv_heads > 0 && c.head_dim > 0 &&
                c.intermediate > 0,
            "[llm] ", src, ": incomplete config (vocab ", c.vocab, ", hidden ", c.hidden, ", layers ", c.layers,
            ", heads ", c.heads, "/", c.kv_heads, ", head_dim ", c.head_dim, ", ffn ", c.intermediate, ")");
  RLX_CHECK(c.heads % c.kv_heads == 0, "[llm] ", src, ": heads ", c.heads, " not a multiple of kv heads ", c.kv_heads);
  RLX_CHECK(c.head_dim % 2 == 0, "[llm] ", src, ": head_dim must be even for RoPE");
  RLX_CHECK(c.rope_freq_factors.empty() || static_cast<int64_t>(c.rope_freq_factors.size()) == c.head_dim / 2,
            "[llm] ", src, ": rope_freqs has ", c.rope_freq_factors.size(), " entries, expected head_dim/2 = ",
            c.head_dim / 2);
}

}  // namespace

const ArchSpec* find_arch(const std::string& name) {
  for (const ArchSpec& a : kArchs)
    if (name == a.name) return &a;
  return nullptr;
}

std::string supported_arch_names() {
  std::string s;
  for (const ArchSpec& a : kArchs) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

std::vector<double> DecoderConfig::inv_freq() const {
  int64_t half = head_dim / 2;
  std::vector<double> f(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) f[i] = std::pow(rope_theta, -2.0 * static_cast<double>(i) / head_dim);
  if (rope_scaling == "linear") {
    for (double& x : f) x /= rope_factor;
  } else if (rope_scaling == "llama3") {
    // Long wavelengths are slowed by `factor`, short ones kept, the band between interpolated.
    double old_ctx = static_cast<double>(rope_original_context);
    double low_wl = old_ctx / rope_low_freq, high_wl = old_ctx / rope_high_freq;
    for (double& x : f) {
      double wl = 2 * M_PI / x;
      if (wl > low_wl) {
        x /= rope_factor;
      } else if (wl >= high_wl) {
        double s = (old_ctx / wl - rope_low_freq) / (rope_high_freq - rope_low_freq);
        x = (1 - s) * x / rope_factor + s * x;
      }
    }
  }
  for (size_t i = 0; i < rope_freq_factors.size() && i < f.size(); ++i) f[i] /= rope_freq_factors[i];
  return f;
}

std::string gguf_support(const gguf::File& g) {
  std::string arch = g.get_str("general.architecture", "");
  if (arch.empty()) return "no general.architecture key";
  if (!find_arch(arch)) return "architecture '" + arch + "' is not one of " + supported_arch_names();
  std::string p = arch + ".";
  for (const char* k : {"embedding_length", "block_count", "feed_forward_length", "attention.head_count"})
    if (!g.find(p + k)) return "missing metadata key " + p + k;
  if (!g.tensor("token_embd.weight")) return "missing tensor token_embd.weight";
  int64_t heads = g.get_int(p + "attention.head_count", 0);
  int64_t hd = g.get_int(p + "attention.key_length", heads ? g.get_int(p + "embedding_length", 0) / heads : 0);
  int64_t rot = g.get_int(p + "rope.dimension_count", hd);
  if (rot != hd) return "partial RoPE (rope.dimension_count " + std::to_string(rot) + " < head dim " + std::to_string(hd) + ")";
  if (g.find(p + "expert_count") && g.get_int(p + "expert_count", 0) > 0) return "mixture-of-experts layers";
  std::string sc = g.get_str(p + "rope.scaling.type", "none");
  if (sc != "none" && sc != "linear") return "RoPE scaling '" + sc + "'";
  return "";
}

DecoderConfig config_from_gguf(const gguf::File& g, const std::string& file) {
  std::string why = gguf_support(g);
  RLX_CHECK(why.empty(), "[llm] ", file, ": unsupported model: ", why);
  DecoderConfig c;
  c.arch = g.get_str("general.architecture", "");
  const ArchSpec* a = find_arch(c.arch);
  std::string p = c.arch + ".";
  c.hidden = g.get_int(p + "embedding_length", 0);
  c.layers = g.get_int(p + "block_count", 0);
  c.heads = g.get_int(p + "attention.head_count", 0);
  c.kv_heads = g.get_int(p + "attention.head_count_kv", c.heads);
  c.head_dim = g.get_int(p + "attention.key_length", c.heads ? c.hidden / c.heads : 0);
  c.intermediate = g.get_int(p + "feed_forward_length", 0);
  c.context = g.get_int(p + "context_length", 0);
  c.rope_theta = g.get_float(p + "rope.freq_base", 10000);
  c.rms_eps = g.get_float(p + "attention.layer_norm_rms_epsilon", 1e-6);
  c.qk_norm = a->qk_norm;
  c.rope_interleaved = a->gguf_interleaved;
  if (a->sliding_window) c.sliding_window = g.get_int(p + "attention.sliding_window", 0);
  if (g.get_str(p + "rope.scaling.type", "none") == "linear") {
    c.rope_scaling = "linear";
    c.rope_factor = g.get_float(p + "rope.scaling.factor", 1);
  }
  if (g.tensor("rope_freqs.weight")) {
    Tensor f = g.to_f32("rope_freqs.weight");
    c.rope_freq_factors.assign(f.data<float>(), f.data<float>() + f.numel());
  }
  const gguf::TensorInfo* emb = g.tensor("token_embd.weight");
  c.vocab = emb->ne.size() == 2 ? emb->ne[1] : 0;
  c.attention_bias = g.tensor("blk.0.attn_q.bias") != nullptr;
  c.tied = g.tensor("output.weight") == nullptr;
  check_config(c, file);
  return c;
}

DecoderConfig config_from_hf(const std::string& dir) {
  fs::path cfg_path = fs::path(dir) / "config.json";
  std::ifstream f(cfg_path);
  RLX_CHECK(f.good(), "[llm] ", cfg_path.string(), ": cannot open");
  nlohmann::json j;
  try {
    f >> j;
  } catch (const std::exception& e) {
    fail("[llm] ", cfg_path.string(), ": bad JSON: ", e.what());
  }
  std::string src = cfg_path.string();
  DecoderConfig c;
  c.arch = j.value("model_type", std::string());
  const ArchSpec* a = find_arch(c.arch);
  RLX_CHECK(a, "[llm] ", src, ": model_type '", c.arch, "' is not one of ", supported_arch_names());
  try {
    auto geti = [&](const char* k, int64_t def) { return j.contains(k) && !j[k].is_null() ? j[k].get<int64_t>() : def; };
    c.vocab = geti("vocab_size", 0);
    c.hidden = geti("hidden_size", 0);
    c.layers = geti("num_hidden_layers", 0);
    c.heads = geti("num_attention_heads", 0);
    c.kv_heads = geti("num_key_value_heads", c.heads);
    c.head_dim = geti("head_dim", c.heads ? c.hidden / c.heads : 0);
    c.intermediate = geti("intermediate_size", 0);
    c.context = geti("max_position_embeddings", 0);
    const nlohmann::json* rp = j.contains("rope_parameters") && j["rope_parameters"].is_object() ? &j["rope_parameters"] : nullptr;
    if (j.contains("rope_theta") && !j["rope_theta"].is_null()) c.rope_theta = j["rope_theta"].get<double>();
    else if (rp && rp->contains("rope_theta")) c.rope_theta = (*rp)["rope_theta"].get<double>();
    if (j.contains("rms_norm_eps")) c.rms_eps = j["rms_norm_eps"].get<double>();
    c.tied = j.value("tie_word_embeddings", false);
    c.qk_norm = a->qk_norm;
    c.attention_bias = a->qkv_bias || (j.contains("attention_bias") && j["attention_bias"].get<bool>());
    if (a->sliding_window && j.contains("sliding_window") && !j["sliding_window"].is_null())
      c.sliding_window = j["sliding_window"].get<int64_t>();
    if (c.arch == "qwen2" && j.value("use_sliding_window", false))
      fail("[llm] ", src, ": qwen2 use_sliding_window is not supported");
    const nlohmann::json* rs = j.contains("rope_scaling") && j["rope_scaling"].is_object() ? &j["rope_scaling"] : nullptr;
    if (!rs && rp && rp->contains("rope_type")) rs = rp;
    if (rs) {
      std::string type = rs->value("rope_type", rs->value("type", std::string("default")));
      if (type == "llama3" || type == "linear") {
        c.rope_scaling = type;
        c.rope_factor = rs->value("factor", 1.0);
        c.rope_low_freq = rs->value("low_freq_factor", 1.0);
        c.rope_high_freq = rs->value("high_freq_factor", 4.0);
        c.rope_original_context = rs->value("original_max_position_embeddings", int64_t{8192});
      } else if (type != "default") {
        fail("[llm] ", src, ": rope_scaling type '", type, "' is not supported (default, linear, llama3)");
      }
    }
  } catch (const nlohmann::json::exception& e) {
    fail("[llm] ", src, ": bad config value: ", e.what());
  }
  check_config(c, src);
  return c;
}

bool is_gguf_path(const std::string& path) { return path.size() > 5 && path.substr(path.size() - 5) == ".gguf"; }

DecoderConfig read_decoder_config(const std::string& path) {
  if (is_gguf_path(path)) return config_from_gguf(gguf::File::open(path), path);
  RLX_CHECK(fs::is_directory(path), "[llm] ", path,
            ": expected a model directory (config.json + *.safetensors) or a .gguf file");
  return config_from_hf(path);
}

}  // namespace rlx::models
