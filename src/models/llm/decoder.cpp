// Decoder weights loading (HF safetensors, GGUF), the per-step HIR graph, and the CausalLM adapter.
#include "models/llm/decoder.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <tuple>

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
  RLX_CHECK(t.rank() == 2, "[llm] projection weight must be rank 2");
  Weight w;
  w.dense = as_f32(t);
  w.out = t.shape()[0];
  w.in = t.shape()[1];
  return w;
}

std::string dims(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? "," : "") + std::to_string(s[i]);
  return o + "]";
}

void check_shape(const Tensor& t, std::vector<int64_t> want, const std::string& what) {
  RLX_CHECK(t.shape() == want, "[llm] ", what, ": shape ", dims(t.shape()), ", expected ", dims(want));
}

void check_weights(const DecoderWeights& w, const std::string& src) {
  const DecoderConfig& c = w.cfg;
  check_shape(w.embed, {c.vocab, c.hidden}, src + " token embedding");
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const DecoderLayer& L = w.layers[l];
    std::string p = src + " layer " + std::to_string(l) + " ";
    auto proj = [&](const Weight& x, int64_t out, int64_t in, const char* n) {
      RLX_CHECK(x.out == out && x.in == in, "[llm] ", p, n, ": [", x.out, ", ", x.in, "], expected [", out, ", ", in, "]");
    };
    proj(L.q, c.heads * c.head_dim, c.hidden, "q");
    proj(L.k, c.kv_heads * c.head_dim, c.hidden, "k");
    proj(L.v, c.kv_heads * c.head_dim, c.hidden, "v");
    proj(L.o, c.hidden, c.heads * c.head_dim, "o");
    proj(L.gate, c.intermediate, c.hidden, "gate");
    proj(L.up, c.intermediate, c.hidden, "up");
    proj(L.down, c.hidden, c.intermediate, "down");
    check_shape(L.attn_norm, {c.hidden}, p + "attn_norm");
    check_shape(L.ffn_norm, {c.hidden}, p + "ffn_norm");
    if (c.qk_norm) check_shape(L.q_norm, {c.head_dim}, p + "q_norm"), check_shape(L.k_norm, {c.head_dim}, p + "k_norm");
  }
  RLX_CHECK(w.lm_head.out == c.vocab && w.lm_head.in == c.hidden, "[llm] ", src, " lm head: [", w.lm_head.out, ", ",
            w.lm_head.in, "]");
}

}  // namespace

DecoderWeights load_decoder_hf(const std::string& dir) {
  DecoderWeights w;
  w.cfg = config_from_hf(dir);
  DecoderConfig& c = w.cfg;
  std::map<std::string, Tensor> t;
  std::vector<fs::path> files;
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") files.push_back(e.path());
  RLX_CHECK(!files.empty(), "[llm] ", dir, ": no *.safetensors files");
  for (auto& p : files) {
    SafeTensors st = SafeTensors::open(p.string());
    for (auto& n : st.names()) t[n] = st.get(n);
  }
  auto get = [&](const std::string& n) -> const Tensor& {
    auto it = t.find(n);
    RLX_CHECK(it != t.end(), "[llm] ", dir, ": missing tensor '", n, "'");
    return it->second;
  };
  w.embed = as_f32(get("model.embed_tokens.weight"));
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    DecoderLayer L;
    L.attn_norm = as_f32(get(p + "input_layernorm.weight"));
    L.ffn_norm = as_f32(get(p + "post_attention_layernorm.weight"));
    if (c.qk_norm) {
      L.q_norm = as_f32(get(p + "self_attn.q_norm.weight"));
      L.k_norm = as_f32(get(p + "self_attn.k_norm.weight"));
    }
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
  check_weights(w, dir);
  return w;
}

DecoderWeights load_decoder_gguf(const std::string& file, const LoadOptions& o) {
  gguf::File g = gguf::File::open(file);
  DecoderWeights w;
  w.cfg = config_from_gguf(g, file);
  DecoderConfig& c = w.cfg;
  auto dense = [&](const std::string& n) {
    RLX_CHECK(g.tensor(n), "[llm] ", file, ": missing tensor '", n, "'");
    return g.to_f32(n);
  };
  std::map<std::string, int> qcount;
  auto proj = [&](const std::string& n) {
    const gguf::TensorInfo* ti = g.tensor(n);
    RLX_CHECK(ti, "[llm] ", file, ": missing tensor '", n, "'");
    RLX_CHECK(ti->ne.size() == 2, "[llm] ", file, ": tensor '", n, "' must be 2-D");
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
    DecoderLayer L;
    L.attn_norm = dense(p + "attn_norm.weight");
    L.ffn_norm = dense(p + "ffn_norm.weight");
    if (c.qk_norm) {
      L.q_norm = dense(p + "attn_q_norm.weight");
      L.k_norm = dense(p + "attn_k_norm.weight");
    }
    L.q = proj(p + "attn_q.weight");
    L.k = proj(p + "attn_k.weight");
    L.v = proj(p + "attn_v.weight");
    L.o = proj(p + "attn_output.weight");
    L.gate = proj(p + "ffn_gate.weight");
    L.up = proj(p + "ffn_up.weight");
    L.down = proj(p + "ffn_down.weight");
    if (c.attention_bias) {
      L.q_bias = dense(p + "attn_q.bias");
      L.k_bias = dense(p + "attn_k.bias");
      L.v_bias = dense(p + "attn_v.bias");
    }
    w.layers.push_back(std::move(L));
  }
  w.norm = dense("output_norm.weight");
  // A tied head reads the embedding's blocks when they are kept packed: the f32 copy the gather
  // uses is ~3.8x the bytes of Q8_0, and the head is the largest product of a decode step.
  const quant::TypeTraits* et = quant::type_traits(g.tensor("token_embd.weight")->type);
  if (!c.tied) w.lm_head = proj("output.weight");
  else if (o.keep_packed && et && et->quantized) w.lm_head = proj("token_embd.weight");
  else w.lm_head = dense_weight(w.embed);
  w.source = "gguf";
  for (auto& [k, v] : qcount) w.source += " " + k + "x" + std::to_string(v);
  check_weights(w, file);
  return w;
}

DecoderWeights load_decoder(const std::string& path, const LoadOptions& o) {
  if (is_gguf_path(path)) return load_decoder_gguf(path, o);
  RLX_CHECK(fs::is_directory(path), "[llm] ", path,
            ": expected a model directory (config.json + *.safetensors) or a .gguf file");
  return load_decoder_hf(path);
}

namespace {

ValueId project(Builder& b, ValueId x, const Weight& w, const Tensor& bias = {}) {
  ValueId y = w.is_packed() ? b.op1(OpKind::DequantMatMul, {x, b.constant(w.packed)}, {{"type", w.qtype}, {"k", w.in}})
                            : b.linear(x, b.constant(w.dense));
  if (bias.defined() && bias.numel() > 0) y = b.add(y, b.constant(bias));
  return y;
}

ValueId rms(Builder& b, ValueId x, const Tensor& g, double eps) {
  return b.op1(OpKind::RmsNorm, {x, b.constant(g)}, {{"eps", eps}});
}

ValueId slice_last(Builder& b, ValueId x, const std::vector<int64_t>& shape, int64_t start, int64_t stop) {
  std::vector<int64_t> st(shape.size(), 0), lim = shape;
  st.back() = start;
  lim.back() = stop;
  return b.op1(OpKind::Slice, {x}, {{"start", st}, {"limit", lim}});
}

// RoPE from host-computed cos/sin [S, D/2] (scaled frequencies): x [B,H,S,D].
ValueId rope_table(Builder& b, ValueId x, ValueId cos, ValueId sin, int64_t B, int64_t H, int64_t S, int64_t D,
                   bool interleaved) {
  int64_t h = D / 2;
  ValueId x1, x2;
  if (interleaved) {
    ValueId p = b.reshape(x, Shape{B, H, S, h, 2});
    x1 = b.reshape(slice_last(b, p, {B, H, S, h, 2}, 0, 1), Shape{B, H, S, h});
    x2 = b.reshape(slice_last(b, p, {B, H, S, h, 2}, 1, 2), Shape{B, H, S, h});
  } else {
    x1 = slice_last(b, x, {B, H, S, D}, 0, h);
    x2 = slice_last(b, x, {B, H, S, D}, h, D);
  }
  ValueId o1 = b.sub(b.mul(x1, cos), b.mul(x2, sin));
  ValueId o2 = b.add(b.mul(x2, cos), b.mul(x1, sin));
  if (!interleaved) return b.op1(OpKind::Concatenate, {o1, o2}, {{"axis", int64_t{3}}});
  o1 = b.reshape(o1, Shape{B, H, S, h, 1});
  o2 = b.reshape(o2, Shape{B, H, S, h, 1});
  return b.reshape(b.op1(OpKind::Concatenate, {o1, o2}, {{"axis", int64_t{4}}}), Shape{B, H, S, D});
}

// A step's outputs: logits, then each layer's new K and V.
StepOutput step_output(std::vector<Tensor> out, int64_t layers) {
  StepOutput so;
  so.logits = std::move(out[0]);
  for (int64_t l = 0; l < layers; ++l) {
    so.new_k.push_back(std::move(out[1 + 2 * l]));
    so.new_v.push_back(std::move(out[2 + 2 * l]));
  }
  return so;
}

}  // namespace

Graph decoder_step_graph(const DecoderWeights& w, int64_t B, int64_t S, int64_t cap, bool all_logits,
                         bool window_bias, bool per_row) {
  const DecoderConfig& c = w.cfg;
  Graph g;
  Builder b(g);
  int64_t H = c.heads, Hk = c.kv_heads, D = c.head_dim, T = cap + S;
  ValueId ids = b.input("ids", DType::i64, Shape{B, S});
  ValueId pos = per_row ? -1 : b.input("positions", DType::i64, Shape{S});
  ValueId cos = -1, sin = -1, mask = -1;
  const bool table = per_row || !c.plain_rope();
  if (table) {
    Shape ts = per_row ? Shape{B, 1, S, D / 2} : Shape{S, D / 2};
    cos = b.input("rope_cos", DType::f32, ts);
    sin = b.input("rope_sin", DType::f32, ts);
  }
  if (window_bias) mask = b.input("window_bias", DType::f32, Shape{B, 1, S, T});
  else if (cap > 0) mask = b.input("keep", DType::f32, Shape{B, T});
  std::vector<ValueId> pk, pv;
  for (int64_t l = 0; cap > 0 && l < c.layers; ++l) {
    pk.push_back(b.input("past_k_" + std::to_string(l), DType::f32, Shape{B, Hk, cap, D}));
    pv.push_back(b.input("past_v_" + std::to_string(l), DType::f32, Shape{B, Hk, cap, D}));
  }
  std::string mask_kind = window_bias ? "bias" : cap > 0 ? "causal_padding" : "causal";
  auto rope = [&](ValueId x, int64_t heads) {
    if (!table)
      return b.op1(OpKind::Rope, {x, pos}, {{"theta", c.rope_theta}, {"interleaved", int64_t{c.rope_interleaved}}});
    return rope_table(b, x, cos, sin, B, heads, S, D, c.rope_interleaved);
  };
  ValueId h = b.op1(OpKind::Embedding, {b.constant(w.embed), ids});  // [B,S,hidden]
  std::vector<ValueId> new_k, new_v;
  for (int64_t l = 0; l < c.layers; ++l) {
    const DecoderLayer& L = w.layers[l];
    b.set_origin("layer" + std::to_string(l));
    ValueId x = rms(b, h, L.attn_norm, c.rms_eps);
    ValueId q = b.reshape(project(b, x, L.q, L.q_bias), Shape{B, S, H, D});
    ValueId k = b.reshape(project(b, x, L.k, L.k_bias), Shape{B, S, Hk, D});
    ValueId v = b.reshape(project(b, x, L.v, L.v_bias), Shape{B, S, Hk, D});
    if (c.qk_norm) {
      q = rms(b, q, L.q_norm, c.rms_eps);
      k = rms(b, k, L.k_norm, c.rms_eps);
    }
    q = rope(b.transpose(q, {0, 2, 1, 3}), H);
    k = rope(b.transpose(k, {0, 2, 1, 3}), Hk);
    v = b.transpose(v, {0, 2, 1, 3});
    new_k.push_back(k);
    new_v.push_back(v);
    ValueId ka = k, va = v;
    if (cap > 0) {
      ka = b.op1(OpKind::Concatenate, {pk[l], k}, {{"axis", int64_t{2}}});
      va = b.op1(OpKind::Concatenate, {pv[l], v}, {{"axis", int64_t{2}}});
    }
    ValueId a = b.attention(q, ka, va, mask, mask_kind);
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

struct DecoderModel::Impl {
  std::map<std::tuple<int64_t, int64_t, int64_t, bool, bool, bool>, std::unique_ptr<CompiledModel>> cache;
  std::vector<double> inv_freq;
  std::function<Graph(const Graph&)> transform;
  CompiledModel& get(const DecoderWeights& w, const std::string& dev, int64_t B, int64_t S, int64_t cap, bool all,
                     bool bias, bool per_row = false) {
    auto key = std::make_tuple(B, S, cap, all, bias, per_row);
    auto it = cache.find(key);
    if (it != cache.end()) return *it->second;
    CompileOptions o;
    o.device = dev;
    Graph g = decoder_step_graph(w, B, S, cap, all, bias, per_row);
    auto m = std::make_unique<CompiledModel>(transform ? transform(g) : g, o);
    return *cache.emplace(key, std::move(m)).first->second;
  }
};

DecoderModel::DecoderModel(DecoderWeights w, std::string device)
    : w_(std::move(w)), device_(std::move(device)), impl_(new Impl) {
  impl_->inv_freq = w_.cfg.inv_freq();
}
DecoderModel::~DecoderModel() { delete impl_; }
void DecoderModel::set_graph_transform(std::function<Graph(const Graph&)> f) {
  RLX_CHECK(impl_->cache.empty(), "[llm] set_graph_transform after a step graph was compiled");
  impl_->transform = std::move(f);
}

std::vector<Tensor> DecoderModel::extra_inputs(int64_t B, int64_t S, int64_t pos, const KvCache* cache,
                                               bool bias) const {
  std::vector<Tensor> in;
  Tensor p(DType::i64, {S});
  for (int64_t i = 0; i < S; ++i) p.data<int64_t>()[i] = pos + i;
  in.push_back(p);
  if (!w_.cfg.plain_rope()) {
    int64_t h = w_.cfg.head_dim / 2;
    Tensor cs(DType::f32, {S, h}), sn(DType::f32, {S, h});
    for (int64_t s = 0; s < S; ++s)
      for (int64_t i = 0; i < h; ++i) {
        double a = static_cast<double>(pos + s) * impl_->inv_freq[i];
        cs.data<float>()[s * h + i] = static_cast<float>(std::cos(a));
        sn.data<float>()[s * h + i] = static_cast<float>(std::sin(a));
      }
    in.push_back(cs);
    in.push_back(sn);
  }
  int64_t cap = cache ? cache->capacity : 0, len = cache ? cache->len : 0, T = cap + S;
  if (bias) {
    // Key slot t holds position t (cache, t < len) or len + (t - cap) (new); query s is at len + s.
    Tensor m(DType::f32, {B, 1, S, T});
    float* d = m.data<float>();
    for (int64_t s = 0; s < S; ++s)
      for (int64_t t = 0; t < T; ++t) {
        int64_t kp = t < cap ? (t < len ? t : -1) : len + (t - cap), qp = len + s;
        bool ok = kp >= 0 && kp <= qp && qp - kp < w_.cfg.sliding_window;
        d[s * T + t] = ok ? 0.0f : -1e30f;
      }
    for (int64_t bi = 1; bi < B; ++bi) std::copy(d, d + S * T, d + bi * S * T);
    in.push_back(m);
  } else if (cache) {
    in.push_back(cache->keep_mask(S));
  }
  if (cache)
    for (int64_t l = 0; l < w_.cfg.layers; ++l) {
      in.push_back(cache->k[l]);
      in.push_back(cache->v[l]);
    }
  return in;
}

void DecoderModel::check_ids(const Tensor& ids) const {
  RLX_CHECK(ids.dtype() == DType::i64 && ids.rank() == 2, "[llm] ids must be i64 [B,S]");
  for (int64_t i = 0; i < ids.numel(); ++i) {
    int64_t t = ids.data<int64_t>()[i];
    RLX_CHECK(t >= 0 && t < w_.cfg.vocab, "[llm] token id ", t, " out of range [0, ", w_.cfg.vocab, ")");
  }
}

std::vector<Tensor> DecoderModel::row_inputs(int64_t S, const std::vector<int64_t>& row_pos, const KvCache& cache,
                                             bool bias) const {
  const int64_t B = static_cast<int64_t>(row_pos.size()), h = w_.cfg.head_dim / 2, cap = cache.capacity, T = cap + S;
  std::vector<Tensor> in;
  Tensor cs(DType::f32, {B, 1, S, h}), sn(DType::f32, {B, 1, S, h});
  for (int64_t r = 0; r < B; ++r)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t i = 0; i < h; ++i) {
        double a = static_cast<double>(row_pos[r] + s) * impl_->inv_freq[i];
        cs.data<float>()[(r * S + s) * h + i] = static_cast<float>(std::cos(a));
        sn.data<float>()[(r * S + s) * h + i] = static_cast<float>(std::sin(a));
      }
  in.push_back(cs);
  in.push_back(sn);
  if (bias) {
    // Row r: key slot t holds position t (t < row_pos[r]) or row_pos[r] + (t - cap) (new).
    Tensor m(DType::f32, {B, 1, S, T});
    float* d = m.data<float>();
    for (int64_t r = 0; r < B; ++r) {
      const int64_t len = row_pos[r];
      for (int64_t s = 0; s < S; ++s)
        for (int64_t t = 0; t < T; ++t) {
          int64_t kp = t < cap ? (t < len ? t : -1) : len + (t - cap), qp = len + s;
          bool ok = kp >= 0 && kp <= qp && qp - kp < w_.cfg.sliding_window;
          d[(r * S + s) * T + t] = ok ? 0.0f : -1e30f;
        }
    }
    in.push_back(m);
  } else {
    Tensor m(DType::f32, {B, T});
    for (int64_t r = 0; r < B; ++r) {
      float* row = m.data<float>() + r * T;
      for (int64_t t = 0; t < row_pos[r]; ++t) row[t] = 1;
      for (int64_t t = 0; t < S; ++t) row[cap + t] = 1;
    }
    in.push_back(m);
  }
  for (int64_t l = 0; l < w_.cfg.layers; ++l) {
    in.push_back(cache.k[l]);
    in.push_back(cache.v[l]);
  }
  return in;
}

StepOutput DecoderModel::step(const Tensor& ids, const std::vector<int64_t>& row_pos, const KvCache& cache) {
  check_ids(ids);
  const int64_t B = ids.shape()[0], S = ids.shape()[1];
  RLX_CHECK(static_cast<int64_t>(row_pos.size()) == B && cache.batch == B && cache.capacity > 0 &&
                static_cast<int64_t>(cache.k.size()) == w_.cfg.layers,
            "[llm] per-row step: ", row_pos.size(), " positions and a cache of ", cache.batch, " rows for ", B,
            " rows of ids");
  bool bias = false;
  for (int64_t p : row_pos) {
    RLX_CHECK(p >= 0 && p <= cache.capacity, "[llm] row position ", p, " outside the cache's ", cache.capacity, " slots");
    bias = bias || (w_.cfg.sliding_window > 0 && p + S > w_.cfg.sliding_window);
  }
  CompiledModel& m = impl_->get(w_, device_, B, S, cache.capacity, false, bias, true);
  std::vector<Tensor> in = {ids};
  for (Tensor& t : row_inputs(S, row_pos, cache, bias)) in.push_back(std::move(t));
  return step_output(m.run(in), w_.cfg.layers);
}

StepOutput DecoderModel::step(const Tensor& ids, int64_t pos, const KvCache* cache) {
  check_ids(ids);
  int64_t B = ids.shape()[0], S = ids.shape()[1];
  // A cache with nothing in it runs the plain causal prefill graph.
  bool use_cache = cache && cache->len > 0;
  RLX_CHECK(!use_cache || cache->len == pos, "[llm] step position ", pos, " but cache holds ", cache ? cache->len : 0);
  const KvCache* kc = use_cache ? cache : nullptr;
  int64_t cap = kc ? kc->capacity : 0;
  bool bias = w_.cfg.sliding_window > 0 && pos + S > w_.cfg.sliding_window;
  CompiledModel& m = impl_->get(w_, device_, B, S, cap, false, bias);
  std::vector<Tensor> in = {ids};
  for (Tensor& t : extra_inputs(B, S, pos, kc, bias)) in.push_back(std::move(t));
  return step_output(m.run(in), w_.cfg.layers);
}

void DecoderModel::prepare(int64_t B, int64_t S, int64_t pos, int64_t cap) {
  bool bias = w_.cfg.sliding_window > 0 && pos + S > w_.cfg.sliding_window;
  impl_->get(w_, device_, B, S, pos > 0 ? cap : 0, false, bias).executable();
}

Tensor DecoderModel::forward_all(const Tensor& ids) {
  int64_t B = ids.shape()[0], S = ids.shape()[1];
  bool bias = w_.cfg.sliding_window > 0 && S > w_.cfg.sliding_window;
  CompiledModel& m = impl_->get(w_, device_, B, S, 0, true, bias);
  std::vector<Tensor> in = {ids};
  for (Tensor& t : extra_inputs(B, S, 0, nullptr, bias)) in.push_back(std::move(t));
  return m.run(in)[0];
}

}  // namespace rlx::models
