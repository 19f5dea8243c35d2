#include "serve/openai.h"

#include <cstring>
#include <random>

namespace rlx::serve {

using nlohmann::json;

ApiError::ApiError(int s, std::string message, std::string p, std::string c, std::string t)
    : std::runtime_error(std::move(message)), status(s), type(std::move(t)), param(std::move(p)), code(std::move(c)) {}

json ApiError::body() const {
  return {{"error",
           {{"message", what()},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

json parse_body(const std::string& body) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    throw ApiError(400, std::string("the request body is not valid JSON: ") + e.what(), "", "invalid_json");
  }
  if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object", "", "invalid_json");
  return j;
}

namespace {

[[noreturn]] void bad_type(const std::string& field, const char* want, const json& v) {
  throw ApiError(400, "'" + field + "' must be " + want + ", not " + v.type_name(), field, "invalid_type");
}

std::string str_field(const json& j, const std::string& k) {
  const json& v = j.at(k);
  if (!v.is_string()) bad_type(k, "a string", v);
  return v.get<std::string>();
}

double num_field(const json& j, const std::string& k, double lo, double hi) {
  const json& v = j.at(k);
  if (!v.is_number()) bad_type(k, "a number", v);
  double d = v.get<double>();
  if (!(d >= lo && d <= hi))
    throw ApiError(400, "'" + k + "' must be between " + json(lo).dump() + " and " + json(hi).dump() + ", got " + v.dump(),
                   k, "invalid_value");
  return d;
}

int64_t int_field(const json& j, const std::string& k, int64_t lo) {
  const json& v = j.at(k);
  if (!v.is_number_integer()) bad_type(k, "an integer", v);
  int64_t n = v.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), INT64_MAX))
                                     : v.get<int64_t>();
  if (n < lo) throw ApiError(400, "'" + k + "' must be at least " + std::to_string(lo) + ", got " + v.dump(), k, "invalid_value");
  return n;
}

bool has(const json& j, const std::string& k) { return j.contains(k) && !j.at(k).is_null(); }

// Message content: a string, or an array of {"type": "text", "text": ...} parts (joined).
std::string content_text(const json& v, const std::string& where) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) bad_type(where, "a string or an array of text parts", v);
  std::string out;
  for (auto& part : v) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
        !part["text"].is_string())
      throw ApiError(400, "'" + where + "': only {\"type\": \"text\", \"text\": ...} parts are supported", where,
                     "invalid_type");
    out += part["text"].get<std::string>();
  }
  return out;
}

}  // namespace

std::string model_field(const json& j) {
  if (!has(j, "model")) throw ApiError(400, "'model' is required", "model", "missing_required_parameter");
  return str_field(j, "model");
}

EmbeddingRequest parse_embedding_request(const json& j) {
  EmbeddingRequest r;
  r.model = model_field(j);
  if (!has(j, "input")) throw ApiError(400, "'input' is required", "input", "missing_required_parameter");
  const json& in = j["input"];
  if (in.is_string()) {
    r.input.push_back(in.get<std::string>());
  } else if (in.is_array()) {
    for (size_t i = 0; i < in.size(); ++i) {
      if (!in[i].is_string())
        throw ApiError(400, "'input[" + std::to_string(i) + "]' must be a string (token-id input is not supported), not " +
                                in[i].type_name(),
                       "input", "invalid_type");
      r.input.push_back(in[i].get<std::string>());
    }
  } else {
    bad_type("input", "a string or an array of strings", in);
  }
  if (r.input.empty()) throw ApiError(400, "'input' is an empty array", "input", "empty_input");
  for (size_t i = 0; i < r.input.size(); ++i)
    if (r.input[i].find_first_not_of(" \t\r\n") == std::string::npos)
      throw ApiError(400, "'input[" + std::to_string(i) + "]' is empty", "input", "empty_input");
  if (has(j, "encoding_format")) {
    std::string f = str_field(j, "encoding_format");
    if (f != "float" && f != "base64")
      throw ApiError(400, "'encoding_format' must be \"float\" or \"base64\", got \"" + f + "\"", "encoding_format",
                     "invalid_value");
    r.base64 = f == "base64";
  }
  return r;
}

GenerationRequest parse_generation_request(const json& j, bool chat) {
  GenerationRequest r;
  r.chat = chat;
  r.model = model_field(j);
  if (chat) {
    if (!has(j, "messages")) throw ApiError(400, "'messages' is required", "messages", "missing_required_parameter");
    const json& ms = j["messages"];
    if (!ms.is_array()) bad_type("messages", "an array", ms);
    if (ms.empty()) throw ApiError(400, "'messages' is an empty array", "messages", "empty_input");
    for (size_t i = 0; i < ms.size(); ++i) {
      std::string w = "messages[" + std::to_string(i) + "]";
      if (!ms[i].is_object()) bad_type(w, "an object", ms[i]);
      if (!has(ms[i], "role") || !ms[i]["role"].is_string())
        throw ApiError(400, "'" + w + ".role' must be a string", w + ".role", "invalid_type");
      std::string role = ms[i]["role"].get<std::string>();
      if (role == "developer") role = "system";
      if (role != "system" && role != "user" && role != "assistant")
        throw ApiError(400, "'" + w + ".role' must be system, user or assistant, got \"" + role + "\"", w + ".role",
                       "invalid_value");
      if (!has(ms[i], "content")) throw ApiError(400, "'" + w + ".content' is required", w + ".content", "missing_required_parameter");
      r.messages.push_back({role, content_text(ms[i]["content"], w + ".content")});
    }
  } else {
    if (!has(j, "prompt")) throw ApiError(400, "'prompt' is required", "prompt", "missing_required_parameter");
    const json& p = j["prompt"];
    if (p.is_array() && p.size() == 1 && p[0].is_string())
      r.prompt = p[0].get<std::string>();
    else if (p.is_string())
      r.prompt = p.get<std::string>();
    else
      bad_type("prompt", "a string (or an array of one string)", p);
    if (r.prompt.empty()) throw ApiError(400, "'prompt' is empty", "prompt", "empty_input");
  }
  for (const char* k : {"max_tokens", "max_completion_tokens"})
    if (has(j, k)) r.max_tokens = int_field(j, k, 1);
  if (has(j, "temperature")) r.temperature = num_field(j, "temperature", 0, 2);
  if (has(j, "top_p")) r.top_p = num_field(j, "top_p", 0, 1);
  if (has(j, "top_p") && r.top_p <= 0) throw ApiError(400, "'top_p' must be greater than 0", "top_p", "invalid_value");
  if (has(j, "seed")) {
    const json& v = j["seed"];
    if (!v.is_number_integer()) bad_type("seed", "an integer", v);
    r.seed = v.is_number_unsigned() ? v.get<uint64_t>() : static_cast<uint64_t>(v.get<int64_t>());
  }
  if (has(j, "n") && int_field(j, "n", 1) != 1) throw ApiError(400, "'n' must be 1", "n", "invalid_value");
  if (has(j, "stream")) {
    if (!j["stream"].is_boolean()) bad_type("stream", "a boolean", j["stream"]);
    r.stream = j["stream"].get<bool>();
  }
  if (has(j, "stream_options")) {
    const json& so = j["stream_options"];
    if (!so.is_object()) bad_type("stream_options", "an object", so);
    if (has(so, "include_usage")) {
      if (!so["include_usage"].is_boolean()) bad_type("stream_options.include_usage", "a boolean", so["include_usage"]);
      r.include_usage = so["include_usage"].get<bool>();
    }
  }
  if (has(j, "stop")) {
    const json& s = j["stop"];
    if (s.is_string()) {
      r.stop.push_back(s.get<std::string>());
    } else if (s.is_array()) {
      if (s.size() > 4) throw ApiError(400, "'stop' holds at most 4 strings", "stop", "invalid_value");
      for (auto& x : s) {
        if (!x.is_string()) bad_type("stop", "a string or an array of strings", s);
        r.stop.push_back(x.get<std::string>());
      }
    } else {
      bad_type("stop", "a string or an array of strings", s);
    }
    for (auto& x : r.stop)
      if (x.empty()) throw ApiError(400, "'stop' strings must not be empty", "stop", "invalid_value");
  }
  return r;
}

models::TextOptions text_options(const GenerationRequest& r, int64_t max_new) {
  models::TextOptions o;
  o.max_new = max_new;
  o.sampling.temperature = r.temperature;
  o.sampling.top_p = r.top_p;
  o.sampling.seed = r.seed;
  o.stop = r.stop;
  return o;
}

std::string dumps(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string base64_floats(const float* p, int64_t n) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(static_cast<size_t>(n) * 4, '\0');
  std::memcpy(bytes.data(), p, bytes.size());  // x86/ARM are little-endian, as the format is
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<uint8_t>(bytes[i + 2]);
    out += k[(v >> 18) & 63];
    out += k[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? k[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? k[v & 63] : '=';
  }
  return out;
}

std::string random_id(const std::string& prefix) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* a = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string s = prefix;
  for (int i = 0; i < 24; ++i) s += a[rng() % 62];
  return s;
}

}  // namespace rlx::serve
