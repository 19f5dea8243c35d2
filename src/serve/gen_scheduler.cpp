#include "serve/gen_scheduler.h"

#include <algorithm>

namespace rlx::serve {

bool GenJob::next(std::string& piece) {
  std::unique_lock<std::mutex> l(mu);
  cv.wait(l, [&] { return finished || !pieces.empty(); });
  if (pieces.empty()) return false;
  piece = std::move(pieces.front());
  pieces.pop_front();
  return true;
}

int GenJob::next_for(std::string& piece, std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> l(mu);
  if (!cv.wait_for(l, wait, [&] { return finished || !pieces.empty(); })) return 0;
  if (pieces.empty()) return -1;
  piece = std::move(pieces.front());
  pieces.pop_front();
  return 1;
}

GenScheduler::GenScheduler(std::string name, models::Llm& llm, GenLimits lim, Metrics& m)
    : name_(std::move(name)), llm_(llm), lim_(lim), metrics_(m) {
  thread_ = std::thread([this] { loop(); });
}

GenScheduler::~GenScheduler() { stop(); }

void GenScheduler::stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void GenScheduler::submit(const std::shared_ptr<GenJob>& job) {
  std::lock_guard<std::mutex> l(mu_);
  auto refuse = [&](int status, std::string why) {
    std::lock_guard<std::mutex> jl(job->mu);
    job->status = status;
    job->error = std::move(why);
    job->finished = true;
  };
  if (stopping_) return refuse(503, "the server is shutting down");
  if (static_cast<int64_t>(queue_.size()) >= lim_.max_queue) {
    metrics_.add("rlx_rejected_total", "model=\"" + name_ + "\",reason=\"queue_full\"");
    return refuse(429, "the generation queue of model '" + name_ + "' is full (" + std::to_string(lim_.max_queue) +
                           " requests); retry later");
  }
  queue_.push_back(job);
  metrics_.set("rlx_queue_depth", "model=\"" + name_ + "\"", static_cast<double>(queue_.size()));
  cv_.notify_one();
}

void GenScheduler::finish(GenJob& j, const std::string& reason, int64_t tokens) {
  {
    std::lock_guard<std::mutex> l(j.mu);
    j.finish_reason = reason;
    j.completion_tokens = tokens;
    j.finished = true;
  }
  j.cv.notify_all();
  metrics_.add("rlx_tokens_total", "model=\"" + name_ + "\",kind=\"completion\"", static_cast<double>(tokens));
}

namespace {
int64_t pow2_at_least(int64_t n) {
  int64_t r = 1;
  while (r < n) r *= 2;
  return r;
}
}  // namespace

void GenScheduler::reserve(const std::vector<Active>& active, int64_t rows, int64_t need) {
  // Rows grow to a power of two and capacity to a multiple of 256 slots, so the decode graphs
  // (compiled per rows x capacity) are few; existing rows are copied over.
  rows = pow2_at_least(rows);
  need = (need + 255) / 256 * 256;
  if (cache_.batch >= rows && cache_.capacity >= need) return;
  models::DecoderModel& m = llm_.model();
  models::KvCache grown(m.num_layers(), std::max(rows, cache_.batch), m.kv_heads(), std::max(need, cache_.capacity),
                        m.head_dim());
  for (size_t i = 0; i < active.size() && cache_.batch > 0; ++i)
    if (active[i].pos > 0) grown.copy_row(static_cast<int64_t>(i), cache_, static_cast<int64_t>(i), active[i].pos);
  cache_ = std::move(grown);
}

bool GenScheduler::publish(Active& a) {
  GenJob& j = *a.job;
  std::string piece = a.session->take_text();
  if (a.first && !piece.empty()) {
    a.first = false;
    metrics_.observe("rlx_time_to_first_token_seconds", "model=\"" + name_ + "\"",
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - j.start).count());
  }
  if (!piece.empty()) {
    std::lock_guard<std::mutex> l(j.mu);
    j.pieces.push_back(std::move(piece));
  }
  j.cv.notify_all();
  if (!a.session->finished()) return true;
  // Ended: "length" when max_tokens ran out without an end-of-turn token, else "stop".
  const auto& toks = a.session->tokens();
  const int64_t n = static_cast<int64_t>(toks.size());
  bool by_length = n >= j.opts.max_new && !(n && llm_.is_stop_token(toks.back()));
  finish(j, by_length ? "length" : "stop", n);
  return false;
}

bool GenScheduler::expired(Active& a) {
  GenJob& j = *a.job;
  const int64_t n = a.session ? static_cast<int64_t>(a.session->tokens().size()) : 0;
  if (j.cancelled) {
    metrics_.add("rlx_cancelled_total", "model=\"" + name_ + "\",reason=\"client_gone\"");
    finish(j, "cancelled", n);
    return true;
  }
  if (std::chrono::steady_clock::now() > j.deadline) {
    metrics_.add("rlx_cancelled_total", "model=\"" + name_ + "\",reason=\"timeout\"");
    finish(j, "length", n);
    return true;
  }
  return false;
}

void GenScheduler::fail(Active& a, const std::exception& ex) {
  GenJob& j = *a.job;
  {
    std::lock_guard<std::mutex> l(j.mu);
    if (a.first) j.status = 500;
    j.error = std::string("[serve] generation failed: ") + ex.what();
  }
  finish(j, "stop", a.session ? static_cast<int64_t>(a.session->tokens().size()) : 0);
}

bool GenScheduler::prefill(Active& a, int64_t row) {
  models::DecoderModel& m = llm_.model();
  const int64_t P = static_cast<int64_t>(a.job->prompt.size());
  if (a.job->opts.max_new <= 0) {
    finish(*a.job, "length", 0);
    return false;
  }
  try {
    a.session = std::make_unique<models::TextSession>(llm_, a.job->prompt, a.job->opts);
    Tensor ids(DType::i64, {1, P});
    std::copy(a.job->prompt.begin(), a.job->prompt.end(), ids.data<int64_t>());
    models::StepOutput out = m.step(ids, 0, nullptr);
    cache_.write_row(row, 0, out.new_k, out.new_v);
    a.pos = P;
    a.session->feed(out.logits.data<float>());
  } catch (const std::exception& ex) {
    fail(a, ex);
    return false;
  }
  return publish(a);
}

void GenScheduler::decode(std::vector<Active>& active) {
  // Rows past the active ones (up to the power-of-two bucket) run as empty sequences and are ignored.
  const int64_t n = static_cast<int64_t>(active.size()), rows = pow2_at_least(n);
  if (n == 0) return;
  metrics_.observe("rlx_decode_batch_size", "model=\"" + name_ + "\"", static_cast<double>(n));
  Tensor ids(DType::i64, {rows, 1});
  std::vector<int64_t> pos(static_cast<size_t>(rows), 0);
  for (int64_t i = 0; i < n; ++i) {
    ids.data<int64_t>()[i] = active[i].session->tokens().back();
    pos[i] = active[i].pos;
  }
  models::StepOutput out;
  try {
    out = llm_.model().step(ids, pos, cache_.first_rows(rows));
  } catch (const std::exception& ex) {
    for (Active& a : active) fail(a, ex);
    active.clear();
    return;
  }
  const int64_t V = llm_.model().vocab();
  for (int64_t i = 0; i < n; ++i) {
    cache_.write_row(i, active[i].pos, out.new_k, out.new_v, i);
    active[i].pos += 1;
    active[i].session->feed(out.logits.data<float>() + i * V);
  }
}

void GenScheduler::loop() {
  const std::string lbl = "model=\"" + name_ + "\"";
  std::vector<Active> active;  // active[i] owns row i of cache_
  for (;;) {
    std::vector<Active> fresh;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stopping_ || !queue_.empty() || !active.empty(); });
      if (stopping_ && queue_.empty() && active.empty()) return;
      while (!queue_.empty() && static_cast<int64_t>(active.size() + fresh.size()) < lim_.max_active) {
        Active a;
        a.job = queue_.front();
        queue_.pop_front();
        fresh.push_back(std::move(a));
      }
      metrics_.set("rlx_queue_depth", lbl, static_cast<double>(queue_.size()));
    }
    // Sequences the client left or whose time ran out leave before the step; the rest stay in
    // order, their rows moved down (row j <= i, so copying in order never overwrites a live row).
    std::vector<Active> keep;
    for (size_t i = 0; i < active.size(); ++i) {
      if (expired(active[i])) continue;
      const int64_t j = static_cast<int64_t>(keep.size());
      if (j != static_cast<int64_t>(i)) cache_.copy_row(j, cache_, static_cast<int64_t>(i), active[i].pos);
      keep.push_back(std::move(active[i]));
    }
    active.swap(keep);
    int64_t need = 0;
    for (const auto* list : {&active, &fresh})
      for (const Active& a : *list) need = std::max(need, static_cast<int64_t>(a.job->prompt.size()) + a.job->opts.max_new);
    if (!fresh.empty() || !active.empty()) reserve(active, static_cast<int64_t>(active.size() + fresh.size()), need);
    // The decode step for the sequences already running, then the newcomers' prefills (each
    // writes the row after the last running one, so rows stay dense).
    decode(active);
    keep.clear();
    for (Active& a : active)
      if (publish(a)) {
        const int64_t j = static_cast<int64_t>(keep.size()), i = static_cast<int64_t>(&a - active.data());
        if (j != i) cache_.copy_row(j, cache_, i, a.pos);
        keep.push_back(std::move(a));
      }
    active.swap(keep);
    for (Active& a : fresh) {
      if (expired(a)) continue;
      if (prefill(a, static_cast<int64_t>(active.size()))) active.push_back(std::move(a));
    }
    if (active.empty()) cache_ = models::KvCache{};  // idle: give the memory back
    metrics_.set("rlx_active_sequences", lbl, static_cast<double>(active.size()));
  }
}

}  // namespace rlx::serve
