// Text in, text out: a decoder model with its tokenizer and chat template, loaded from one GGUF file
// (weights + tokenizer.ggml.* + tokenizer.chat_template) or an HF directory (config.json,
// *.safetensors, tokenizer.json, tokenizer_config.json). Streams generated text piece by piece.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/generate.h"
#include "models/llm/chat_template.h"
#include "models/llm/decoder.h"
#include "models/tokenizers/bpe.h"

namespace rlx::models {

struct ChatMessage {
  std::string role, content;
};

struct TextOptions {
  int64_t max_new = 128;
  SamplingOptions sampling;
  std::vector<std::string> stop;  // stop strings (not included in the output)
};

// Turns generated ids into text pieces: holds back an incomplete UTF-8 character and any tail that
// could still become a stop string.
class TextStream {
 public:
  TextStream(const BpeTokenizer& t, std::vector<std::string> stop) : tok_(t), stop_(std::move(stop)) {}
  // The new text after `id` (may be empty); sets stopped() when a stop string appeared.
  std::string push(int64_t id);
  std::string flush();  // what was held back, at the end
  bool stopped() const { return stopped_; }

 private:
  const BpeTokenizer& tok_;
  std::vector<std::string> stop_;
  std::vector<int64_t> ids_;
  size_t emitted_ = 0;
  bool stopped_ = false;
  std::string text_;
};

class Llm;

// One text generation in progress, advanced a piece at a time (streaming, Python iterators).
class TextSession {
 public:
  TextSession(Llm& llm, std::vector<int64_t> prompt, TextOptions o);
  // Runs until the next non-empty piece of text; false once generation has ended (an end-of-turn
  // token, a stop string, or max_new tokens).
  bool next(std::string& piece);
  const GenerateStats& stats() const { return stats_; }
  const std::vector<int64_t>& tokens() const { return out_; }  // generated ids so far

  // Driven from outside (continuous batching: the caller runs the model for many sessions at once).
  // feed() takes the logits [V] of this sequence's last position, picks the next token as next()
  // would and returns false once generation has ended; take_text() returns the text produced since
  // the last call (at the end, with what was held back).
  bool feed(float* logits);
  std::string take_text();
  bool finished() const { return done_; }
  const std::vector<int64_t>& prompt() const { return prompt_; }
  const TextOptions& options() const { return o_; }

 private:
  bool step();  // one token; false when finished
  bool choose(float* logits);  // samples a token into out_/the stream; false on an end-of-turn token or a stop string
  Llm& llm_;
  std::vector<int64_t> prompt_, out_;
  TextOptions o_;
  std::unique_ptr<KvCache> cache_;
  StepOutput last_;
  std::mt19937_64 rng_;
  TextStream stream_;
  GenerateStats stats_;
  std::string pending_;
  bool done_ = false;
};

class Llm {
 public:
  static std::unique_ptr<Llm> load(const std::string& path, const std::string& device = "cpu", const LoadOptions& o = {});

  const BpeTokenizer& tokenizer() const { return tok_; }
  DecoderModel& model() { return *model_; }
  bool has_chat_template() const { return tmpl_ != nullptr; }
  const std::string& chat_template_source() const { return tmpl_src_; }
  // The chat template rendered over `messages` with the generation prompt appended.
  std::string apply_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true) const;
  // Token ids for a plain prompt (BOS as the tokenizer asks) or a rendered chat (specials parsed).
  std::vector<int64_t> encode_prompt(const std::string& text, bool chat) const;
  // Generates from prompt ids; on_text receives each piece as it is produced (return false to stop).
  std::string generate(const std::vector<int64_t>& prompt, const TextOptions& o,
                       const std::function<bool(const std::string&)>& on_text = {}, GenerateStats* stats = nullptr);
  bool is_stop_token(int64_t id) const;

 private:
  BpeTokenizer tok_;
  std::unique_ptr<DecoderModel> model_;
  std::unique_ptr<ChatTemplate> tmpl_;
  std::string tmpl_src_;
};

}  // namespace rlx::models
