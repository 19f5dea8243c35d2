// KV cache bookkeeping, sampling and the prefill/decode loop.
#include "models/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include "rlx/error.h"

namespace rlx::models {

KvCache::KvCache(int64_t layers, int64_t b, int64_t kv_heads, int64_t cap, int64_t head_dim)
    : batch(b), capacity(cap) {
  for (int64_t l = 0; l < layers; ++l) {
    k.emplace_back(DType::f32, std::vector<int64_t>{b, kv_heads, cap, head_dim});
    v.emplace_back(DType::f32, std::vector<int64_t>{b, kv_heads, cap, head_dim});
  }
}

void KvCache::append(const std::vector<Tensor>& nk, const std::vector<Tensor>& nv) {
  RLX_CHECK(nk.size() == k.size() && nv.size() == v.size(), "[generate] cache has ", k.size(), " layers, step gave ",
            nk.size());
  int64_t S = nk.empty() ? 0 : nk[0].shape()[2];
  RLX_CHECK(len + S <= capacity, "[generate] KV cache full (", capacity, " positions)");
  for (size_t l = 0; l < k.size(); ++l) {
    for (int which = 0; which < 2; ++which) {
      const Tensor& src = which ? nv[l] : nk[l];
      Tensor& dst = which ? v[l] : k[l];
      const auto& ds = dst.shape();
      int64_t BH = ds[0] * ds[1], D = ds[3];
      RLX_CHECK(src.dtype() == DType::f32 && src.numel() == BH * S * D, "[generate] new kv shape mismatch");
      for (int64_t r = 0; r < BH; ++r)
        std::memcpy(dst.data<float>() + (r * capacity + len) * D, src.data<float>() + r * S * D,
                    static_cast<size_t>(S * D) * 4);
    }
  }
  len += S;
}

Tensor KvCache::keep_mask(int64_t S) const {
  Tensor m(DType::f32, {batch, capacity + S});
  for (int64_t b = 0; b < batch; ++b) {
    float* row = m.data<float>() + b * (capacity + S);
    for (int64_t t = 0; t < len; ++t) row[t] = 1;
    for (int64_t t = 0; t < S; ++t) row[capacity + t] = 1;
  }
  return m;
}

void KvCache::write_row(int64_t row, int64_t at, const std::vector<Tensor>& nk, const std::vector<Tensor>& nv,
                        int64_t src_row) {
  RLX_CHECK(nk.size() == k.size() && nv.size() == v.size() && row >= 0 && row < batch, "[generate] write_row: row ",
            row, " of ", batch, ", ", nk.size(), " layers for ", k.size());
  for (size_t l = 0; l < k.size(); ++l)
    for (int which = 0; which < 2; ++which) {
      const Tensor& src = which ? nv[l] : nk[l];
      Tensor& dst = which ? v[l] : k[l];
      const int64_t Hk = dst.shape()[1], D = dst.shape()[3], S = src.shape()[2];
      RLX_CHECK(src.dtype() == DType::f32 && src.rank() == 4 && src.shape()[1] == Hk && src.shape()[3] == D &&
                    src_row < src.shape()[0] && at >= 0 && at + S <= capacity,
                "[generate] write_row: new kv does not fit row ", row, " at ", at, " (capacity ", capacity, ")");
      for (int64_t h = 0; h < Hk; ++h)
        std::memcpy(dst.data<float>() + ((row * Hk + h) * capacity + at) * D,
                    src.data<float>() + ((src_row * Hk + h) * S) * D, static_cast<size_t>(S * D) * 4);
    }
}

void KvCache::copy_row(int64_t row, const KvCache& src, int64_t src_row, int64_t n) {
  RLX_CHECK(src.k.size() == k.size() && row < batch && src_row < src.batch && n <= capacity && n <= src.capacity,
            "[generate] copy_row: caches do not match");
  for (size_t l = 0; l < k.size(); ++l)
    for (int which = 0; which < 2; ++which) {
      const Tensor& s = which ? src.v[l] : src.k[l];
      Tensor& d = which ? v[l] : k[l];
      const int64_t Hk = d.shape()[1], D = d.shape()[3];
      for (int64_t h = 0; h < Hk; ++h)
        std::memmove(d.data<float>() + (row * Hk + h) * capacity * D,
                     s.data<float>() + (src_row * Hk + h) * src.capacity * D, static_cast<size_t>(n * D) * 4);
    }
}

KvCache KvCache::first_rows(int64_t rows) const {
  RLX_CHECK(rows >= 1 && rows <= batch, "[generate] first_rows: ", rows, " of ", batch);
  KvCache c;
  c.batch = rows;
  c.capacity = capacity;
  c.len = len;
  auto view = [&](const Tensor& t) {
    std::vector<int64_t> s = t.shape();
    s[0] = rows;
    auto owner = std::make_shared<Tensor>(t);
    return Tensor::wrap(DType::f32, s, owner, const_cast<void*>(t.raw()));
  };
  for (size_t l = 0; l < k.size(); ++l) {
    c.k.push_back(view(k[l]));
    c.v.push_back(view(v[l]));
  }
  return c;
}

void apply_repeat_penalty(float* logits, int64_t V, const std::vector<int64_t>& recent, double penalty) {
  if (penalty == 1.0) return;
  std::vector<bool> seen(static_cast<size_t>(V), false);
  for (int64_t t : recent)
    if (t >= 0 && t < V && !seen[t]) {
      seen[t] = true;
      logits[t] = logits[t] > 0 ? static_cast<float>(logits[t] / penalty) : static_cast<float>(logits[t] * penalty);
    }
}

int64_t sample_token(const float* logits, int64_t V, const SamplingOptions& o, std::mt19937_64& rng) {
  RLX_CHECK(V > 0, "[generate] empty logits");
  if (o.temperature <= 0) {
    int64_t best = 0;
    for (int64_t i = 1; i < V; ++i)
      if (logits[i] > logits[best]) best = i;
    return best;
  }
  std::vector<int64_t> idx(static_cast<size_t>(V));
  std::iota(idx.begin(), idx.end(), 0);
  // Descending by logit, index breaking ties, so a seed reproduces the same choice everywhere.
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  int64_t k = o.top_k > 0 ? std::min(o.top_k, V) : V;
  std::vector<double> p(static_cast<size_t>(k));
  double mx = logits[idx[0]] / o.temperature, sum = 0;
  for (int64_t i = 0; i < k; ++i) sum += p[i] = std::exp(logits[idx[i]] / o.temperature - mx);
  int64_t keep = k;
  if (o.min_p > 0) {
    for (int64_t i = 1; i < keep; ++i)
      if (p[i] < o.min_p * p[0]) {
        keep = i;
        break;
      }
  }
  if (o.top_p < 1.0) {
    double acc = 0;
    for (int64_t i = 0; i < keep; ++i) {
      acc += p[i] / sum;
      if (acc >= o.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double tot = 0;
  for (int64_t i = 0; i < keep; ++i) tot += p[i];
  double r = std::uniform_real_distribution<double>(0.0, tot)(rng);
  for (int64_t i = 0; i < keep; ++i) {
    r -= p[i];
    if (r < 0) return idx[i];
  }
  return idx[keep - 1];
}

std::vector<std::vector<int64_t>> generate(CausalLM& m, const std::vector<std::vector<int64_t>>& prompts,
                                           int64_t max_new, const SamplingOptions& o, int64_t eos,
                                           GenerateStats* stats, const TokenCallback& on_token,
                                           const std::vector<int64_t>& stop) {
  RLX_CHECK(!prompts.empty() && !prompts[0].empty(), "[generate] empty prompt");
  int64_t B = static_cast<int64_t>(prompts.size()), S = static_cast<int64_t>(prompts[0].size());
  for (auto& p : prompts) RLX_CHECK(static_cast<int64_t>(p.size()) == S, "[generate] prompts must have equal length");
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(B));
  if (max_new <= 0) return out;
  // Capacity is fixed up front so the decode graph is compiled once for every step.
  KvCache cache(m.num_layers(), B, m.kv_heads(), S + max_new, m.head_dim());
  std::mt19937_64 rng(o.seed);
  std::vector<bool> done(static_cast<size_t>(B), false);
  using clk = std::chrono::steady_clock;

  Tensor ids(DType::i64, {B, S});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) ids.data<int64_t>()[b * S + s] = prompts[b][s];
  auto t0 = clk::now();
  StepOutput so = m.step(ids, 0, &cache);
  cache.append(so.new_k, so.new_v);
  if (stats) stats->prefill_ms = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
  auto t1 = clk::now();
  int64_t V = m.vocab();
  bool stopped = false;
  for (int64_t step = 0; step < max_new; ++step) {
    Tensor next(DType::i64, {B, 1});
    bool all_done = true;
    for (int64_t b = 0; b < B; ++b) {
      int64_t tok = eos;
      if (!done[b]) {
        float* lg = so.logits.data<float>() + b * V;
        if (o.repeat_penalty != 1.0) {
          std::vector<int64_t> recent(prompts[b].begin(), prompts[b].end());
          recent.insert(recent.end(), out[b].begin(), out[b].end());
          if (static_cast<int64_t>(recent.size()) > o.repeat_last_n)
            recent.erase(recent.begin(), recent.end() - o.repeat_last_n);
          apply_repeat_penalty(lg, V, recent, o.repeat_penalty);
        }
        tok = sample_token(lg, V, o, rng);
        if (on_token && !on_token(b, tok)) stopped = true;
      }
      out[b].push_back(tok);
      if ((eos >= 0 && tok == eos) || std::find(stop.begin(), stop.end(), tok) != stop.end()) done[b] = true;
      all_done = all_done && done[b];
      next.data<int64_t>()[b] = tok;
    }
    if (step + 1 == max_new || all_done || stopped) break;
    so = m.step(next, cache.len, &cache);
    cache.append(so.new_k, so.new_v);
    if (stats) ++stats->decode_tokens;
  }
  if (stats) stats->decode_ms = std::chrono::duration<double, std::milli>(clk::now() - t1).count();
  return out;
}

}  // namespace rlx::models
