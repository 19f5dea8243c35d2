#include "serve/embed_batcher.h"

#include <algorithm>

#include "rlx/error.h"

namespace rlx::serve {

EmbedBatcher::EmbedBatcher(std::string name, models::SentenceEmbedder& emb, BatchLimits lim, Metrics& m)
    : name_(std::move(name)), emb_(emb), lim_(lim), metrics_(m) {
  thread_ = std::thread([this] { loop(); });
}

EmbedBatcher::~EmbedBatcher() { stop(); }

void EmbedBatcher::stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

EmbedResult EmbedBatcher::embed(std::vector<std::string> texts, const std::vector<int64_t>& lengths,
                                const std::function<bool()>& client_gone) {
  auto job = std::make_shared<Job>();
  job->texts = std::move(texts);
  for (int64_t n : lengths) job->longest = std::max(job->longest, n);
  job->deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<int64_t>(lim_.timeout_s * 1000));
  std::unique_lock<std::mutex> l(mu_);
  if (stopping_) return {503, "the server is shutting down", {}, 0};
  if (static_cast<int64_t>(queue_.size()) >= lim_.max_queue) {
    metrics_.add("rlx_rejected_total", "model=\"" + name_ + "\",reason=\"queue_full\"");
    return {429, "the embedding queue of model '" + name_ + "' is full (" + std::to_string(lim_.max_queue) +
                     " requests); retry later", {}, 0};
  }
  queue_.push_back(job);
  metrics_.set("rlx_queue_depth", "model=\"" + name_ + "\"", static_cast<double>(queue_.size()));
  cv_.notify_one();
  while (!done_cv_.wait_for(l, std::chrono::milliseconds(100), [&] { return job->done; })) {
    if (job->taken || !client_gone) continue;
    l.unlock();
    bool gone = client_gone();
    l.lock();
    if (gone && !job->taken && !job->done) {
      queue_.erase(std::find(queue_.begin(), queue_.end(), job));
      metrics_.set("rlx_queue_depth", "model=\"" + name_ + "\"", static_cast<double>(queue_.size()));
      metrics_.add("rlx_cancelled_total", "model=\"" + name_ + "\",reason=\"client_gone\"");
      return {499, "the client closed the connection", {}, 0};
    }
  }
  return std::move(job->result);
}

void EmbedBatcher::loop() {
  const std::string lbl = "model=\"" + name_ + "\"";
  for (;;) {
    std::vector<std::shared_ptr<Job>> batch;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      // Take queued requests in order while rows x longest stays within the budget (the first
      // request always goes, whatever its size). Expired ones are answered without running.
      int64_t rows = 0, longest = 0;
      auto now = std::chrono::steady_clock::now();
      while (!queue_.empty()) {
        auto& j = queue_.front();
        if (j->deadline < now) {
          j->result = {503, "the request waited longer than the server's --timeout in the queue", {}, 0};
          j->done = true;
          metrics_.add("rlx_cancelled_total", lbl + ",reason=\"timeout\"");
          queue_.pop_front();
          continue;
        }
        int64_t r = rows + static_cast<int64_t>(j->texts.size()), lg = std::max(longest, j->longest);
        if (!batch.empty() && r * lg > lim_.max_tokens) break;
        rows = r;
        longest = lg;
        j->taken = true;
        batch.push_back(j);
        queue_.pop_front();
      }
      metrics_.set("rlx_queue_depth", lbl, static_cast<double>(queue_.size()));
      if (batch.empty()) {
        done_cv_.notify_all();
        continue;
      }
      metrics_.observe("rlx_embed_batch_size", lbl, static_cast<double>(rows));
      metrics_.observe("rlx_embed_batch_tokens", lbl, static_cast<double>(rows * longest));  // before bucketing
    }
    std::vector<std::string> all;
    int64_t longest = 0;
    for (auto& j : batch) {
      all.insert(all.end(), j->texts.begin(), j->texts.end());
      longest = std::max(longest, j->longest);
    }
    std::vector<EmbedResult> out(batch.size());
    try {
      // The compiled graph is specialized per (rows, length): round both up to a few buckets
      // (rows to 1, 2, 4, 8, then a multiple of 8, with empty filler sentences; length to a
      // multiple of 16 with padding the attention mask hides) so a stream of batches reuses a
      // handful of programs and no pass computes more than 8 filler rows (a power of two would
      // run 32 rows for 17 requests).
      const int64_t n = static_cast<int64_t>(all.size());
      int64_t rows = 1;
      while (rows < n && rows < 8) rows *= 2;
      if (rows < n) rows = (n + 7) / 8 * 8;
      const int64_t pad = std::min(emb_.max_seq_length(), (longest + 15) / 16 * 16);
      std::vector<std::string> padded = all;
      padded.resize(static_cast<size_t>(rows));
      models::BatchEncoding enc = emb_.tokenizer().encode_batch(padded, emb_.max_seq_length(), pad);
      std::vector<Tensor> r = emb_.model().run({enc.input_ids, enc.attention_mask, enc.token_type_ids});
      RLX_CHECK(r.size() == 1 && r[0].dtype() == DType::f32 && r[0].rank() == 2 && r[0].shape()[0] == rows,
                "[serve] unexpected embedding output");
      const int64_t H = r[0].shape()[1];
      const float* p = r[0].data<float>();
      int64_t row = 0;
      for (size_t k = 0; k < batch.size(); ++k) {
        int64_t m = static_cast<int64_t>(batch[k]->texts.size());
        out[k].dim = H;
        out[k].data.assign(p + row * H, p + (row + m) * H);
        row += m;
      }
    } catch (const std::exception& ex) {
      for (auto& r : out) r = {500, std::string("[serve] embedding failed: ") + ex.what(), {}, 0};
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      for (size_t k = 0; k < batch.size(); ++k) {
        batch[k]->result = std::move(out[k]);
        batch[k]->done = true;
      }
    }
    done_cv_.notify_all();
  }
}

}  // namespace rlx::serve
