// The `rlx` command end to end: exit codes and messages for good and bad input.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>

namespace {

struct Result {
  int code;
  std::string out;
};

Result run_rlx(const std::string& args) {
  std::string cmd = std::string(RLX_BIN) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int st = pclose(p);
  return {WEXITSTATUS(st), out};
}

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
  EXPECT_EQ(run_rlx("compile " + ex("mlp.rlx") + " --dump=xir").code, 1);
  EXPECT_EQ(run_rlx("compile " + ex("mlp.rlx") + " --bind batch=x").code, 1);
}

TEST(Cli, BadInputsExitOneWithMessage) {
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
  EXPECT_EQ(run_rlx("frobnicate").code, 1);
  auto dev = run_rlx("run " + ex("mlp.rlx") + " --device nope");
  EXPECT_EQ(dev.code, 1);
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
