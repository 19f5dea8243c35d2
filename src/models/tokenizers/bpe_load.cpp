// BpeTokenizer from GGUF metadata (tokenizer.ggml.*) and from an HF tokenizer.json.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/tokenizers/bpe.h"
#include "rlx/error.h"
#include "rlx/gguf.h"

namespace rlx::models {

namespace {

const char* kGpt2Regex = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
// Llama 3 and Qwen2 differ only in how many digits make one pre-token.
std::string llama3_regex(const char* digits) {
  return std::string("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}") + digits +
         "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
}

// tokenizer.ggml.pre -> the pre-tokenizer regexes (applied in order); false when unknown.
bool gguf_pre_regex(const std::string& pre, std::vector<std::string>& out, bool& ignore_merges) {
  if (pre.empty() || pre == "default" || pre == "gpt-2" || pre == "gpt2") out = {kGpt2Regex};
  else if (pre == "llama3" || pre == "llama-bpe" || pre == "llama-v3" || pre == "smaug-bpe")
    out = {llama3_regex("{1,3}")}, ignore_merges = true;
  else if (pre == "qwen2" || pre == "deepseek-r1-qwen") out = {llama3_regex("")};
  else if (pre == "smollm") out = {"\\p{N}", kGpt2Regex};
  else return false;
  return true;
}

std::vector<std::string> str_array(const gguf::Value& v) {
  std::vector<std::string> o;
  o.reserve(v.arr.size());
  for (const gguf::Value& e : v.arr) o.push_back(e.as_str());
  return o;
}

}  // namespace

std::string BpeTokenizer::gguf_support(const gguf::File& g) {
  std::string model = g.get_str("tokenizer.ggml.model", "");
  if (model.empty()) return "no tokenizer.ggml.model key";
  if (model != "gpt2" && model != "llama") return "tokenizer.ggml.model '" + model + "' (supported: gpt2, llama)";
  const gguf::Value* t = g.find("tokenizer.ggml.tokens");
  if (!t || t->type != gguf::ValueType::Array || t->elem != gguf::ValueType::String) return "no tokenizer.ggml.tokens";
  if (model == "gpt2") {
    if (!g.find("tokenizer.ggml.merges")) return "no tokenizer.ggml.merges";
    std::vector<std::string> re;
    bool im = false;
    std::string pre = g.get_str("tokenizer.ggml.pre", "default");
    if (!gguf_pre_regex(pre, re, im)) return "pre-tokenizer '" + pre + "' (supported: default, llama-bpe, qwen2, smollm)";
  } else if (!g.find("tokenizer.ggml.scores") && !g.find("tokenizer.ggml.merges")) {
    return "a llama tokenizer needs tokenizer.ggml.scores or merges";
  }
  return "";
}

BpeTokenizer BpeTokenizer::from_gguf(const gguf::File& g, const std::string& label) {
  std::string why = gguf_support(g);
  RLX_CHECK(why.empty(), "[tokenizer] ", label, ": unsupported tokenizer: ", why);
  BpeTokenizer t;
  std::string model = g.get_str("tokenizer.ggml.model", "");
  t.kind_ = model == "gpt2" ? Kind::ByteLevel : Kind::SentencePiece;
  t.tokens_ = str_array(g.at("tokenizer.ggml.tokens"));
  size_t n = t.tokens_.size();
  if (const gguf::Value* s = g.find("tokenizer.ggml.scores")) {
    RLX_CHECK(s->arr.size() == n, "[tokenizer] ", label, ": ", s->arr.size(), " scores for ", n, " tokens");
    for (const gguf::Value& e : s->arr) t.scores_.push_back(static_cast<float>(e.as_float()));
  } else {
    t.scores_.assign(n, 0.0f);
  }
  if (const gguf::Value* ty = g.find("tokenizer.ggml.token_type")) {
    RLX_CHECK(ty->arr.size() == n, "[tokenizer] ", label, ": ", ty->arr.size(), " token types for ", n, " tokens");
    for (const gguf::Value& e : ty->arr) t.types_.push_back(static_cast<int32_t>(e.as_int()));
  }
  if (const gguf::Value* m = g.find("tokenizer.ggml.merges")) {
    std::vector<std::string> merges = str_array(*m);
    for (size_t i = 0; i < merges.size(); ++i) t.merge_rank_.emplace(merges[i], static_cast<int32_t>(i));
  }
  auto id_key = [&](const char* k) {
    int64_t v = g.get_int(k, -1);
    RLX_CHECK(v < static_cast<int64_t>(n), "[tokenizer] ", label, ": ", k, " = ", v, " outside the vocabulary (", n, ")");
    return v;
  };
  t.bos_ = id_key("tokenizer.ggml.bos_token_id");
  t.eos_ = id_key("tokenizer.ggml.eos_token_id");
  t.unk_ = id_key("tokenizer.ggml.unknown_token_id");
  auto flag = [&](const char* k, bool def) {
    const gguf::Value* v = g.find(k);
    return v ? v->as_int() != 0 : def;
  };
  bool spm = t.kind_ == Kind::SentencePiece;
  t.add_bos_ = flag("tokenizer.ggml.add_bos_token", spm);
  t.add_eos_ = flag("tokenizer.ggml.add_eos_token", false);
  t.add_space_prefix_ = spm && flag("tokenizer.ggml.add_space_prefix", true);
  if (!spm) {
    gguf_pre_regex(g.get_str("tokenizer.ggml.pre", "default"), t.split_regex_, t.ignore_merges_);
    t.nfc_ = g.get_str("tokenizer.ggml.pre", "") == "qwen2";
  }
  t.finish();
  int64_t eot = g.get_int("tokenizer.ggml.eot_token_id", -1);
  if (eot >= 0 && eot < static_cast<int64_t>(n) && eot != t.eos_) t.stop_ids_.push_back(eot);
  return t;
}

namespace {

// Reads HF pre_tokenizer JSON into regexes; returns false for a construct this reader lacks.
bool hf_pre(const nlohmann::json& p, std::vector<std::string>& re, bool& metaspace, std::string& prepend, std::string& why) {
  if (p.is_null()) return true;
  std::string type = p.value("type", std::string());
  if (type == "Sequence") {
    for (const auto& e : p["pretokenizers"])
      if (!hf_pre(e, re, metaspace, prepend, why)) return false;
    return true;
  }
  if (type == "ByteLevel") {
    if (p.value("add_prefix_space", false)) return why = "ByteLevel add_prefix_space", false;
    if (p.value("use_regex", true)) re.push_back(kGpt2Regex);
    return true;
  }
  if (type == "Split") {
    if (p.value("behavior", std::string()) != "Isolated" || p.value("invert", false))
      return why = "Split behavior other than Isolated", false;
    const auto& pat = p["pattern"];
    if (pat.contains("Regex")) re.push_back(pat["Regex"].get<std::string>());
    else return why = "Split by String", false;
    return true;
  }
  if (type == "Digits") {
    re.push_back(p.value("individual_digits", false) ? "\\p{N}" : "\\p{N}+");
    return true;
  }
  if (type == "Metaspace") {
    if (p.value("split", false)) return why = "Metaspace split", false;
    metaspace = true;
    prepend = p.value("prepend_scheme", std::string(p.value("add_prefix_space", true) ? "always" : "never"));
    return true;
  }
  return why = "pre_tokenizer " + type, false;
}

}  // namespace

BpeTokenizer BpeTokenizer::from_hf_json(const std::string& path) {
  std::ifstream f(path);
  RLX_CHECK(f.good(), "[tokenizer] ", path, ": cannot open");
  nlohmann::json j;
  try {
    f >> j;
  } catch (const std::exception& e) {
    fail("[tokenizer] ", path, ": bad JSON: ", e.what());
  }
  BpeTokenizer t;
  try {
    const auto& m = j.at("model");
    RLX_CHECK(m.value("type", std::string()) == "BPE", "[tokenizer] ", path, ": model type '",
              m.value("type", std::string()), "' (a BPE tokenizer.json is expected)");
    size_t n = 0;
    for (auto& [tok, id] : m.at("vocab").items()) n = std::max(n, id.get<size_t>() + 1);
    for (const auto& a : j.value("added_tokens", nlohmann::json::array())) n = std::max(n, a.at("id").get<size_t>() + 1);
    t.tokens_.assign(n, "");
    t.types_.assign(n, kNormal);
    t.scores_.assign(n, 0.0f);
    for (auto& [tok, id] : m.at("vocab").items()) t.tokens_[id.get<size_t>()] = tok;
    int32_t rank = 0;
    for (const auto& mg : m.value("merges", nlohmann::json::array()))
      t.merge_rank_.emplace(mg.is_string() ? mg.get<std::string>() : mg[0].get<std::string>() + " " + mg[1].get<std::string>(), rank++);
    t.byte_fallback_ = m.value("byte_fallback", false);
    t.ignore_merges_ = m.value("ignore_merges", false);
    for (const auto& a : j.value("added_tokens", nlohmann::json::array())) {
      size_t id = a.at("id").get<size_t>();
      t.tokens_[id] = a.at("content").get<std::string>();
      t.types_[id] = a.value("special", false) ? kControl : kUserDefined;
    }
    bool metaspace = false;
    std::string prepend = "always", why;
    // Llama 2 style: the normalizer prepends U+2581 and turns spaces into it.
    const auto& norm = j.value("normalizer", nlohmann::json());
    if (!norm.is_null()) {
      std::vector<nlohmann::json> parts = norm.value("type", std::string()) == "Sequence"
                                              ? norm["normalizers"].get<std::vector<nlohmann::json>>()
                                              : std::vector<nlohmann::json>{norm};
      for (const auto& p : parts) {
        std::string ty = p.value("type", std::string());
        if (ty == "Prepend" || ty == "Replace") metaspace = true;
        else if (ty == "NFC") t.nfc_ = true;
        else fail("[tokenizer] ", path, ": normalizer ", ty, " is not supported");
      }
    }
    bool metaspace_pre = false;
    RLX_CHECK(hf_pre(j.value("pre_tokenizer", nlohmann::json()), t.split_regex_, metaspace_pre, prepend, why),
              "[tokenizer] ", path, ": ", why, " is not supported");
    metaspace = metaspace || metaspace_pre;
    t.kind_ = metaspace || t.byte_fallback_ ? Kind::SentencePiece : Kind::ByteLevel;
    t.add_space_prefix_ = t.kind_ == Kind::SentencePiece && prepend != "never";
    t.prefix_first_only_ = prepend == "first";
    t.metaspace_ = metaspace_pre;
    if (m.contains("unk_token") && m["unk_token"].is_string()) {
      auto it = m.at("vocab").find(m["unk_token"].get<std::string>());
      if (it != m.at("vocab").end()) t.unk_ = it->get<int64_t>();
    }
    t.finish();
    // BOS/EOS from the post-processor template ("single": [SpecialToken <s>, Sequence A, ...]).
    const auto& pp = j.value("post_processor", nlohmann::json());
    std::vector<nlohmann::json> procs;
    if (!pp.is_null()) {
      if (pp.value("type", std::string()) == "Sequence") procs = pp["processors"].get<std::vector<nlohmann::json>>();
      else procs = {pp};
    }
    for (const auto& p : procs) {
      if (p.value("type", std::string()) != "TemplateProcessing") continue;
      bool seen_a = false;
      for (const auto& piece : p.at("single")) {
        if (piece.contains("Sequence")) seen_a = true;
        else if (piece.contains("SpecialToken")) {
          int64_t id = t.find(piece["SpecialToken"]["id"].get<std::string>());
          if (!seen_a) t.bos_ = id, t.add_bos_ = id >= 0;
          else t.eos_ = id, t.add_eos_ = id >= 0;
        }
      }
    }
  } catch (const nlohmann::json::exception& e) {
    fail("[tokenizer] ", path, ": unexpected tokenizer.json layout: ", e.what());
  }
  // tokenizer_config.json beside it names bos/eos when the post-processor does not.
  std::filesystem::path cfg = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  std::ifstream cf(cfg);
  if (cf.good()) {
    nlohmann::json c = nlohmann::json::parse(cf, nullptr, false);
    auto tok = [&](const char* k) -> int64_t {
      if (!c.is_object() || !c.contains(k)) return -1;
      const auto& v = c[k];
      if (v.is_string()) return t.find(v.get<std::string>());
      if (v.is_object() && v.contains("content")) return t.find(v["content"].get<std::string>());
      return -1;
    };
    if (t.bos_ < 0) t.bos_ = tok("bos_token");
    int64_t e = tok("eos_token");
    if (e >= 0 && !t.add_eos_) t.eos_ = e;
  }
  return t;
}

}  // namespace rlx::models
