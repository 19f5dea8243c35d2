// RLX side of bench/onnx_zoo.py: imports one ONNX model with its input shape fixed by the input
// array, compiles it for the cpu device once, then times `CompiledModel::run` alone (warm-up runs
// first; the compile is timed separately).
// Usage: rlx_bench_onnx_zoo MODEL.onnx INPUT.npy OUT_PREFIX WARMUP RUNS [BUDGET_S]
//   Runs at least 5 and at most RUNS timed runs, stopping early once BUDGET_S seconds of timed
//   runs have passed. Writes OUT_PREFIX.npz (every output) and OUT_PREFIX.json
//   ({"times_ms": [...], "compile_s": .., "peak_rss_mb": ..}); with RLX_PROFILE=1 prints the
//   per-kernel profile to stderr.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include "formats/onnx/onnx.h"
#include "rlx/npy.h"
#include "rlx/session.h"

using namespace rlx;

// This process's peak resident set (VmHWM): unlike getrusage's ru_maxrss it starts afresh at exec,
// so it is not the parent's high-water mark.
static double peak_rss_mb() {
  std::ifstream st("/proc/self/status");
  std::string line;
  while (std::getline(st, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // kB
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

int main(int argc, char** argv) {
  if (argc != 6 && argc != 7) {
    std::fprintf(stderr, "usage: %s MODEL.onnx INPUT.npy OUT_PREFIX WARMUP RUNS [BUDGET_S]\n", argv[0]);
    return 2;
  }
  try {
    const std::string model_path = argv[1], out = argv[3];
    const int warmup = std::atoi(argv[4]), runs = std::atoi(argv[5]);
    const double budget_s = argc == 7 ? std::atof(argv[6]) : 1e9;
    Tensor x = read_npy(argv[2]);
    auto names = onnx::onnx_input_names(model_path);
    if (names.size() != 1) {
      std::fprintf(stderr, "%s: expected one runtime input, found %zu\n", model_path.c_str(), names.size());
      return 1;
    }
    onnx::ImportOptions io;
    io.input_shapes[names[0]] = x.shape();
    auto t0 = std::chrono::steady_clock::now();
    Graph g = onnx::load_onnx(model_path, io);
    CompileOptions co;
    co.device = "cpu";
    co.verify = false;
    CompiledModel model(std::move(g), co);
    std::map<std::string, Tensor> feed{{names[0], x}};
    auto outs = model.run(feed);  // the first run specializes and builds the executable
    const double compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (int i = 1; i < warmup; ++i) outs = model.run(feed);
    std::ostringstream times;
    double spent = 0;
    for (int i = 0; i < runs && (i < 5 || spent < budget_s); ++i) {
      auto a = std::chrono::steady_clock::now();
      outs = model.run(feed);
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
      spent += ms / 1000.0;
      times << (i ? "," : "") << ms;
    }
    if (std::getenv("RLX_PROFILE")) std::cerr << model.profile();
    std::vector<std::pair<std::string, Tensor>> ordered(outs.begin(), outs.end());
    write_npz(out + ".npz", ordered);
    std::ofstream f(out + ".json");
    f << "{\"times_ms\":[" << times.str() << "],\"compile_s\":" << compile_s << ",\"peak_rss_mb\":" << peak_rss_mb()
      << "}\n";
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rlx_bench_onnx_zoo: %s\n", e.what());
    return 1;
  }
}
