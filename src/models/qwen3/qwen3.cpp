// Qwen3 weights loading (HF safetensors, GGUF) and the per-step HIR graph.
#include "models/qwen3/qwen3.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "quant/blocks.h"
#include "rlx/builder.h"
#include "rlx/gguf.h"
#include "rlx/safetensors.h"
#include "rlx/session.h"

namespace rlx::models {

namespace fs = std::filesystem;

namespace {

// f32 copy-free when already f32 (the mmap view is kept); otherwise converted.
Tensor as_f32(const Tensor& t) {
  if (t.dtype() == DType::f32) return t;
  Tensor o(DType::f32, t.shape());
  float* d = o.data<float>();
  int64_t n = t.numel();
  if (t.dtype() == DType::f16)
    for (int64_t i = 0; i < n; ++i) d[i] = f16_to_f32(t.data<uint16_t>()[i]);
  else if (t.dtype() == DType::bf16)
    for (int64_t i = 0; i < n; ++i) d[i] = bf16_to_f32(t.data<uint16_t>()[i]);
  else
    for (int64_t i = 0; i < n; ++i) d[i] = static_cast<float>(t.get(i));
  return o;
}

Weight dense_weight(const Tensor& t) {
  RLX_CHECK(t.rank() == 2, "[qwen3] projection weight must be rank 2");
  Weight w;
  w.dense = as_f32(t);
  w.out = t.shape()[0];
  w.in = t.shape()[1];
  return w;
}

void check_config(const Qwen3Config& c, const std::string& src) {
  RLX_CHECK(c.vocab > 0 && c.hidden > 0 && c.layers > 0 && c.heads > 0 && c.kv_heads > 0 && c.head_dim > 0 &&
                c.intermediate > 0,
            "[qwen3] ", src, ": incomplete config (vocab ", c.vocab, ", hidden ", c.hidden, ", layers ", c.layers,
            ", heads ", c.heads, "/", c.kv_heads, ", head_dim ", c.head_dim, ")");
  RLX_CHECK(c.heads % c.kv_heads == 0, "[qwen3] ", src, ": heads ", c.heads, " not a multiple of kv heads ", c.kv_heads);
  RLX_CHECK(c.head_dim % 2 == 0, "[qwen3] ", src, ": head_dim must be even for RoPE");
}

Qwen3Config hf_config(const std::string& dir) {
  fs::path cfg_path = fs::path(dir) / "config.json";
  std::ifstream f(cfg_path);
  RLX_CHECK(f.good(), "[qwen3] ", cfg_path.string(), ": cannot open");
  nlohmann::json j;
  try {
    f >> j;
  } catch (const std::exception& e) {
    fail("[qwen3] ", cfg_path.string(), ": bad JSON: ", e.what());
  }
  Qwen3Config c;
  auto geti = [&](const char* k, int64_t def) { return j.contains(k) && !j[k].is_null() ? j[k].get<int64_t>() : def; };
  c.vocab = geti("vocab_size", 0);
  c.hidden = geti("hidden_size", 0);
  c.layers = geti("num_hidden_layers", 0);
  c.heads = geti("num_attention_heads", 0);
  c.kv_heads = geti("num_key_value_heads", c.heads);
  c.head_dim = geti("head_dim", c.heads ? c.hidden / c.heads : 0);
  c.intermediate = geti("intermediate_size", 0);
  c.context = geti("max_position_embeddings", 0);
  if (j.contains("rope_theta")) c.rope_theta = j["rope_theta"].get<double>();
  else if (j.contains("rope_parameters") && j["rope_parameters"].contains("rope_theta"))
    c.rope_theta = j["rope_parameters"]["rope_theta"].get<double>();
  if (j.contains("rms_norm_eps")) c.rms_eps = j["rms_norm_eps"].get<double>();
  c.tied = j.value("tie_word_embeddings", false);
  c.attention_bias = j.value("attention_bias", false);
  check_config(c, cfg_path.string());
  return c;
}

Qwen3Config gguf_config(const gguf::File& g, const std::string& file) {
  std::string arch = g.get_str("general.architecture", "");
  RLX_CHECK(arch == "qwen3", "[qwen3] ", file, ": general.architecture is '", arch, "', expected 'qwen3'");
  Qwen3Config c;
  c.hidden = g.get_int("qwen3.embedding_length", 0);
  c.layers = g.get_int("qwen3.block_count", 0);
  c.heads = g.get_int("qwen3.attention.head_count", 0);
  c.kv_heads = g.get_int("qwen3.attention.head_count_kv", c.heads);
  c.head_dim = g.get_int("qwen3.attention.key_length", c.heads ? c.hidden / c.heads : 0);
  c.intermediate = g.get_int("qwen3.feed_forward_length", 0);
  c.context = g.get_int("qwen3.context_length", 0);
  c.rope_theta = g.get_float("qwen3.rope.freq_base", 1e6);
  c.rms_eps = g.get_float("qwen3.attention.layer_norm_rms_epsilon", 1e-6);
  const gguf::TensorInfo* emb = g.tensor("token_embd.weight");
  RLX_CHECK(emb, "[qwen3] ", file, ": missing tensor 'token_embd.weight'");
  c.vocab = emb->ne.size() == 2 ? emb->ne[1] : 0;
  check_config(c, file);
  return c;
}

bool is_gguf(const std::string& path) { return path.size() > 5 && path.substr(path.size() - 5) == ".gguf"; }

}  // namespace

Qwen3Config read_qwen3_config(const std::string& path) {
  if (is_gguf(path)) return gguf_config(gguf::File::open(path), path);
  RLX_CHECK(fs::is_directory(path), "[qwen3] ", path, ": expected a model directory (config.json + *.safetensors) or a .gguf file");
  return hf_config(path);
}

Qwen3Weights load_qwen3_hf(const std::string& dir) {
  Qwen3Weights w;
  w.cfg = hf_config(dir);
  Qwen3Config& c = w.cfg;

  std::map<std::string, Tensor> t;
  std::vector<fs::path> files;
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") files.push_back(e.path());
  RLX_CHECK(!files.empty(), "[qwen3] ", dir, ": no *.safetensors files");
  for (auto& p : files) {
    SafeTensors st = SafeTensors::open(p.string());
    for (auto& n : st.names()) t[n] = st.get(n);
  }
  auto get = [&](const std::string& n) -> const Tensor& {
    auto it = t.find(n);
    RLX_CHECK(it != t.end(), "[qwen3] ", dir, ": missing tensor '", n, "'");
    return it->second;
  };
  w.embed = as_f32(get("model.embed_tokens.weight"));
  RLX_CHECK(w.embed.shape() == std::vector<int64_t>({c.vocab, c.hidden}), "[qwen3] embed_tokens shape mismatch");
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    Qwen3Layer L;
    L.attn_norm = as_f32(get(p + "input_layernorm.weight"));
    L.ffn_norm = as_f32(get(p + "post_attention_layernorm.weight"));
    L.q_norm = as_f32(get(p + "self_attn.q_norm.weight"));
    L.k_norm = as_f32(get(p + "self_attn.k_norm.weight"));
    L.q = dense_weight(get(p + "self_attn.q_proj.weight"));
    L.k = dense_weight(get(p + "self_attn.k_proj.weight"));
    L.v = dense_weight(get(p + "self_attn.v_proj.weight"));
    L.o = dense_weight(get(p + "self_attn.o_proj.weight"));
    L.gate = dense_weight(get(p + "mlp.gate_proj.weight"));
    L.up = dense_weight(get(p + "mlp.up_proj.weight"));
    L.down = dense_weight(get(p + "mlp.down_proj.weight"));
    if (c.attention_bias) {
      L.q_bias = as_f32(get(p + "self_attn.q_proj.bias"));
      L.k_bias = as_f32(get(p + "self_attn.k_proj.bias"));
      L.v_bias = as_f32(get(p + "self_attn.v_proj.bias"));
    }
    w.layers.push_back(std::move(L));
  }
  w.norm = as_f32(get("model.norm.weight"));
  if (!c.tied && t.count("lm_head.weight")) w.lm_head = dense_weight(get("lm_head.weight"));
  else w.lm_head = dense_weight(w.embed), c.tied = true;
  w.source = "safetensors";
  return w;
}

Qwen3Weights load_qwen3_gguf(const std::string& file, const LoadOptions& o) {
  gguf::File g = gguf::File::open(file);
  Qwen3Weights w;
  w.cfg = gguf_config(g, file);
  Qwen3Config& c = w.cfg;
  auto dense = [&](const std::string& n) {
    RLX_CHECK(g.tensor(n), "[qwen3] ", file, ": missing tensor '", n, "'");
    return g.to_f32(n);
  };
  std::map<std::string, int> qcount;
  auto proj = [&](const std::string& n) {
    const gguf::TensorInfo* ti = g.tensor(n);
    RLX_CHECK(ti, "[qwen3] ", file, ": missing tensor '", n, "'");
    RLX_CHECK(ti->ne.size() == 2, "[qwen3] ", file, ": tensor '", n, "' must be 2-D");
    const quant::TypeTraits* tr = quant::type_traits(ti->type);
    qcount[tr->name]++;
    Weight wt;
    wt.in = ti->ne[0];
    wt.out = ti->ne[1];
    if (o.keep_packed && tr->quantized) {
      wt.packed = g.packed(n);
      wt.qtype = tr->name;
    } else {
      wt.dense = g.to_f32(n);
    }
    return wt;
  };
  w.embed = dense("token_embd.weight");
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string p = "blk." + std::to_string(l) + ".";
    Qwen3Layer L;
    L.attn_norm = dense(p + "attn_norm.weight");
    L.ffn_norm = dense(p + "ffn_norm.weight");
    L.q_norm = dense(p + "attn_q_norm.weight");
    L.k_norm = dense(p + "attn_k_norm.weight");
    L.q = proj(p + "attn_q.weight");
    L.k = proj(p + "attn_k.weight");
    L.v = proj(p + "attn_v.weight");
    L.o = proj(p + "attn_output.weight");
    L.gate = proj(p + "ffn_gate.weight");
    L.up = proj(p + "ffn_up.weight");
    L.down = proj(p + "ffn_down.weight");
    if (g.tensor(p + "attn_q.bias")) {
      c.attention_bias = true;
      L.q_bias = dense(p + "attn_q.bias");
      L.k_bias = dense(p + "attn_k.bias");
      L.v_bias = dense(p + "attn_v.bias");
    }
    w.layers.push_back(std::move(L));
  }
  w.norm = dense("output_norm.weight");
  if (g.tensor("output.weight")) {
    w.lm_head = proj("output.weight");
  } else {
    c.tied = true;
    w.lm_head = dense_weight(w.embed);
  }
  w.source = "gguf";
  for (auto& [k, v] : qcount) w.source += " " + k + "x" + std::to_string(v);
  return w;
}

Qwen3Weights load_qwen3(const std::string& path, const LoadOptions& o) {
  if (is_gguf(path)) return load_qwen3_gguf(path, o);
  RLX_CHECK(fs::is_directory(path), "[qwen3] ", path, ": expected a model directory (config.json + *.safetensors) or a .gguf file");
  return load_qwen3_hf(path);
}

namespace {

ValueId project(Builder& b, ValueId x, const Weight& w, const Tensor& bias = {}) {
  ValueId y;
  if (w.is_packed()) {
    y = b.op1(OpKind::DequantMatMul, {x, b.constant(w.packed)}, {{"type", w.qtype}, {"k", w.in}});
  } else {
    y = b.linear(x, b.constant(w.dense));
  }
  if (bias.defined() && bias.numel() > 0) y = b.add(y, b.constant(bias));
  return y;
}

ValueId rms(Builder& b, ValueId x, const Tensor& g, double eps) {
  return b.op1(OpKind::RmsNorm, {x, b.constant(g)}, {{"eps", eps}});
}

}  // namespace

Graph qwen3_step_graph(const Qwen3Weights& w, int64_t B, int64_t S, int64_t cap, bool all_logits) {
  const Qwen3Config& c = w.cfg;
  Graph g;
  Builder b(g);
  ValueId ids = b.input("ids", DType::i64, Shape{B, S});
  ValueId pos = b.input("positions", DType::i64, Shape{S});
  ValueId keep = -1;
  std::vector<ValueId> pk, pv;
  if (cap > 0) {
    keep = b.input("keep", DType::f32, Shape{B, cap + S});
    for (int64_t l = 0; l < c.layers; ++l) {
      pk.push_back(b.input("past_k_" + std::to_string(l), DType::f32, Shape{B, c.kv_heads, cap, c.head_dim}));
      pv.push_back(b.input("past_v_" + std::to_string(l), DType::f32, Shape{B, c.kv_heads, cap, c.head_dim}));
    }
  }
  int64_t H = c.heads, Hk = c.kv_heads, D = c.head_dim;
  ValueId h = b.op1(OpKind::Embedding, {b.constant(w.embed), ids});  // [B,S,hidden]
  std::vector<ValueId> new_k, new_v;
  for (int64_t l = 0; l < c.layers; ++l) {
    const Qwen3Layer& L = w.layers[l];
    b.set_origin("layer" + std::to_string(l));
    ValueId x = rms(b, h, L.attn_norm, c.rms_eps);
    ValueId q = b.reshape(project(b, x, L.q, L.q_bias), Shape{B, S, H, D});
    ValueId k = b.reshape(project(b, x, L.k, L.k_bias), Shape{B, S, Hk, D});
    ValueId v = b.reshape(project(b, x, L.v, L.v_bias), Shape{B, S, Hk, D});
    q = b.transpose(rms(b, q, L.q_norm, c.rms_eps), {0, 2, 1, 3});
    k = b.transpose(rms(b, k, L.k_norm, c.rms_eps), {0, 2, 1, 3});
    v = b.transpose(v, {0, 2, 1, 3});
    q = b.op1(OpKind::Rope, {q, pos}, {{"theta", c.rope_theta}, {"interleaved", int64_t{0}}});
    k = b.op1(OpKind::Rope, {k, pos}, {{"theta", c.rope_theta}, {"interleaved", int64_t{0}}});
    new_k.push_back(k);
    new_v.push_back(v);
    ValueId a;
    if (cap > 0) {
      ValueId ka = b.op1(OpKind::Concatenate, {pk[l], k}, {{"axis", int64_t{2}}});
      ValueId va = b.op1(OpKind::Concatenate, {pv[l], v}, {{"axis", int64_t{2}}});
      a = b.attention(q, ka, va, keep, "causal_padding");
    } else {
      a = b.attention(q, k, v, -1, "causal");
    }
    a = b.reshape(b.transpose(a, {0, 2, 1, 3}), Shape{B, S, H * D});
    h = b.add(h, project(b, a, L.o));
    ValueId y = rms(b, h, L.ffn_norm, c.rms_eps);
    ValueId gate = b.op1(OpKind::Silu, {project(b, y, L.gate)});
    h = b.add(h, project(b, b.mul(gate, project(b, y, L.up)), L.down));
  }
  b.set_origin("head");
  if (!all_logits) {
    h = b.op1(OpKind::Slice, {h}, {{"start", std::vector<int64_t>{0, S - 1, 0}}, {"limit", std::vector<int64_t>{B, S, c.hidden}}});
    h = b.reshape(h, Shape{B, c.hidden});
  }
  h = rms(b, h, w.norm, c.rms_eps);
  b.output(project(b, h, w.lm_head));
  for (int64_t l = 0; l < c.layers; ++l) {
    b.output(new_k[l]);
    b.output(new_v[l]);
  }
  return g;
}

struct Qwen3Model::Impl {
  std::map<std::tuple<int64_t, int64_t, int64_t, bool>, std::unique_ptr<CompiledModel>> cache;
  CompiledModel& get(const Qwen3Weights& w, const std::string& dev, int64_t B, int64_t S, int64_t cap, bool all) {
    auto key = std::make_tuple(B, S, cap, all);
    auto it = cache.find(key);
    if (it != cache.end()) return *it->second;
    CompileOptions o;
    o.device = dev;
    auto m = std::make_unique<CompiledModel>(qwen3_step_graph(w, B, S, cap, all), o);
    return *cache.emplace(key, std::move(m)).first->second;
  }
};

Qwen3Model::Qwen3Model(Qwen3Weights w, std::string device) : w_(std::move(w)), device_(std::move(device)), impl_(new Impl) {}
Qwen3Model::~Qwen3Model() { delete impl_; }

static Tensor positions(int64_t pos, int64_t S) {
  Tensor p(DType::i64, {S});
  for (int64_t i = 0; i < S; ++i) p.data<int64_t>()[i] = pos + i;
  return p;
}

StepOutput Qwen3Model::step(const Tensor& ids, int64_t pos, const KvCache* cache) {
  RLX_CHECK(ids.dtype() == DType::i64 && ids.rank() == 2, "[qwen3] ids must be i64 [B,S]");
  int64_t B = ids.shape()[0], S = ids.shape()[1];
  for (int64_t i = 0; i < ids.numel(); ++i) {
    int64_t t = ids.data<int64_t>()[i];
    RLX_CHECK(t >= 0 && t < w_.cfg.vocab, "[qwen3] token id ", t, " out of range [0, ", w_.cfg.vocab, ")");
  }
  // A cache with nothing in it runs the plain causal prefill graph.
  bool use_cache = cache && cache->len > 0;
  RLX_CHECK(!use_cache || cache->len == pos, "[qwen3] step position ", pos, " but cache holds ", cache ? cache->len : 0);
  int64_t cap = use_cache ? cache->capacity : 0;
  CompiledModel& m = impl_->get(w_, device_, B, S, cap, false);
  std::vector<Tensor> in = {ids, positions(pos, S)};
  if (use_cache) {
    in.push_back(cache->keep_mask(S));
    for (int64_t l = 0; l < w_.cfg.layers; ++l) {
      in.push_back(cache->k[l]);
      in.push_back(cache->v[l]);
    }
  }
  auto out = m.run(in);
  StepOutput so;
  so.logits = out[0];
  for (int64_t l = 0; l < w_.cfg.layers; ++l) {
    so.new_k.push_back(out[1 + 2 * l]);
    so.new_v.push_back(out[2 + 2 * l]);
  }
  return so;
}

Tensor Qwen3Model::forward_all(const Tensor& ids) {
  int64_t B = ids.shape()[0], S = ids.shape()[1];
  CompiledModel& m = impl_->get(w_, device_, B, S, 0, true);
  return m.run(std::vector<Tensor>{ids, positions(0, S)})[0];
}

}  // namespace rlx::models
