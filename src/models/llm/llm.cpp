// Llm: loading model + tokenizer + chat template from one source, prompt encoding, streamed text.
#include "models/llm/llm.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "rlx/error.h"
#include "rlx/gguf.h"

namespace rlx::models {

namespace fs = std::filesystem;

namespace {

// Bytes at the end of `s` that start an incomplete UTF-8 character.
size_t incomplete_utf8_tail(const std::string& s) {
  size_t n = s.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    unsigned char c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

}  // namespace

std::string TextStream::push(int64_t id) {
  if (stopped_) return "";
  // Padded model vocabularies (logit rows beyond the tokenizer) have no text, as in HF decode.
  if (id < 0 || id >= tok_.vocab_size()) return "";
  ids_.push_back(id);
  text_ = tok_.decode(ids_, true);
  for (const std::string& s : stop_) {
    size_t p = s.empty() ? std::string::npos : text_.find(s, emitted_ > s.size() ? emitted_ - s.size() : 0);
    if (p != std::string::npos) {
      stopped_ = true;
      std::string out = p > emitted_ ? text_.substr(emitted_, p - emitted_) : "";
      emitted_ = std::max(emitted_, p);
      return out;
    }
  }
  size_t safe = text_.size() - incomplete_utf8_tail(text_);
  // Hold back a suffix that is a prefix of some stop string.
  for (const std::string& s : stop_)
    for (size_t k = std::min(s.size() - 1, text_.size()); k > 0; --k)
      if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
        safe = std::min(safe, text_.size() - k);
        break;
      }
  if (safe <= emitted_) return "";
  std::string out = text_.substr(emitted_, safe - emitted_);
  emitted_ = safe;
  return out;
}

std::string TextStream::flush() {
  if (stopped_ || emitted_ >= text_.size()) return "";
  std::string out = text_.substr(emitted_);
  emitted_ = text_.size();
  return out;
}

std::unique_ptr<Llm> Llm::load(const std::string& path, const std::string& device, const LoadOptions& o) {
  auto m = std::make_unique<Llm>();
  if (is_gguf_path(path)) {
    gguf::File g = gguf::File::open(path);
    m->tok_ = BpeTokenizer::from_gguf(g, path);
    m->tmpl_src_ = g.get_str("tokenizer.chat_template", "");
  } else {
    fs::path tj = fs::path(path) / "tokenizer.json";
    RLX_CHECK(fs::exists(tj), "[llm] ", path, ": no tokenizer.json");
    m->tok_ = BpeTokenizer::from_hf_json(tj.string());
    std::ifstream cf(fs::path(path) / "tokenizer_config.json");
    if (cf.good()) {
      nlohmann::json c = nlohmann::json::parse(cf, nullptr, false);
      if (c.is_object() && c.contains("chat_template") && c["chat_template"].is_string())
        m->tmpl_src_ = c["chat_template"].get<std::string>();
    }
    if (m->tmpl_src_.empty()) {
      std::ifstream jf(fs::path(path) / "chat_template.jinja");
      if (jf.good()) m->tmpl_src_.assign(std::istreambuf_iterator<char>(jf), {});
    }
  }
  if (!m->tmpl_src_.empty()) m->tmpl_ = std::make_unique<ChatTemplate>(m->tmpl_src_);
  m->model_ = std::make_unique<DecoderModel>(load_decoder(path, o), device);
  RLX_CHECK(m->tok_.vocab_size() <= m->model_->vocab(), "[llm] ", path, ": tokenizer has ", m->tok_.vocab_size(),
            " tokens but the model's vocabulary is ", m->model_->vocab());
  return m;
}

std::string Llm::apply_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  RLX_CHECK(tmpl_, "[llm] this model has no chat template (tokenizer.chat_template)");
  nlohmann::json msgs = nlohmann::json::array();
  for (const ChatMessage& c : messages) msgs.push_back({{"role", c.role}, {"content", c.content}});
  auto tok = [&](int64_t id) { return id >= 0 ? tok_.token(id) : std::string(); };
  nlohmann::json ctx = {{"messages", msgs},
                        {"add_generation_prompt", add_generation_prompt},
                        {"bos_token", tok(tok_.bos())},
                        {"eos_token", tok(tok_.eos())}};
  return tmpl_->render(ctx);
}

std::vector<int64_t> Llm::encode_prompt(const std::string& text, bool chat) const {
  // A rendered chat template already carries BOS when the model wants it.
  return tok_.encode(text, !chat);
}

bool Llm::is_stop_token(int64_t id) const {
  return id == tok_.eos() || std::find(tok_.stop_ids().begin(), tok_.stop_ids().end(), id) != tok_.stop_ids().end();
}

TextSession::TextSession(Llm& llm, std::vector<int64_t> prompt, TextOptions o)
    : llm_(llm), prompt_(std::move(prompt)), o_(std::move(o)), rng_(o_.sampling.seed), stream_(llm.tokenizer(), o_.stop) {
  RLX_CHECK(!prompt_.empty(), "[llm] empty prompt");
}

bool TextSession::step() {
  using clk = std::chrono::steady_clock;
  DecoderModel& m = llm_.model();
  if (!cache_) {
    if (o_.max_new <= 0) return false;
    // Capacity fixed up front: the decode graph is compiled once for every step.
    cache_ = std::make_unique<KvCache>(m.num_layers(), 1, m.kv_heads(), static_cast<int64_t>(prompt_.size()) + o_.max_new,
                                       m.head_dim());
    int64_t P = static_cast<int64_t>(prompt_.size());
    auto tc = clk::now();
    m.prepare(1, P, 0, 0);
    if (o_.max_new > 1) m.prepare(1, 1, P, cache_->capacity);
    stats_.compile_ms = std::chrono::duration<double, std::milli>(clk::now() - tc).count();
    Tensor ids(DType::i64, {1, P});
    std::copy(prompt_.begin(), prompt_.end(), ids.data<int64_t>());
    auto t0 = clk::now();
    last_ = m.step(ids, 0, cache_.get());
    cache_->append(last_.new_k, last_.new_v);
    stats_.prefill_ms = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
  } else {
    if (static_cast<int64_t>(out_.size()) >= o_.max_new) return false;
    Tensor next(DType::i64, {1, 1});
    next.data<int64_t>()[0] = out_.back();
    auto t0 = clk::now();
    last_ = m.step(next, cache_->len, cache_.get());
    cache_->append(last_.new_k, last_.new_v);
    stats_.decode_ms += std::chrono::duration<double, std::milli>(clk::now() - t0).count();
    ++stats_.decode_tokens;
  }
  return choose(last_.logits.data<float>());
}

bool TextSession::choose(float* lg) {
  const int64_t V = llm_.model().vocab();
  if (o_.sampling.repeat_penalty != 1.0) {
    std::vector<int64_t> recent(prompt_);
    recent.insert(recent.end(), out_.begin(), out_.end());
    if (static_cast<int64_t>(recent.size()) > o_.sampling.repeat_last_n)
      recent.erase(recent.begin(), recent.end() - o_.sampling.repeat_last_n);
    apply_repeat_penalty(lg, V, recent, o_.sampling.repeat_penalty);
  }
  int64_t tok = sample_token(lg, V, o_.sampling, rng_);
  out_.push_back(tok);
  if (llm_.is_stop_token(tok)) return false;
  pending_ += stream_.push(tok);
  return !stream_.stopped();
}

bool TextSession::feed(float* logits) {
  if (done_) return false;
  done_ = !choose(logits) || static_cast<int64_t>(out_.size()) >= o_.max_new;
  return !done_;
}

std::string TextSession::take_text() {
  if (done_) pending_ += stream_.flush();
  std::string out;
  out.swap(pending_);
  return out;
}

bool TextSession::next(std::string& piece) {
  while (!done_ && pending_.empty()) done_ = !step();
  if (done_) pending_ += stream_.flush();
  piece.swap(pending_);
  pending_.clear();
  return !piece.empty();
}

std::string Llm::generate(const std::vector<int64_t>& prompt, const TextOptions& o,
                          const std::function<bool(const std::string&)>& on_text, GenerateStats* stats) {
  TextSession s(*this, prompt, o);
  std::string all, piece;
  while (s.next(piece)) {
    all += piece;
    if (on_text && !on_text(piece)) break;
  }
  if (stats) *stats = s.stats();
  return all;
}

}  // namespace rlx::models
