// RLX side of the H200 MNIST MLP training benchmark (bench/h200_mnist.py runs the peers and merges).
// The training step (forward + backward + SGD update, src/train's build_train_step) is compiled for
// cuda once per (MLP, batch); the new parameters are copied back into the parameter inputs on the
// device after each step (Executable::resident_feedback, inside the captured CUDA graph), so the
// timed loop is graph replays only. The executables come from the public pipeline
// (CompiledModel::executable(): shape specialization, verification, the LIR schedule). Rows:
//   rlx/device-resident: N steps back to back on one seeded synthetic batch, CUDA events, img/s;
//                        the default schedule (one persistent launch where the planner takes the step,
//                        src/backends/cuda/render_grid.h) and RLX_CUDA_PERSISTENT=0 (cuBLASLt + merged
//                        launches), each with its parity check and eager profile (per phase / per kernel)
//   rlx/Trainer:         train::Trainer on device "cuda" (resident API: parameters stay on the GPU;
//                        the batch is written every step; step() reads the loss back each step,
//                        advance() + a read every 50 steps does not)
// Parity: the first steps' losses and the final parameters against train::Trainer on the cpu.
// Usage: h200_mnist OUT_DIR [mlps=128;512,512] [batches=128,1024] [steps=2000]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "bench_util.h"
#include "models/mlp.h"
#include "rlx/session.h"
#include "runtime/backend.h"
#include "train/train.h"

using namespace rlx;

namespace {

using rlx_bench::pct;
using rlx_bench::split;

double max_abs_diff(const Tensor& a, const Tensor& b) {
  double e = 0;
  for (int64_t i = 0; i < a.numel(); ++i) e = std::max(e, std::abs(a.get(i) - b.get(i)));
  return e;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: h200_mnist OUT_DIR [mlps=128;512,512] [batches=128,1024] [steps=2000]\n");
    return 2;
  }
  std::string out = argv[1];
  auto mlps = split(argc > 2 ? argv[2] : "128;512,512", ';');
  auto batches = split(argc > 3 ? argv[3] : "128,1024", ',');
  int steps = argc > 4 ? std::atoi(argv[4]) : 2000;
  std::ofstream rows(out + "/rlx_rows.jsonl"), checks(out + "/rlx_checks.jsonl");
  try {
    for (auto& hidden : mlps) {
      std::vector<int64_t> sizes{784};
      for (auto& h : split(hidden, ',')) sizes.push_back(std::stoll(h));
      sizes.push_back(10);
      std::string name;
      for (auto s : sizes) name += (name.empty() ? "" : "-") + std::to_string(s);
      for (auto& bs : batches) {
        int64_t B = std::stoll(bs);
        // Device-resident rows for two schedules, each compiled on its own: the
        // default (one persistent launch where the planner takes the step) and RLX_CUDA_PERSISTENT=0
        // (cuBLASLt GEMMs + merged launches); each with its parity check.
        train::OptimizerConfig opt;  // plain SGD, lr 0.1
        Graph loss = models::mlp_loss_graph(sizes, B);
        int np = static_cast<int>(2 * (sizes.size() - 1));
        Graph step = train::build_train_step(loss, np, opt);
        CompileOptions co;
        co.device = "cuda";
        // Inputs: params, data (x, labels), lr, lr_hat, eps_hat. Outputs: loss, correct, params.
        std::vector<Tensor> init = models::mlp_init(sizes, 0);
        std::mt19937 rng(1);
        std::uniform_real_distribution<float> px(0.0f, 1.0f);
        Tensor x(DType::f32, {B, 784}), y(DType::i64, {B});
        for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = px(rng);
        for (int64_t i = 0; i < B; ++i) y.data<int64_t>()[i] = static_cast<int64_t>(rng() % 10);
        Tensor lr(DType::f32, {}), lr_hat(DType::f32, {}), eps_hat(DType::f32, {});
        lr.data<float>()[0] = lr_hat.data<float>()[0] = 0.1f, eps_hat.data<float>()[0] = 0.0f;
        std::vector<Tensor> in;
        for (auto& p : init) in.push_back(p.clone());
        in.push_back(x), in.push_back(y), in.push_back(lr), in.push_back(lr_hat), in.push_back(eps_hat);
        const int kParity = 5;
        std::vector<double> cpu_loss;
        CompileOptions cpu;
        cpu.device = "cpu";
        train::Trainer ref(loss, init, opt, {}, cpu);
        for (int s = 0; s < kParity; ++s) cpu_loss.push_back(ref.step({x, y})[0].get(0));
        char line[768];
        auto emit = [&](const std::string& variant, const std::vector<double>& v) {
          double p50 = pct(v, 0.5);
          std::snprintf(line, sizeof line,
                        "{\"system\": \"rlx\", \"variant\": \"%s\", \"device\": \"cuda\", \"workload\": "
                        "\"mnist mlp %s sgd train step\", \"dtype\": \"f32\", \"batch\": %lld, \"seq\": null, "
                        "\"p50_ms\": %.5f, \"p90_ms\": %.5f, \"throughput\": %.1f, \"unit\": \"img/s\", "
                        "\"peak_rss_mb\": null}\n",
                        variant.c_str(), name.c_str(), static_cast<long long>(B), p50, pct(v, 0.9), B / (p50 / 1000.0));
          rows << line;
        };
        struct Sched {
          const char* env;  // RLX_CUDA_PERSISTENT
          const char* variant;
        };
        for (Sched sc : {Sched{"1", "device-resident, CUDA graph"},
                         Sched{"0", "device-resident, CUDA graph, RLX_CUDA_PERSISTENT=0 (cuBLASLt + merged launches)"}}) {
          setenv("RLX_CUDA_PERSISTENT", sc.env, 1);
          auto t0 = std::chrono::steady_clock::now();
          CompiledModel model(step, co);
          Executable& exe = model.executable();
          double compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          std::vector<std::pair<int, int>> fb;
          for (int i = 0; i < np; ++i) fb.push_back({2 + i, i});
          exe.resident_feedback(fb);
          exe.resident_upload(in);
          // Parity: 5 steps on the device (losses read back each step) vs train::Trainer on the cpu.
          std::vector<double> dev_loss;
          for (int s = 0; s < kParity; ++s) {
            exe.resident_time(1);
            dev_loss.push_back(exe.resident_read_output(0).get(0));
          }
          double perr = 0, lerr = 0;
          for (int i = 0; i < np; ++i) perr = std::max(perr, max_abs_diff(exe.resident_read_input(i), ref.params()[i]));
          for (int s = 0; s < kParity; ++s) lerr = std::max(lerr, std::abs(dev_loss[s] - cpu_loss[s]));
          std::snprintf(line, sizeof line,
                        "{\"check\": \"rlx cuda (RLX_CUDA_PERSISTENT=%s) vs rlx cpu Trainer, %d SGD steps\", \"mlp\": \"%s\", "
                        "\"batch\": %lld, \"loss_first\": %.6f, \"loss_last\": %.6f, \"max_abs_loss_diff\": %.3g, "
                        "\"max_abs_param_diff\": %.3g}\n",
                        sc.env, kParity, name.c_str(), static_cast<long long>(B), dev_loss.front(), dev_loss.back(), lerr,
                        perr);
          checks << line;
          std::printf("parity %s b%lld persistent=%s: loss %.4f -> %.4f, |dloss| %.2g, |dparam| %.2g\n", name.c_str(),
                      static_cast<long long>(B), sc.env, dev_loss.front(), dev_loss.back(), lerr, perr);
          // Throughput: `steps` replays back to back, five rounds; p50/p90 over rounds.
          exe.resident_time(50);  // warm-up (captures the graph)
          std::vector<double> ms;
          for (int r = 0; r < 5; ++r) ms.push_back(exe.resident_time(steps));
          double final_loss = exe.resident_read_output(0).get(0);
          std::printf("rlx cuda %s b%lld persistent=%s: %.4f ms/step p50 (%.2f M img/s), loss after %d steps %.4f | "
                      "compile %.1f s | %s\n",
                      name.c_str(), static_cast<long long>(B), sc.env, pct(ms, 0.5), B / pct(ms, 0.5) / 1e3,
                      5 * steps + 55, final_loss, compile_s, exe.summary().c_str());
          emit(sc.variant, ms);
          // Per-kernel profile of eager steps (a persistent launch: split by phase), for the report.
          setenv("RLX_PROFILE", "1", 1);
          CompiledModel pmodel(step, co);
          for (int i = 0; i < 5; ++i) pmodel.run(in);
          unsetenv("RLX_PROFILE");
          std::ofstream pf(out + "/rlx_profile_mnist_" + name + "_b" + bs + "_p" + sc.env + ".txt");
          pf << exe.summary() << "\n" << pmodel.profile();
        }
        unsetenv("RLX_CUDA_PERSISTENT");
        // The library path: train::Trainer on cuda (inputs/outputs cross the host each step).
        train::Trainer tr(loss, init, opt, {}, co);
        for (int s = 0; s < 20; ++s) tr.step({x, y});
        std::vector<double> tms;
        for (int s = 0; s < 200; ++s) {
          auto a = std::chrono::steady_clock::now();
          tr.step({x, y});
          tms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
        }
        std::printf("rlx Trainer(cuda) %s b%lld: %.4f ms/step p50 (%.2f M img/s)\n", name.c_str(),
                    static_cast<long long>(B), pct(tms, 0.5), B / pct(tms, 0.5) / 1e3);
        emit("train::Trainer on cuda, step() (resident; loss read back every step)", tms);
        // Trainer::advance: the batch and scalars are written, nothing read back; the loss is read
        // once per 50 steps (what a training loop that logs every 50 steps does).
        std::vector<double> ams;
        for (int r = 0; r < 5; ++r) {
          auto a = std::chrono::steady_clock::now();
          for (int s = 0; s < 500; ++s) {
            tr.advance({x, y});
            if (s % 50 == 49) tr.outputs();
          }
          ams.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count() / 500);
        }
        std::printf("rlx Trainer(cuda) advance %s b%lld: %.4f ms/step p50 (%.2f M img/s)\n", name.c_str(),
                    static_cast<long long>(B), pct(ams, 0.5), B / pct(ams, 0.5) / 1e3);
        emit("train::Trainer on cuda, advance() (resident; loss read every 50 steps)", ams);
        rows.flush(), checks.flush();
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "h200_mnist: %s\n", e.what());
    return 1;
  }
  return 0;
}
