// Concurrent text generations on one LLM, continuously batched: one worker thread per model holds
// every active sequence (a TextSession for sampling and text, plus one row of a shared KV cache
// with its own length). Each round it prefills the sequences that just arrived (one forward pass
// each), then runs ONE decode step for all the others together (DecoderModel's per-row step: every
// row at its own position, one batched GEMM per projection). Sequences join and leave between
// rounds, so a long generation never holds up a short one. Request threads read text pieces from
// their job as they appear.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "models/llm/llm.h"
#include "serve/metrics.h"

namespace rlx::serve {

struct GenJob {
  std::vector<int64_t> prompt;
  models::TextOptions opts;
  std::chrono::steady_clock::time_point start, deadline;
  std::atomic<bool> cancelled{false};  // set by the request thread (client gone); the worker drops it
  // Filled by the worker under mu:
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> pieces;
  bool finished = false;
  int status = 200;           // != 200: refused or failed before any text (error holds why)
  std::string error;
  std::string finish_reason;  // "stop" | "length"
  int64_t completion_tokens = 0;
  // Blocks until a piece is ready (true) or the generation has ended with nothing left (false).
  bool next(std::string& piece);
  // The same, waiting at most `wait`: 1 a piece, 0 none yet, -1 ended.
  int next_for(std::string& piece, std::chrono::milliseconds wait);
};

struct GenLimits {
  int64_t max_active = 16;   // sequences decoded together; later ones wait in the queue
  int64_t max_queue = 256;   // waiting generations; more are refused with 429
  double timeout_s = 60;     // a generation is ended (finish_reason "length") after this
};

class GenScheduler {
 public:
  GenScheduler(std::string name, models::Llm& llm, GenLimits lim, Metrics& m);
  ~GenScheduler();
  // Queues the job; on refusal sets job->status/error and finished.
  void submit(const std::shared_ptr<GenJob>& job);
  void stop();  // finishes every queued and active generation, then joins

 private:
  struct Active {
    std::shared_ptr<GenJob> job;
    std::unique_ptr<models::TextSession> session;
    int64_t pos = 0;  // filled slots of its cache row (the row is its index in the active list)
    bool first = true;
  };
  void loop();
  bool prefill(Active& a, int64_t row);      // the prompt alone, its KV moved into `row`; false when done
  void decode(std::vector<Active>& active);  // one step for every prefilled row together
  bool publish(Active& a);                   // new text to the job; false when the sequence is done
  bool expired(Active& a);                   // cancelled or past its deadline: finished here
  void fail(Active& a, const std::exception& ex);
  void reserve(const std::vector<Active>& active, int64_t rows, int64_t need);  // grows cache_
  void finish(GenJob& j, const std::string& reason, int64_t tokens);
  std::string name_;
  models::Llm& llm_;
  GenLimits lim_;
  Metrics& metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<GenJob>> queue_;
  models::KvCache cache_;  // [rows, Hkv, capacity, D] per layer; row i belongs to active[i]
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace rlx::serve
