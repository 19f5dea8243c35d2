// Parallel training on in-process ranks, against one process's Trainer on the whole batch: pipeline
// parallelism (src/train/pipeline_parallel.h: the stage split, the GPipe and 1F1B orders) and data
// parallelism (train::DataParallel: the bucketed gradient all-reduce of the step graph).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "dist/communicator.h"
#include "models/mlp.h"
#include "rlx/builder.h"
#include "train/pipeline_parallel.h"
#include "train/train.h"

namespace rlx {
namespace {

const std::vector<int64_t> kSizes = {32, 48, 40, 10};
constexpr int64_t kBatch = 16;

// Two fixed batches, taken in turn (so step s+2 sees step s's batch again and the loss must fall).
std::vector<std::vector<Tensor>> batches(int n) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  std::vector<std::vector<Tensor>> out;
  for (int k = 0; k < std::min(n, 2); ++k) {
    Tensor x(DType::f32, {kBatch, kSizes[0]}), y(DType::i64, {kBatch});
    for (int64_t i = 0; i < kBatch; ++i) {
      int64_t c = static_cast<int64_t>(rng() % 10);
      y.set_int(i, c);
      for (int64_t p = 0; p < kSizes[0]; ++p) x.data<float>()[i * kSizes[0] + p] = nd(rng) + (p % 10 == c ? 1.5f : 0.f);
    }
    out.push_back({x, y});
  }
  for (int k = 2; k < n; ++k) out.push_back(out[static_cast<size_t>(k % 2)]);
  return out;
}

train::OptimizerConfig sgd() {
  train::OptimizerConfig o;
  o.lr = 0.1;
  o.momentum = 0.9;
  return o;
}

struct RankResult {
  std::vector<double> losses, correct;
  std::vector<Tensor> params;
  std::vector<int> owned;
  std::string order, error;
};

// `dp` replicas of a `stages`-stage pipeline (a DP×PP mesh of stages·dp ranks).
std::vector<RankResult> run_pipeline(int stages, int micro, train::PipelineSchedule sched, int steps,
                                     train::OptimizerConfig opt = sgd(), int dp = 1) {
  auto world = dist::make_local_world(stages * dp);
  std::vector<RankResult> res(static_cast<size_t>(stages * dp));
  auto data = batches(steps);
  std::vector<std::thread> th;
  for (int r = 0; r < stages * dp; ++r)
    th.emplace_back([&, r] {
      dist::set_thread(world[static_cast<size_t>(r)].get());
      try {
        train::PipelineTrainer tr(models::mlp_loss_graph(kSizes, kBatch / (micro * dp)), models::mlp_init(kSizes, 3),
                                  opt, {micro, sched, dp});
        for (int s = 0; s < steps; ++s) {
          auto o = tr.step(data[static_cast<size_t>(s)]);
          res[static_cast<size_t>(r)].losses.push_back(o[0].get(0));
          res[static_cast<size_t>(r)].correct.push_back(o[1].get(0));
        }
        res[static_cast<size_t>(r)].params = tr.params();
        res[static_cast<size_t>(r)].owned = tr.plan()[static_cast<size_t>(tr.stage())].params;
        res[static_cast<size_t>(r)].order = tr.last_order();
      } catch (const std::exception& e) {
        res[static_cast<size_t>(r)].error = e.what();
      }
      dist::set_thread(nullptr);
    });
  for (auto& t : th) t.join();
  return res;
}

struct Reference {
  std::vector<double> losses, correct;
  std::vector<Tensor> params;
};

Reference run_single(int steps, train::OptimizerConfig opt = sgd()) {
  train::Trainer tr(models::mlp_loss_graph(kSizes, kBatch), models::mlp_init(kSizes, 3), opt);
  auto data = batches(steps);
  Reference r;
  for (int s = 0; s < steps; ++s) {
    auto o = tr.step(data[static_cast<size_t>(s)]);
    r.losses.push_back(o[0].get(0));
    r.correct.push_back(o[1].get(0));
  }
  for (auto& p : tr.params()) r.params.push_back(p);
  return r;
}

void expect_matches(const std::vector<RankResult>& pp, const Reference& ref) {
  for (size_t r = 0; r < pp.size(); ++r) {
    ASSERT_EQ(pp[r].error, "") << "rank " << r;
    ASSERT_EQ(pp[r].losses.size(), ref.losses.size());
    for (size_t s = 0; s < ref.losses.size(); ++s) {
      EXPECT_NEAR(pp[r].losses[s], ref.losses[s], 1e-5 * std::abs(ref.losses[s])) << "rank " << r << " step " << s;
      EXPECT_EQ(pp[r].correct[s], ref.correct[s]) << "rank " << r << " step " << s;
    }
    for (size_t k = 0; k < pp[r].owned.size(); ++k) {
      const Tensor& a = pp[r].params[k];
      const Tensor& b = ref.params[static_cast<size_t>(pp[r].owned[k])];
      ASSERT_EQ(a.numel(), b.numel());
      double m = 0;
      for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::abs(a.get(i) - b.get(i)));
      EXPECT_LT(m, 2e-5) << "rank " << r << " param " << pp[r].owned[k];
    }
  }
  EXPECT_LT(ref.losses[4], ref.losses[0]);  // the run trains (steps 0 and 4 see the same batch)
}

TEST(PipelineParallel, SplitBalancesFlopsAndOwnsEveryParameterOnce) {
  auto st = train::split_pipeline(models::mlp_loss_graph(kSizes, 8), 6, 3);
  ASSERT_EQ(st.size(), 3u);
  std::vector<int> seen;
  double total = 0;
  for (auto& s : st) {
    total += s.flops;
    seen.insert(seen.end(), s.params.begin(), s.params.end());
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  auto one = train::split_pipeline(models::mlp_loss_graph(kSizes, 8), 6, 1);
  EXPECT_NEAR(total, one[0].flops, 1e-9 * total);  // every operation in exactly one stage
  for (auto& s : st) EXPECT_GT(s.nodes, 0) << train::pipeline_table(st);
  auto two = train::split_pipeline(models::mlp_loss_graph(kSizes, 8), 6, 2);  // layers of 1536/1920/400 MACs
  EXPECT_GT(two[0].flops, 0.3 * total) << train::pipeline_table(two);
  EXPECT_GT(two[1].flops, 0.3 * total) << train::pipeline_table(two);
  EXPECT_EQ(st[0].acts_in, 0);
  EXPECT_GT(st[0].bytes_out, 0);
  EXPECT_EQ(st[1].acts_in, st[0].acts_out);
  EXPECT_EQ(st[2].acts_in, st[1].acts_out);
  EXPECT_NE(train::pipeline_table(st).find("stage"), std::string::npos);
}

TEST(PipelineParallel, TiedParameterAcrossStagesIsAnError) {
  Graph g;
  Builder b(g);
  ValueId w = b.input("w", DType::f32, Shape{8, 8});
  ValueId x = b.input("x", DType::f32, Shape{4, 8});
  ValueId h = x;
  for (int i = 0; i < 4; ++i) h = b.unary(OpKind::Tanh, b.matmul(h, w));  // the same w in every layer
  b.output(b.reduce(OpKind::ReduceSum, h, {0, 1}, false));
  try {
    train::split_pipeline(g, 1, 2);
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("tied"), std::string::npos) << e.what();
  }
}

TEST(PipelineParallel, OneFOneBAndGPipeRunTheirOrders) {
  auto a = run_pipeline(2, 4, train::PipelineSchedule::OneFOneB, 1);
  ASSERT_EQ(a[0].error, "");
  EXPECT_EQ(a[0].order, "F0 F1 B0 F2 B1 F3 B2 B3");
  EXPECT_EQ(a[1].order, "F0 B0 F1 B1 F2 B2 F3 B3");
  auto g = run_pipeline(2, 4, train::PipelineSchedule::GPipe, 1);
  ASSERT_EQ(g[0].error, "");
  EXPECT_EQ(g[0].order, "F0 F1 F2 F3 B3 B2 B1 B0");
}

TEST(PipelineParallel, TwoStagesGPipeMatchOneProcess) {
  expect_matches(run_pipeline(2, 4, train::PipelineSchedule::GPipe, 6), run_single(6));
}

TEST(PipelineParallel, ThreeStages1F1BMatchOneProcess) {
  expect_matches(run_pipeline(3, 4, train::PipelineSchedule::OneFOneB, 6), run_single(6));
}

// A 2×2 mesh on 4 ranks: replicas {0,1} and {2,3} of a 2-stage pipeline, each stage's gradient
// all-reduced over {0,2} / {1,3}; every rank's losses, counts and parameters equal one process's.
TEST(PipelineParallel, DataParallelTimesPipelineMeshMatchesOneProcess) {
  for (auto sched : {train::PipelineSchedule::OneFOneB, train::PipelineSchedule::GPipe})
    expect_matches(run_pipeline(2, 2, sched, 6, sgd(), 2), run_single(6));
  // One rank cannot hold two replicas: named at construction.
  EXPECT_THROW(train::PipelineTrainer(models::mlp_loss_graph(kSizes, 4), models::mlp_init(kSizes, 3), sgd(),
                                      {2, train::PipelineSchedule::OneFOneB, 2}),
               Error);
}

TEST(PipelineParallel, AdamWithTwoMicroBatchesMatchesOneProcess) {
  train::OptimizerConfig o;
  o.kind = "adam";
  o.lr = 0.01;
  expect_matches(run_pipeline(2, 2, train::PipelineSchedule::OneFOneB, 5, o), run_single(5, o));
}

std::vector<RankResult> run_data_parallel(int ranks, int steps, int64_t bucket_bytes) {
  auto world = dist::make_local_world(ranks);
  std::vector<RankResult> res(static_cast<size_t>(ranks));
  auto data = batches(steps);
  const int64_t local = kBatch / ranks;
  std::vector<std::thread> th;
  for (int r = 0; r < ranks; ++r)
    th.emplace_back([&, r] {
      dist::set_thread(world[static_cast<size_t>(r)].get());
      try {
        train::Trainer tr(models::mlp_loss_graph(kSizes, local), models::mlp_init(kSizes, 3), sgd(), {}, {}, {},
                          {ranks, bucket_bytes});
        for (int s = 0; s < steps; ++s) {  // this rank's rows of the global batch
          const auto& whole = data[static_cast<size_t>(s)];
          Tensor x(DType::f32, {local, kSizes[0]}), y(DType::i64, {local});
          std::memcpy(x.raw(), static_cast<const char*>(whole[0].raw()) + x.nbytes() * static_cast<size_t>(r), x.nbytes());
          std::memcpy(y.raw(), static_cast<const char*>(whole[1].raw()) + y.nbytes() * static_cast<size_t>(r), y.nbytes());
          auto o = tr.step({x, y});
          res[static_cast<size_t>(r)].losses.push_back(o[0].get(0));
          res[static_cast<size_t>(r)].correct.push_back(o[1].get(0));
        }
        for (auto& p : tr.params()) res[static_cast<size_t>(r)].params.push_back(p.clone());
        for (int i = 0; i < 6; ++i) res[static_cast<size_t>(r)].owned.push_back(i);
        int collectives = 0;
        for (auto& n : tr.step_graph().nodes) collectives += n.op == OpKind::AllReduce;
        res[static_cast<size_t>(r)].order = std::to_string(collectives);
      } catch (const std::exception& e) {
        res[static_cast<size_t>(r)].error = e.what();
      }
      dist::set_thread(nullptr);
    });
  for (auto& t : th) t.join();
  return res;
}

TEST(DataParallel, TwoRanksInOneBucketMatchOneProcess) {
  auto dp = run_data_parallel(2, 6, int64_t{1} << 20);
  expect_matches(dp, run_single(6));
  EXPECT_EQ(dp[0].order, "3");  // one bucket for the six gradients, plus the loss and the count
}

TEST(DataParallel, FourRanksWithOneBucketPerGradientMatchOneProcess) {
  auto dp = run_data_parallel(4, 6, 1);
  expect_matches(dp, run_single(6));
  EXPECT_EQ(dp[0].order, "8");  // bucket_bytes 1: every gradient alone
}

}  // namespace
}  // namespace rlx
