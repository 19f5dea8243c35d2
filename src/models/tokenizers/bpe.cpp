// BPE encode/decode: special-token split, pre-tokenization, merges, byte fallback.
#include "models/tokenizers/bpe.h"

#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <queue>

#include "rlx/error.h"

namespace rlx::models {

namespace {

const char* kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

// GPT-2's reversible byte -> code point map: printable Latin-1 bytes map to themselves, the rest to
// U+0100 upwards, so every byte string is a string of visible characters.
struct ByteMap {
  std::string to_utf8[256];
  std::unordered_map<uint32_t, uint8_t> back;
  ByteMap() {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      uint32_t cp = keep ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + n++);
      icu::UnicodeString u(static_cast<UChar32>(cp));
      u.toUTF8String(to_utf8[b]);
      back[cp] = static_cast<uint8_t>(b);
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

// Length of the UTF-8 sequence starting with byte c (1 for stray continuation bytes).
size_t utf8_len(unsigned char c) {
  if (c >= 0xF0) return 4;
  if (c >= 0xE0) return 3;
  if (c >= 0xC0) return 2;
  return 1;
}

std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = std::min(utf8_len(static_cast<unsigned char>(s[i])), s.size() - i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size()) s.replace(p, from.size(), to);
  return s;
}

// Compiled patterns, shared by every tokenizer (a handful of distinct regexes per process).
const icu::RegexPattern* compiled(const std::string& pattern) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<icu::RegexPattern>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(pattern);
  if (it != cache.end()) return it->second.get();
  UErrorCode st = U_ZERO_ERROR;
  UParseError pe;
  std::unique_ptr<icu::RegexPattern> re(icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(pattern), 0, pe, st));
  RLX_CHECK(U_SUCCESS(st), "[tokenizer] bad pre-tokenizer regex '", pattern, "': ", u_errorName(st));
  return cache.emplace(pattern, std::move(re)).first->second.get();
}

// Splits each piece by `pattern`, keeping both the matches and the text between them (HF "Isolated").
std::vector<std::string> regex_split(const std::vector<std::string>& pieces, const std::string& pattern) {
  UErrorCode st = U_ZERO_ERROR;
  const icu::RegexPattern* re = compiled(pattern);
  std::vector<std::string> out;
  for (const std::string& p : pieces) {
    icu::UnicodeString u = icu::UnicodeString::fromUTF8(p);
    std::unique_ptr<icu::RegexMatcher> m(re->matcher(u, st));
    int32_t last = 0;
    auto emit = [&](int32_t a, int32_t b) {
      if (b <= a) return;
      std::string s;
      u.tempSubStringBetween(a, b).toUTF8String(s);
      out.push_back(std::move(s));
    };
    while (m->find(st) && U_SUCCESS(st)) {
      int32_t a = m->start(st), b = m->end(st);
      if (b == a) continue;
      emit(last, a);
      emit(a, b);
      last = b;
    }
    emit(last, u.length());
  }
  return out;
}

}  // namespace

int64_t BpeTokenizer::find(const std::string& t) const {
  auto it = ids_.find(t);
  return it == ids_.end() ? -1 : it->second;
}

bool BpeTokenizer::is_control(int64_t id) const {
  return id >= 0 && id < static_cast<int64_t>(types_.size()) && types_[id] == kControl;
}

void BpeTokenizer::finish() {
  ids_.clear();
  for (size_t i = 0; i < tokens_.size(); ++i) ids_.emplace(tokens_[i], static_cast<int64_t>(i));
  if (types_.size() < tokens_.size()) types_.resize(tokens_.size(), kNormal);
  specials_.clear();
  for (size_t i = 0; i < tokens_.size(); ++i)
    if ((types_[i] == kControl || types_[i] == kUserDefined) && !tokens_[i].empty()) specials_.push_back(tokens_[i]);
  std::stable_sort(specials_.begin(), specials_.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  for (const char* s : {"<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<|endoftext|>", "<|end|>", "<end_of_turn>", "<|eom_id|>"}) {
    int64_t id = find(s);
    if (id >= 0 && id != eos_ && types_[id] == kControl) stop_ids_.push_back(id);
  }
}

void BpeTokenizer::bpe_word(const std::string& word, std::vector<int64_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    int64_t id = find(word);
    if (id >= 0) return out.push_back(id);
  }
  std::vector<std::string> sym = utf8_chars(word);
  bool by_rank = !merge_rank_.empty();
  // Merges in best-first order (lowest rank, or highest score of the merged token; the leftmost pair
  // on ties) with a heap over adjacent pairs, so a long word costs O(n log n), not O(n^2).
  size_t n = sym.size();
  std::vector<size_t> prev(n), next(n);
  std::vector<uint32_t> version(n, 0);
  for (size_t i = 0; i < n; ++i) prev[i] = i - 1, next[i] = i + 1;  // prev[0] wraps to SIZE_MAX
  struct Cand {
    double pri;
    size_t left, right;
    uint32_t vl, vr;
    bool operator<(const Cand& o) const { return pri != o.pri ? pri > o.pri : left > o.left; }
  };
  std::priority_queue<Cand> heap;
  auto consider = [&](size_t l, size_t r) {
    if (l >= n || r >= n) return;
    if (by_rank) {
      auto it = merge_rank_.find(sym[l] + " " + sym[r]);
      if (it != merge_rank_.end()) heap.push({static_cast<double>(it->second), l, r, version[l], version[r]});
    } else {
      int64_t id = find(sym[l] + sym[r]);
      if (id >= 0) heap.push({-static_cast<double>(scores_[id]), l, r, version[l], version[r]});
    }
  };
  for (size_t i = 0; i + 1 < n; ++i) consider(i, i + 1);
  std::vector<bool> alive(n, true);
  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    if (!alive[c.left] || !alive[c.right] || next[c.left] != c.right || version[c.left] != c.vl ||
        version[c.right] != c.vr)
      continue;  // a stale pair: one side has merged since
    sym[c.left] += sym[c.right];
    alive[c.right] = false;
    ++version[c.left];
    next[c.left] = next[c.right];
    if (next[c.right] < n) prev[next[c.right]] = c.left;
    consider(prev[c.left], c.left);
    consider(c.left, next[c.left]);
  }
  std::vector<std::string> merged;
  for (size_t i = 0; i < n; ++i)
    if (alive[i]) merged.push_back(std::move(sym[i]));
  sym.swap(merged);
  for (const std::string& s : sym) {
    int64_t id = find(s);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    bool fell_back = false;
    if (byte_fallback_ && kind_ == Kind::SentencePiece) {
      fell_back = true;
      std::vector<int64_t> bytes;
      for (unsigned char c : s) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "<0x%02X>", c);
        int64_t b = find(hex);
        if (b < 0) fell_back = false;
        bytes.push_back(b);
      }
      if (fell_back) out.insert(out.end(), bytes.begin(), bytes.end());
    }
    if (!fell_back) {
      RLX_CHECK(unk_ >= 0, "[tokenizer] '", s, "' is not in the vocabulary and there is no unknown token");
      out.push_back(unk_);
    }
  }
}

void BpeTokenizer::encode_plain(const std::string& text, bool first, std::vector<int64_t>& out) const {
  if (text.empty()) return;
  if (kind_ == Kind::SentencePiece) {
    std::string t = replace_all(text, " ", kSpace);
    // HF Metaspace adds no prefix to text that already starts with a space.
    bool skip = metaspace_ && !text.empty() && text[0] == ' ';
    if (add_space_prefix_ && (first || !prefix_first_only_) && !skip) t = kSpace + t;
    return bpe_word(t, out);
  }
  std::vector<std::string> pieces{text};
  if (nfc_) {
    UErrorCode st = U_ZERO_ERROR;
    const icu::Normalizer2* n = icu::Normalizer2::getNFCInstance(st);
    std::string s;
    n->normalize(icu::UnicodeString::fromUTF8(text), st).toUTF8String(s);
    pieces = {s};
  }
  for (const std::string& re : split_regex_) pieces = regex_split(pieces, re);
  const ByteMap& bm = byte_map();
  for (const std::string& p : pieces) {
    std::string mapped;
    for (unsigned char c : p) mapped += bm.to_utf8[c];
    bpe_word(mapped, out);
  }
}

std::vector<int64_t> BpeTokenizer::encode(const std::string& text, bool add_special) const {
  std::vector<int64_t> out;
  if (add_special && add_bos_ && bos_ >= 0) out.push_back(bos_);
  size_t start = 0, i = 0;
  bool first = true;
  while (i < text.size()) {
    const std::string* hit = nullptr;
    for (const std::string& s : specials_)
      if (text.compare(i, s.size(), s) == 0) {
        hit = &s;
        break;
      }
    if (!hit) {
      ++i;
      continue;
    }
    encode_plain(text.substr(start, i - start), first && start == 0, out);
    out.push_back(find(*hit));
    first = false;
    i += hit->size();
    start = i;
  }
  encode_plain(text.substr(start), first, out);
  if (add_special && add_eos_ && eos_ >= 0) out.push_back(eos_);
  return out;
}

std::string BpeTokenizer::decode(const std::vector<int64_t>& ids, bool skip_special) const {
  std::string out;
  const ByteMap& bm = byte_map();
  bool at_start = true;
  for (int64_t id : ids) {
    RLX_CHECK(id >= 0 && id < vocab_size(), "[tokenizer] token id ", id, " out of range [0, ", vocab_size(), ")");
    int32_t ty = types_[id];
    if (skip_special && ty == kControl) continue;
    const std::string& t = tokens_[id];
    if (ty == kControl || ty == kUserDefined) {
      out += t;
    } else if (kind_ == Kind::SentencePiece) {
      unsigned v = 0;
      if (ty == kByte || (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && std::sscanf(t.c_str(), "<0x%02X>", &v) == 1)) {
        if (ty == kByte) std::sscanf(t.c_str(), "<0x%02X>", &v);
        out += static_cast<char>(v);
      } else {
        std::string s = replace_all(t, kSpace, " ");
        if (at_start && add_space_prefix_ && !s.empty() && s[0] == ' ') s.erase(0, 1);
        out += s;
      }
    } else {
      icu::UnicodeString u = icu::UnicodeString::fromUTF8(t);
      for (int32_t k = 0; k < u.length();) {
        UChar32 cp = u.char32At(k);
        auto it = bm.back.find(static_cast<uint32_t>(cp));
        if (it != bm.back.end()) out += static_cast<char>(it->second);
        else icu::UnicodeString(cp).toUTF8String(out);
        k += U16_LENGTH(cp);
      }
    }
    at_start = false;
  }
  return out;
}

}  // namespace rlx::models
