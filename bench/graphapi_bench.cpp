// The graph-API devices against the others on identical seeded inputs: a MiniLM-L6-shaped encoder
// (6 layers, hidden 384, 12 heads, FFN 1536, erf-GELU; seeded random weights, so no model files are
// needed) at seq 128, and one SGD-momentum step of the 784-128-10 MNIST MLP at batch 128.
//   tpu  StableHLO through the PJRT plugin RLX_PJRT_PLUGIN names (XLA CPU here, CUDA on the H200)
//   mlx  mlx::core ops traced by mlx::core::compile (MLX's Linux CPU build)
//   cpu, cuda  RLX's own backends
// Writes one JSON row per (device, workload, batch) to OUT (bench/results rows schema, the header
// added by the caller) and prints each. Usage:
//   graphapi_bench OUT.jsonl DEVICES [minilm_batches=1,32] [iters=20] [mnist_steps=50] [tag=]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "bench_util.h"
#include "models/mlp.h"
#include "rlx/builder.h"
#include "rlx/device.h"
#include "rlx/session.h"
#include "runtime/backend.h"
#include "train/train.h"

using namespace rlx;

namespace {

using rlx_bench::pct;
using rlx_bench::split;

constexpr int64_t kSeq = 128, kHidden = 384, kHeads = 12, kLayers = 6, kFfn = 1536, kVocab = 30522;

Tensor seeded(std::vector<int64_t> shape, uint32_t seed, float scale) {
  Tensor t(DType::f32, std::move(shape));
  std::mt19937 r(seed);
  std::normal_distribution<float> n(0.0f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = n(r);
  return t;
}
Tensor filled(std::vector<int64_t> shape, float v) {
  Tensor t(DType::f32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = v;
  return t;
}

Graph minilm(int64_t B) {
  Graph g;
  Builder b(g);
  uint32_t seed = 1;
  auto w = [&](std::vector<int64_t> s) { return b.constant(seeded(std::move(s), seed++, 0.05f)); };
  auto ones = [&](int64_t n) { return b.constant(filled({n}, 1.0f)); };
  auto zeros = [&](int64_t n) { return b.constant(filled({n}, 0.0f)); };
  auto ids = b.input("input_ids", DType::i64, {B, kSeq});
  auto x = b.op1(OpKind::Embedding, {w({kVocab, kHidden}), ids});
  x = b.add(b.add(x, w({kSeq, kHidden})), w({kHidden}));
  x = b.layer_norm(x, ones(kHidden), zeros(kHidden), 1e-12);
  auto heads = [&](ValueId t) { return b.transpose(b.reshape(t, {B, kSeq, kHeads, kHidden / kHeads}), {0, 2, 1, 3}); };
  for (int l = 0; l < kLayers; ++l) {
    auto q = heads(b.linear(x, w({kHidden, kHidden}), w({kHidden})));
    auto k = heads(b.linear(x, w({kHidden, kHidden}), w({kHidden})));
    auto v = heads(b.linear(x, w({kHidden, kHidden}), w({kHidden})));
    auto a = b.reshape(b.transpose(b.attention(q, k, v), {0, 2, 1, 3}), {B, kSeq, kHidden});
    x = b.layer_norm(b.add(x, b.linear(a, w({kHidden, kHidden}), w({kHidden}))), ones(kHidden), zeros(kHidden), 1e-12);
    auto f = b.linear(b.linear(x, w({kFfn, kHidden}), w({kFfn}), "gelu"), w({kHidden, kFfn}), w({kHidden}));
    x = b.layer_norm(b.add(x, f), ones(kHidden), zeros(kHidden), 1e-12);
  }
  b.output(x);
  return g;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string variant(const std::string& d, const std::string& tag) {
  std::string v = d == "mlx" ? "MLX, mlx::core::compile" : "rlx " + d + " backend";
  if (d == "tpu") {  // "PJRT plugin <path> (C API 0.81; ...": the plugin's file name and API version
    const std::string& r = device_info("tpu").reason;
    size_t a = r.find(" (C API"), s = r.rfind('/', a);
    if (a != std::string::npos && s != std::string::npos)
      v = "PJRT " + r.substr(s + 1, a - s - 1) + " (" + r.substr(a + 2, r.find(';', a) - a - 2) + ")";
  }
  for (auto& c : v)
    if (c == '"' || c == '\\') c = '\'';
  return tag.empty() ? v : v + ", " + tag;
}

void row(std::ofstream& out, const std::string& dev, const std::string& var, const std::string& workload, int64_t batch,
         const char* seq, const std::vector<double>& v, double per_unit, const char* unit) {
  char line[1024];
  double p50 = pct(v, 0.5);
  std::snprintf(line, sizeof line,
                "{\"system\": \"rlx\", \"variant\": \"%s\", \"device\": \"%s\", \"workload\": \"%s\", \"dtype\": \"f32\", "
                "\"batch\": %lld, \"seq\": %s, \"p50_ms\": %.4f, \"p90_ms\": %.4f, \"throughput\": %.1f, \"unit\": \"%s\", "
                "\"peak_rss_mb\": null}",
                var.c_str(), dev.c_str(), workload.c_str(), static_cast<long long>(batch), seq, p50, pct(v, 0.9),
                per_unit / (p50 / 1000.0), unit);
  std::printf("%s\n", line);
  out << line << "\n";
  out.flush();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: graphapi_bench OUT.jsonl DEVICES [minilm_batches=1,32] [iters=20] [mnist_steps=50] [tag]\n");
    return 2;
  }
  std::ofstream out(argv[1]);
  auto devices = split(argv[2]);
  auto batches = split(argc > 3 ? argv[3] : "1,32");
  int iters = argc > 4 ? std::atoi(argv[4]) : 20;
  int steps = argc > 5 ? std::atoi(argv[5]) : 50;
  std::string tag = argc > 6 ? argv[6] : "";
  int rc = 0;
  std::map<int64_t, std::pair<std::string, Tensor>> first_out;
  std::pair<std::string, double> first_loss;  // the first device that trained, and its loss
  for (auto& d : devices) {
    const DeviceInfo& info = device_info(d);
    std::printf("== %s: %s (%s)\n", d.c_str(), device_status_name(info.status).data(), info.reason.c_str());
    if (!info.can_execute()) {
      rc = 1;
      continue;
    }
    try {
      for (auto& bs : batches) {
        int64_t B = std::stoll(bs);
        Tensor ids(DType::i64, {B, kSeq});
        std::mt19937 r(7);
        for (int64_t i = 0; i < ids.numel(); ++i) ids.set_int(i, static_cast<int64_t>(r() % kVocab));
        CompileOptions co;
        co.device = d;
        co.verify = false;
        auto t0 = std::chrono::steady_clock::now();
        CompiledModel m(minilm(B), co);
        Tensor y = m.run({ids})[0];
        std::printf("%s minilm b%lld: compile + first run %.0f ms\n", d.c_str(), static_cast<long long>(B), ms_since(t0));
        // Parity on the same inputs: the first device listed is the reference of the others.
        if (!first_out.count(B)) {
          first_out[B] = {d, y};
        } else {
          const Tensor& r = first_out[B].second;
          double worst = 0;
          for (int64_t i = 0; i < y.numel(); ++i) worst = std::max(worst, std::abs(y.get(i) - r.get(i)));
          std::printf("%s minilm b%lld: max |diff| vs %s %.3g\n", d.c_str(), static_cast<long long>(B),
                      first_out[B].first.c_str(), worst);
        }
        std::vector<double> v;
        for (int i = 0; i < iters; ++i) {
          auto s = std::chrono::steady_clock::now();
          m.run({ids});
          v.push_back(ms_since(s));
        }
        row(out, d, variant(d, tag), "minilm-l6 encoder (random weights), end-to-end host I/O", B, "128", v,
            static_cast<double>(B), "seq/s");
      }
      const std::vector<int64_t> sizes = {784, 128, 10};
      const int64_t batch = 128;
      train::OptimizerConfig opt;
      opt.lr = 0.05;
      opt.momentum = 0.9;
      CompileOptions co;
      co.device = d;
      train::Trainer tr(models::mlp_loss_graph(sizes, batch), models::mlp_init(sizes, 3), opt, {}, co);
      Tensor x = seeded({batch, 784}, 5, 0.5f), y(DType::i64, {batch});
      for (int64_t i = 0; i < batch; ++i) y.set_int(i, i % 10);
      tr.step({x, y});
      std::vector<double> v;
      for (int s = 0; s < steps; ++s) {
        auto t0 = std::chrono::steady_clock::now();
        tr.advance({x, y});
        v.push_back(ms_since(t0));
      }
      double loss = tr.outputs()[0].get(0);
      if (first_loss.first.empty()) first_loss = {d, loss};
      std::printf("%s mnist: loss after %d steps %.6f (%s: %.6f)\n", d.c_str(), steps + 1, loss, first_loss.first.c_str(),
                  first_loss.second);
      row(out, d, variant(d, tag), "mnist mlp 784-128-10 sgd-momentum step (resident params)", batch, "null", v,
          static_cast<double>(batch), "img/s");
    } catch (const std::exception& e) {
      std::printf("%s: FAILED: %s\n", d.c_str(), e.what());
      rc = 1;
    }
  }
  return rc;
}
