// The OpenAI wire format as `rlx serve` speaks it: request bodies parsed and checked into plain
// structs (a bad field is an ApiError with the 4xx status and an OpenAI error object), and the
// response / stream-chunk objects the OpenAI clients read.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/llm/llm.h"

namespace rlx::serve {

struct ApiError : std::runtime_error {
  int status;
  std::string type, param, code;
  ApiError(int status, std::string message, std::string param = "", std::string code = "",
           std::string type = "invalid_request_error");
  nlohmann::json body() const;  // {"error": {"message", "type", "param", "code"}}
};

// The body as a JSON object, or ApiError 400 (malformed JSON / not an object).
nlohmann::json parse_body(const std::string& body);
// The "model" field (a string; ApiError 400 when missing or not a string).
std::string model_field(const nlohmann::json& j);

struct EmbeddingRequest {
  std::string model;
  std::vector<std::string> input;
  bool base64 = false;  // encoding_format "base64": little-endian f32 bytes, base64-encoded
};
EmbeddingRequest parse_embedding_request(const nlohmann::json& j);

// /v1/completions (prompt) and /v1/chat/completions (messages) share the sampling fields.
struct GenerationRequest {
  std::string model;
  bool chat = false;
  std::string prompt;                          // completions
  std::vector<models::ChatMessage> messages;   // chat
  std::optional<int64_t> max_tokens;
  double temperature = 1.0, top_p = 1.0;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  bool stream = false, include_usage = false;
};
GenerationRequest parse_generation_request(const nlohmann::json& j, bool chat);
models::TextOptions text_options(const GenerationRequest& r, int64_t max_new);

// JSON text with invalid UTF-8 (user input echoed, a model's partial bytes) replaced, never thrown.
std::string dumps(const nlohmann::json& j);

std::string base64_floats(const float* p, int64_t n);
std::string random_id(const std::string& prefix);  // "chatcmpl-…", "cmpl-…"

}  // namespace rlx::serve
