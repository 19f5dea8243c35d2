// Chat templates (`tokenizer.chat_template` in GGUF, tokenizer_config.json in HF): an interpreter
// for the Jinja subset the common templates use (ChatML, Llama 2/3, Mistral, Zephyr, SmolLM, Qwen):
// for loops (loop.first/last/index/index0/length), if/elif/else, set, expressions with + ~ and or
// not in, comparisons, `x if c else y`, attribute/index/slice access, filters (trim, length, upper,
// lower, default, tojson, first, last), `is defined/none/string`, string methods (strip, startswith,
// endswith, split, upper, lower), raise_exception. Rendered as transformers does: trim_blocks and
// lstrip_blocks on. Anything else fails with "[chat-template] line:col: ...".
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace rlx::models {

class ChatTemplate {
 public:
  explicit ChatTemplate(const std::string& source);  // parses; throws on a syntax error
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  // context: {"messages": [{"role":..., "content":...}], "add_generation_prompt": bool,
  // "bos_token": ..., "eos_token": ..., ...}.
  std::string render(const nlohmann::json& context) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlx::models
