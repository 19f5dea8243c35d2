// BERT encoders (Hugging Face `BertModel` layout) built as HIR graphs, and sentence embeddings
// (pooling + L2 normalization) as sentence-transformers computes them.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/bert/hf_model.h"
#include "models/tokenizers/wordpiece.h"
#include "rlx/graph.h"
#include "rlx/session.h"

namespace rlx::models {

struct BertConfig {
  int64_t vocab_size = 0, hidden = 0, layers = 0, heads = 0, intermediate = 0;
  int64_t max_positions = 512, type_vocab_size = 2;
  double layer_norm_eps = 1e-12;
  std::string activation = "gelu";  // linear activation name: gelu | gelu_tanh | relu | silu
  static BertConfig from_json(const nlohmann::json& config, const std::string& where);
};

struct BertGraphOptions {
  // "none": output last_hidden_state f32 [batch, seq, hidden]; "mean" | "cls" | "max": pooled
  // [batch, hidden] (masked by attention_mask, as sentence-transformers pools).
  std::string pooling = "none";
  bool normalize = false;  // L2-normalize the pooled vector (eps 1e-12, like torch F.normalize)
};

// Graph inputs, all i64 [batch, seq] with symbolic dims "batch" and "seq":
// input_ids, attention_mask (1 = token, 0 = padding), token_type_ids. Weights are graph constants
// that point into the safetensors mapping (f16/bf16 weights are widened to f32 once).
Graph build_bert_graph(const BertConfig& cfg, const HfWeights& weights, const BertGraphOptions& opt);

// A model directory ready to embed sentences: tokenizer + compiled graph (one compilation per
// (batch, seq) shape, cached by CompiledModel).
class SentenceEmbedder {
 public:
  // fallback: DispatchOptions::fallback ("cpu": nodes the device cannot run go to cpu).
  // `transform` (optional) rewrites the built graph before compilation (e.g. shard_tensor_parallel).
  SentenceEmbedder(const std::string& dir, const std::string& device = "cpu", const std::string& fallback = "",
                   const std::function<Graph(const Graph&)>& transform = {});
  ~SentenceEmbedder();
  // f32 [N, hidden]; sentences are batched `batch_size` at a time, each batch padded to its longest.
  Tensor embed(const std::vector<std::string>& sentences, int64_t batch_size = 32);
  const WordPieceTokenizer& tokenizer() const { return *tok_; }
  const BertConfig& config() const { return cfg_; }
  const SentencePipeline& pipeline() const { return pipe_; }
  int64_t max_seq_length() const { return max_len_; }
  CompiledModel& model() { return *model_; }

 private:
  BertConfig cfg_;
  SentencePipeline pipe_;
  int64_t max_len_ = 0;
  std::unique_ptr<WordPieceTokenizer> tok_;
  std::unique_ptr<CompiledModel> model_;
};

}  // namespace rlx::models
