// `rlx bench MODEL`: latency and throughput of any model rlx.load reads (.rlx, .onnx, .rten, a Qwen3
// .gguf, a Hugging Face folder) on one device, on generated inputs: p50/p90/mean per run, the
// first run's compile time apart, JSON in bench/results' row layout.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <set>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "commands.h"
#include "formats/file_io.h"
#include "models/load_model.h"
#include "rlx/device.h"

namespace rlx::cli {

namespace {

std::string json_str(const std::string& s) {
  std::string r = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      r += buf;
      continue;
    }
    r += c;
  }
  return r + "\"";
}

std::string machine() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  return model + ", " + std::to_string(std::thread::hardware_concurrency()) + " logical CPUs";
}

// Generated inputs: floats uniform in [-1, 1) (seeded), integers 0/1 alternating (valid token ids,
// positions, masks and token types for every model), booleans true.
Tensor make_input(const ValueType& t, std::mt19937& rng) {
  Tensor x(t.dtype, static_dims(t.shape));
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (is_float(t.dtype)) x.set(i, u(rng));
    else if (t.dtype == DType::boolean) x.set_int(i, 1);
    else x.set_int(i, i % 2);
  }
  return x;
}

std::string value_name(const Graph& g, ValueId v) {
  std::string l = g.value_label(v);
  return l.empty() || l[0] != '%' ? l : l.substr(1);
}

}  // namespace

int cmd_bench(const Args& a) {
  const std::string& path = a.positional[0];
  int64_t batch = a.integer("batch"), seq = a.integer("seq"), runs = a.integer("runs"), warm = a.integer("warmup");
  models::ModelLoadOptions lo;
  lo.batch = batch;
  lo.seq = seq;
  std::string kind = models::model_kind(path);
  Graph g = models::load_model(path, lo);
  // Symbolic dims: --bind, else dim 0 of an input is the batch and dim 1 the sequence.
  Bindings b = bindings(a);
  std::set<std::string> syms;
  for (auto& s : g.symbols()) syms.insert(s);
  for (auto& [k, v] : b)
    if (!syms.count(k)) usage_fail("bench --bind ", k, ": the model has no symbolic dim '", k, "'");
  bool has_seq = kind == "gguf" || kind == "hf-qwen3";
  for (auto in : g.inputs) {
    const Shape& s = g.type(in).shape;
    for (size_t d = 0; d < s.size(); ++d)
      if (!s[d].is_static() && !b.count(s[d].sym)) {
        b[s[d].sym] = d == 0 ? batch : d == 1 ? seq : 1;
        has_seq |= d == 1;
      }
  }
  CompileOptions co;
  co.device = a.get("device");
  CompiledModel m(g, co);
  std::mt19937 rng(0);
  std::vector<Tensor> inputs;
  std::string shapes;
  for (auto in : g.inputs) {
    ValueType t = g.type(in);
    Shape s;
    for (auto& d : t.shape) s.push_back(d.is_static() ? d : Dim(b.at(d.sym)));
    t.shape = s;
    inputs.push_back(make_input(t, rng));
    shapes += (shapes.empty() ? "" : ", ") + value_name(g, in) + " " + std::string(dtype_name(t.dtype)) + shape_str(s);
  }
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  m.run(inputs);  // compiles this shape
  double first_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  for (int64_t i = 0; i < warm; ++i) m.run(inputs);
  std::vector<double> ms;
  for (int64_t i = 0; i < runs; ++i) {
    auto s = clock::now();
    m.run(inputs);
    ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - s).count());
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  auto pct = [&](double p) { return sorted[std::min(sorted.size() - 1, static_cast<size_t>(p * double(sorted.size())))]; };
  double p50 = pct(0.5), p90 = pct(0.9), mean = 0;
  for (double v : ms) mean += v / double(ms.size());
  double thr = double(batch) * 1000.0 / p50;
  std::printf("rlx bench %s (%s) on %s: inputs %s\n", path.c_str(), kind.c_str(), co.device.c_str(), shapes.c_str());
  std::printf("first run (compile + run) %.1f ms; %lld runs after %lld warm-up: p50 %.3f ms, p90 %.3f ms, mean %.3f ms, "
              "%.1f items/s (batch %lld)\n",
              first_ms, (long long)runs, (long long)warm, p50, p90, mean, thr, (long long)batch);
  std::string out = a.get("json");
  if (!out.empty()) {
    char date[32];
    std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", std::gmtime(&now));
    std::string name = path;
    while (name.size() > 1 && name.back() == '/') name.pop_back();
    name = name.substr(name.find_last_of('/') + 1);
    std::ostringstream j;
    j << "{\"benchmark\": \"rlx bench\", \"machine\": " << json_str(machine()) << ", \"date\": \"" << date
      << "Z\", \"model\": " << json_str(path) << ", \"format\": \"" << kind << "\", \"inputs\": " << json_str(shapes)
      << ", \"first_run_ms\": " << first_ms << ", \"warmup\": " << warm << ", \"runs\": " << runs
      << ",\n \"rows\": [{\"system\": \"rlx\", \"variant\": " << json_str(co.device) << ", \"device\": "
      << json_str(co.device) << ", \"workload\": " << json_str(name) << ", \"dtype\": \""
      << (inputs.empty() ? "-" : dtype_name(inputs[0].dtype())) << "\", \"batch\": " << batch << ", \"seq\": "
      << (has_seq ? std::to_string(seq) : "null") << ", \"p50_ms\": " << p50
      << ", \"p90_ms\": " << p90 << ", \"mean_ms\": " << mean << ", \"throughput\": " << thr
      << ", \"unit\": \"items/s\"}]}\n";
    if (out == "-") {
      std::cout << j.str();
    } else {
      formats::write_file_atomic(out, j.str(), "bench");
      std::printf("json: %s\n", out.c_str());
    }
  }
  return 0;
}

}  // namespace rlx::cli
