// Dynamic batching of embedding requests: request threads enqueue their sentences; one batching
// thread per model takes every queued request that fits a token budget, runs them as one forward
// pass of the SentenceEmbedder's tokenizer and compiled graph (rows and length rounded up to
// buckets, so few shapes are compiled) and hands each request its rows.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "models/bert/bert.h"
#include "serve/metrics.h"

namespace rlx::serve {

struct EmbedResult {
  int status = 200;         // 200, or the HTTP status of the failure
  std::string error;        // the message when status != 200
  std::vector<float> data;  // [n, dim] row-major
  int64_t dim = 0;
};

struct BatchLimits {
  int64_t max_tokens = 8192;   // padded tokens (rows x longest) per forward pass
  int64_t max_queue = 256;     // queued requests; more are refused with 429
  double timeout_s = 60;       // a request still queued after this is answered 503
};

class EmbedBatcher {
 public:
  EmbedBatcher(std::string name, models::SentenceEmbedder& emb, BatchLimits lim, Metrics& m);
  ~EmbedBatcher();
  // Blocks until the batch holding these sentences has run (or the request failed). `client_gone`
  // (optional) is asked while the request waits; true drops it from the queue (status 499).
  EmbedResult embed(std::vector<std::string> texts, const std::vector<int64_t>& lengths,
                    const std::function<bool()>& client_gone = {});
  void stop();  // finishes what is queued, then joins the thread

 private:
  struct Job {
    std::vector<std::string> texts;
    int64_t longest = 0;
    std::chrono::steady_clock::time_point deadline;
    EmbedResult result;
    bool taken = false;  // in a batch (no longer cancellable)
    bool done = false;
  };
  void loop();
  std::string name_;
  models::SentenceEmbedder& emb_;
  BatchLimits lim_;
  Metrics& metrics_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace rlx::serve
