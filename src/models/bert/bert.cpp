// BERT as HIR: embeddings + LayerNorm, then post-LN encoder layers (attention with a padding mask,
// GELU MLP), then optional masked pooling and L2 normalization.
#include "models/bert/bert.h"

#include <algorithm>

#include "rlx/builder.h"

namespace rlx::models {

using nlohmann::json;

BertConfig BertConfig::from_json(const json& j, const std::string& where) {
  auto need = [&](const char* k) -> int64_t {
    RLX_CHECK(j.contains(k) && j[k].is_number_integer() && j[k].get<int64_t>() > 0, "[bert] ", where,
              ": config.json needs a positive integer '", k, "'");
    return j[k].get<int64_t>();
  };
  std::string type = j.value("model_type", "bert");
  RLX_CHECK(type == "bert", "[bert] ", where, ": model_type '", type, "' is not bert");
  std::string pos = j.value("position_embedding_type", "absolute");
  RLX_CHECK(pos == "absolute", "[bert] ", where, ": position_embedding_type '", pos, "' is not supported (absolute)");
  BertConfig c;
  c.vocab_size = need("vocab_size");
  c.hidden = need("hidden_size");
  c.layers = need("num_hidden_layers");
  c.heads = need("num_attention_heads");
  c.intermediate = need("intermediate_size");
  c.max_positions = need("max_position_embeddings");
  c.type_vocab_size = j.value("type_vocab_size", int64_t{2});
  c.layer_norm_eps = j.value("layer_norm_eps", 1e-12);
  RLX_CHECK(c.hidden % c.heads == 0, "[bert] ", where, ": hidden_size ", c.hidden, " is not a multiple of ",
            c.heads, " heads");
  std::string act = j.value("hidden_act", "gelu");
  if (act == "gelu")
    c.activation = "gelu";
  else if (act == "gelu_new" || act == "gelu_pytorch_tanh")
    c.activation = "gelu_tanh";
  else if (act == "relu" || act == "silu")
    c.activation = act;
  else
    fail("[bert] ", where, ": hidden_act '", act, "' is not supported (gelu, gelu_new, relu, silu)");
  return c;
}

namespace {

// Weights are stored either bare ("encoder.layer.0...") or under "bert." (BertForX checkpoints).
struct WeightSource {
  const HfWeights& w;
  std::string prefix;
  Tensor get(const std::string& name, std::vector<int64_t> shape) const {
    Tensor t = w.get(prefix + name);
    RLX_CHECK(t.shape() == shape, "[bert] weight '", prefix + name, "' has shape ", shape_str(to_shape(t.shape())),
              ", config implies ", shape_str(to_shape(shape)));
    if (t.dtype() == DType::f32) return t;
    RLX_CHECK(is_float(t.dtype()), "[bert] weight '", prefix + name, "' has dtype ", dtype_name(t.dtype()));
    Tensor f(DType::f32, t.shape());
    for (int64_t i = 0; i < t.numel(); ++i) f.data<float>()[i] = static_cast<float>(t.get(i));
    return f;
  }
};

}  // namespace

Graph build_bert_graph(const BertConfig& c, const HfWeights& weights, const BertGraphOptions& opt) {
  WeightSource W{weights, ""};
  if (!weights.has("embeddings.word_embeddings.weight") && weights.has("bert.embeddings.word_embeddings.weight"))
    W.prefix = "bert.";
  Graph g;
  g.name = "bert";
  Builder b(g);
  const int64_t H = c.hidden, NH = c.heads, D = c.hidden / c.heads;
  auto C = [&](const std::string& n, std::vector<int64_t> s) { return b.constant(W.get(n, std::move(s))); };

  ValueId ids = b.input("input_ids", DType::i64, {"batch", "seq"});
  ValueId mask = b.input("attention_mask", DType::i64, {"batch", "seq"});
  ValueId types = b.input("token_type_ids", DType::i64, {"batch", "seq"});

  b.set_origin("embeddings");
  ValueId pos = b.op1(OpKind::Iota, {}, {{"shape", Shape{"seq"}}, {"dim", int64_t{0}}, {"dtype", DType::i64}});
  ValueId x = b.op1(OpKind::Embedding, {C("embeddings.word_embeddings.weight", {c.vocab_size, H}), ids});
  x = b.add(x, b.op1(OpKind::Embedding, {C("embeddings.position_embeddings.weight", {c.max_positions, H}), pos}));
  x = b.add(x, b.op1(OpKind::Embedding, {C("embeddings.token_type_embeddings.weight", {c.type_vocab_size, H}), types}));
  x = b.layer_norm(x, C("embeddings.LayerNorm.weight", {H}), C("embeddings.LayerNorm.bias", {H}), c.layer_norm_eps);

  auto heads = [&](ValueId t) {  // [B,S,H] -> [B,NH,S,D]
    return b.transpose(b.reshape(t, Shape{"batch", "seq", NH, D}), {0, 2, 1, 3});
  };
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string p = "encoder.layer." + std::to_string(l) + ".";
    b.set_origin("layer" + std::to_string(l) + ".attention");
    auto lin = [&](ValueId in, const std::string& n, int64_t out, int64_t inner, const std::string& act = "none") {
      return b.linear(in, C(p + n + ".weight", {out, inner}), C(p + n + ".bias", {out}), act);
    };
    ValueId q = heads(lin(x, "attention.self.query", H, H));
    ValueId k = heads(lin(x, "attention.self.key", H, H));
    ValueId v = heads(lin(x, "attention.self.value", H, H));
    ValueId a = b.attention(q, k, v, mask, "padding");
    a = b.reshape(b.transpose(a, {0, 2, 1, 3}), Shape{"batch", "seq", H});
    a = lin(a, "attention.output.dense", H, H);
    x = b.layer_norm(b.add(a, x), C(p + "attention.output.LayerNorm.weight", {H}),
                     C(p + "attention.output.LayerNorm.bias", {H}), c.layer_norm_eps);
    b.set_origin("layer" + std::to_string(l) + ".mlp");
    ValueId h = lin(x, "intermediate.dense", c.intermediate, H, c.activation);
    h = lin(h, "output.dense", H, c.intermediate);
    x = b.layer_norm(b.add(h, x), C(p + "output.LayerNorm.weight", {H}), C(p + "output.LayerNorm.bias", {H}),
                     c.layer_norm_eps);
  }

  if (opt.pooling == "none") {
    b.output(x);
    return g;
  }
  b.set_origin("pooling");
  ValueId m = b.convert(mask, DType::f32);                  // [B,S]
  ValueId m3 = b.reshape(m, Shape{"batch", "seq", 1});      // [B,S,1]
  ValueId pooled;
  if (opt.pooling == "mean") {
    // sentence-transformers: sum(x·m) / clamp(sum(m), 1e-9)
    ValueId sum = b.reduce(OpKind::ReduceSum, b.mul(x, m3), {1}, false);       // [B,H]
    ValueId cnt = b.max(b.reduce(OpKind::ReduceSum, m, {1}, true), b.scalar(1e-9, DType::f32));  // [B,1]
    pooled = b.div(sum, cnt);
  } else if (opt.pooling == "cls") {
    // x[:, 0, :] as a gather with a rank-0 index (seq is symbolic, so no static slice).
    pooled = b.op1(OpKind::Gather, {x, b.scalar(0, DType::i64)}, {{"axis", int64_t{1}}});
  } else if (opt.pooling == "max") {
    // Padding positions are set to -1e9 before the max, as sentence-transformers does.
    ValueId keep = b.op1(OpKind::Ne, {m3, b.scalar(0.0, DType::f32)});
    ValueId masked = b.select(b.op1(OpKind::Expand, {keep}, {{"shape", Shape{"batch", "seq", H}}}), x,
                              b.scalar(-1e9, DType::f32));
    pooled = b.reduce(OpKind::ReduceMax, masked, {1}, false);
  } else {
    fail("[bert] unknown pooling '", opt.pooling, "' (none, mean, cls, max)");
  }
  if (opt.normalize) {
    // torch F.normalize: x / max(||x||₂, 1e-12)
    ValueId ss = b.reduce(OpKind::ReduceSum, b.mul(pooled, pooled), {1}, true);
    ValueId norm = b.max(b.unary(OpKind::Sqrt, ss), b.scalar(1e-12, DType::f32));
    pooled = b.div(pooled, norm);
  }
  b.output(pooled);
  return g;
}

SentenceEmbedder::SentenceEmbedder(const std::string& dir, const std::string& device, const std::string& fallback,
                                   const std::function<Graph(const Graph&)>& transform) {
  HfModelDir m = HfModelDir::open(dir);
  cfg_ = BertConfig::from_json(m.config, dir);
  pipe_ = m.sentence;
  tok_ = std::make_unique<WordPieceTokenizer>(WordPieceTokenizer::from_dir(m.model_dir));
  RLX_CHECK(tok_->vocab_size() <= cfg_.vocab_size, "[bert] ", dir, ": tokenizer has ", tok_->vocab_size(),
            " tokens, model only ", cfg_.vocab_size);
  max_len_ = pipe_.max_seq_length > 0 ? pipe_.max_seq_length : tok_->config().model_max_length;
  max_len_ = std::min(max_len_, cfg_.max_positions);
  BertGraphOptions opt;
  opt.pooling = pipe_.is_sentence_transformer ? pipe_.pooling : "mean";
  opt.normalize = pipe_.normalize;
  CompileOptions co;
  co.device = device;
  co.dispatch.fallback = fallback;
  co.verify = false;  // the graph is built by code, verified by its tests; skip per-shape re-verification
  Graph g = build_bert_graph(cfg_, m.weights, opt);
  if (transform) g = transform(g);
  model_ = std::make_unique<CompiledModel>(std::move(g), co);
}

SentenceEmbedder::~SentenceEmbedder() = default;

Tensor SentenceEmbedder::embed(const std::vector<std::string>& sentences, int64_t batch_size) {
  const int64_t N = static_cast<int64_t>(sentences.size()), H = cfg_.hidden;
  RLX_CHECK(batch_size > 0, "[bert] batch size must be positive");
  Tensor out(DType::f32, {N, H});
  // Like sentence-transformers, batch sentences of similar length together (longest first) so
  // little compute goes to padding; results go back to the caller's order.
  std::vector<int64_t> len(N), order(N);
  for (int64_t i = 0; i < N; ++i) {
    len[i] = static_cast<int64_t>(tok_->encode(sentences[i], max_len_).size());
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return len[a] > len[b]; });
  for (int64_t s = 0; s < N; s += batch_size) {
    std::vector<std::string> chunk;
    for (int64_t k = s; k < std::min(N, s + batch_size); ++k) chunk.push_back(sentences[order[k]]);
    BatchEncoding enc = tok_->encode_batch(chunk, max_len_);
    std::vector<Tensor> r = model_->run({enc.input_ids, enc.attention_mask, enc.token_type_ids});
    RLX_CHECK(r.size() == 1 && r[0].dtype() == DType::f32 && r[0].numel() == static_cast<int64_t>(chunk.size()) * H,
              "[bert] unexpected model output");
    for (size_t k = 0; k < chunk.size(); ++k)
      std::copy(r[0].data<float>() + k * H, r[0].data<float>() + (k + 1) * H, out.data<float>() + order[s + k] * H);
  }
  return out;
}

}  // namespace rlx::models
