// Persistent launches (src/backends/cuda/render_grid.*): a small training step
// runs as one resident-grid launch (own f32 GEMM parts, warp reductions, grid barriers). The plan
// and NVRTC compile are checked everywhere NVRTC exists; execution against the cpu Trainer (ragged
// tile edges, 1 and 2 hidden layers, in-place feedback) only where a GPU is present.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstdlib>
#include <random>

#include "backends/cuda/cuda_api.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/fuse_lir.h"
#include "models/mlp.h"
#include "passes/passes.h"
#include "rlx/device.h"
#include "rlx/lir.h"
#include "rlx/session.h"
#include "train/train.h"
#include "cuda_test_util.h"
#include "test_util.h"

namespace rlx {
namespace {

using cuda_test::rnd;

LirProgram step_lir(const std::vector<int64_t>& sizes, int64_t B) {
  int np = static_cast<int>(2 * (sizes.size() - 1));
  Graph step = train::build_train_step(models::mlp_loss_graph(sizes, B), np, train::OptimizerConfig{});
  return cuda_test::cuda_lir(step);
}

TEST(CudaPersistent, SmallTrainStepIsOneLaunchThatCompiles) {
  std::string why;
  cuda::Api* a = cuda::nvrtc_only(&why);
  struct Case {
    std::vector<int64_t> sizes;
    int64_t B;
  };
  // Above the default work cap (150 MFLOP of GEMMs) only with RLX_CUDA_GRID_MAX_MFLOP raised.
  rlx_test::ScopedEnv cap("RLX_CUDA_GRID_MAX_MFLOP", "1000");
  for (const Case& c : {Case{{784, 128, 10}, 128}, Case{{784, 128, 10}, 1024}, Case{{784, 512, 512, 10}, 128},
                        Case{{100, 37, 10}, 50}}) {
    auto launches = cuda::render_for_check(step_lir(c.sizes, c.B));
    ASSERT_EQ(launches.size(), 1u) << c.sizes[1] << " b" << c.B;
    EXPECT_EQ(launches[0].first.rfind("persistent(", 0), 0u) << launches[0].first;
    const cuda::KernelSource& ks = launches[0].second;
    EXPECT_EQ(ks.block, 256u);
    EXPECT_EQ(ks.grid, 132u);  // one block per multiprocessor (render_for_check assumes 132)
    EXPECT_GE(ks.scratch_bytes, 16u);  // barrier words (+ split-K counters and partial tiles)
    EXPECT_NE(ks.code.find("grid_sync_(bar_)"), std::string::npos);
    if (a) {
      EXPECT_NO_THROW(cuda::nvrtc_compile_for(*a, "sm_90", ks.code)) << c.sizes[1] << " b" << c.B;
    }
  }
  // Above the cap (784-512-512-10 at 1024: ~3.9 GFLOP of GEMMs) cuBLASLt keeps the GEMMs; so at
  // the default cap for 784-128-10 at 1024 (415 MFLOP), while 784-128-10 at 128 (52 MFLOP) is one launch.
  EXPECT_GT(cuda::render_for_check(step_lir({784, 512, 512, 10}, 1024)).size(), 1u);
  {
    rlx_test::ScopedEnv dflt("RLX_CUDA_GRID_MAX_MFLOP", nullptr);
    EXPECT_EQ(cuda::render_for_check(step_lir({784, 128, 10}, 1024)).size(), 8u);
    EXPECT_EQ(cuda::render_for_check(step_lir({784, 128, 10}, 128)).size(), 1u);
  }
  if (!a) GTEST_SKIP() << "planned, not compiled: no NVRTC here: " << why;
}

// Whether the arena plan is sound for the schedule's order: two arena buffers live at once (first
// to last kernel touching them, views counting for their base) never share bytes. A kernel writing
// over an input that dies there (in place) touches both at one kernel: allowed.
bool arena_plan_valid(const LirProgram& p, std::string* why) {
  const int nb = static_cast<int>(p.buffers.size());
  std::vector<int> first(nb, INT_MAX), last(nb, -1);
  for (int k = 0; k < static_cast<int>(p.kernels.size()); ++k) {
    std::vector<int> bs = p.kernels[k].in;
    bs.insert(bs.end(), p.kernels[k].out.begin(), p.kernels[k].out.end());
    for (int b : bs) {
      while (p.buffers[b].kind == BufferKind::View) b = p.buffers[b].view_of;
      first[b] = std::min(first[b], k), last[b] = std::max(last[b], k);
    }
  }
  for (int a = 0; a < nb; ++a)
    for (int b = a + 1; b < nb; ++b) {
      const LirBuffer &x = p.buffers[a], &y = p.buffers[b];
      if (x.kind != BufferKind::Arena || y.kind != BufferKind::Arena || last[a] < 0 || last[b] < 0) continue;
      bool bytes = x.offset < y.offset + y.bytes() && y.offset < x.offset + x.bytes();
      bool live = first[a] < last[b] && first[b] < last[a];
      if (bytes && live) {
        *why = x.name + " and " + y.name + " share bytes while both live";
        return false;
      }
    }
  return true;
}

std::vector<std::string> labels(const LirProgram& p) {
  std::vector<std::string> r;
  for (auto& k : p.kernels) r.push_back(k.label());
  return r;
}

// grid-layout (fuse_lir.h) on a training step: laid out, every arena buffer has its own bytes,
// sinks (outputs no kernel reads) come last in their order, every input is made before it is read;
// over the arena cap it refuses and leaves schedule and plan as they were (no persistent launch).
TEST(CudaPersistent, GridLayoutOwnBytesSinksLastOrLeavesThePlan) {
  LirProgram p = step_lir({784, 128, 10}, 128);
  {
    rlx_test::ScopedEnv off("RLX_CUDA_PERSISTENT", "0");  // the passes up to grid-layout (which then does nothing)
    schedule_lir(p, cuda::cuda_schedule());
  }
  auto addr = [&p](int id) {
    while (p.buffers[id].kind == BufferKind::View) id = p.buffers[id].view_of;
    return p.buffers[id].kind == BufferKind::Arena ? static_cast<uint64_t>(p.buffers[id].offset)
                                                   : (static_cast<uint64_t>(id) + 1) << 40;
  };
  std::string why;
  ASSERT_TRUE(arena_plan_valid(p, &why)) << why;
  ASSERT_FALSE(cuda::arena_disjoint(p));  // the plan reuses bytes ...
  EXPECT_FALSE((cuda::MergePlanner{p, addr}.grid_parts(false).empty()));
  EXPECT_TRUE((cuda::MergePlanner{p, addr}.grid_parts().empty()));  // ... so no persistent launch over it

  // Over the cap: refused, untouched.
  LirProgram q = p;
  EXPECT_EQ(cuda::grid_layout(q, 1024), 0);
  EXPECT_EQ(labels(q), labels(p));
  EXPECT_EQ(q.arena_bytes, p.arena_bytes);
  for (size_t b = 0; b < p.buffers.size(); ++b) EXPECT_EQ(q.buffers[b].offset, p.buffers[b].offset) << b;
  EXPECT_TRUE(arena_plan_valid(q, &why)) << why;
  EXPECT_TRUE((cuda::MergePlanner{q, addr}.grid_parts().empty()));

  // Laid out.
  std::vector<bool> read(p.buffers.size(), false);
  for (auto& k : p.kernels)
    for (int b : k.in)
      for (read[b] = true; p.buffers[b].kind == BufferKind::View; read[b] = true) b = p.buffers[b].view_of;
  std::vector<std::string> want, sinks;
  for (auto& k : p.kernels) (k.out.size() == 1 && !read[k.out[0]] ? sinks : want).push_back(k.label());
  ASSERT_GE(sinks.size(), 2u);  // the loss, the correct count, the parameter updates
  want.insert(want.end(), sinks.begin(), sinks.end());
  LirProgram before = p;
  ASSERT_EQ(cuda::grid_layout(p), 1);
  EXPECT_EQ(labels(p), want);
  EXPECT_TRUE(cuda::arena_disjoint(p));
  EXPECT_TRUE(arena_plan_valid(p, &why)) << why;
  int64_t sum = 0;
  for (auto& b : p.buffers)
    if (b.kind == BufferKind::Arena) {
      EXPECT_LE(b.offset + b.bytes(), p.arena_bytes);
      sum += b.bytes();
    }
  EXPECT_GE(p.arena_bytes, sum);
  EXPECT_GT(p.arena_bytes, before.arena_bytes);
  std::vector<int> made(p.buffers.size(), -1);  // every arena input is written by an earlier kernel
  for (int k = 0; k < static_cast<int>(p.kernels.size()); ++k) {
    for (int b : p.kernels[k].in) {
      int x = b;
      while (p.buffers[x].kind == BufferKind::View) x = p.buffers[x].view_of;
      if (p.buffers[x].kind == BufferKind::Arena) {
        EXPECT_GE(made[x], 0) << p.kernels[k].label() << " reads " << p.buffers[x].name;
      }
    }
    for (int b : p.kernels[k].out) made[b] = k;
  }
  EXPECT_FALSE((cuda::MergePlanner{p, addr}.grid_parts().empty()));
}

TEST(CudaPersistent, OffSwitchKeepsMergedLaunches) {
  rlx_test::ScopedEnv off("RLX_CUDA_PERSISTENT", "0");
  auto launches = cuda::render_for_check(step_lir({784, 128, 10}, 128));
  EXPECT_EQ(launches.size(), 8u);  // 5 cuBLASLt GEMMs, loss-head rows, mask rows, SGD side by side
}

// Both cuda schedules (persistent, RLX_CUDA_PERSISTENT=0) against the cpu Trainer (loss, params)
// and against each other (the correct count, an exact integer).
TEST(CudaPersistent, TrainStepMatchesCpuTrainer) {
  const DeviceInfo& d = device_info("cuda");
  if (!d.can_execute()) GTEST_SKIP() << "no GPU here: " << d.reason;
  struct Case {
    std::vector<int64_t> sizes;
    int64_t B;
  };
  for (const Case& c : {Case{{100, 37, 10}, 50}, Case{{784, 128, 10}, 128}, Case{{64, 48, 40, 10}, 33},
                        Case{{784, 128, 10}, 1024}}) {
    const int np = static_cast<int>(2 * (c.sizes.size() - 1));
    Graph loss = models::mlp_loss_graph(c.sizes, c.B);
    train::OptimizerConfig opt;
    std::mt19937 rng(41);
    Tensor x = rnd(DType::f32, {c.B, c.sizes[0]}, rng), y(DType::i64, {c.B});
    for (int64_t i = 0; i < c.B; ++i) y.data<int64_t>()[i] = static_cast<int64_t>(rng() % 10);
    Tensor lr(DType::f32, {}), lr_hat(DType::f32, {}), eps_hat(DType::f32, {});
    lr.data<float>()[0] = lr_hat.data<float>()[0] = 0.1f, eps_hat.data<float>()[0] = 0.0f;
    std::vector<Tensor> init = models::mlp_init(c.sizes, 7), in;
    for (auto& t : init) in.push_back(t.clone());
    in.insert(in.end(), {x, y, lr, lr_hat, eps_hat});
    rlx_test::ScopedEnv cap("RLX_CUDA_GRID_MAX_MFLOP", "1000");  // the 1024 case (split-K GEMM parts) too
    CompileOptions cpu;
    cpu.device = "cpu";
    train::Trainer ref(loss, init, opt, {}, cpu);
    std::vector<double> want;
    for (int s = 0; s < 4; ++s) want.push_back(ref.step({x, y})[0].get(0));
    std::vector<std::vector<double>> correct(2);
    for (int persistent : {1, 0}) {
      rlx_test::ScopedEnv env("RLX_CUDA_PERSISTENT", persistent ? "1" : "0");
      auto exe = make_executable("cuda", step_lir(c.sizes, c.B));
      std::vector<std::pair<int, int>> fb;
      for (int i = 0; i < np; ++i) fb.push_back({2 + i, i});
      exe->resident_feedback(fb);
      exe->resident_upload(in);
      bool one = exe->summary().find("(0 cuBLASLt GEMMs, 1 NVRTC kernel launches") != std::string::npos;
      EXPECT_EQ(one, persistent == 1) << exe->summary();
      for (int s = 0; s < 4; ++s) {  // runs 1 and 2 eager, then the captured graph
        exe->resident_time(1);
        EXPECT_NEAR(exe->resident_read_output(0).get(0), want[s], 1e-5)
            << c.sizes[1] << " b" << c.B << " step " << s << " p" << persistent;
        correct[persistent].push_back(exe->resident_read_output(1).get(0));
      }
      for (int i = 0; i < np; ++i)
        EXPECT_LT(rlx_test::max_abs_diff(exe->resident_read_input(i), ref.params()[i]), 2e-5)
            << c.sizes[1] << " b" << c.B << " param " << i << " p" << persistent;
    }
    EXPECT_EQ(correct[1], correct[0]) << c.sizes[1] << " b" << c.B;
  }
}

}  // namespace
}  // namespace rlx
