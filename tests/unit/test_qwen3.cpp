// Qwen3 parity against Hugging Face Qwen3ForCausalLM (goldens from tests/models/qwen3/make_goldens.py),
// KV-cache decode against HF greedy generate, GGUF (F16/Q8_0/Q4_0) against the f32 model, sampling.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <cstdio>
#include <random>

#include "models/generate.h"
#include "models/qwen3/qwen3.h"
#include "rlx/npy.h"
#include "rlx/safetensors.h"

using namespace rlx;
using namespace rlx::models;

namespace {

std::string data(const std::string& f) { return std::string(RLX_SOURCE_DIR) + "/tests/models/qwen3/" + f; }

const std::map<std::string, Tensor>& goldens() {
  static const auto g = read_npz(data("goldens.npz"));
  return g;
}

Qwen3Model& hf_model() {
  static Qwen3Model m(load_qwen3(data("tiny")));
  return m;
}

int64_t argmax_row(const Tensor& t, int64_t row, int64_t V) {
  int64_t best = 0;
  for (int64_t i = 1; i < V; ++i)
    if (t.get(row * V + i) > t.get(row * V + best)) best = i;
  return best;
}

Tensor last_logits(Qwen3Model& m, const Tensor& ids) { return m.step(ids, 0, nullptr).logits; }

}  // namespace

TEST(Qwen3, ConfigFromHf) {
  const Qwen3Config& c = hf_model().weights().cfg;
  EXPECT_EQ(c.vocab, 256);
  EXPECT_EQ(c.hidden, 64);
  EXPECT_EQ(c.layers, 2);
  EXPECT_EQ(c.heads, 4);
  EXPECT_EQ(c.kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_FALSE(c.tied);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.context, 512);  // max_position_embeddings
  // The config alone, without the weights: the same numbers from config.json and from the GGUF header.
  for (const char* src : {"tiny", "tiny-Q8_0.gguf"}) {
    Qwen3Config r = read_qwen3_config(data(src));
    EXPECT_EQ(r.context, 512) << src;
    EXPECT_EQ(r.vocab, 256) << src;
    EXPECT_EQ(r.layers, 2) << src;
  }
}

// The parity grid: batch {1,2,4} x prompt {8,32,64,128}, last-position top-1 identical in every row.
TEST(Qwen3, ParityGridVsHf) {
  const int64_t V = 256;
  int rows = 0, agree = 0;
  double worst = 0;
  std::printf("  B    S   top1   max|dlogit|\n");
  for (int64_t B : {1, 2, 4}) {
    for (int64_t S : {8, 32, 64, 128}) {
      std::string sfx = "_b" + std::to_string(B) + "_s" + std::to_string(S);
      const Tensor& ids = goldens().at("ids" + sfx);
      const Tensor& want = goldens().at("logits" + sfx);
      Tensor got = last_logits(hf_model(), ids);
      ASSERT_EQ(got.shape(), want.shape());
      double err = 0;
      for (int64_t i = 0; i < got.numel(); ++i) err = std::max(err, std::abs(got.get(i) - want.get(i)));
      int ok = 0;
      for (int64_t b = 0; b < B; ++b) ok += argmax_row(got, b, V) == argmax_row(want, b, V);
      std::printf("  %lld %4lld   %d/%lld   %.3g\n", (long long)B, (long long)S, ok, (long long)B, err);
      rows += static_cast<int>(B);
      agree += ok;
      worst = std::max(worst, err);
      EXPECT_EQ(ok, B) << sfx;
      EXPECT_LT(err, 1e-3) << sfx;
    }
  }
  std::printf("  top-1 agreement %d/%d rows, worst max-abs logit error %.3g\n", agree, rows, worst);
}

TEST(Qwen3, TiedHeadVsHf) {
  Qwen3Model m(load_qwen3(data("tiny_tied")));
  EXPECT_TRUE(m.weights().cfg.tied);
  Tensor got = last_logits(m, goldens().at("tied_ids"));
  const Tensor& want = goldens().at("tied_logits");
  double err = 0;
  for (int64_t i = 0; i < got.numel(); ++i) err = std::max(err, std::abs(got.get(i) - want.get(i)));
  EXPECT_LT(err, 1e-3);
}

// Incremental decode through the KV cache reproduces HF greedy generate token for token.
TEST(Qwen3, KvCacheGreedyMatchesHfGenerate) {
  const Tensor& ids = goldens().at("gen_ids");
  const Tensor& want = goldens().at("gen_out");
  int64_t B = ids.shape()[0], S = ids.shape()[1], N = want.shape()[1];
  std::vector<std::vector<int64_t>> prompts(B);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) prompts[b].push_back(ids.get_int(b * S + s));
  GenerateStats st;
  auto out = generate(hf_model(), prompts, N, SamplingOptions{}, -1, &st);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < N; ++i) EXPECT_EQ(out[b][i], want.get_int(b * N + i)) << "row " << b << " token " << i;
  EXPECT_EQ(st.decode_tokens, N - 1);
}

// Decoding with the cache gives the same logits as a full re-run over the longer sequence.
TEST(Qwen3, KvCacheStepEqualsFullForward) {
  Qwen3Model& m = hf_model();
  Tensor ids(DType::i64, {2, 6});
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = (i * 37 + 5) % 256;
  KvCache cache(2, 2, 2, 8, 16);
  Tensor pre(DType::i64, {2, 5});
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t s = 0; s < 5; ++s) pre.data<int64_t>()[b * 5 + s] = ids.data<int64_t>()[b * 6 + s];
  StepOutput p = m.step(pre, 0, &cache);
  cache.append(p.new_k, p.new_v);
  Tensor next(DType::i64, {2, 1});
  for (int64_t b = 0; b < 2; ++b) next.data<int64_t>()[b] = ids.data<int64_t>()[b * 6 + 5];
  Tensor inc = m.step(next, 5, &cache).logits;
  Tensor full = m.step(ids, 0, nullptr).logits;
  for (int64_t i = 0; i < full.numel(); ++i) EXPECT_NEAR(inc.get(i), full.get(i), 1e-4) << i;
}

// GGUF files written by the gguf package from the same weights: F16 matches tightly, quantized
// types are reported (top-1 agreement, cosine) and held to loose bounds.
TEST(Qwen3, GgufPerQuantVsF32) {
  std::printf("  type   packed  top1-vs-f32   min-cosine  max|dlogit|\n");
  for (const char* q : {"F16", "Q8_0", "Q4_0"}) {
    for (bool packed : {true, false}) {
      LoadOptions lo;
      lo.keep_packed = packed;
      Qwen3Model m(load_qwen3(data(std::string("tiny-") + q + ".gguf"), lo));
      int rows = 0, agree = 0;
      double min_cos = 1, err = 0;
      for (int64_t B : {1, 4}) {
        for (int64_t S : {8, 64}) {
          std::string sfx = "_b" + std::to_string(B) + "_s" + std::to_string(S);
          Tensor got = last_logits(m, goldens().at("ids" + sfx));
          const Tensor& want = goldens().at("logits" + sfx);
          for (int64_t b = 0; b < B; ++b) {
            double dot = 0, na = 0, nb = 0;
            for (int64_t i = 0; i < 256; ++i) {
              double x = got.get(b * 256 + i), y = want.get(b * 256 + i);
              dot += x * y, na += x * x, nb += y * y;
              err = std::max(err, std::abs(x - y));
            }
            min_cos = std::min(min_cos, dot / std::sqrt(na * nb));
            agree += argmax_row(got, b, 256) == argmax_row(want, b, 256);
            ++rows;
          }
        }
      }
      std::printf("  %-5s  %-6s  %2d/%2d        %.5f     %.3g\n", q, packed ? "yes" : "no", agree, rows, min_cos, err);
      if (std::string(q) == "F16") {
        EXPECT_EQ(agree, rows);
      }
      EXPECT_GT(min_cos, std::string(q) == "Q4_0" ? 0.8 : 0.99) << q;  // tiny random weights: 4-bit is coarse
    }
  }
}

TEST(Qwen3, MissingFilesAndBadIdsFailClearly) {
  EXPECT_THROW(load_qwen3(data("does-not-exist")), Error);
  EXPECT_THROW(load_qwen3(data("quant_blocks.gguf")), Error);  // not a qwen3 architecture
  Tensor bad(DType::i64, {1, 2});
  bad.data<int64_t>()[1] = 999;
  EXPECT_THROW(hf_model().step(bad, 0, nullptr), Error);
}

TEST(Sampling, GreedyTopKTopPSeeded) {
  std::vector<float> logits = {0.1f, 2.0f, 1.9f, -1.0f, 0.5f};
  std::mt19937_64 rng(1);
  EXPECT_EQ(sample_token(logits.data(), 5, SamplingOptions{}, rng), 1);
  SamplingOptions k1{1.0, 1, 1.0, 0};
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sample_token(logits.data(), 5, k1, rng), 1);
  SamplingOptions k2{1.0, 2, 1.0, 0};
  for (int i = 0; i < 50; ++i) {
    int64_t t = sample_token(logits.data(), 5, k2, rng);
    EXPECT_TRUE(t == 1 || t == 2);
  }
  SamplingOptions p{1.0, 0, 0.3, 0};  // the top token alone holds > 30% of the mass
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sample_token(logits.data(), 5, p, rng), 1);
  // Same seed, same sequence.
  SamplingOptions t{0.8, 0, 0.95, 42};
  std::mt19937_64 a(42), b(42);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(sample_token(logits.data(), 5, t, a), sample_token(logits.data(), 5, t, b));
}

TEST(Qwen3, SampledGenerationIsReproducible) {
  std::vector<std::vector<int64_t>> prompt = {{1, 2, 3, 4}};
  SamplingOptions o{0.9, 20, 0.9, 7};
  auto a = generate(hf_model(), prompt, 6, o);
  auto b = generate(hf_model(), prompt, 6, o);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a[0].size(), 6u);
}

// HF checkpoints saved in f16/bf16 load (converted to f32 compute) and keep top-1 parity.
TEST(Qwen3, HalfPrecisionSafetensors) {
  namespace fs = std::filesystem;
  SafeTensors src = SafeTensors::open(data("tiny/model.safetensors"));
  for (DType dt : {DType::f16, DType::bf16}) {
    fs::path dir = fs::temp_directory_path() / ("rlx_qwen3_" + std::string(dtype_name(dt)) + "_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    fs::copy_file(data("tiny/config.json"), dir / "config.json", fs::copy_options::overwrite_existing);
    std::vector<std::pair<std::string, Tensor>> ts;
    for (auto& n : src.names()) {
      Tensor t = src.get(n), h(dt, t.shape());
      for (int64_t i = 0; i < t.numel(); ++i) h.set(i, t.get(i));
      ts.emplace_back(n, h);
    }
    write_safetensors((dir / "model.safetensors").string(), ts);
    Qwen3Model m(load_qwen3(dir.string()));
    Tensor got = last_logits(m, goldens().at("ids_b4_s32"));
    const Tensor& want = goldens().at("logits_b4_s32");
    int agree = 0;
    for (int64_t b = 0; b < 4; ++b) agree += argmax_row(got, b, 256) == argmax_row(want, b, 256);
    EXPECT_GE(agree, 3) << dtype_name(dt);
    fs::remove_all(dir);
  }
}
