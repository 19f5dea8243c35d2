// WordPiece tokenizer: normalizer, pre-tokenizer, greedy subword split, special tokens, batching.
#include "models/tokenizers/wordpiece.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "formats/file_io.h"
#include "rlx/error.h"

namespace rlx::models {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// UTF-8 → code points; malformed bytes become U+FFFD (which clean_text then drops).
std::vector<UChar32> decode_utf8(const std::string& s) {
  std::vector<UChar32> out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned c = p[i];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > n) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    UChar32 cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    bool ok = true;
    for (int k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) ok = false;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    static const UChar32 kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (!ok || cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

void append_utf8(std::string& s, UChar32 c) {
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (c >> 18));
    s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
}

bool is_whitespace(UChar32 c) {
  return c == '\t' || c == '\n' || c == '\r' || u_hasBinaryProperty(c, UCHAR_WHITE_SPACE);
}

// Unicode "Other" (Cc Cf Cs Co Cn), except the whitespace controls.
bool is_control(UChar32 c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  switch (u_charType(c)) {
    case U_CONTROL_CHAR: case U_FORMAT_CHAR: case U_SURROGATE: case U_PRIVATE_USE_CHAR: case U_UNASSIGNED:
      return true;
    default:
      return false;
  }
}

// ASCII punctuation (which includes symbols such as $ + < = > ^ ` |) or any Unicode P* category.
bool is_punctuation(UChar32 c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
  switch (u_charType(c)) {
    case U_DASH_PUNCTUATION: case U_START_PUNCTUATION: case U_END_PUNCTUATION: case U_CONNECTOR_PUNCTUATION:
    case U_OTHER_PUNCTUATION: case U_INITIAL_PUNCTUATION: case U_FINAL_PUNCTUATION:
      return true;
    default:
      return false;
  }
}

// The CJK Unified Ideograph blocks BERT splits into single characters.
bool is_cjk(UChar32 c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

std::vector<UChar32> nfd(const std::vector<UChar32>& cps) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* n = icu::Normalizer2::getNFDInstance(err);
  RLX_CHECK(U_SUCCESS(err), "[tokenizer] ICU NFD unavailable: ", u_errorName(err));
  icu::UnicodeString s;
  for (UChar32 c : cps) s.append(c);
  icu::UnicodeString d = n->normalize(s, err);
  RLX_CHECK(U_SUCCESS(err), "[tokenizer] NFD failed: ", u_errorName(err));
  std::vector<UChar32> out;
  for (int32_t i = 0; i < d.length();) {
    UChar32 c = d.char32At(i);
    out.push_back(c);
    i += U16_LENGTH(c);
  }
  return out;
}

// Full, context-free lower-casing of one code point (İ → i + U+0307), as HF does per char.
void lower_into(UChar32 c, std::vector<UChar32>& out) {
  if (c < 0x80) {
    out.push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
    return;
  }
  UChar src[2], dst[8];
  int32_t n = 0;
  U16_APPEND_UNSAFE(src, n, c);
  UErrorCode err = U_ZERO_ERROR;
  int32_t m = u_strToLower(dst, 8, src, n, "", &err);
  if (U_FAILURE(err) || m > 8) {
    out.push_back(u_tolower(c));
    return;
  }
  for (int32_t i = 0; i < m;) {
    UChar32 d;
    U16_NEXT(dst, i, m, d);
    out.push_back(d);
  }
}

json read_json(const std::string& path) {
  std::string text = formats::read_file_bytes(path, "tokenizer");
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail("[tokenizer] ", path, ": not valid JSON: ", e.what());
  }
}

}  // namespace

void WordPieceTokenizer::index() {
  vocab_.clear();
  vocab_.reserve(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) vocab_.emplace(tokens_[i], static_cast<int64_t>(i));
  auto need = [&](const std::string& t, const char* what) {
    int64_t i = id(t);
    RLX_CHECK(i >= 0, "[tokenizer] the ", what, " token '", t, "' is not in the vocabulary");
    return i;
  };
  unk_id_ = need(cfg_.unk, "unknown");
  cls_id_ = need(cfg_.cls, "classifier");
  sep_id_ = need(cfg_.sep, "separator");
  pad_id_ = need(cfg_.pad, "padding");
  for (const std::string* t : {&cfg_.unk, &cfg_.cls, &cfg_.sep, &cfg_.pad})
    if (std::find(special_.begin(), special_.end(), *t) == special_.end()) special_.push_back(*t);
  if (id("[MASK]") >= 0 && std::find(special_.begin(), special_.end(), "[MASK]") == special_.end())
    special_.push_back("[MASK]");
}

WordPieceTokenizer WordPieceTokenizer::from_dir(const std::string& dir) {
  fs::path d(dir);
  if (fs::exists(d / "tokenizer.json")) return from_tokenizer_json((d / "tokenizer.json").string());
  RLX_CHECK(fs::exists(d / "vocab.txt"), "[tokenizer] ", dir, ": neither tokenizer.json nor vocab.txt found");
  WordPieceConfig cfg;
  if (fs::exists(d / "tokenizer_config.json")) {
    json c = read_json((d / "tokenizer_config.json").string());
    if (c.contains("do_lower_case") && c["do_lower_case"].is_boolean()) cfg.lowercase = c["do_lower_case"];
    if (c.contains("strip_accents") && c["strip_accents"].is_boolean()) cfg.strip_accents = c["strip_accents"] ? 1 : 0;
    if (c.contains("tokenize_chinese_chars") && c["tokenize_chinese_chars"].is_boolean())
      cfg.chinese_chars = c["tokenize_chinese_chars"];
    for (auto [key, field] : {std::pair{"unk_token", &cfg.unk}, {"cls_token", &cfg.cls}, {"sep_token", &cfg.sep},
                              {"pad_token", &cfg.pad}})
      if (c.contains(key) && c[key].is_string()) *field = c[key].get<std::string>();
    if (c.contains("model_max_length") && c["model_max_length"].is_number_integer())
      cfg.model_max_length = std::min<int64_t>(c["model_max_length"].get<int64_t>(), 1 << 20);
  }
  return from_vocab_txt((d / "vocab.txt").string(), cfg);
}

WordPieceTokenizer WordPieceTokenizer::from_vocab_txt(const std::string& path, WordPieceConfig cfg) {
  std::string text = formats::read_file_bytes(path, "tokenizer");
  WordPieceTokenizer t;
  t.cfg_ = std::move(cfg);
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(start, nl - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    t.tokens_.push_back(line);
    start = nl + 1;
  }
  RLX_CHECK(!t.tokens_.empty(), "[tokenizer] ", path, ": empty vocabulary");
  t.index();
  return t;
}

WordPieceTokenizer WordPieceTokenizer::from_tokenizer_json(const std::string& path) {
  json j = read_json(path);
  auto bad = [&](const std::string& what) { fail("[tokenizer] ", path, ": ", what); };
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) bad("no 'model' object");
  const json& m = j["model"];
  if (m.value("type", "") != "WordPiece") bad("model type '" + m.value("type", std::string("?")) + "' is not WordPiece");
  if (!m.contains("vocab") || !m["vocab"].is_object()) bad("WordPiece model has no vocab object");
  WordPieceTokenizer t;
  WordPieceConfig& c = t.cfg_;
  c.unk = m.value("unk_token", c.unk);
  c.prefix = m.value("continuing_subword_prefix", c.prefix);
  c.max_chars_per_word = m.value("max_input_chars_per_word", c.max_chars_per_word);
  t.tokens_.assign(m["vocab"].size(), std::string());
  std::vector<bool> seen(t.tokens_.size());
  for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) {
    if (!it.value().is_number_integer()) bad("vocab id of '" + it.key() + "' is not an integer");
    int64_t i = it.value().get<int64_t>();
    if (i < 0 || i >= static_cast<int64_t>(t.tokens_.size()) || seen[i])
      bad("vocab ids are not a permutation of 0..N-1 (id " + std::to_string(i) + ")");
    seen[i] = true;
    t.tokens_[i] = it.key();
  }
  if (j.contains("normalizer") && !j["normalizer"].is_null()) {
    const json& n = j["normalizer"];
    if (n.value("type", "") != "BertNormalizer")
      bad("normalizer '" + n.value("type", std::string("?")) + "' is not supported (only BertNormalizer)");
    c.clean_text = n.value("clean_text", true);
    c.chinese_chars = n.value("handle_chinese_chars", true);
    c.lowercase = n.value("lowercase", true);
    if (n.contains("strip_accents") && n["strip_accents"].is_boolean()) c.strip_accents = n["strip_accents"] ? 1 : 0;
  } else {
    c.clean_text = c.chinese_chars = c.lowercase = false;
    c.strip_accents = 0;
  }
  if (j.contains("pre_tokenizer") && !j["pre_tokenizer"].is_null() &&
      j["pre_tokenizer"].value("type", "") != "BertPreTokenizer")
    bad("pre_tokenizer '" + j["pre_tokenizer"].value("type", std::string("?")) + "' is not supported");
  if (j.contains("post_processor") && j["post_processor"].is_object()) {
    const json& p = j["post_processor"];
    if (p.value("type", "") == "BertProcessing") {
      if (p.contains("cls") && p["cls"].is_array()) c.cls = p["cls"][0].get<std::string>();
      if (p.contains("sep") && p["sep"].is_array()) c.sep = p["sep"][0].get<std::string>();
    } else if (p.value("type", "") == "TemplateProcessing" && p.contains("single") && p["single"].is_array()) {
      const json& s = p["single"];
      if (s.size() == 3 && s[0].contains("SpecialToken") && s[2].contains("SpecialToken")) {
        c.cls = s[0]["SpecialToken"].value("id", c.cls);
        c.sep = s[2]["SpecialToken"].value("id", c.sep);
      } else {
        bad("post_processor template is not [CLS] $A [SEP]");
      }
    }
  }
  if (j.contains("padding") && j["padding"].is_object()) c.pad = j["padding"].value("pad_token", c.pad);
  if (j.contains("added_tokens") && j["added_tokens"].is_array())
    for (auto& a : j["added_tokens"])
      if (a.value("special", false) && a.contains("content")) t.special_.push_back(a["content"].get<std::string>());
  // tokenizer_config.json beside it carries model_max_length.
  fs::path cfgp = fs::path(path).parent_path() / "tokenizer_config.json";
  if (fs::exists(cfgp)) {
    json tc = read_json(cfgp.string());
    if (tc.contains("model_max_length") && tc["model_max_length"].is_number_integer())
      c.model_max_length = std::min<int64_t>(tc["model_max_length"].get<int64_t>(), 1 << 20);
  }
  t.index();
  return t;
}

int64_t WordPieceTokenizer::id(const std::string& token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

const std::string& WordPieceTokenizer::token(int64_t i) const {
  RLX_CHECK(i >= 0 && i < vocab_size(), "[tokenizer] id ", i, " out of range [0, ", vocab_size(), ")");
  return tokens_[i];
}

std::vector<std::string> WordPieceTokenizer::basic_tokenize(const std::string& text) const {
  std::vector<UChar32> cps = decode_utf8(text), buf;
  buf.reserve(cps.size());
  if (cfg_.clean_text) {
    for (UChar32 c : cps) {
      if (c == 0 || c == 0xFFFD || is_control(c)) continue;
      buf.push_back(is_whitespace(c) ? ' ' : c);
    }
    cps.swap(buf);
    buf.clear();
  }
  if (cfg_.chinese_chars) {
    for (UChar32 c : cps) {
      if (is_cjk(c)) {
        buf.push_back(' ');
        buf.push_back(c);
        buf.push_back(' ');
      } else {
        buf.push_back(c);
      }
    }
    cps.swap(buf);
    buf.clear();
  }
  bool strip = cfg_.strip_accents < 0 ? cfg_.lowercase : cfg_.strip_accents == 1;
  if (strip) {
    for (UChar32 c : nfd(cps))
      if (u_charType(c) != U_NON_SPACING_MARK) buf.push_back(c);
    cps.swap(buf);
    buf.clear();
  }
  if (cfg_.lowercase) {
    for (UChar32 c : cps) lower_into(c, buf);
    cps.swap(buf);
    buf.clear();
  }
  // Pre-tokenizer: whitespace separates words; every punctuation char is a word of its own.
  std::vector<std::string> words;
  std::string cur;
  for (UChar32 c : cps) {
    if (is_whitespace(c)) {
      if (!cur.empty()) words.push_back(std::move(cur)), cur.clear();
    } else if (is_punctuation(c)) {
      if (!cur.empty()) words.push_back(std::move(cur)), cur.clear();
      std::string p;
      append_utf8(p, c);
      words.push_back(p);
    } else {
      append_utf8(cur, c);
    }
  }
  if (!cur.empty()) words.push_back(std::move(cur));
  return words;
}

std::vector<int64_t> WordPieceTokenizer::wordpiece(const std::string& word) const {
  // Char boundaries (byte offsets) of the word.
  std::vector<size_t> bounds;
  for (size_t i = 0; i < word.size(); ++i)
    if ((static_cast<unsigned char>(word[i]) & 0xC0) != 0x80) bounds.push_back(i);
  bounds.push_back(word.size());
  int64_t nchars = static_cast<int64_t>(bounds.size()) - 1;
  if (nchars > cfg_.max_chars_per_word) return {unk_id_};
  std::vector<int64_t> out;
  size_t s = 0;  // index into bounds
  std::string piece;
  while (s + 1 < bounds.size()) {
    int64_t found = -1;
    size_t e = bounds.size() - 1;
    for (; e > s; --e) {
      piece.assign(s > 0 ? cfg_.prefix : std::string());
      piece.append(word, bounds[s], bounds[e] - bounds[s]);
      auto it = vocab_.find(piece);
      if (it != vocab_.end()) {
        found = it->second;
        break;
      }
    }
    if (found < 0) return {unk_id_};  // one unknown piece makes the whole word [UNK]
    out.push_back(found);
    s = e;
  }
  return out;
}

std::vector<int64_t> WordPieceTokenizer::tokenize(const std::string& text) const {
  std::vector<int64_t> ids;
  auto run = [&](const std::string& seg) {
    for (const std::string& w : basic_tokenize(seg))
      for (int64_t i : wordpiece(w)) ids.push_back(i);
  };
  // Special tokens written in the text (e.g. "[SEP]") are matched verbatim, leftmost-longest.
  size_t pos = 0, from = 0;
  while (pos < text.size()) {
    size_t best_at = std::string::npos, best_len = 0;
    for (const std::string& sp : special_) {
      size_t f = text.find(sp, pos);
      if (f != std::string::npos && (f < best_at || (f == best_at && sp.size() > best_len))) {
        best_at = f;
        best_len = sp.size();
      }
    }
    if (best_at == std::string::npos) break;
    run(text.substr(from, best_at - from));
    ids.push_back(id(text.substr(best_at, best_len)));
    pos = from = best_at + best_len;
  }
  run(text.substr(from));
  return ids;
}

std::vector<int64_t> WordPieceTokenizer::encode(const std::string& text, int64_t max_length) const {
  if (max_length <= 0) max_length = cfg_.model_max_length;
  RLX_CHECK(max_length >= 2, "[tokenizer] max_length ", max_length, " leaves no room for [CLS] and [SEP]");
  std::vector<int64_t> body = tokenize(text);
  if (static_cast<int64_t>(body.size()) > max_length - 2) body.resize(max_length - 2);
  std::vector<int64_t> ids;
  ids.reserve(body.size() + 2);
  ids.push_back(cls_id_);
  ids.insert(ids.end(), body.begin(), body.end());
  ids.push_back(sep_id_);
  return ids;
}

BatchEncoding WordPieceTokenizer::encode_batch(const std::vector<std::string>& texts, int64_t max_length,
                                               int64_t pad_to) const {
  BatchEncoding b;
  int64_t T = std::max<int64_t>(pad_to, 0);
  for (const std::string& t : texts) {
    b.ids.push_back(encode(t, max_length));
    T = std::max<int64_t>(T, static_cast<int64_t>(b.ids.back().size()));
  }
  int64_t B = static_cast<int64_t>(texts.size());
  b.input_ids = Tensor(DType::i64, {B, T});
  b.attention_mask = Tensor(DType::i64, {B, T});
  b.token_type_ids = Tensor(DType::i64, {B, T});  // zero-filled: single-sequence inputs
  int64_t* ids = b.input_ids.data<int64_t>();
  int64_t* mask = b.attention_mask.data<int64_t>();
  for (int64_t i = 0; i < B; ++i)
    for (int64_t j = 0; j < T; ++j) {
      bool real = j < static_cast<int64_t>(b.ids[i].size());
      ids[i * T + j] = real ? b.ids[i][j] : pad_id_;
      mask[i * T + j] = real ? 1 : 0;
    }
  return b;
}

}  // namespace rlx::models
