// The MiniLM sentence embedding (mean pooled, L2 normalized, 128 tokens) on one device, for the
// tests that compare a device against the cpu on the real model (tests/models or a local copy).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "models/bert/bert.h"
#include "models/minilm_dir.h"
#include "rlx/session.h"

namespace rlx_test {

inline double secs_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// MiniLM from `dir` with its first `layers` layers (0: all) on `sentences`, compiled for `device`;
// `seconds` (optional) gets compile + run time.
inline rlx::Tensor minilm_embed(const std::string& dir, const std::string& device, int64_t layers,
                                const std::vector<std::string>& sentences, double* seconds = nullptr) {
  using namespace rlx;
  using namespace rlx::models;
  auto t0 = std::chrono::steady_clock::now();
  HfModelDir m = HfModelDir::open(dir);
  BertConfig cfg = BertConfig::from_json(m.config, dir);
  if (layers > 0) cfg.layers = layers;
  WordPieceTokenizer tok = WordPieceTokenizer::from_dir(m.model_dir);
  BertGraphOptions opt;
  opt.pooling = "mean";
  opt.normalize = true;
  CompileOptions co;
  co.device = device;
  co.verify = false;
  CompiledModel model(build_bert_graph(cfg, m.weights, opt), co);
  BatchEncoding enc = tok.encode_batch(sentences, 128);
  Tensor r = model.run({enc.input_ids, enc.attention_mask, enc.token_type_ids})[0];
  if (seconds) *seconds = secs_since(t0);
  return r;
}

}  // namespace rlx_test
