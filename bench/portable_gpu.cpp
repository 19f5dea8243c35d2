// Portable GPU devices on software drivers (lavapipe, llvmpipe, PoCL) next to cpu, on identical
// seeded inputs: a GEMM, a softmax and a fused elementwise chain. p50/p90 of 20 runs after 3
// warm-ups; writes bench/results/portable_gpu.json. Speed on CPU-emulated GPUs is not a goal.
// Build: g++ -O2 -std=c++20 -Iinclude -Isrc bench/portable_gpu.cpp build-gpu/librlx_core.a \
//          build-gpu/librlx_onnx_proto.a -lopenblas -licuuc -lprotobuf -lz -ldl -lpthread -o /tmp/portable_gpu
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>

#include "rlx/builder.h"
#include "rlx/device.h"
#include "rlx/session.h"

using namespace rlx;

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
  for (const char* dev : {"cpu", "vulkan", "opengl", "gpu"}) {
    if (!device_info(dev).can_execute()) continue;
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
  std::ofstream("bench/results/portable_gpu.json")
      << "{\"benchmark\": \"portable_gpu\", \"machine\": \"2 vCPU x86-64 (software GPU drivers)\", \"date\": \"2026-11-29\", "
         "\"rows\": [\n"
      << rows << "\n]}\n";
}
