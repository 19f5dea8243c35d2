#include "serve/gen_scheduler.h"

namespace rlx::serve {

bool GenJob::next(std::string& piece) {
  std::unique_lock<std::mutex> l(mu);
  cv.wait(l, [&] { return finished || !pieces.empty(); });
  if (pieces.empty()) return false;
  piece = std::move(pieces.front());
  pieces.pop_front();
  return true;
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

bool GenScheduler::advance(Active& a) {
  GenJob& j = *a.job;
  auto produced = [&] { return static_cast<int64_t>(a.session->tokens().size()); };
  if (j.cancelled) {
    metrics_.add("rlx_cancelled_total", "model=\"" + name_ + "\",reason=\"client_gone\"");
    finish(j, "cancelled", produced());
    return false;
  }
  if (std::chrono::steady_clock::now() > j.deadline) {
    metrics_.add("rlx_cancelled_total", "model=\"" + name_ + "\",reason=\"timeout\"");
    finish(j, "length", produced());
    return false;
  }
  std::string piece;
  bool more;
  try {
    more = a.session->next(piece);
  } catch (const std::exception& ex) {
    {
      std::lock_guard<std::mutex> l(j.mu);
      if (a.first) j.status = 500;
      j.error = std::string("[serve] generation failed: ") + ex.what();
    }
    finish(j, "stop", produced());
    return false;
  }
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
  if (more) return true;
  // Ended: "length" when max_tokens ran out without an end-of-turn token, else "stop".
  const auto& toks = a.session->tokens();
  bool by_length = produced() >= j.opts.max_new && !(toks.size() && llm_.is_stop_token(toks.back()));
  finish(j, by_length ? "length" : "stop", produced());
  return false;
}

void GenScheduler::loop() {
  const std::string lbl = "model=\"" + name_ + "\"";
  std::vector<Active> active;
  for (;;) {
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stopping_ || !queue_.empty() || !active.empty(); });
      if (stopping_ && queue_.empty() && active.empty()) return;
      while (!queue_.empty() && static_cast<int64_t>(active.size()) < lim_.max_active) {
        Active a;
        a.job = queue_.front();
        queue_.pop_front();
        active.push_back(std::move(a));
      }
      metrics_.set("rlx_queue_depth", lbl, static_cast<double>(queue_.size()));
    }
    for (auto& a : active)
      if (!a.session) a.session = std::make_unique<models::TextSession>(llm_, a.job->prompt, a.job->opts);
    metrics_.set("rlx_active_sequences", lbl, static_cast<double>(active.size()));
    metrics_.observe("rlx_decode_round_sequences", lbl, static_cast<double>(active.size()));
    std::vector<Active> still;
    for (auto& a : active)
      if (advance(a)) still.push_back(std::move(a));
    active.swap(still);
    metrics_.set("rlx_active_sequences", lbl, static_cast<double>(active.size()));
  }
}

}  // namespace rlx::serve
