// `rlx embed`: sentence embeddings from a Hugging Face / sentence-transformers BERT directory.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "commands.h"
#include "dist/communicator.h"
#include "models/bert/bert.h"
#include "passes/shard.h"
#include "rlx/npy.h"

namespace rlx::cli {

namespace {

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int cmd_embed(const Args& a) {
  std::string model = a.get("model"), device = a.get("device"), file = a.get("file"), output = a.get("output");
  int64_t batch = a.integer("batch-size");
  bool similarity = a.has("similarity"), quiet = a.has("quiet");
  std::vector<std::string> sentences = a.positional;
  if (!file.empty()) {
    std::ifstream in(file);
    RLX_CHECK(in.good(), "[cli] cannot read --file '", file, "'");
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") != std::string::npos) sentences.push_back(line);
    }
  }
  if (sentences.empty()) usage_fail("embed: no sentences given (as arguments, or with --file)");

  // --tp N: this rank's shard of a Megatron tensor-parallel BERT (src/passes/shard_tensor_parallel.cpp).
  const int64_t tp = a.integer("tp");
  dist::Communicator& comm = dist::current();
  std::function<Graph(const Graph&)> shard;
  ShardReport report;
  if (tp > 1) {
    RLX_CHECK(comm.size() == tp, "[cli] embed --tp ", tp, " needs ", tp, " ranks (rlx launch -n ", tp,
              " -- rlx embed ..., or mpirun -n ", tp, "); this process is rank ", comm.rank(), " of ", comm.size());
    shard = [&](const Graph& g) { return shard_tensor_parallel(g, "bert", tp, comm.rank(), &report); };
  }
  const bool lead = comm.rank() == 0;  // one rank prints and writes; every rank computes
  if (!lead) quiet = true;
  auto t0 = std::chrono::steady_clock::now();
  models::SentenceEmbedder emb(model, device, a.get("fallback"), shard);
  if (tp > 1 && a.has("shard-report") && lead) std::fputs(report.str().c_str(), stderr);
  double load_ms = ms_since(t0);
  auto t1 = std::chrono::steady_clock::now();
  Tensor e = emb.embed(sentences, batch);
  double run_ms = ms_since(t1);
  const int64_t N = e.shape()[0], H = e.shape()[1];
  const float* p = e.data<float>();

  if (!lead) return 0;
  if (!output.empty()) {
    write_npy(output, e);
    std::printf("wrote %lld x %lld embeddings to %s\n", static_cast<long long>(N), static_cast<long long>(H),
                output.c_str());
  }
  if (similarity) {
    std::vector<double> norm(N);
    for (int64_t i = 0; i < N; ++i) {
      double s = 0;
      for (int64_t j = 0; j < H; ++j) s += static_cast<double>(p[i * H + j]) * p[i * H + j];
      norm[i] = std::max(std::sqrt(s), 1e-12);
    }
    for (int64_t i = 0; i < N; ++i) std::printf("[%lld] %s\n", static_cast<long long>(i), sentences[i].c_str());
    std::printf("%6s", "");
    for (int64_t j = 0; j < N; ++j) std::printf(" %7lld", static_cast<long long>(j));
    std::printf("\n");
    for (int64_t i = 0; i < N; ++i) {
      std::printf("[%3lld]", static_cast<long long>(i));
      for (int64_t j = 0; j < N; ++j) {
        double d = 0;
        for (int64_t k = 0; k < H; ++k) d += static_cast<double>(p[i * H + k]) * p[j * H + k];
        std::printf(" %7.4f", d / (norm[i] * norm[j]));
      }
      std::printf("\n");
    }
  } else if (output.empty()) {
    for (int64_t i = 0; i < N; ++i) {
      std::printf("%s\t[", sentences[i].c_str());
      for (int64_t j = 0; j < H; ++j) std::printf(j ? ", %.6f" : "%.6f", p[i * H + j]);
      std::printf("]\n");
    }
  }
  if (!quiet)
    std::fprintf(stderr, "rlx embed: %lld sentences, dim %lld, device %s: load %.0f ms, embed %.0f ms\n",
                 static_cast<long long>(N), static_cast<long long>(H), device.c_str(), load_ms, run_ms);
  return 0;
}

}  // namespace rlx::cli
