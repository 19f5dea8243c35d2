// DecoderModel::step with per-row positions (continuous batching): two sequences of different
// lengths in one KV cache, decoded together, give the logits each gives decoded alone, for the
// tiny llama (RoPE scaling: the table path), qwen2 (QKV bias) and mistral (sliding window 16,
// crossed mid-decode: the per-row bias mask). Also KvCache::first_rows / copy_row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "models/generate.h"
#include "models/llm/decoder.h"
#include "rlx/npy.h"

using namespace rlx;
using namespace rlx::models;

namespace {

std::string data(const std::string& f) { return std::string(RLX_SOURCE_DIR) + "/tests/models/llm/" + f; }

int64_t argmax(const float* p, int64_t V) { return std::max_element(p, p + V) - p; }

Tensor row_ids(const std::vector<int64_t>& v) {
  Tensor t(DType::i64, {1, static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

void check_rows(const std::string& arch) {
  SCOPED_TRACE(arch);
  DecoderModel m(load_decoder(data(arch)));
  auto g = read_npz(data("goldens_" + arch + ".npz"));
  // Prompt tokens from the golden prompt followed by its generated continuation (72 in all).
  std::vector<int64_t> seq(g.at("ids").data<int64_t>(), g.at("ids").data<int64_t>() + g.at("ids").numel());
  seq.insert(seq.end(), g.at("generated").data<int64_t>(), g.at("generated").data<int64_t>() + g.at("generated").numel());
  const int64_t V = m.vocab(), L = m.num_layers(), steps = 6, cap = 48;
  const std::vector<int64_t> lens = {5, 13};  // mistral: row 1 crosses the 16-token window
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t P : lens) prompts.emplace_back(seq.begin(), seq.begin() + P);
  // Alone: each sequence through its own one-row cache; the logits of every decode step.
  std::vector<std::vector<std::vector<float>>> alone(2);
  std::vector<std::vector<int64_t>> tokens(2);
  for (int r = 0; r < 2; ++r) {
    KvCache c(L, 1, m.kv_heads(), cap, m.head_dim());
    StepOutput o = m.step(row_ids(prompts[r]), 0, &c);
    c.append(o.new_k, o.new_v);
    tokens[r].push_back(argmax(o.logits.data<float>(), V));
    for (int64_t s = 0; s < steps; ++s) {
      o = m.step(row_ids({tokens[r].back()}), c.len, &c);
      c.append(o.new_k, o.new_v);
      alone[r].emplace_back(o.logits.data<float>(), o.logits.data<float>() + V);
      tokens[r].push_back(argmax(o.logits.data<float>(), V));
    }
  }
  // Together: rows 0 and 1 of a 4-row cache (the step sees its first two rows).
  KvCache big(L, 4, m.kv_heads(), cap, m.head_dim());
  std::vector<int64_t> pos(2);
  for (int r = 0; r < 2; ++r) {
    StepOutput o = m.step(row_ids(prompts[r]), 0, nullptr);
    // Prefill row r into row 2 first, then move it: copy_row must carry every filled slot.
    big.write_row(2, 0, o.new_k, o.new_v);
    big.copy_row(r, big, 2, lens[r]);
    pos[r] = lens[r];
    EXPECT_EQ(argmax(o.logits.data<float>(), V), tokens[r][0]);
  }
  double worst = 0;
  for (int64_t s = 0; s < steps; ++s) {
    Tensor step_ids(DType::i64, {2, 1});
    for (int r = 0; r < 2; ++r) step_ids.data<int64_t>()[r] = tokens[r][s];
    StepOutput o = m.step(step_ids, pos, big.first_rows(2));
    ASSERT_EQ(o.logits.shape(), (std::vector<int64_t>{2, V}));
    for (int r = 0; r < 2; ++r) {
      const float* got = o.logits.data<float>() + r * V;
      for (int64_t v = 0; v < V; ++v) worst = std::max(worst, std::abs(double(got[v]) - alone[r][s][v]));
      EXPECT_EQ(argmax(got, V), tokens[r][s + 1]) << "row " << r << " step " << s;
      big.write_row(r, pos[r], o.new_k, o.new_v, r);
      pos[r] += 1;
    }
  }
  EXPECT_LT(worst, 1e-3);
}

}  // namespace

TEST(DecoderRows, LlamaRowsAtDifferentPositionsMatchAlone) { check_rows("llama"); }
TEST(DecoderRows, Qwen2RowsAtDifferentPositionsMatchAlone) { check_rows("qwen2"); }
TEST(DecoderRows, MistralRowsAcrossTheSlidingWindowMatchAlone) { check_rows("mistral"); }

TEST(DecoderRows, StepChecksItsArguments) {
  DecoderModel m(load_decoder(data("llama")));
  KvCache c(m.num_layers(), 2, m.kv_heads(), 8, m.head_dim());
  Tensor ids(DType::i64, {2, 1});
  EXPECT_THROW(m.step(ids, std::vector<int64_t>{0}, c), Error);      // 1 position for 2 rows
  EXPECT_THROW(m.step(ids, std::vector<int64_t>{0, 9}, c), Error);   // past the capacity
  EXPECT_THROW(c.first_rows(3), Error);
}
