// `rlx serve`: an OpenAI-compatible HTTP server (cpp-httplib) for sentence-embedding models
// (/v1/embeddings) and llama-family LLMs (/v1/completions, /v1/chat/completions), with dynamic
// batching (embed_batcher.h), continuously batched generation (gen_scheduler.h), admission
// before waiting (admission.h), Prometheus /metrics,
// one JSON log line per request, a small web page at /, and graceful shutdown on SIGTERM.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "serve/embed_batcher.h"
#include "serve/gen_scheduler.h"
#include "serve/metrics.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}

namespace rlx::serve {

class Listener;

struct ServeOptions {
  std::vector<std::string> models;  // PATH or NAME=PATH each
  std::string device = "cpu", host = "127.0.0.1";
  int port = 8080;                  // 0: any free port (the chosen one is printed)
  size_t max_body = 1 << 20;        // bytes; larger bodies get 413
  int threads = 64;                 // HTTP worker threads (each holds one connection)
  BatchLimits embed;
  GenLimits gen;
  bool quiet = false;               // no per-request log lines
};

// One loaded model, either kind.
struct ServedModel {
  std::string name, path, kind;  // kind: "embedding" | "generation"
  std::unique_ptr<models::SentenceEmbedder> embedder;
  std::unique_ptr<EmbedBatcher> batcher;
  std::unique_ptr<models::Llm> llm;
  std::unique_ptr<GenScheduler> scheduler;
  int64_t context = 0;  // max tokens per input (embedding) or prompt + completion (generation)
};

// "embedding" for a BERT / sentence-transformers directory, "generation" for a .gguf file or an HF
// decoder directory; a [serve] error otherwise.
std::string model_kind(const std::string& path);

class Server {
 public:
  explicit Server(ServeOptions o);
  ~Server();
  // Loads the models, binds, serves until SIGTERM/SIGINT (or stop()), drains in-flight requests;
  // returns the process exit code.
  int run();
  void stop();

 private:
  void load_models();
  void routes();  // routes.cpp
  void embeddings(const httplib::Request& req, httplib::Response& res);
  void generation(const httplib::Request& req, httplib::Response& res, bool chat);
  ServedModel& find_model(const std::string& name, const std::string& kind);
  void log_request(const httplib::Request& req, const httplib::Response& res);
  ServeOptions o_;
  Metrics metrics_;
  std::map<std::string, std::unique_ptr<ServedModel>> models_;
  std::unique_ptr<Listener> http_;
  std::atomic<bool> draining_{false};
};

}  // namespace rlx::serve
