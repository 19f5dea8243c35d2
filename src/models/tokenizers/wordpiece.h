// BERT's WordPiece tokenizer, matching Hugging Face `tokenizers` (BertNormalizer + BertPreTokenizer +
// WordPiece + [CLS] A [SEP] template) id for id. Loads tokenizer.json, or vocab.txt with
// tokenizer_config.json for older model directories. Unicode properties (categories, NFD, case
// mapping) come from ICU.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "rlx/tensor.h"

namespace rlx::models {

struct WordPieceConfig {
  bool clean_text = true;        // drop control chars / U+FFFD, map whitespace to ' '
  bool chinese_chars = true;     // put spaces around CJK ideographs
  bool lowercase = true;
  int strip_accents = -1;        // -1: follow `lowercase` (the HF default), 0 no, 1 yes
  std::string unk = "[UNK]", cls = "[CLS]", sep = "[SEP]", pad = "[PAD]";
  std::string prefix = "##";     // continuing-subword prefix
  int64_t max_chars_per_word = 100;
  int64_t model_max_length = 512;
};

// A batch ready for a BERT graph: i64 [B, T] each, T = longest sequence (or the fixed length).
struct BatchEncoding {
  Tensor input_ids, attention_mask, token_type_ids;
  std::vector<std::vector<int64_t>> ids;  // per sentence, unpadded (with [CLS]/[SEP])
};

class WordPieceTokenizer {
 public:
  // `dir` holds tokenizer.json, or vocab.txt (+ tokenizer_config.json).
  static WordPieceTokenizer from_dir(const std::string& dir);
  static WordPieceTokenizer from_tokenizer_json(const std::string& path);
  static WordPieceTokenizer from_vocab_txt(const std::string& path, WordPieceConfig cfg);

  const WordPieceConfig& config() const { return cfg_; }
  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t id(const std::string& token) const;  // -1 when absent
  const std::string& token(int64_t id) const;

  // Normalizer + pre-tokenizer: the words WordPiece sees.
  std::vector<std::string> basic_tokenize(const std::string& text) const;
  // Greedy longest-match-first split of one word into vocabulary ids.
  std::vector<int64_t> wordpiece(const std::string& word) const;
  // Ids of `text` without special tokens (special tokens written in the text are kept whole).
  std::vector<int64_t> tokenize(const std::string& text) const;
  // [CLS] ids [SEP], truncated so the whole is at most max_length (0: the model's maximum).
  std::vector<int64_t> encode(const std::string& text, int64_t max_length = 0) const;
  // Encodes and pads every text to the longest (or to pad_to when > 0), as sentence-transformers does.
  BatchEncoding encode_batch(const std::vector<std::string>& texts, int64_t max_length = 0, int64_t pad_to = 0) const;

 private:
  void index();
  WordPieceConfig cfg_;
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int64_t> vocab_;
  std::vector<std::string> special_;  // added special tokens matched verbatim in the raw text
  int64_t unk_id_ = -1, cls_id_ = -1, sep_id_ = -1, pad_id_ = 0;
};

}  // namespace rlx::models
