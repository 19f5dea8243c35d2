// What one request did, for its log line and metrics: filled by the handler on the HTTP worker
// thread that serves the request (httplib runs routing, content providers and the logger on it).
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace rlx::serve {

struct RequestLog {
  std::chrono::steady_clock::time_point start;
  bool started = false;
  std::string model, error;
  int64_t prompt_tokens = 0, completion_tokens = 0, inputs = 0;
  bool stream = false, cancelled = false;
};

RequestLog& request_log();  // this thread's current request

}  // namespace rlx::serve
