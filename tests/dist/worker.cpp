// One rank of the multi-process tests (tests/unit/test_dist.cpp runs it under mpirun -n 2):
//   collectives  every collective op through the MPI transport vs reference_collective
//   tp-mlp       a Megatron TP MLP (shard_tensor_parallel, preset mlp) vs the unsharded graph
//   tp-llama DIR the llama preset on a small HF decoder: logits and K/V vs the unsharded graph
//   pp-mlp S [D]  pipeline-parallel SGD (schedule S; D data-parallel replicas of it: a DP×PP mesh)
//   dp-mlp       data-parallel SGD on Fashion-MNIST (gradients all-reduced in the graph) vs one process
//   mismatch     rank 1 compiles a graph of another shape: the start-up hash check must fail
//   fault [tag]  a loop of all_reduce (the tag only names the run, for pgrep); RLX_DIST_KILL_AT / RLX_DIST_STOP_AT kills or stops one rank, the other must fail cleanly
// Prints "[worker] rank R: ..." lines; exits 0 on success.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "autodiff/autodiff.h"
#include "data/idx.h"
#include "dist/communicator.h"
#include "models/mlp.h"
#include "tiny_llama.h"
#include "train/pipeline_parallel.h"
#include "train/train.h"
#include "passes/shard.h"
#include "rlx/builder.h"
#include "rlx/reference.h"
#include "rlx/session.h"

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
  if (a.shape() != b.shape()) return INFINITY;
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::abs(a.get(i) - b.get(i)));
  return m;
}

int check(bool ok, int rank, const std::string& what) {
  std::printf("[worker] rank %d: %s %s\n", rank, what.c_str(), ok ? "ok" : "FAILED");
  std::fflush(stdout);
  return ok ? 0 : 1;
}

int collectives(dist::Communicator& c) {
  const int n = c.size(), r = c.rank();
  std::vector<int64_t> world;
  for (int i = 0; i < n; ++i) world.push_back(i);
  struct Case {
    OpKind op;
    Attrs attrs;
    DType dt;
  };
  std::vector<Case> cases = {
      {OpKind::AllReduce, {{"reduce", std::string("sum")}}, DType::f32},
      {OpKind::AllReduce, {{"reduce", std::string("max")}}, DType::f64},
      {OpKind::AllReduce, {{"reduce", std::string("min")}}, DType::i32},
      {OpKind::AllReduce, {{"reduce", std::string("prod")}}, DType::f64},
      {OpKind::AllReduce, {{"reduce", std::string("sum")}, {"root", int64_t{1}}}, DType::f32},
      {OpKind::AllGather, {{"axis", int64_t{1}}}, DType::f32},
      {OpKind::AllGather, {{"axis", int64_t{0}}}, DType::i64},
      {OpKind::ReduceScatter, {{"axis", int64_t{1}}, {"reduce", std::string("sum")}}, DType::f32},
      {OpKind::AllToAll, {{"split_axis", int64_t{1}}, {"concat_axis", int64_t{0}}}, DType::f32},
      {OpKind::CollectiveBroadcast, {{"root", int64_t{1}}}, DType::f32},
  };
  int bad = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    Case cs = cases[k];
    cs.attrs["groups"] = world;
    Graph g;
    Builder b(g);
    ValueId x = b.input("x", cs.dt, Shape{3, 4});
    b.output(b.op1(cs.op, {x}, cs.attrs));
    std::vector<Tensor> all;
    for (int q = 0; q < n; ++q) all.push_back(seeded(cs.dt, {3, 4}, 100 * k + q));
    CompiledModel m(g, CompileOptions{});
    Tensor got = m.run(std::vector<Tensor>{all[r]})[0];
    Tensor want = reference_collective(g.nodes[0], all)[r];
    bad += check(max_diff(got, want) <= 1e-6 * (1 + std::abs(want.get(0))), r, std::string(op_name(cs.op)) + " case " + std::to_string(k));
  }
  // send/recv around the ring
  {
    Graph g;
    Builder b(g);
    ValueId x = b.input("x", DType::f32, Shape{5});
    ValueId s = b.op1(OpKind::Send, {x}, {{"peer", int64_t{(r + 1) % n}}, {"tag", int64_t{9}}});
    b.output(b.op1(OpKind::Recv, {s}, {{"peer", int64_t{(r + n - 1) % n}}, {"tag", int64_t{9}}, {"shape", Shape{5}}}));
    CompiledModel m(g, CompileOptions{});
    Tensor got = m.run(std::vector<Tensor>{seeded(DType::f32, {5}, 7 + r)})[0];
    bad += check(max_diff(got, seeded(DType::f32, {5}, 7 + (r + n - 1) % n)) == 0, r, "send/recv ring");
  }
  return bad ? 1 : 0;
}

// x [4, 16] -> Linear 16->32 gelu -> Linear 32->16 -> Linear 16->24 relu -> Linear 24->8.
Graph mlp_graph() {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", DType::f32, Shape{"batch", 16});
  int64_t sizes[] = {16, 32, 16, 24, 8};
  const char* act[] = {"gelu", "none", "relu", "none"};
  for (int l = 0; l < 4; ++l) {
    ValueId w = b.constant(seeded(DType::f32, {sizes[l + 1], sizes[l]}, 11 + l));
    ValueId bias = b.constant(seeded(DType::f32, {sizes[l + 1]}, 21 + l));
    x = b.linear(x, w, bias, act[l]);
  }
  b.output(x);
  return g;
}

int tp_mlp(dist::Communicator& c) {
  Graph full = mlp_graph();
  ShardReport rep;
  Graph part = shard_tensor_parallel(full, "mlp", c.size(), c.rank(), &rep);
  if (c.rank() == 0) std::fputs(rep.str().c_str(), stdout);
  Tensor x = seeded(DType::f32, {4, 16}, 5);
  Tensor want = reference_run(full, {x})[0];
  CompiledModel m(part, CompileOptions{});
  Tensor got = m.run(std::vector<Tensor>{x})[0];
  double d = max_diff(got, want);
  std::printf("[worker] rank %d: tp-mlp max |diff| %.3g\n", c.rank(), d);
  return check(d < 1e-4 && rep.collectives.size() == 2, c.rank(), "tp-mlp");
}

// value_and_grad of the MLP loss; with `ranks` > 1 the loss and every gradient are all-reduced and
// divided by the rank count inside the graph (mean over the global batch).
Graph dp_step_graph(const std::vector<int64_t>& sizes, int64_t batch, int ranks) {
  Graph vg = ad::value_and_grad(models::mlp_loss_graph(sizes, batch), {0, 1, 2, 3});
  if (ranks == 1) return vg;
  std::vector<int64_t> world;
  for (int i = 0; i < ranks; ++i) world.push_back(i);
  Builder b(vg);
  std::vector<ValueId> outs = vg.outputs;
  vg.outputs.clear();
  for (size_t i = 0; i < outs.size(); ++i) {
    if (i == 1) {  // the correct-count output: kept local
      vg.outputs.push_back(outs[i]);
      continue;
    }
    ValueId s = b.op1(OpKind::AllReduce, {outs[i]}, {{"reduce", std::string("sum")}, {"groups", world}});
    vg.outputs.push_back(b.mul(s, b.scalar(1.0 / ranks, DType::f32)));
  }
  return vg;
}

std::vector<double> train_curve(const data::Dataset& d, int ranks, int rank, int steps, int64_t batch) {
  const std::vector<int64_t> sizes{784, 32, 10};
  std::vector<Tensor> params = models::mlp_init(sizes, 3);
  const int64_t local = batch / ranks;
  CompiledModel m(dp_step_graph(sizes, local, ranks), CompileOptions{});
  std::vector<double> curve;
  for (int s = 0; s < steps; ++s) {
    int64_t first = s * batch + rank * local;
    Tensor x(DType::f32, {local, 784}), y(DType::i64, {local});
    std::memcpy(x.raw(), d.train_x.data<float>() + first * 784, x.nbytes());
    std::memcpy(y.raw(), d.train_y.data<int64_t>() + first, y.nbytes());
    std::vector<Tensor> in = params;
    in.push_back(x);
    in.push_back(y);
    std::vector<Tensor> out = m.run(in);
    curve.push_back(out[0].get(0));
    for (size_t p = 0; p < params.size(); ++p) {  // SGD, lr 0.5
      Tensor np = params[p].clone();
      for (int64_t i = 0; i < np.numel(); ++i) np.data<float>()[i] -= 0.5f * out[2 + p].data<float>()[i];
      params[p] = np;
    }
  }
  return curve;
}

int dp_mlp(dist::Communicator& c) {
  data::Dataset d = data::load_dataset("fashion");
  const int steps = 8;
  std::vector<double> dp = train_curve(d, c.size(), c.rank(), steps, 64);
  // The one-process run of the same global batches, on this rank (its graph has no collective).
  std::vector<double> single = train_curve(d, 1, 0, steps, 64);
  double worst = 0;
  for (int s = 0; s < steps; ++s) {
    worst = std::max(worst, std::abs(dp[s] - single[s]) / std::max(1e-6, std::abs(single[s])));
    if (c.rank() == 0) std::printf("[worker] step %d loss dp=%.7f single=%.7f\n", s, dp[s], single[s]);
  }
  std::printf("[worker] rank %d: dp-mlp worst relative loss difference %.3g over %d steps\n", c.rank(), worst, steps);
  return check(worst < 1e-4 && single.back() < single.front(), c.rank(), "dp-mlp");
}

// Pipeline parallel over MPI: 784-128-64-10 split into one stage per rank, 4 micro-batches of 16,
// under `schedule`; the loss curve must equal one process's Trainer on the same 64-image batches.
// `replicas` > 1: a DP×PP mesh (c.size() / replicas stages), micro-batches of batch / (micro·replicas).
int pp_mlp(dist::Communicator& c, const std::string& schedule, int replicas) {
  data::Dataset d = data::load_dataset("fashion");
  const std::vector<int64_t> sizes = {784, 128, 64, 10};
  const int steps = 8, micro = 4;
  const int64_t batch = 64;
  train::OptimizerConfig opt;
  opt.lr = 0.1;
  opt.momentum = 0.9;
  train::PipelineTrainer pp(models::mlp_loss_graph(sizes, batch / (micro * replicas)), models::mlp_init(sizes, 3), opt,
                            {micro, train::parse_pipeline_schedule(schedule), replicas});
  train::Trainer single(models::mlp_loss_graph(sizes, batch), models::mlp_init(sizes, 3), opt);
  if (c.rank() == 0) std::printf("%s", train::pipeline_table(pp.plan()).c_str());
  double worst = 0, first = 0, last = 0;
  for (int s = 0; s < steps; ++s) {
    Tensor x(DType::f32, {batch, 784}), y(DType::i64, {batch});
    std::memcpy(x.raw(), d.train_x.data<float>() + s * batch * 784, x.nbytes());
    std::memcpy(y.raw(), d.train_y.data<int64_t>() + s * batch, y.nbytes());
    double a = pp.step({x, y})[0].get(0), b = single.step({x, y})[0].get(0);
    worst = std::max(worst, std::abs(a - b) / std::max(1e-6, std::abs(b)));
    if (s == 0) first = b;
    last = b;
    if (c.rank() == 0) std::printf("[worker] step %d loss pp=%.7f single=%.7f\n", s, a, b);
  }
  std::printf("[worker] rank %d (replica %d, stage %d): pp-mlp %s order %s; worst relative loss difference %.3g over %d steps\n",
              c.rank(), pp.replica(), pp.stage(), schedule.c_str(), pp.last_order().c_str(), worst, steps);
  return check(worst < 1e-5 && last < first, c.rank(), "pp-mlp");
}

int mismatch(dist::Communicator& c) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", DType::f32, Shape{c.rank() == 1 ? 5 : 4});
  b.output(b.op1(OpKind::AllReduce, {x}, {{"groups", std::vector<int64_t>{0, 1}}}));
  CompiledModel m(g, CompileOptions{});
  m.run(std::vector<Tensor>{Tensor(DType::f32, {c.rank() == 1 ? 5 : 4})});
  std::printf("[worker] rank %d: mismatched graphs were not detected\n", c.rank());
  return 1;
}

int fault(dist::Communicator& c) {
  Graph g;
  Builder b(g);
  std::vector<int64_t> world;
  for (int i = 0; i < c.size(); ++i) world.push_back(i);
  ValueId x = b.input("x", DType::f32, Shape{1 << 16});
  b.output(b.op1(OpKind::AllReduce, {x}, {{"groups", world}}));
  CompiledModel m(g, CompileOptions{});
  Tensor t = seeded(DType::f32, {1 << 16}, 1);
  for (int i = 0; i < 100000; ++i) m.run(std::vector<Tensor>{t});
  return 0;
}

}  // namespace

int tp_llama(dist::Communicator& c, const std::string& dir) {
  std::vector<Tensor> in;
  Graph full = testing::tiny_llama_step(dir, 2, 5, &in);
  ShardReport rep;
  Graph part = shard_tensor_parallel(full, "llama", c.size(), c.rank(), &rep);
  if (c.rank() == 0) std::fputs(rep.str().c_str(), stdout);
  std::vector<Tensor> want = CompiledModel(full, CompileOptions{}).run(in);  // no collectives: each rank alone
  std::vector<Tensor> got = CompiledModel(part, CompileOptions{}).run(in);
  double d = 0;
  for (size_t i = 0; i < want.size(); ++i) d = std::max(d, max_diff(got.at(i), want[i]));
  std::printf("[worker] rank %d: tp-llama max |diff| %.3g over logits and K/V\n", c.rank(), d);
  return check(d < 2e-5 && rep.vocab_parallel == 2 && rep.row == 4, c.rank(), "tp-llama");
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: rlx_dist_worker collectives|tp-mlp|tp-llama DIR|dp-mlp|pp-mlp [gpipe|1f1b] [replicas]|mismatch|fault\n");
    return 2;
  }
  try {
    if (!dist::launched_by_mpi()) {
      std::fprintf(stderr, "[worker] not started by mpirun\n");
      return 2;
    }
    dist::set_process(dist::make_mpi());
    dist::Communicator& c = dist::current();
    std::string s = argv[1];
    if (s == "collectives") return collectives(c);
    if (s == "tp-mlp") return tp_mlp(c);
    if (s == "tp-llama" && argc > 2) return tp_llama(c, argv[2]);
    if (s == "dp-mlp") return dp_mlp(c);
    if (s == "pp-mlp") return pp_mlp(c, argc > 2 ? argv[2] : "1f1b", argc > 3 ? std::atoi(argv[3]) : 1);
    if (s == "mismatch") return mismatch(c);
    if (s == "fault") return fault(c);
    std::fprintf(stderr, "[worker] unknown scenario %s\n", argv[1]);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[worker] rank error: %s\n", e.what());
    return 1;
  }
}
