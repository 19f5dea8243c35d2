// BPE tokenizers for decoder LLMs, from GGUF metadata (tokenizer.ggml.*) or an HF tokenizer.json:
// byte-level BPE (GPT-2 style: SmolLM2, Qwen, Llama 3; bytes mapped to printable code points,
// pre-tokenizer regexes run with ICU) and SentencePiece-style BPE (Llama 2, Mistral: spaces as
// U+2581, merges by rank or by score, <0xNN> byte fallback). Special and added tokens are matched in
// the text before pre-tokenization.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace rlx::gguf {
class File;
}

namespace rlx::models {

class BpeTokenizer {
 public:
  enum class Kind { ByteLevel, SentencePiece };
  // GGUF token types (llama.cpp's numbering).
  enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

  static BpeTokenizer from_gguf(const gguf::File& g, const std::string& label);
  static BpeTokenizer from_hf_json(const std::string& tokenizer_json);
  // Empty when the GGUF's tokenizer is one this class reads; otherwise why not.
  static std::string gguf_support(const gguf::File& g);

  // add_special: prepend BOS (and append EOS) as the model's config asks.
  std::vector<int64_t> encode(const std::string& text, bool add_special = true) const;
  // skip_special: drop control tokens (BOS/EOS/...) from the text.
  std::string decode(const std::vector<int64_t>& ids, bool skip_special = false) const;

  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t bos() const { return bos_; }
  int64_t eos() const { return eos_; }
  bool is_control(int64_t id) const;
  Kind kind() const { return kind_; }
  const std::string& token(int64_t id) const { return tokens_.at(static_cast<size_t>(id)); }
  int64_t find(const std::string& token) const;  // -1 when absent
  // Extra ids that end generation (e.g. <|im_end|>, <|eot_id|>), besides eos().
  const std::vector<int64_t>& stop_ids() const { return stop_ids_; }

 private:
  void finish();
  void bpe_word(const std::string& word, std::vector<int64_t>& out) const;
  void encode_plain(const std::string& text, bool first, std::vector<int64_t>& out) const;

  Kind kind_ = Kind::ByteLevel;
  std::vector<std::string> tokens_;
  std::vector<float> scores_;
  std::vector<int32_t> types_;
  std::unordered_map<std::string, int64_t> ids_;
  std::unordered_map<std::string, int32_t> merge_rank_;  // "left right" -> rank
  std::vector<std::string> split_regex_;                 // byte-level pre-tokenizer: applied in order
  std::vector<std::string> specials_;                    // matched verbatim in the text, longest first
  std::vector<int64_t> stop_ids_;
  int64_t bos_ = -1, eos_ = -1, unk_ = -1;
  bool add_bos_ = false, add_eos_ = false;
  bool add_space_prefix_ = true;  // SentencePiece: a leading U+2581 on each text segment
  bool prefix_first_only_ = false;  // ... only on the segment that starts the text
  bool metaspace_ = false;          // HF Metaspace pre-tokenizer (no prefix before a leading space)
  bool nfc_ = false;                // byte-level: NFC-normalize first (Qwen)
  bool byte_fallback_ = true;
  bool ignore_merges_ = false;    // whole pre-tokens that are in the vocabulary are kept (Llama 3)
};

}  // namespace rlx::models
