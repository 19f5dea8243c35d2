#include "serve/metrics.h"

#include <cstdio>
#include <sstream>

#include "rlx/error.h"

namespace rlx::serve {

namespace {
const std::vector<double> kSeconds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
const std::vector<double> kSizes = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};

std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}
std::string braces(const std::string& labels) { return labels.empty() ? "" : "{" + labels + "}"; }
}  // namespace

Metrics::Metrics() {
  family("rlx_requests_total", "counter", "HTTP requests answered, by endpoint and status code");
  family("rlx_tokens_total", "counter", "tokens processed, by model and kind (prompt | completion)");
  family("rlx_queue_depth", "gauge", "requests waiting for their model's worker thread");
  family("rlx_active_sequences", "gauge", "generations being decoded (they share each decode step)");
  family("rlx_cancelled_total", "counter", "requests dropped because the client went away or timed out");
  family("rlx_rejected_total", "counter", "requests refused: a queue full, every HTTP worker busy (reason busy), or the server stopping");
  family("rlx_request_duration_seconds", "histogram", "time from request to the last byte of the answer",
         kSeconds);
  family("rlx_time_to_first_token_seconds", "histogram", "generation: time until the first text piece", kSeconds);
  family("rlx_embed_batch_size", "histogram", "sentences per embedding forward pass", kSizes);
  family("rlx_embed_batch_tokens", "histogram", "padded tokens per embedding forward pass", kSizes);
  family("rlx_decode_batch_size", "histogram", "sequences in one batched decode step", kSizes);
}

void Metrics::family(const std::string& name, std::string type, std::string help, std::vector<double> bounds) {
  families_[name] = {std::move(type), std::move(help), std::move(bounds)};
}

void Metrics::add(const std::string& name, const std::string& labels, double v) {
  std::lock_guard<std::mutex> l(mu_);
  RLX_CHECK(families_.count(name), "[serve] unknown metric ", name);
  scalars_[name][labels] += v;
}

void Metrics::set(const std::string& name, const std::string& labels, double v) {
  std::lock_guard<std::mutex> l(mu_);
  RLX_CHECK(families_.count(name), "[serve] unknown metric ", name);
  scalars_[name][labels] = v;
}

void Metrics::observe(const std::string& name, const std::string& labels, double v) {
  std::lock_guard<std::mutex> l(mu_);
  auto f = families_.find(name);
  RLX_CHECK(f != families_.end() && f->second.type == "histogram", "[serve] unknown histogram ", name);
  Hist& h = hists_[name][labels];
  if (h.buckets.empty()) h.buckets.assign(f->second.bounds.size(), 0);
  for (size_t i = 0; i < f->second.bounds.size(); ++i)
    if (v <= f->second.bounds[i]) ++h.buckets[i];
  ++h.count;
  h.sum += v;
}

double Metrics::value(const std::string& name, const std::string& labels) const {
  std::lock_guard<std::mutex> l(mu_);
  auto f = scalars_.find(name);
  if (f == scalars_.end()) return 0;
  auto v = f->second.find(labels);
  return v == f->second.end() ? 0 : v->second;
}

std::string Metrics::text() const {
  std::lock_guard<std::mutex> l(mu_);
  std::ostringstream o;
  for (auto& [name, f] : families_) {
    o << "# HELP " << name << " " << f.help << "\n# TYPE " << name << " " << f.type << "\n";
    if (f.type != "histogram") {
      auto s = scalars_.find(name);
      if (s != scalars_.end())
        for (auto& [labels, v] : s->second) o << name << braces(labels) << " " << num(v) << "\n";
      continue;
    }
    auto hs = hists_.find(name);
    if (hs == hists_.end()) continue;
    for (auto& [labels, h] : hs->second) {
      std::string sep = labels.empty() ? "" : ",";
      for (size_t i = 0; i < f.bounds.size(); ++i)
        o << name << "_bucket{" << labels << sep << "le=\"" << num(f.bounds[i]) << "\"} " << h.buckets[i] << "\n";
      o << name << "_bucket{" << labels << sep << "le=\"+Inf\"} " << h.count << "\n";
      o << name << "_sum" << braces(labels) << " " << num(h.sum) << "\n";
      o << name << "_count" << braces(labels) << " " << h.count << "\n";
    }
  }
  return o.str();
}

}  // namespace rlx::serve
