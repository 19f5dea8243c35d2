// The `rlx` command end to end: exit codes and messages for good and bad input.
#include <gtest/gtest.h>

#include "rlx/safetensors.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <string>

#include "run_rlx.h"

namespace {

using Result = RlxRun;

std::string ex(const char* f) { return std::string(RLX_SOURCE_DIR) + "/examples/" + f; }

std::string tmpfile(const char* name, const std::string& content) {
  std::string p = testing::TempDir() + name;
  std::ofstream(p) << content;
  return p;
}

}  // namespace

TEST(Cli, DevicesListsSixteen) {
  auto r = run_rlx("devices");
  EXPECT_EQ(r.code, 0);
  for (const char* d : {"cpu", "metal", "mlx", "ane", "cuda", "rocm", "oneapi", "tpu", "hexagon", "gpu", "vulkan",
                        "opengl", "directx", "webgpu", "cortexm", "fpga"})
    EXPECT_NE(r.out.find(std::string("\n") + d + " "), std::string::npos) << d;
  EXPECT_NE(r.out.find("16 targets"), std::string::npos);
}

TEST(Cli, ReportShowsAllPaths) {
  auto r = run_rlx("compile " + ex("mixed.rlx") + " --device cpu --report");
  EXPECT_EQ(r.code, 0) << r.out;
  for (const char* p : {" native ", " common-IR ", " rewritten "}) EXPECT_NE(r.out.find(p), std::string::npos) << p;
  auto env = run_rlx("compile " + ex("mixed.rlx"));
  EXPECT_EQ(env.out.find("dispatch report"), std::string::npos);
  auto withenv = run_rlx("compile " + ex("mixed.rlx") + " --force-common=linear --report");
  EXPECT_NE(withenv.out.find("linear"), std::string::npos);
}

TEST(Cli, UnsupportedFailsWithDiagnostic) {
  auto r = run_rlx("compile " + ex("f64_attention.rlx") + " --device webgpu --report");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("cannot legalize node 'self_attn'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("devices that could run it"), std::string::npos);
}

TEST(Cli, DumpLevels) {
  EXPECT_NE(run_rlx("compile " + ex("mlp.rlx") + " --dump=hir").out.find("graph @mlp"), std::string::npos);
  EXPECT_NE(run_rlx("compile " + ex("mlp.rlx") + " --dump=mir --bind batch=3").out.find("f32[3,"), std::string::npos);
  EXPECT_NE(run_rlx("compile " + ex("mlp.rlx") + " --dump=lir").out.find("lir @mlp"), std::string::npos);
  EXPECT_EQ(run_rlx("compile " + ex("mlp.rlx") + " --dump=xir").code, 2);
  EXPECT_EQ(run_rlx("compile " + ex("mlp.rlx") + " --bind batch=x").code, 2);
}

TEST(Cli, BadInputsFailWithMessage) {
  auto missing = run_rlx("compile /nonexistent/file.rlx");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find("rlx: "), std::string::npos);
  auto bad = run_rlx("compile " + tmpfile("bad.rlx", "graph @g(%x: f32[2]) {\n  %y = nosuchop(%x) : f32[2]\n  return %y\n}\n"));
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("[parse]"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("nosuchop"), std::string::npos) << bad.out;
  auto noinput = run_rlx("run " + ex("mlp.rlx"));
  EXPECT_EQ(noinput.code, 1);
  EXPECT_NE(noinput.out.find("missing input 'x'"), std::string::npos) << noinput.out;
  auto nofile = run_rlx("run " + ex("mlp.rlx") + " --input x=/nonexistent.npy");
  EXPECT_EQ(nofile.code, 1);
  EXPECT_EQ(run_rlx("frobnicate").code, 2);
  auto dev = run_rlx("run " + ex("mlp.rlx") + " --device nope");
  EXPECT_EQ(dev.code, 2);
  EXPECT_NE(dev.out.find("unknown device 'nope'"), std::string::npos);
}

#include "rlx/npy.h"

TEST(Cli, RunWritesNpz) {
  rlx::Tensor x(rlx::DType::f32, {2, 8});
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, 0.1 * static_cast<double>(i % 5));
  std::string in = testing::TempDir() + "x.npy", out = testing::TempDir() + "out.npz";
  rlx::write_npy(in, x);
  std::remove(out.c_str());
  auto r = run_rlx("run " + ex("mlp.rlx") + " --input x=" + in + " --output " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  auto arrs = rlx::read_npz(out);
  ASSERT_EQ(arrs.size(), 1u);
  const rlx::Tensor& p = arrs.begin()->second;
  EXPECT_EQ(p.shape(), (std::vector<int64_t>{2, 4}));
  for (int64_t row = 0; row < 2; ++row) {  // softmax rows sum to one
    double s = 0;
    for (int64_t j = 0; j < 4; ++j) s += p.get(row * 4 + j);
    EXPECT_NEAR(s, 1.0, 1e-5);
  }
}

// ---- the command table: help, version, README ----------------------------------------------------

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

namespace {

const std::vector<std::string> kCommands = {"devices", "compile", "run",   "inspect", "generate", "embed",    "serve", "launch",
                                            "onnx-suite", "train-mnist", "bench", "splat", "ops", "quantize", "help"};

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// The names of the commands `rlx --help` lists (lines "  NAME  summary" under "commands:").
std::vector<std::string> listed_commands() {
  std::vector<std::string> r;
  std::istringstream in(run_rlx("--help", true).out);
  std::string line;
  bool in_list = false;
  while (std::getline(in, line)) {
    if (line == "commands:") in_list = true;
    else if (line.empty()) in_list = in_list && r.empty();
    else if (in_list && line.size() > 2 && line[2] != ' ') r.push_back(line.substr(2, line.find(' ', 2) - 2));
  }
  return r;
}

}  // namespace

TEST(Cli, HelpListsEveryCommandWithItsSummary) {
  for (const char* flag : {"--help", "-h", "help"}) {
    auto r = run_rlx(flag, true);
    EXPECT_EQ(r.code, 0) << flag;
    EXPECT_TRUE(has(r.out, "rlx --version")) << r.out;
  }
  EXPECT_EQ(listed_commands(), kCommands);
  auto none = run_rlx("");
  EXPECT_EQ(none.code, 2);  // no command is a usage error, with the overview
  EXPECT_TRUE(has(none.out, "commands:")) << none.out;
}

TEST(Cli, EveryCommandHasItsOwnHelp) {
  for (auto& c : kCommands) {
    for (const char* flag : {" --help", " -h"}) {
      auto r = run_rlx(c + flag, true);
      EXPECT_EQ(r.code, 0) << c << flag << ": " << r.out;
      EXPECT_EQ(r.out.rfind("rlx " + c + ": ", 0), 0u) << r.out;
      EXPECT_TRUE(has(r.out, "usage: rlx " + c)) << r.out;
      EXPECT_TRUE(has(r.out, "-h, --help")) << r.out;
    }
    EXPECT_EQ(run_rlx("help " + c, true).out, run_rlx(c + " --help", true).out) << c;
  }
  // Flags carry their type, default and allowed values.
  auto t = run_rlx("train-mnist --help", true).out;
  EXPECT_TRUE(has(t, "--epochs N")) << t;
  EXPECT_TRUE(has(t, "default 5")) << t;
  EXPECT_TRUE(has(t, "--optimizer sgd|adam|adamw")) << t;
  EXPECT_TRUE(has(run_rlx("generate --help", true).out, "--top-p P")) << t;
  EXPECT_TRUE(has(run_rlx("generate --help", true).out, "in (0, 1]"));
  EXPECT_EQ(run_rlx("help frobnicate").code, 2);
}

TEST(Cli, VersionIsTheCMakeProjectVersion) {
  std::smatch m;
  std::string cmake = read_text(std::string(RLX_SOURCE_DIR) + "/CMakeLists.txt");
  ASSERT_TRUE(std::regex_search(cmake, m, std::regex(R"(project\(rlx VERSION ([0-9.]+))")));
  auto r = run_rlx("--version", true);
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "rlx " + m[1].str() + "\n");
}

// README.md's command table is the generated one, and names exactly the commands `rlx --help` lists.
TEST(Cli, ReadmeTableMatchesCommandTable) {
  std::string readme = read_text(std::string(RLX_SOURCE_DIR) + "/README.md");
  auto begin = readme.find("<!-- rlx commands");
  auto end = readme.find("<!-- end rlx commands -->");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  begin = readme.find('\n', begin) + 1;
  std::string table = readme.substr(begin, end - begin);
  auto gen = run_rlx("help --markdown", true);
  ASSERT_EQ(gen.code, 0);
  EXPECT_EQ(table, gen.out) << "README.md's command table is stale: regenerate it with `build/bin/rlx help --markdown`";
  std::vector<std::string> rows;
  std::regex row(R"(\n\| `rlx ([a-z-]+))");
  for (auto it = std::sregex_iterator(table.begin(), table.end(), row); it != std::sregex_iterator(); ++it)
    rows.push_back((*it)[1].str());
  EXPECT_EQ(rows, listed_commands());
}

// ---- strictness: usage errors exit 2 with "rlx: [cli] ..." -------------------------------------

namespace {
void expect_usage_error(const std::string& args, const std::vector<std::string>& says) {
  auto r = run_rlx(args);
  EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
  EXPECT_EQ(r.out.rfind("rlx: [cli] ", 0), 0u) << args << "\n" << r.out;
  EXPECT_FALSE(has(r.out, "internal error")) << args << "\n" << r.out;
  for (auto& s : says) EXPECT_TRUE(has(r.out, s)) << args << ": no '" << s << "' in\n" << r.out;
}
std::string tiny_qwen3() { return std::string(RLX_SOURCE_DIR) + "/tests/models/qwen3/tiny"; }
}  // namespace

TEST(Cli, UnknownFlagsAreUsageErrors) {
  expect_usage_error("compile " + ex("mlp.rlx") + " --frobnicate", {"unknown flag '--frobnicate'", "rlx compile --help"});
  expect_usage_error("train-mnist --epoch 1", {"unknown flag '--epoch'", "did you mean '--epochs'"});
  expect_usage_error("devices --frobnicate", {"unknown flag"});
  expect_usage_error("run " + ex("mlp.rlx") + " --bind batch=2", {"unknown flag '--bind'"});  // run binds from inputs
  expect_usage_error("ops --device cpu --frob=1", {"unknown flag '--frob'"});
  expect_usage_error("embed --model /tmp --frob x", {"unknown flag '--frob'"});
  expect_usage_error("serve --model /tmp --frob x", {"unknown flag '--frob'"});
  expect_usage_error("compile " + ex("mlp.rlx") + " --report=1", {"--report takes no value"});
  expect_usage_error("compile " + ex("mlp.rlx") + " --device", {"--device needs a value"});
  expect_usage_error("compile " + ex("mlp.rlx") + " " + ex("mlp.rlx"), {"takes one argument (MODEL)"});
  expect_usage_error("compile", {"needs MODEL"});
  expect_usage_error("frobnicate", {"unknown command 'frobnicate'"});
  expect_usage_error("train-mnist --epochs 1 --epochs 2", {"--epochs given 2 times"});
}

TEST(Cli, MalformedNumbersAreUsageErrors) {
  expect_usage_error("train-mnist --epochs abc", {"--epochs", "'abc' is not an integer"});
  expect_usage_error("train-mnist --lr fast", {"--lr", "'fast' is not a number"});
  expect_usage_error("train-mnist --hidden 128,x", {"--hidden", "'x' is not an integer"});
  expect_usage_error("onnx-suite /tmp --jobs two", {"--jobs", "'two' is not an integer"});
  expect_usage_error("generate --model " + tiny_qwen3() + " --prompt-ids 1,2 --max-new 1.5", {"'1.5' is not an integer"});
  expect_usage_error("generate --model " + tiny_qwen3() + " --prompt-ids 1,b", {"'b' is not an integer"});
  expect_usage_error("compile " + ex("mlp.rlx") + " --bind batch=x", {"'x' is not an integer"});
}

TEST(Cli, OutOfRangeValuesAreUsageErrors) {
  auto r = run_rlx("compile " + ex("mlp.rlx") + " --dump=mir --bind batch=-3");
  EXPECT_FALSE(has(r.out, "f32[-3")) << r.out;
  expect_usage_error("compile " + ex("mlp.rlx") + " --dump=mir --bind batch=-3", {"batch=-3", "must be >= 1"});
  std::string gen = "generate --model " + tiny_qwen3() + " --prompt-ids 1,2,3";
  expect_usage_error(gen + " --temperature -1", {"--temperature", "must be >= 0"});
  expect_usage_error(gen + " --top-p 1.5", {"--top-p", "in (0, 1]"});
  expect_usage_error(gen + " --top-p 0", {"--top-p", "in (0, 1]"});
  expect_usage_error(gen + " --max-new -1", {"--max-new", "must be >= 0"});
  expect_usage_error(gen + " --batch 0", {"--batch", "must be >= 1"});
  expect_usage_error("train-mnist --momentum 1", {"--momentum", "in [0, 1)"});
  expect_usage_error("train-mnist --data nope", {"unknown dataset 'nope'", "fashion, mnist"});
  expect_usage_error("compile " + ex("mlp.rlx") + " --dump=xir", {"unknown level 'xir'", "hir, mir, lir"});
  expect_usage_error("run " + ex("mlp.rlx") + " --device nope", {"unknown device 'nope'"});
}

TEST(Cli, BindNamesTheModelsSymbols) {
  expect_usage_error("compile " + ex("mlp.rlx") + " --bind nosuchsym=4", {"no symbolic dim 'nosuchsym'", "batch"});
  auto ok = run_rlx("compile " + ex("mlp.rlx") + " --dump=mir --bind batch=3");
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_TRUE(has(ok.out, "f32[3,8]")) << ok.out;
}

// --input arrays specialize a .rlx graph at compile time as they do an imported one.
TEST(Cli, CompileInputShapesSizeTheGraph) {
  rlx::Tensor x(rlx::DType::f32, {5, 8});
  std::string in = testing::TempDir() + "x_five.npy";
  rlx::write_npy(in, x);
  auto r = run_rlx("compile " + ex("mlp.rlx") + " --input x=" + in + " --dump=mir");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "f32[5,8]")) << r.out;
}

TEST(Cli, GenerateMaxNewBeyondTheContextNamesIt) {
  // tests/models/qwen3/tiny: max_position_embeddings 512
  expect_usage_error("generate --model " + tiny_qwen3() + " --prompt-ids 1,2,3 --max-new 600",
                     {"context length of 512", "--max-new 509"});
  auto ok = run_rlx("generate --model " + tiny_qwen3() + " --prompt-ids 1,2,3 --max-new 2", true);
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_EQ(std::count(ok.out.begin(), ok.out.end(), ','), 1) << ok.out;  // two new ids
}

TEST(Cli, DevicesJson) {
  auto r = run_rlx("devices --json", true);
  ASSERT_EQ(r.code, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_array());
  EXPECT_EQ(j.size(), 16u);
  bool cpu = false;
  for (auto& d : j) {
    for (const char* k : {"name", "status", "description", "reason"}) EXPECT_TRUE(d[k].is_string()) << d.dump();
    EXPECT_TRUE(d["runs"].is_boolean()) << d.dump();
    if (d["name"] == "cpu") cpu = d["runs"].get<bool>();
  }
  EXPECT_TRUE(cpu);
}

namespace {
std::string mlp_input() {
  rlx::Tensor x(rlx::DType::f32, {2, 8});
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, 0.1 * static_cast<double>(i % 5));
  std::string in = testing::TempDir() + "x_mlp.npy";
  rlx::write_npy(in, x);
  return in;
}
}  // namespace

TEST(Cli, RunReportPrintsTheDispatchTable) {
  auto r = run_rlx("run " + ex("mlp.rlx") + " --input x=" + mlp_input() + " --report", true);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "dispatch report")) << r.out;
  EXPECT_TRUE(has(r.out, " native ")) << r.out;
  EXPECT_TRUE(has(r.out, "probs = ")) << r.out;
}

TEST(Cli, RunOutputNpyWritesOneArray) {
  std::string out = testing::TempDir() + "out_one.npy";
  std::remove(out.c_str());
  auto r = run_rlx("run " + ex("mlp.rlx") + " --input x=" + mlp_input() + " --output " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  rlx::Tensor p = rlx::read_npy(out);
  EXPECT_EQ(p.shape(), (std::vector<int64_t>{2, 4}));
  // Two outputs cannot go to one .npy: refused before running, nothing written.
  std::string two = tmpfile("two_out.rlx", "graph @two(%x: f32[n,8]) {\n  %a = neg(%x) : f32[n,8]\n"
                                           "  %b = exp(%x) : f32[n,8]\n  return %a, %b\n}\n");
  std::string bad = testing::TempDir() + "out_two.npy";
  std::remove(bad.c_str());
  expect_usage_error("run " + two + " --input x=" + mlp_input() + " --output " + bad, {"2 outputs", ".npz"});
  EXPECT_FALSE(std::filesystem::exists(bad));
  std::string npz = testing::TempDir() + "out_two.npz";
  ASSERT_EQ(run_rlx("run " + two + " --input x=" + mlp_input() + " --output " + npz).code, 0);
  EXPECT_EQ(rlx::read_npz(npz).size(), 2u);
  expect_usage_error("run " + ex("mlp.rlx") + " --output out.txt", {"must end in .npy or .npz"});
  expect_usage_error("run " + ex("mlp.rlx") + " --input x=" + mlp_input() + " --output /nonexistent-dir/o.npz",
                     {"folder '/nonexistent-dir' does not exist"});
}

TEST(Cli, UnknownModelExtensionsNameTheKnownFormats) {
  std::string st = tmpfile("weights.safetensors", "not a graph");
  for (const char* cmd : {"compile ", "run "}) {
    auto r = run_rlx(cmd + st);
    EXPECT_EQ(r.code, 2) << cmd << r.out;
    EXPECT_TRUE(has(r.out, "unknown model format")) << r.out;
    EXPECT_TRUE(has(r.out, ".rlx") && has(r.out, ".onnx") && has(r.out, ".rten")) << r.out;
    EXPECT_TRUE(has(r.out, "holds weights, not a graph")) << r.out;
    EXPECT_FALSE(has(r.out, "[parse]")) << r.out;
  }
  auto bad = run_rlx("inspect " + st);  // read as safetensors: its own error, not the .rlx parser's
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_TRUE(has(bad.out, "[safetensors]")) << bad.out;
  auto other = run_rlx("inspect " + tmpfile("w.bin", "x"));
  EXPECT_EQ(other.code, 2) << other.out;
  EXPECT_TRUE(has(other.out, "unknown model format") && has(other.out, ".safetensors")) << other.out;
}

TEST(Cli, InspectAndRunReadSafetensors) {
  std::string p = testing::TempDir() + "cli_weights.safetensors";
  rlx::Tensor x(rlx::DType::f32, {2, 8});
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, 0.1 * static_cast<double>(i % 5));
  rlx::write_safetensors(p, {{"x", x}, {"bias", rlx::Tensor(rlx::DType::bf16, {3})}}, {{"source", "test"}});
  auto r = run_rlx("inspect " + p);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "tensors: 2") && has(r.out, "x  F32[2,8]") && has(r.out, "bias  BF16[3]")) << r.out;
  EXPECT_TRUE(has(r.out, "metadata source: test")) << r.out;
  auto run = run_rlx("run " + ex("mlp.rlx") + " --input x=" + p, true);
  auto npy = run_rlx("run " + ex("mlp.rlx") + " --input x=" + mlp_input(), true);
  EXPECT_EQ(run.code, 0) << run.out;
  EXPECT_EQ(run.out, npy.out);  // the same array from either file
  EXPECT_EQ(run_rlx("run " + ex("mlp.rlx") + " --input y=" + p).code, 1);
}

TEST(Cli, TrainMnistChecksOutputsBeforeTraining) {
  for (std::string flags : {"--checkpoint /nonexistent-dir/c.safetensors --plot none",
                            "--checkpoint none --plot /nonexistent-dir/curves.png"}) {
    auto r = run_rlx("train-mnist --epochs 1 --max-steps 2 --quiet " + flags);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_TRUE(has(r.out, "/nonexistent-dir")) << r.out;
    EXPECT_FALSE(has(r.out, "epoch 1")) << "trained before failing:\n" << r.out;
  }
  expect_usage_error("train-mnist --checkpoint " + testing::TempDir(), {"it is a folder"});
  expect_usage_error("train-mnist --resume /nonexistent-dir/c.safetensors", {"does not exist"});
}

TEST(Cli, BenchReportsLatencyAsJsonRows) {
  std::string out = testing::TempDir() + "bench_mlp.json";
  auto r = run_rlx("bench " + ex("mlp.rlx") + " --batch 3 --runs 5 --warmup 1 --json " + out, true);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "inputs x f32[3,8]") && has(r.out, "p50") && has(r.out, "p90")) << r.out;
  std::ifstream f(out);
  nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j["runs"], 5);
  ASSERT_EQ(j["rows"].size(), 1u);
  const auto& row = j["rows"][0];
  EXPECT_EQ(row["system"], "rlx");
  EXPECT_EQ(row["device"], "cpu");
  EXPECT_EQ(row["batch"], 3);
  EXPECT_GT(row["p50_ms"].get<double>(), 0);
  EXPECT_GE(row["p90_ms"].get<double>(), row["p50_ms"].get<double>());
  EXPECT_NEAR(row["throughput"].get<double>(), 3 * 1000.0 / row["p50_ms"].get<double>(), 1e-3 * row["throughput"].get<double>());
  // A decoder from a GGUF file: one forward step over --seq tokens.
  auto g = run_rlx("bench " + std::string(RLX_SOURCE_DIR) + "/tests/models/qwen3/tiny-Q4_0.gguf --seq 4 --runs 2 --json -", true);
  ASSERT_EQ(g.code, 0) << g.out;
  EXPECT_TRUE(has(g.out, "ids i64[1,4]") && has(g.out, "\"seq\": 4")) << g.out;
  expect_usage_error("bench " + ex("mlp.rlx") + " --bind nosuch=3", {"no symbolic dim 'nosuch'"});
  expect_usage_error("bench " + ex("mlp.rlx") + " --runs 0", {"--runs"});
  auto bad = run_rlx("bench " + tmpfile("w.safetensors", "x"));
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_TRUE(has(bad.out, "unknown model format") && has(bad.out, "weights only")) << bad.out;
}
