// RLX side of the H200 linear-algebra benchmark (bench/h200_linalg.py times CuPy and torch.linalg
// on the same shapes and merges): one cholesky per graph, compiled for cuda (cuSOLVER), timed as
// `iters` runs back to back on device-resident inputs (CUDA events around the batch), five rounds,
// p50/p90 over rounds; the executable is CompiledModel::executable()'s. Usage: h200_linalg OUT_DIR [iters=50]
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>

#include "rlx/builder.h"
#include "rlx/session.h"
#include "runtime/backend.h"

using namespace rlx;

struct Case {
  int64_t batch, n;
  const char* dtype;
};
const Case kCases[] = {{10000, 8, "f64"}, {10000, 8, "f32"}, {10000, 32, "f64"}, {10000, 32, "f32"},
                       {1, 2048, "f64"},  {1, 2048, "f32"},  {1, 4096, "f32"}};

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: h200_linalg OUT_DIR [iters]\n");
    return 2;
  }
  std::string out = argv[1];
  int iters = argc > 2 ? std::atoi(argv[2]) : 50;
  std::ofstream rows(out + "/rlx_linalg_rows.jsonl");
  try {
    for (const Case& c : kCases) {
      DType dt;
      parse_dtype(c.dtype, &dt);
      Graph g;
      Builder b(g);
      for (auto o : b.op(OpKind::Cholesky, {b.input("a", dt, {c.batch, c.n, c.n})})) b.output(o);
      CompileOptions co;
      co.device = "cuda";
      CompiledModel model(std::move(g), co);
      Executable& exe = model.executable();
      // seeded SPD inputs: M Mᵀ / n + I per matrix
      std::mt19937 rng(3);
      std::uniform_real_distribution<double> u(-1, 1);
      Tensor a(dt, {c.batch, c.n, c.n});
      std::vector<double> m(c.n * c.n);
      for (int64_t bb = 0; bb < c.batch; ++bb) {
        for (auto& x : m) x = u(rng);
        for (int64_t i = 0; i < c.n; ++i)
          for (int64_t j = 0; j <= i; ++j) {
            double v = i == j ? 1.0 : 0.0;
            for (int64_t k = 0; k < c.n; ++k) v += m[i * c.n + k] * m[j * c.n + k] / static_cast<double>(c.n);
            a.set((bb * c.n + i) * c.n + j, v);
            a.set((bb * c.n + j) * c.n + i, v);
          }
      }
      exe.resident_upload({a});
      exe.resident_time(3);
      std::vector<double> ms;
      for (int r = 0; r < 5; ++r) ms.push_back(exe.resident_time(c.n >= 2048 ? std::max(3, iters / 10) : iters));
      std::sort(ms.begin(), ms.end());
      std::printf("rlx cholesky %s %lldx%lld^2: %.4f ms  (%s)\n", c.dtype, (long long)c.batch, (long long)c.n, ms[2],
                  exe.summary().c_str());
      char line[512];
      std::snprintf(line, sizeof line,
                    "{\"system\": \"rlx\", \"variant\": \"cuSOLVER potrf%s + 2 NVRTC kernels\", \"device\": \"cuda\", "
                    "\"workload\": \"cholesky %lldx%lld\", \"dtype\": \"%s\", \"batch\": %lld, \"seq\": null, "
                    "\"p50_ms\": %.5f, \"p90_ms\": %.5f, \"throughput\": null, \"unit\": null, \"peak_rss_mb\": null}\n",
                    c.batch > 1 ? "Batched" : "", (long long)c.n, (long long)c.n, c.dtype, (long long)c.batch, ms[2],
                    ms[4]);
      rows << line;
      rows.flush();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "h200_linalg: %s\n", e.what());
    return 1;
  }
  return 0;
}
