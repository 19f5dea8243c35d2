#include "serve/server.h"

#include <signal.h>

#include <csignal>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "rlx/error.h"
#include "serve/admission.h"
#include "serve/listener.h"
#include "serve/openai.h"
#include "serve/request_log.h"

namespace rlx::serve {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
volatile std::sig_atomic_t g_signal = 0;
extern "C" void on_signal(int sig) { g_signal = sig; }
}  // namespace

RequestLog& request_log() {
  static thread_local RequestLog log;
  return log;
}

std::string model_kind(const std::string& path) {
  if (fs::is_regular_file(path)) {
    RLX_CHECK(fs::path(path).extension() == ".gguf", "[serve] --model ", path,
              ": a file must be a .gguf LLM; an embedding model is a directory");
    return "generation";
  }
  RLX_CHECK(fs::is_directory(path), "[serve] --model ", path, ": no such file or directory");
  std::ifstream in(fs::path(path) / "config.json");
  RLX_CHECK(in.good(), "[serve] --model ", path, ": the directory has no config.json");
  json cfg;
  try {
    cfg = json::parse(in);
  } catch (const std::exception& e) {
    RLX_CHECK(false, "[serve] --model ", path, ": config.json: ", e.what());
  }
  std::string type = cfg.value("model_type", "");
  return type == "bert" ? "embedding" : "generation";
}

Server::Server(ServeOptions o) : o_(std::move(o)) {}
Server::~Server() = default;

void Server::load_models() {
  RLX_CHECK(!o_.models.empty(), "[serve] no --model given");
  for (const std::string& spec : o_.models) {
    auto m = std::make_unique<ServedModel>();
    size_t eq = spec.find('=');
    if (eq != std::string::npos && spec.substr(0, eq).find('/') == std::string::npos) {
      m->name = spec.substr(0, eq);
      m->path = spec.substr(eq + 1);
    } else {
      m->path = spec;
      fs::path p = fs::path(spec).lexically_normal();
      if (p.filename().empty()) p = p.parent_path();
      m->name = p.extension() == ".gguf" ? p.stem().string() : p.filename().string();
    }
    RLX_CHECK(!m->name.empty(), "[serve] --model ", spec, ": empty model name");
    RLX_CHECK(!models_.count(m->name), "[serve] two models are named '", m->name, "'; name them with --model NAME=PATH");
    m->kind = model_kind(m->path);
    auto t0 = std::chrono::steady_clock::now();
    if (m->kind == "embedding") {
      m->embedder = std::make_unique<models::SentenceEmbedder>(m->path, o_.device);
      m->context = m->embedder->max_seq_length();
      m->embedder->embed({"warm up"}, 1);  // compile the first shape before the first request
      m->batcher = std::make_unique<EmbedBatcher>(m->name, *m->embedder, o_.embed, metrics_);
    } else {
      m->llm = models::Llm::load(m->path, o_.device);
      m->context = m->llm->model().weights().cfg.context;
      m->scheduler = std::make_unique<GenScheduler>(m->name, *m->llm, o_.gen, metrics_);
    }
    std::fprintf(stderr, "rlx serve: model '%s' (%s, %s, context %lld) loaded in %.0f ms\n", m->name.c_str(),
                 m->kind.c_str(), m->path.c_str(), static_cast<long long>(m->context),
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    models_[m->name] = std::move(m);
  }
}

void Server::log_request(const httplib::Request& req, const httplib::Response& res) {
  RequestLog& lg = request_log();
  double secs = lg.started ? std::chrono::duration<double>(std::chrono::steady_clock::now() - lg.start).count() : 0;
  static const char* known[] = {"/v1/embeddings", "/v1/completions", "/v1/chat/completions", "/v1/models",
                                "/health", "/metrics", "/"};
  std::string endpoint = "other";
  for (const char* k : known)
    if (req.path == k) endpoint = k;
  std::string lbl = "endpoint=\"" + endpoint + "\"";
  metrics_.add("rlx_requests_total", lbl + ",status=\"" + std::to_string(res.status) + "\"");
  metrics_.observe("rlx_request_duration_seconds", lbl, secs);
  if (!o_.quiet) {
    json line = {{"time", static_cast<int64_t>(std::time(nullptr))},
                 {"method", req.method},
                 {"path", req.path},
                 {"status", res.status},
                 {"ms", std::round(secs * 1e4) / 10},
                 {"remote", req.remote_addr}};
    if (!lg.model.empty()) line["model"] = lg.model;
    if (lg.inputs) line["inputs"] = lg.inputs;
    if (lg.prompt_tokens) line["prompt_tokens"] = lg.prompt_tokens;
    if (lg.completion_tokens) line["completion_tokens"] = lg.completion_tokens;
    if (lg.stream) line["stream"] = true;
    if (lg.cancelled) line["cancelled"] = true;
    if (!lg.error.empty()) line["error"] = lg.error;
    std::string s = dumps(line) + "\n";
    std::fwrite(s.data(), 1, s.size(), stderr);
  }
  lg = RequestLog{};
}

void Server::stop() {
  draining_ = true;
  if (http_) http_->close_listener();
}

int Server::run() {
  // SIGTERM/SIGINT only set a flag (threads that exist before this point, e.g. the cpu device's
  // pool, may receive them); a watcher thread sees it and stops the listener.
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  load_models();
  http_ = std::make_unique<Listener>();
  const int threads = o_.threads;
  // Connections beyond --threads are answered 429 by two spare threads instead of queueing (admission.h).
  http_->new_task_queue = [threads] { return new AdmissionQueue(static_cast<size_t>(threads), 2); };
  http_->set_payload_max_length(o_.max_body);
  http_->set_tcp_nodelay(true);  // small responses go out at once, not after a delayed ACK
  http_->set_keep_alive_timeout(5);
  http_->set_keep_alive_max_count(1000);
  http_->set_read_timeout(30);
  http_->set_pre_routing_handler([this](const httplib::Request&, httplib::Response& res) {
    if (draining_) res.set_header("Connection", "close");  // keep-alive clients move on while we drain
    RequestLog& lg = request_log();
    lg = RequestLog{};
    lg.start = std::chrono::steady_clock::now();
    lg.started = true;
    if (AdmissionQueue::overloaded()) {
      metrics_.add("rlx_rejected_total", "reason=\"busy\"");
      lg.error = "every HTTP worker is busy";
      res.status = 429;
      res.set_header("Connection", "close");
      res.set_content(dumps(ApiError(429, "the server is busy: all " + std::to_string(o_.threads) +
                                              " HTTP workers (--threads) are serving other connections; retry later",
                                     "", "server_busy", "rate_limit_error")
                                .body()),
                      "application/json");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http_->set_logger([this](const httplib::Request& q, const httplib::Response& r) { log_request(q, r); });
  routes();

  int port = o_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(o_.host);
    RLX_CHECK(port > 0, "[serve] cannot bind ", o_.host, " to any port");
  } else {
    RLX_CHECK(http_->bind_to_port(o_.host, port), "[serve] cannot bind ", o_.host, ":", port,
              " (in use, or not an address of this machine)");
  }
  http_->raise_backlog(1024);
  std::fprintf(stderr, "rlx serve: listening on http://%s:%d\n", o_.host.c_str(), port);
  std::fflush(stderr);

  std::atomic<bool> done{false};
  std::thread signals([&] {
    while (!done) {
      if (int sig = g_signal) {
        std::fprintf(stderr, "rlx serve: %s: no new connections; finishing the requests in flight\n",
                     sig == SIGTERM ? "SIGTERM" : "SIGINT");
        stop();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  bool ok = http_->listen_after_bind();  // returns once the listener is closed and every worker has finished
  done = true;
  signals.join();
  for (auto& [n, m] : models_) {
    if (m->batcher) m->batcher->stop();
    if (m->embedder && std::getenv("RLX_PROFILE")) std::fprintf(stderr, "%s", m->embedder->model().profile().c_str());
    if (m->scheduler) m->scheduler->stop();
  }
  std::fprintf(stderr, "rlx serve: stopped\n");
  return ok || draining_ ? 0 : 1;
}

}  // namespace rlx::serve
