// The HTTP routes of `rlx serve`: OpenAI endpoints, /v1/models, /health, /metrics and the page.
#include <ctime>

#include "serve/admission.h"
#include "serve/listener.h"
#include "serve/openai.h"
#include "serve/page.h"
#include "serve/request_log.h"
#include "serve/server.h"

namespace rlx::serve {

using nlohmann::json;

namespace {

void send_json(httplib::Response& res, int status, const json& j) {
  res.status = status;
  res.set_content(dumps(j), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  request_log().error = e.what();
  send_json(res, e.status, e.body());
}

json usage(int64_t prompt, int64_t completion) {
  return {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

// The JSON object of one streamed chunk (chat: a delta; completions: text).
json chunk(const GenerationRequest& r, const std::string& id, int64_t created, const std::string& text,
           const json& finish, bool first) {
  json choice = {{"index", 0}, {"finish_reason", finish}, {"logprobs", nullptr}};
  if (r.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || finish.is_null()) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  return {{"id", id},
          {"object", r.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", r.model},
          {"choices", json::array({choice})}};
}

// Runs a handler body, turning ApiError / other exceptions into OpenAI error responses.
template <class F>
void guarded(httplib::Response& res, F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const std::exception& e) {
    send_error(res, ApiError(500, std::string("[serve] ") + e.what(), "", "internal_error", "server_error"));
  }
}

}  // namespace

ServedModel& Server::find_model(const std::string& name, const std::string& kind) {
  auto it = models_.find(name);
  if (it == models_.end()) {
    std::string known;
    for (auto& [n, m] : models_) known += (known.empty() ? "" : ", ") + n + " (" + m->kind + ")";
    throw ApiError(404, "the model '" + name + "' does not exist; this server has: " + known, "model", "model_not_found");
  }
  if (it->second->kind != kind)
    throw ApiError(400, "the model '" + name + "' is a" + (kind == "embedding" ? " generation" : "n embedding") +
                            " model; it does not serve this endpoint", "model", "wrong_model_kind");
  request_log().model = name;
  return *it->second;
}

void Server::embeddings(const httplib::Request& req, httplib::Response& res) {
  guarded(res, [&] {
    EmbeddingRequest r = parse_embedding_request(parse_body(req.body));
    ServedModel& m = find_model(r.model, "embedding");
    std::vector<int64_t> lens;
    int64_t total = 0;
    for (size_t i = 0; i < r.input.size(); ++i) {
      int64_t n = static_cast<int64_t>(m.embedder->tokenizer().tokenize(r.input[i]).size()) + 2;  // + [CLS] [SEP]
      if (n > m.context)
        throw ApiError(400, "'input[" + std::to_string(i) + "]' is " + std::to_string(n) + " tokens; the model '" +
                                r.model + "' takes at most " + std::to_string(m.context),
                       "input", "context_length_exceeded");
      lens.push_back(n);
      total += n;
    }
    request_log().prompt_tokens = total;
    request_log().inputs = static_cast<int64_t>(r.input.size());
    ClientWatch watch(req);
    EmbedResult e = m.batcher->embed(r.input, lens, [&] { return watch.gone(); });
    if (e.status == 499) {
      request_log().cancelled = true;
      res.status = 499;  // nobody reads it: the client has gone
      return;
    }
    if (e.status != 200)
      throw ApiError(e.status, e.error, "", e.status == 429 ? "rate_limit_exceeded" : "unavailable",
                     e.status >= 500 ? "server_error" : "rate_limit_error");
    metrics_.add("rlx_tokens_total", "model=\"" + r.model + "\",kind=\"prompt\"", static_cast<double>(total));
    json data = json::array();
    for (size_t i = 0; i < r.input.size(); ++i) {
      const float* p = e.data.data() + i * e.dim;
      json emb = r.base64 ? json(base64_floats(p, e.dim)) : json(std::vector<float>(p, p + e.dim));
      data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", std::move(emb)}});
    }
    send_json(res, 200,
              {{"object", "list"}, {"data", std::move(data)}, {"model", r.model},
               {"usage", {{"prompt_tokens", total}, {"total_tokens", total}}}});
  });
}

void Server::generation(const httplib::Request& req, httplib::Response& res, bool chat) {
  guarded(res, [&] {
    GenerationRequest r = parse_generation_request(parse_body(req.body), chat);
    ServedModel& m = find_model(r.model, "generation");
    models::Llm& llm = *m.llm;
    std::vector<int64_t> ids;
    if (chat) {
      if (!llm.has_chat_template())
        throw ApiError(400, "the model '" + r.model + "' has no chat template; use /v1/completions", "model",
                       "no_chat_template");
      ids = llm.encode_prompt(llm.apply_chat(r.messages, true), true);
    } else {
      ids = llm.encode_prompt(r.prompt, false);
    }
    const int64_t P = static_cast<int64_t>(ids.size()), ctx = m.context;
    if (P == 0) throw ApiError(400, "the prompt encodes to no tokens", chat ? "messages" : "prompt", "empty_input");
    if (ctx > 0 && P >= ctx)
      throw ApiError(400, "the prompt is " + std::to_string(P) + " tokens; the model '" + r.model + "' has a context of " +
                              std::to_string(ctx) + " tokens",
                     chat ? "messages" : "prompt", "context_length_exceeded");
    int64_t room = ctx > 0 ? ctx - P : INT64_MAX;
    int64_t max_new = r.max_tokens.value_or(std::min<int64_t>(chat ? 256 : 16, room));
    if (max_new > room)
      throw ApiError(400, "the prompt (" + std::to_string(P) + " tokens) + max_tokens " + std::to_string(max_new) +
                              " exceeds the context of " + std::to_string(ctx) + " tokens of the model '" + r.model + "'",
                     "max_tokens", "context_length_exceeded");
    auto job = std::make_shared<GenJob>();
    job->prompt = ids;
    job->opts = text_options(r, max_new);
    job->start = std::chrono::steady_clock::now();
    job->deadline = job->start + std::chrono::milliseconds(static_cast<int64_t>(o_.gen.timeout_s * 1000));
    RequestLog& lg = request_log();
    lg.prompt_tokens = P;
    lg.stream = r.stream;
    metrics_.add("rlx_tokens_total", "model=\"" + r.model + "\",kind=\"prompt\"", static_cast<double>(P));
    m.scheduler->submit(job);
    {
      std::lock_guard<std::mutex> l(job->mu);
      if (job->finished && job->status != 200)
        throw ApiError(job->status, job->error, "", job->status == 429 ? "rate_limit_exceeded" : "unavailable",
                       job->status == 429 ? "rate_limit_error" : "server_error");
    }
    const std::string id = random_id(chat ? "chatcmpl-" : "cmpl-");
    const int64_t created = static_cast<int64_t>(std::time(nullptr));
    if (!r.stream) {
      // Waits in short slices, looking at the connection after each piece and each empty slice (a
      // fast decode delivers a piece every slice): a client that went away cancels its sequence (it
      // leaves the next decode step) instead of running to max_tokens.
      std::string text, piece;
      ClientWatch watch(req);
      for (int got; (got = job->next_for(piece, std::chrono::milliseconds(100))) >= 0;) {
        if (got) text += piece;
        if (!job->cancelled && watch.gone()) {
          job->cancelled = true;
          lg.cancelled = true;
        }
      }
      std::lock_guard<std::mutex> l(job->mu);
      if (job->status != 200) throw ApiError(job->status, job->error, "", "internal_error", "server_error");
      lg.completion_tokens = job->completion_tokens;
      json choice = {{"index", 0}, {"finish_reason", job->finish_reason}, {"logprobs", nullptr}};
      if (chat)
        choice["message"] = {{"role", "assistant"}, {"content", text}};
      else
        choice["text"] = text;
      send_json(res, 200,
                {{"id", id}, {"object", chat ? "chat.completion" : "text_completion"}, {"created", created},
                 {"model", r.model}, {"choices", json::array({choice})},
                 {"usage", usage(P, job->completion_tokens)}});
      return;
    }
    // Server-sent events: one chunk per text piece, then the finish chunk, usage, [DONE]. A failed
    // write means the client went away: the job is cancelled and its sequence leaves the batch.
    auto first = std::make_shared<bool>(true);
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [job, r, id, created, P, first](size_t, httplib::DataSink& sink) {
          auto send = [&](const json& j) {
            std::string s = "data: " + dumps(j) + "\n\n";
            return sink.write(s.data(), s.size());
          };
          std::string piece;
          if (job->next(piece)) {
            bool ok = send(chunk(r, id, created, piece, nullptr, *first));
            *first = false;
            if (!ok) {
              job->cancelled = true;
              request_log().cancelled = true;
            }
            return ok;
          }
          std::string reason, error;
          int64_t done_tokens;
          {
            std::lock_guard<std::mutex> l(job->mu);
            reason = job->finish_reason;
            error = job->error;
            done_tokens = job->completion_tokens;
          }
          request_log().completion_tokens = done_tokens;
          if (!error.empty()) send(ApiError(500, error, "", "internal_error", "server_error").body());
          send(chunk(r, id, created, "", reason, *first));
          if (r.include_usage)
            send({{"id", id}, {"object", r.chat ? "chat.completion.chunk" : "text_completion"}, {"created", created},
                  {"model", r.model}, {"choices", json::array()}, {"usage", usage(P, done_tokens)}});
          static const std::string kDone = "data: [DONE]\n\n";
          sink.write(kDone.data(), kDone.size());
          sink.done();
          return true;
        },
        [job](bool success) {
          if (!success) job->cancelled = true;
        });
  });
}

void Server::routes() {
  httplib::Server& s = *http_;
  s.Post("/v1/embeddings", [this](const httplib::Request& q, httplib::Response& r) { embeddings(q, r); });
  s.Post("/v1/completions", [this](const httplib::Request& q, httplib::Response& r) { generation(q, r, false); });
  s.Post("/v1/chat/completions", [this](const httplib::Request& q, httplib::Response& r) { generation(q, r, true); });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& r) {
    json data = json::array();
    for (auto& [n, m] : models_)
      data.push_back({{"id", n}, {"object", "model"}, {"created", 0}, {"owned_by", "rlx"}, {"kind", m->kind},
                      {"context_length", m->context}});
    send_json(r, 200, {{"object", "list"}, {"data", data}});
  });
  s.Get("/health", [this](const httplib::Request&, httplib::Response& r) {
    json names = json::array();
    for (auto& [n, m] : models_) names.push_back(n);
    bool draining = draining_;
    send_json(r, draining ? 503 : 200, {{"status", draining ? "draining" : "ok"}, {"models", names}});
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& r) {
    r.set_content(metrics_.text(), "text/plain; version=0.0.4");
  });
  s.Get("/", [](const httplib::Request&, httplib::Response& r) { r.set_content(page_html(), "text/html; charset=utf-8"); });
  // Every other error (unknown path 404, oversized body 413, bad request line 400) as an
  // OpenAI error object; responses that already carry one are left alone.
  s.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& q, httplib::Response& r) {
    if (!r.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string msg = r.status == 404   ? "no route " + q.method + " " + q.path
                      : r.status == 413 ? "the request body is larger than the server's limit of " +
                                              std::to_string(o_.max_body) + " bytes (--max-body)"
                                        : std::string("the request could not be read (HTTP ") + std::to_string(r.status) + ")";
    std::string code = r.status == 404 ? "not_found" : r.status == 413 ? "request_too_large" : "bad_request";
    request_log().error = msg;
    r.set_content(dumps(ApiError(r.status, msg, "", code).body()), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
}

}  // namespace rlx::serve
