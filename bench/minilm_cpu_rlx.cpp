// RLX side of bench/minilm_cpu.py: the real BERT builder (src/models/bert) on the real
// all-MiniLM-L6-v2 weights (mean pooling + L2 normalization, as sentence-transformers), compiled for
// the cpu device once per (batch, seq), timed on the token inputs the Python driver wrote.
// Usage: bench_minilm_cpu [--device=D] MODEL_DIR INPUTS.npz OUT_PREFIX WARMUP RUNS (D: cpu by default;
//   bench/oneapi_minilm.py runs it for cpu and oneapi)
//   INPUTS.npz holds ids_BxS / mask_BxS (i64) per grid point. Writes OUT_PREFIX.json
//   ({"rows": [...], "peak_rss_mb": ..}) and OUT_PREFIX.npz (embedding per grid point); with
//   RLX_PROFILE=1 prints each shape's per-kernel profile to stderr.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "formats/onnx/onnx.h"
#include "models/bert/bert.h"
#include "rlx/npy.h"
#include "rlx/session.h"

using namespace rlx;

int main(int argc, char** argv) {
  std::string device = "cpu";
  if (argc > 1 && std::string(argv[1]).rfind("--device=", 0) == 0) {
    device = std::string(argv[1]).substr(9);
    ++argv, --argc;
  }
  if (argc != 6 && argc != 7) {
    std::fprintf(stderr, "usage: %s MODEL_DIR INPUTS.npz OUT_PREFIX WARMUP RUNS [MODEL.onnx]\n", argv[0]);
    return 2;
  }
  // With MODEL.onnx: the ONNX export of the same model through RLX's importer (inputs input_ids,
  // attention_mask), imported once per input shape; else the BERT builder's graph.
  const std::string onnx_path = argc == 7 ? argv[6] : "";
  std::string dir = argv[1], out = argv[3];
  int warmup = std::atoi(argv[4]), runs = std::atoi(argv[5]);
  models::HfModelDir m = models::HfModelDir::open(dir);
  models::BertConfig cfg = models::BertConfig::from_json(m.config, dir);
  models::BertGraphOptions opt;
  opt.pooling = m.sentence.is_sentence_transformer ? m.sentence.pooling : "mean";
  opt.normalize = m.sentence.normalize;
  CompileOptions co;
  co.device = device;
  co.verify = false;
  CompiledModel builder(models::build_bert_graph(cfg, m.weights, opt), co);
  std::vector<std::pair<std::string, Tensor>> inputs = read_npz_ordered(argv[2]), embs;
  std::ostringstream rows;
  for (auto& [name, ids] : inputs) {
    if (name.rfind("ids_", 0) != 0) continue;
    std::string key = name.substr(4);
    Tensor mask;
    for (auto& [n2, t] : inputs)
      if (n2 == "mask_" + key) mask = t;
    Tensor types(DType::i64, ids.shape());
    std::fill(types.data<int64_t>(), types.data<int64_t>() + types.numel(), 0);
    std::vector<Tensor> feed = {ids, mask, types};
    std::unique_ptr<CompiledModel> imported;
    if (!onnx_path.empty()) {
      onnx::ImportOptions io;
      io.input_shapes = {{"input_ids", ids.shape()}, {"attention_mask", mask.shape()}};
      imported = std::make_unique<CompiledModel>(onnx::load_onnx(onnx_path, io), co);
      feed = {ids, mask};
    }
    CompiledModel& model = imported ? *imported : builder;
    for (int i = 0; i < warmup; ++i) model.run(feed);
    std::vector<double> t;
    for (int i = 0; i < runs; ++i) {
      auto a = std::chrono::steady_clock::now();
      model.run(feed);
      t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
    }
    embs.push_back({key, model.run(feed)[0]});
    std::sort(t.begin(), t.end());
    auto pct = [&](double p) {  // numpy's linear percentile
      double x = p * (t.size() - 1);
      size_t i = static_cast<size_t>(x);
      return i + 1 < t.size() ? t[i] + (x - i) * (t[i + 1] - t[i]) : t[i];
    };
    int64_t b = ids.shape()[0], s = ids.shape()[1];
    rows << (rows.tellp() > 0 ? "," : "") << "{\"batch\":" << b << ",\"seq\":" << s << ",\"p50_ms\":" << pct(0.5)
         << ",\"p90_ms\":" << pct(0.9) << "}";
    std::fprintf(stderr, "  rlx b%lld s%lld: p50 %.2f ms\n", (long long)b, (long long)s, pct(0.5));
    if (std::getenv("RLX_PROFILE")) std::cerr << "profile b" << b << " s" << s << ":\n" << model.profile();
  }
  write_npz(out + ".npz", embs);
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::ofstream f(out + ".json");
  f << "{\"rows\":[" << rows.str() << "],\"peak_rss_mb\":" << ru.ru_maxrss / 1024.0
    << ",\"note\":\"" << (onnx_path.empty() ? "real BERT builder (src/models/bert)" : "ONNX export imported (src/formats/onnx)")
    << ", gemm: own AVX2 kernel or OpenBLAS\"}\n";
  return 0;
}
