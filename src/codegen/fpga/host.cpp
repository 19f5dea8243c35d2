// The host half of the fpga device: quantizes the f32 inputs to the bytes the datapath streams in,
// builds and runs the Verilator simulator of a project, and finishes its outputs (f32 epilogue or
// dequantize) exactly as the graph's host ops do.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "codegen/fpga/fpga.h"
#include "quant/fixed_point.h"
#include "runtime/disk_cache.h"

namespace rlx::fpga {

extern const char* const kLayerSv;
extern const char* const kTestbenchCpp;

namespace {

bool tool_found(const char* tool) {
  return std::system((std::string(tool) + " --version >/dev/null 2>&1").c_str()) == 0;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string tail(const std::string& s, size_t n) { return s.size() <= n ? s : "..." + s.substr(s.size() - n); }

int shell(const std::string& cmd) {
  int rc = std::system(cmd.c_str());
  return rc == -1 ? -1 : (WIFEXITED(rc) ? WEXITSTATUS(rc) : 128);
}

// The cache key of a project: everything the generated files depend on.
std::string project_key(const Model& m, const Options& o) {
  std::ostringstream s;
  s << kLayerSv << kTestbenchCpp << "P" << o.parallel << " in " << m.in_scale << " " << m.in_zp << " " << m.in_signed;
  for (auto& L : m.layers) {
    s << "|" << L.K << " " << L.N << " " << L.x_zp << " " << L.x_signed << " " << L.wbits << " " << L.int_out << " "
      << L.out_signed << " " << L.relu << " " << L.half_even << " " << L.zp << ":";
    for (auto v : L.wc) s << v << ",";
    for (auto v : L.bias) s << v << ",";
    for (auto v : L.mul) s << v << ",";
    for (auto v : L.shift) s << v << ",";
  }
  return hex64(fnv1a64(s.str()));
}

}  // namespace

std::string missing_tools() {
  if (!tool_found("verilator")) return "verilator not found on PATH (Debian package verilator)";
  if (!tool_found("make")) return "make not found on PATH";
  if (!tool_found("c++")) return "no C++ compiler (c++) on PATH for the Verilator model";
  return "";
}

std::vector<uint8_t> quantize_inputs(const Model& m, const Tensor& x) {
  int64_t K = m.in_features();
  RLX_CHECK(x.rank() >= 1 && x.shape().back() == K, "[fpga] input '", m.input, "': the last dimension must be ", K);
  int32_t lo, hi;
  quant::int8_range(!m.in_signed, &lo, &hi);
  std::vector<uint8_t> b(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i)
    b[static_cast<size_t>(i)] = static_cast<uint8_t>(quant::quantize(static_cast<float>(x.get(i)), m.in_scale, m.in_zp, lo, hi));
  return b;
}

Tensor finish_outputs(const Model& m, const std::vector<uint8_t>& raw, int64_t rows, const std::vector<int64_t>& shape) {
  const Layer& L = m.layers.back();
  int64_t N = L.N, total = rows * N;
  if (L.int_out && !m.dequant) {
    Tensor t(L.out_signed ? DType::i8 : DType::u8, shape);
    std::memcpy(t.raw(), raw.data(), static_cast<size_t>(total));
    return t;
  }
  Tensor t(DType::f32, shape);
  float* y = t.data<float>();
  for (int64_t i = 0; i < total; ++i) {
    int64_t n = i % N;
    if (L.int_out) {
      int32_t q = L.out_signed ? static_cast<int8_t>(raw[static_cast<size_t>(i)]) : raw[static_cast<size_t>(i)];
      y[i] = quant::dequantize(q, m.dq_zp, m.dq_scale);
    } else {
      uint32_t u = 0;
      for (int b = 0; b < 4; ++b) u |= static_cast<uint32_t>(raw[static_cast<size_t>(4 * i + b)]) << (8 * b);
      float v = static_cast<float>(static_cast<int32_t>(u)) * L.scale[static_cast<size_t>(n)];
      if (!m.post_bias.empty()) v = v + m.post_bias[static_cast<size_t>(n)];
      y[i] = v;
    }
  }
  return t;
}

std::vector<uint8_t> simulate(const std::string& dir, const std::vector<uint8_t>& bytes, int64_t rows, int64_t out_bytes,
                              SimStats* stats, int stall_percent) {
  RLX_CHECK(dir.find('\'') == std::string::npos, "[fpga] the project path may not hold a quote: ", dir);
  std::string missing = missing_tools();
  RLX_CHECK(missing.empty(), "[fpga] cannot simulate: ", missing);
  SimStats st;
  st.dir = dir;
  std::string bin = dir + "/obj_dir/Vrlx_fpga_top";
  auto t0 = std::chrono::steady_clock::now();
  st.cached = std::filesystem::exists(bin);
  if (!st.cached) {
    int rc = shell("make -C '" + dir + "' sim > '" + dir + "/build.log' 2>&1");
    RLX_CHECK(rc == 0 && std::filesystem::exists(bin), "[fpga] the Verilator build failed (", dir, "/build.log):\n",
              tail(read_text(dir + "/build.log"), 3000));
  }
  auto t1 = std::chrono::steady_clock::now();
  std::string tag = std::to_string(::getpid()) + "_" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  std::string in = "in_" + tag + ".bin", out = "out_" + tag + ".bin", js = "stats_" + tag + ".json";
  {
    std::ofstream f(dir + "/" + in, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    RLX_CHECK(f.good(), "[fpga] cannot write the input stream into ", dir);
  }
  int rc = shell("cd '" + dir + "' && ./obj_dir/Vrlx_fpga_top " + in + " " + out + " " + std::to_string(rows) + " " +
                 std::to_string(stall_percent) + " " + js + " > sim_" + tag + ".log 2>&1");
  std::string log = read_text(dir + "/sim_" + tag + ".log");
  std::string raw = read_text(dir + "/" + out), sj = read_text(dir + "/" + js);
  for (auto* f : {&in, &out, &js}) std::filesystem::remove(dir + "/" + *f);
  std::filesystem::remove(dir + "/sim_" + tag + ".log");
  RLX_CHECK(rc == 0, "[fpga] the simulation failed (exit ", rc, "): ", tail(log, 2000));
  RLX_CHECK(static_cast<int64_t>(raw.size()) == rows * out_bytes, "[fpga] the simulation wrote ", raw.size(), " bytes, expected ",
            rows * out_bytes);
  auto j = nlohmann::json::parse(sj);
  st.images = j.at("images").get<int64_t>();
  st.cycles = j.at("cycles").get<int64_t>();
  st.latency_first = j.at("latency_first").get<int64_t>();
  st.latency_max = j.at("latency_max").get<int64_t>();
  st.interval = j.at("interval").get<double>();
  auto t2 = std::chrono::steady_clock::now();
  st.build_s = std::chrono::duration<double>(t1 - t0).count();
  st.sim_s = std::chrono::duration<double>(t2 - t1).count();
  if (stats) *stats = st;
  return std::vector<uint8_t>(raw.begin(), raw.end());
}

Tensor run_mlp(const Graph& g, const Tensor& x, const Options& o, SimStats* stats) {
  Model m = plan_mlp(g);
  std::string missing = missing_tools();
  RLX_CHECK(missing.empty(), "[fpga] cannot run: ", missing);
  std::string dir = cache_dir("fpga") + "/" + project_key(m, o);
  if (!std::filesystem::exists(dir + "/obj_dir/Vrlx_fpga_top")) write_project(m, dir, o);
  int64_t K = m.in_features(), rows = x.numel() / K;
  std::vector<uint8_t> bytes = quantize_inputs(m, x);
  int64_t ob = m.layers.back().int_out ? 1 : 4;
  std::vector<uint8_t> raw = simulate(dir, bytes, rows, m.out_features() * ob, stats);
  std::vector<int64_t> shape = x.shape();
  shape.back() = m.out_features();
  return finish_outputs(m, raw, rows, shape);
}

}  // namespace rlx::fpga
