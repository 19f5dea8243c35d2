// RLX side of the H200 attention micro-benchmark (bench/h200_attention.py times PyTorch SDPA on the
// same shapes and merges). One attention op per graph, compiled for cuda; timed as `iters` CUDA
// graph replays back to back (CUDA events around the batch), five rounds, p50/p90 over rounds.
// The executable is the public pipeline's (CompiledModel::executable()), timed through the resident API.
// Usage: h200_attention OUT_DIR [iters=200]
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>

#include "rlx/builder.h"
#include "rlx/session.h"
#include "runtime/backend.h"

using namespace rlx;

struct Case {
  int64_t B, H, S, D;
  const char* dtype;
  const char* mask;
};

// MiniLM's heads (b32/b128), then long-sequence shapes with head dims 64 and 128.
const Case kCases[] = {{32, 12, 128, 32, "f16", "none"},   {128, 12, 128, 32, "f16", "none"},
                       {8, 16, 1024, 64, "f16", "none"},   {8, 16, 1024, 64, "f16", "causal"},
                       {4, 16, 2048, 128, "f16", "causal"}, {4, 16, 2048, 128, "bf16", "causal"},
                       {32, 12, 128, 32, "f32", "none"}};

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: h200_attention OUT_DIR [iters]\n");
    return 2;
  }
  std::string out = argv[1];
  int iters = argc > 2 ? std::atoi(argv[2]) : 200;
  std::ofstream rows(out + "/rlx_attention_rows.jsonl");
  try {
    for (const Case& c : kCases) {
      DType dt;
      parse_dtype(c.dtype, &dt);
      Graph g;
      Builder b(g);
      auto q = b.input("q", dt, {c.B, c.H, c.S, c.D}), k = b.input("k", dt, {c.B, c.H, c.S, c.D}),
           v = b.input("v", dt, {c.B, c.H, c.S, c.D});
      b.output(b.attention(q, k, v, -1, c.mask));
      CompileOptions co;
      co.device = "cuda";
      CompiledModel model(std::move(g), co);
      Executable& exe = model.executable();
      std::mt19937 rng(3);
      std::uniform_real_distribution<double> u(-1, 1);
      std::vector<Tensor> in;
      for (int i = 0; i < 3; ++i) {
        Tensor t(dt, {c.B, c.H, c.S, c.D});
        for (int64_t j = 0; j < t.numel(); ++j) t.set(j, u(rng));
        in.push_back(std::move(t));
      }
      exe.resident_upload(in);
      exe.resident_time(20);
      std::vector<double> ms;
      for (int r = 0; r < 5; ++r) ms.push_back(exe.resident_time(iters));
      std::sort(ms.begin(), ms.end());
      double flops = 4.0 * c.B * c.H * c.S * c.S * c.D * (std::string(c.mask) == "causal" ? 0.5 : 1.0);
      std::printf("rlx attention %s B%lld H%lld S%lld D%lld %s: %.4f ms (%.1f TFLOP/s)\n", c.dtype,
                  (long long)c.B, (long long)c.H, (long long)c.S, (long long)c.D, c.mask, ms[2], flops / ms[2] / 1e9);
      char line[640];
      std::snprintf(line, sizeof line,
                    "{\"system\": \"rlx\", \"variant\": \"fused attention kernel, CUDA graph replay\", \"device\": \"cuda\", "
                    "\"workload\": \"attention B%lld H%lld S%lld D%lld mask=%s\", \"dtype\": \"%s\", \"batch\": %lld, "
                    "\"seq\": %lld, \"p50_ms\": %.5f, \"p90_ms\": %.5f, \"throughput\": %.2f, \"unit\": \"TFLOP/s\", "
                    "\"peak_rss_mb\": null}\n",
                    (long long)c.B, (long long)c.H, (long long)c.S, (long long)c.D, c.mask, c.dtype, (long long)c.B,
                    (long long)c.S, ms[2], ms[4], flops / ms[2] / 1e9);
      rows << line;
      rows.flush();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "h200_attention: %s\n", e.what());
    return 1;
  }
  return 0;
}
