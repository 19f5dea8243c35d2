// `rlx embed`: sentence embeddings from a Hugging Face / sentence-transformers BERT directory.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "models/bert/bert.h"
#include "rlx/npy.h"

namespace rlx::cli {

namespace {

const char* kEmbedUsage =
    "usage: rlx embed --model DIR [--device D] [--batch-size N] [--similarity] [--quiet]\n"
    "                 (\"sentence\" ... | --file sentences.txt) [--output emb.npy]\n"
    "  prints one embedding per line (or, with --similarity, the cosine matrix); --output writes\n"
    "  f32 [N, hidden] as .npy. --file reads one sentence per non-empty line.";

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int cmd_embed(int argc, char** argv) {
  std::string model, device = "cpu", file, output;
  int64_t batch = 32;
  bool similarity = false, quiet = false;
  std::vector<std::string> sentences;
  auto value = [&](int& i, const char* flag) -> std::string {
    std::string s = argv[i];
    auto eq = s.find('=');
    if (eq != std::string::npos) return s.substr(eq + 1);
    RLX_CHECK(i + 1 < argc, "[cli] ", flag, " needs a value\n", kEmbedUsage);
    return argv[++i];
  };
  for (int i = 0; i < argc; ++i) {
    std::string s = argv[i];
    auto is = [&](const char* f) { return s == f || s.rfind(std::string(f) + "=", 0) == 0; };
    if (is("--model")) model = value(i, "--model");
    else if (is("--device")) device = value(i, "--device");
    else if (is("--file")) file = value(i, "--file");
    else if (is("--output")) output = value(i, "--output");
    else if (is("--batch-size")) {
      std::string v = value(i, "--batch-size");
      char* end = nullptr;
      batch = std::strtoll(v.c_str(), &end, 10);
      RLX_CHECK(end && *end == 0 && batch > 0, "[cli] --batch-size expects a positive integer, got '", v, "'");
    } else if (s == "--similarity") similarity = true;
    else if (s == "--quiet") quiet = true;
    else if (s == "--help") {
      std::puts(kEmbedUsage);
      return 0;
    } else if (s == "--") {
      for (++i; i < argc; ++i) sentences.push_back(argv[i]);
    } else if (s.rfind("--", 0) == 0) fail("[cli] embed: unknown flag '", s, "'\n", kEmbedUsage);
    else sentences.push_back(s);
  }
  RLX_CHECK(!model.empty(), "[cli] embed needs --model DIR\n", kEmbedUsage);
  if (!file.empty()) {
    std::ifstream in(file);
    RLX_CHECK(in.good(), "[cli] cannot read --file '", file, "'");
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") != std::string::npos) sentences.push_back(line);
    }
  }
  RLX_CHECK(!sentences.empty(), "[cli] embed: no sentences given\n", kEmbedUsage);

  auto t0 = std::chrono::steady_clock::now();
  models::SentenceEmbedder emb(model, device);
  double load_ms = ms_since(t0);
  auto t1 = std::chrono::steady_clock::now();
  Tensor e = emb.embed(sentences, batch);
  double run_ms = ms_since(t1);
  const int64_t N = e.shape()[0], H = e.shape()[1];
  const float* p = e.data<float>();

  if (!output.empty()) {
    write_npy(output, e);
    std::printf("wrote %lld x %lld embeddings to %s\n", static_cast<long long>(N), static_cast<long long>(H),
                output.c_str());
  } else if (similarity) {
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
  } else {
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
