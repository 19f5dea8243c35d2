// Training: optimizer updates against hand-computed values, one-graph steps with state kept in
// fixed buffers, bit-identical resume from a safetensors checkpoint, and an MLP that learns MNIST.
#include <gtest/gtest.h>

#include "rlx/safetensors.h"

#include <cmath>
#include <filesystem>
#include <numeric>
#include <cstring>
#include <fstream>
#include <random>
#include <set>

#include "data/idx.h"
#include "models/mlp.h"
#include "rlx/builder.h"
#include "runtime/backend.h"
#include "train/train.h"
#include "test_util.h"

using namespace rlx;

namespace {

// loss = sum((w - t)^2) / 2 -> grad = w - t
Graph quad() {
  Graph g;
  Builder b(g);
  ValueId w = b.input("w", DType::f32, {3}), t = b.input("t", DType::f32, {3});
  ValueId d = b.sub(w, t);
  b.output(b.mul(b.reduce(OpKind::ReduceSum, b.mul(d, d), {0}, false), b.scalar(0.5, DType::f32)));
  return g;
}

std::vector<float> run_opt(const train::OptimizerConfig& c, int steps, std::vector<float> w0, std::vector<float> t) {
  train::Trainer tr(quad(), {Tensor::from(DType::f32, {3}, w0)}, c);
  Tensor tt = Tensor::from(DType::f32, {3}, t);
  for (int s = 0; s < steps; ++s) tr.step({tt});
  std::vector<float> r(3);
  for (int i = 0; i < 3; ++i) r[i] = static_cast<float>(tr.params()[0].get(i));
  return r;
}

// Host reference implementations (PyTorch's update rules) on the same problem.
std::vector<double> ref_opt(const train::OptimizerConfig& c, int steps, std::vector<double> w, const std::vector<double>& t) {
  std::vector<double> m(3, 0), v(3, 0);
  for (int s = 1; s <= steps; ++s)
    for (int i = 0; i < 3; ++i) {
      double g = w[i] - t[i];
      if (c.kind == "sgd") {
        g += c.weight_decay * w[i];
        if (c.momentum != 0) {
          m[i] = c.momentum * m[i] + g;
          g = c.nesterov ? g + c.momentum * m[i] : m[i];
        }
        w[i] -= c.lr * g;
      } else {
        if (c.kind == "adamw") w[i] *= 1 - c.lr * c.weight_decay;
        else g += c.weight_decay * w[i];
        m[i] = c.beta1 * m[i] + (1 - c.beta1) * g;
        v[i] = c.beta2 * v[i] + (1 - c.beta2) * g * g;
        double mh = m[i] / (1 - std::pow(c.beta1, s)), vh = v[i] / (1 - std::pow(c.beta2, s));
        w[i] -= c.lr * mh / (std::sqrt(vh) + c.eps);
      }
    }
  return w;
}

void expect_matches(const train::OptimizerConfig& c) {
  std::vector<float> w0 = {1.0f, -2.0f, 0.5f}, t = {0.3f, 0.1f, -0.7f};
  auto got = run_opt(c, 7, w0, t);
  auto want = ref_opt(c, 7, {1.0, -2.0, 0.5}, {0.3, 0.1, -0.7});
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(got[i], want[i], 2e-5) << c.kind << " [" << i << "]";
}

}  // namespace

TEST(Optimizer, SgdPlainMomentumNesterovWeightDecay) {
  train::OptimizerConfig c;
  c.lr = 0.1;
  expect_matches(c);
  c.momentum = 0.9;
  expect_matches(c);
  c.nesterov = true;
  c.weight_decay = 0.01;
  expect_matches(c);
}

TEST(Optimizer, AdamAndAdamW) {
  train::OptimizerConfig c;
  c.kind = "adam";
  c.lr = 0.05;
  c.weight_decay = 0.01;
  expect_matches(c);
  c.kind = "adamw";
  c.weight_decay = 0.1;
  expect_matches(c);
}

TEST(Optimizer, LrSchedules) {
  train::LrSchedule s;
  EXPECT_DOUBLE_EQ(s.at(0.1, 50), 0.1);
  s.kind = "step";
  s.step_size = 10;
  s.gamma = 0.5;
  EXPECT_DOUBLE_EQ(s.at(1.0, 25), 0.25);
  s.kind = "cosine";
  s.total = 100;
  s.warmup = 10;
  EXPECT_DOUBLE_EQ(s.at(1.0, 0), 0.1);
  EXPECT_NEAR(s.at(1.0, 10), 1.0, 1e-12);
  EXPECT_NEAR(s.at(1.0, 100), 0.0, 1e-12);
  s.kind = "bogus";
  EXPECT_THROW(s.at(1.0, 50), Error);
}

TEST(TrainStep, IsOneGraphAndStateBuffersAreReused) {
  auto loss = models::mlp_loss_graph({6, 5, 3}, 4);
  train::OptimizerConfig c;
  c.momentum = 0.9;
  train::Trainer tr(loss, models::mlp_init({6, 5, 3}, 1), c);
  const Graph& g = tr.step_graph();
  // params (4) + momentum (4) + x + labels + lr/lr_hat/eps_hat
  EXPECT_EQ(g.inputs.size(), 13u);
  EXPECT_EQ(g.outputs.size(), 2u + 4u + 4u);
  EXPECT_TRUE(g.is_hir_free());
  Tensor x(DType::f32, {4, 6}), y(DType::i64, {4});
  for (int i = 0; i < 24; ++i) x.set(i, std::sin(i));
  for (int i = 0; i < 4; ++i) y.set_int(i, i % 3);
  std::set<const void*> seen;
  for (int s = 0; s < 6; ++s) {
    tr.step({x, y});
    seen.insert(tr.params()[0].raw());
    seen.insert(tr.state()[0].raw());
  }
  EXPECT_EQ(seen.size(), 4u);  // two ping-pong sets of (param, state), nothing new per step
  EXPECT_EQ(tr.compiled().cache_size(), 1);
}

TEST(TrainStep, CheckpointResumeIsBitIdentical) {
  auto loss = models::mlp_loss_graph({6, 5, 3}, 4);
  train::OptimizerConfig c;
  c.kind = "adam";
  c.lr = 0.01;
  Tensor x(DType::f32, {4, 6}), y(DType::i64, {4});
  for (int i = 0; i < 24; ++i) x.set(i, std::cos(i));
  for (int i = 0; i < 4; ++i) y.set_int(i, (i * 2) % 3);
  auto init = models::mlp_init({6, 5, 3}, 2);
  train::Trainer a(loss, init, c);
  for (int s = 0; s < 3; ++s) a.step({x, y});
  std::string path = (std::filesystem::temp_directory_path() / "rlx_train_ckpt.safetensors").string();
  a.save(path);
  for (int s = 0; s < 4; ++s) a.step({x, y});
  train::Trainer b(loss, models::mlp_init({6, 5, 3}, 99), c);
  b.load(path);
  EXPECT_EQ(b.step_count(), 3);
  for (int s = 0; s < 4; ++s) b.step({x, y});
  for (size_t p = 0; p < a.params().size(); ++p)
    ASSERT_EQ(std::memcmp(a.params()[p].raw(), b.params()[p].raw(), a.params()[p].nbytes()), 0) << "param " << p;
}

// Resuming is bit-identical for every piece of trainer state: f16 AMP's dynamic loss
// scale (value, growth counter, skipped count), Adam/AdamW moments and bias correction, and the
// lr schedule's step. Train N steps, save, continue M; a fresh trainer loads and runs M: the same
// parameters, state, losses and loss scale, bit for bit.
namespace {
void expect_same(train::Trainer& a, train::Trainer& b) {
  ASSERT_EQ(a.step_count(), b.step_count());
  for (size_t p = 0; p < a.params().size(); ++p)
    ASSERT_EQ(std::memcmp(a.params()[p].raw(), b.params()[p].raw(), a.params()[p].nbytes()), 0) << "param " << p;
  for (size_t p = 0; p < a.state().size(); ++p)
    ASSERT_EQ(std::memcmp(a.state()[p].raw(), b.state()[p].raw(), a.state()[p].nbytes()), 0) << "state " << p;
  EXPECT_EQ(a.loss_scale(), b.loss_scale());
  EXPECT_EQ(a.skipped_steps(), b.skipped_steps());
  EXPECT_EQ(a.current_lr(), b.current_lr());
}
void resume_case(const train::OptimizerConfig& c, const train::LrSchedule& sched, const train::AmpConfig& amp,
                 const std::string& tag) {
  auto loss = models::mlp_loss_graph({6, 5, 3}, 4);
  Tensor x(DType::f32, {4, 6}), y(DType::i64, {4});
  auto batch = [&](int s) {
    for (int i = 0; i < 24; ++i) x.set(i, std::sin(0.7 * i + s));
    for (int i = 0; i < 4; ++i) y.set_int(i, (i + s) % 3);
  };
  const int N = 12, M = 15;
  train::Trainer a(loss, models::mlp_init({6, 5, 3}, 2), c, sched, {}, amp);
  for (int s = 0; s < N; ++s) batch(s), a.step({x, y});
  std::string path = (std::filesystem::temp_directory_path() / ("rlx_resume_" + tag + ".safetensors")).string();
  a.save(path);
  std::vector<double> la, lb;
  for (int s = N; s < N + M; ++s) batch(s), la.push_back(a.step({x, y})[0].get(0));
  train::Trainer b(loss, models::mlp_init({6, 5, 3}, 77), c, sched, {}, amp);
  b.load(path);
  EXPECT_EQ(b.step_count(), N);
  for (int s = N; s < N + M; ++s) batch(s), lb.push_back(b.step({x, y})[0].get(0));
  EXPECT_EQ(la, lb) << tag;
  expect_same(a, b);
  std::filesystem::remove(path);
}
}  // namespace

TEST(TrainCheckpoint, AmpF16LossScaleResumeIsBitIdentical) {
  train::OptimizerConfig c;
  c.momentum = 0.9;
  train::AmpConfig amp;
  amp.dtype = DType::f16;
  amp.init_scale = std::ldexp(1.0, 36);  // overflows first: skipped steps, then growth every 3 good steps
  amp.growth_interval = 3;
  resume_case(c, {}, amp, "amp_f16");
  // the scale really moved during the run, so restoring it matters
  train::Trainer t(models::mlp_loss_graph({6, 5, 3}, 4), models::mlp_init({6, 5, 3}, 2), c, {}, {}, amp);
  Tensor x(DType::f32, {4, 6}), y(DType::i64, {4});
  for (int i = 0; i < 24; ++i) x.set(i, std::sin(0.7 * i));
  for (int s = 0; s < 12; ++s) t.step({x, y});
  EXPECT_GT(t.skipped_steps(), 0);
  EXPECT_NE(t.loss_scale(), amp.init_scale);
}

TEST(TrainCheckpoint, AdamAndAdamWWithScheduleResumeIsBitIdentical) {
  train::OptimizerConfig c;
  c.kind = "adamw";
  c.lr = 0.01;
  c.weight_decay = 0.05;
  train::LrSchedule cosine;
  cosine.kind = "cosine";
  cosine.warmup = 5;
  cosine.total = 30;
  resume_case(c, cosine, {}, "adamw_cosine");
  c.kind = "adam";
  train::LrSchedule step;
  step.kind = "step";
  step.step_size = 7;
  step.gamma = 0.5;
  resume_case(c, step, {}, "adam_step");
  c.kind = "sgd";
  c.momentum = 0.9;
  c.nesterov = true;
  resume_case(c, cosine, {}, "sgd_nesterov_cosine");
}

TEST(TrainCheckpoint, LoadRejectsMismatchedTrainers) {
  auto loss = models::mlp_loss_graph({6, 5, 3}, 4);
  train::OptimizerConfig adam;
  adam.kind = "adam";
  train::Trainer a(loss, models::mlp_init({6, 5, 3}, 2), adam);
  std::string path = (std::filesystem::temp_directory_path() / "rlx_resume_mismatch.safetensors").string();
  a.save(path);
  train::OptimizerConfig adamw = adam;
  adamw.kind = "adamw";
  train::Trainer b(loss, models::mlp_init({6, 5, 3}, 2), adamw);
  try {
    b.load(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer 'adam'"), std::string::npos) << e.what();
  }
  train::AmpConfig amp;
  amp.dtype = DType::f16;
  train::Trainer c(loss, models::mlp_init({6, 5, 3}, 2), adam, {}, {}, amp);
  try {
    c.load(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("loss_scale"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

// advance() runs a step without reading anything back; outputs() reads the loss when
// asked. k advances + one read equal k steps of an identical trainer, bit for bit.
TEST(TrainStep, AdvanceReadsNothingAndMatchesStep) {
  auto loss = models::mlp_loss_graph({6, 5, 3}, 4);
  train::OptimizerConfig c;
  c.momentum = 0.9;
  train::Trainer a(loss, models::mlp_init({6, 5, 3}, 3), c), b(loss, models::mlp_init({6, 5, 3}, 3), c);
  Tensor x(DType::f32, {4, 6}), y(DType::i64, {4});
  for (int i = 0; i < 24; ++i) x.set(i, std::cos(0.3 * i));
  for (int i = 0; i < 4; ++i) y.set_int(i, i % 3);
  EXPECT_THROW(a.outputs(), Error);  // nothing ran yet
  double lb = 0;
  for (int s = 0; s < 5; ++s) {
    a.advance({x, y});
    lb = b.step({x, y})[0].get(0);
  }
  EXPECT_EQ(a.outputs()[0].get(0), lb);
  expect_same(a, b);
  Tensor bad(DType::f32, {5, 6});
  try {
    a.advance({bad, y});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data input 'x'"), std::string::npos) << e.what();
  }
}

// Executable's resident API, host default (what train::Trainer drives on every device):
// output 1 feeds input 0 after each run; one input replaced between runs; reads on demand.
TEST(TrainResident, HostDefaultFeedsOutputsBackWithoutCopies) {
  Graph g;
  Builder b(g);
  ValueId p = b.input("p", DType::f32, {3}), d = b.input("d", DType::f32, {3});
  b.output(b.reduce(OpKind::ReduceSum, b.mul(p, d), {0}, false));
  b.output(b.add(p, d));
  CompiledModel m(g, CompileOptions{});
  Executable& e = m.executable();
  e.resident_feedback({{1, 0}});
  e.resident_upload({Tensor::from(DType::f32, {3}, std::vector<float>{1, 2, 3}),
                     Tensor::from(DType::f32, {3}, std::vector<float>{1, 1, 1})});
  e.resident_run(3);  // p: 1,2,3 -> 4,5,6; the last run's loss = sum((3,4,5) * 1)
  EXPECT_EQ(e.resident_read_input(0).get(2), 6.0);
  EXPECT_EQ(e.resident_read_output(1).get(0), 4.0);  // a fed-back output reads as the new input
  EXPECT_EQ(e.resident_read_output(0).get(0), 12.0);
  std::set<const void*> bufs;
  e.resident_write(1, Tensor::from(DType::f32, {3}, std::vector<float>{0.5f, 0.5f, 0.5f}));
  for (int r = 0; r < 4; ++r) {
    e.resident_run(1);
    bufs.insert(e.resident_read_input(0).raw());
  }
  EXPECT_EQ(bufs.size(), 2u);  // two buffers swapped, nothing allocated per run
  EXPECT_EQ(e.resident_read_input(0).get(0), 6.0);
  EXPECT_THROW(e.resident_write(5, Tensor()), Error);
}

// Outputs that are inputs passed through (an update folded to the identity: q' = q; an
// output reading a parameter unchanged: p) keep their values across the feedback swaps: every run's
// outputs equal the reference values. On cpu the lowering copies pass-through outputs, so this does
// not exercise the host default's clones (the test below does); it is regression coverage of the
// whole CompiledModel resident path (lowering, feedback, reads) end to end.
TEST(TrainResident, HostDefaultPassThroughOutputsDoNotAliasInputs) {
  Graph g;
  Builder b(g);
  ValueId p = b.input("p", DType::f32, {3}), q = b.input("q", DType::f32, {3}), d = b.input("d", DType::f32, {3});
  b.output(p);           // 0: the parameter before the update (not fed back)
  b.output(b.add(p, d)); // 1: p' = p + d, fed back to p
  b.output(q);           // 2: q' = q, fed back to q
  CompiledModel m(g, CompileOptions{});
  Executable& e = m.executable();
  e.resident_feedback({{1, 0}, {2, 1}});
  e.resident_upload({Tensor::from(DType::f32, {3}, std::vector<float>{1, 2, 3}),
                     Tensor::from(DType::f32, {3}, std::vector<float>{7, 8, 9}),
                     Tensor::from(DType::f32, {3}, std::vector<float>{1, 1, 1})});
  for (int r = 0; r < 5; ++r) {
    e.resident_run(1);
    SCOPED_TRACE("run " + std::to_string(r));
    EXPECT_EQ(e.resident_read_output(0).get(0), 1.0 + r);  // p before this run's update
    EXPECT_EQ(e.resident_read_input(0).get(0), 2.0 + r);   // p after it
    EXPECT_EQ(e.resident_read_output(1).get(2), 4.0 + r);
    EXPECT_EQ(e.resident_read_input(1).get(1), 8.0);
    EXPECT_EQ(e.resident_read_output(2).get(2), 9.0);
    EXPECT_NE(e.resident_read_output(0).raw(), e.resident_read_input(0).raw());
  }
}

// The hazard of the host default's feedback swaps: an output that is an input passed
// through (a parameter read unchanged: p) or one tensor returned for two outputs (p' twice) must
// get its own buffer, or a later run writes into a live input. cpu lowering copies
// pass-through outputs, so no CompiledModel shows it; this minimal host Executable does: run()
// returns {p, p + d, p + d (the same tensor)}, output 1 is fed back to p, and run_into writes one
// output after the other while reading the inputs, as a kernel schedule does. Without the clones
// after the first run, output 2 shares the new p (writing it changes p before output 1 reads it)
// and output 0 shares the old p (it reads p + 2d). Fails with either half of the fix removed.
TEST(TrainResident, HostDefaultClonesOutputsThatAreInputs) {
  struct PassThrough : Executable {
    std::vector<Tensor> run(const std::vector<Tensor>& in) override {
      Tensor next(DType::f32, {3});
      for (int64_t k = 0; k < 3; ++k) next.set(k, in[0].get(k) + in[1].get(k));
      return {in[0], next, next};
    }
    void run_into(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
      for (int64_t k = 0; k < 3; ++k) out[2].set(k, in[0].get(k) + in[1].get(k));  // "kernel" 1
      for (int64_t k = 0; k < 3; ++k) out[1].set(k, in[0].get(k) + in[1].get(k));  // "kernel" 2
      for (int64_t k = 0; k < 3; ++k) out[0].set(k, in[0].get(k));                 // "kernel" 3
    }
  } e;
  e.resident_feedback({{1, 0}});
  e.resident_upload({Tensor::from(DType::f32, {3}, std::vector<float>{1, 2, 3}),
                     Tensor::from(DType::f32, {3}, std::vector<float>{1, 1, 1})});
  for (int r = 0; r < 4; ++r) {
    e.resident_run(1);
    SCOPED_TRACE("run " + std::to_string(r));
    EXPECT_EQ(e.resident_read_output(0).get(0), 1.0 + r);  // p before this run's update
    EXPECT_EQ(e.resident_read_input(0).get(0), 2.0 + r);   // p after it
    EXPECT_EQ(e.resident_read_output(1).get(2), 4.0 + r);  // fed back: reads as the new p
    EXPECT_EQ(e.resident_read_output(2).get(1), 3.0 + r);
    EXPECT_EQ(e.resident_read_input(1).get(0), 1.0);
    EXPECT_NE(e.resident_read_output(0).raw(), e.resident_read_input(0).raw());
    EXPECT_NE(e.resident_read_output(2).raw(), e.resident_read_input(0).raw());
  }
}

// Checkpoints go through the shared safetensors module; this checks the pieces Trainer relies on.
TEST(TrainCheckpoint, SafetensorsRoundTripAndErrors) {
  std::string path = (std::filesystem::temp_directory_path() / "rlx_st.safetensors").string();
  Tensor a = Tensor::from(DType::f32, {2, 2}, std::vector<float>{1, 2, 3, 4});
  Tensor b = Tensor::from(DType::i64, {3}, std::vector<int64_t>{7, 8, 9});
  write_safetensors(path, {{"a", a}, {"b", b}}, {{"k", "v"}});
  SafeTensors r = SafeTensors::open(path);
  ASSERT_EQ(r.names().size(), 2u);
  EXPECT_EQ(r.get("b").get_int(2), 9);
  EXPECT_EQ(r.get("a").get(3), 4.0);
  EXPECT_EQ(r.metadata().at("k"), "v");
  { std::ofstream(path, std::ios::binary) << "garbage"; }
  EXPECT_THROW(SafeTensors::open(path), Error);
}

// The accuracy test of the suite: MLP 784-64-10 on the MNIST 8k/2k split, a few hundred steps.
TEST(TrainMnist, MlpLearnsMnistSplit) {
  // ../shared/data/mnist beside the checkout (absent in a clone elsewhere: skipped), or RLX_MNIST_DIR,
  // which must then exist.
  std::string dir = mnist_dir();
  if (!std::filesystem::exists(dir)) {
    if (std::getenv("RLX_MNIST_DIR")) FAIL() << "RLX_MNIST_DIR=" << dir << " does not exist";
    GTEST_SKIP() << "no MNIST data at " << dir;
  }
  auto ds = data::load_dataset("mnist", dir);
  const int64_t B = 64;
  std::vector<int64_t> sizes = {784, 64, 10};
  train::OptimizerConfig c;
  c.lr = 0.1;
  c.momentum = 0.9;
  train::Trainer tr(models::mlp_loss_graph(sizes, B), models::mlp_init(sizes, 0), c);
  Tensor bx(DType::f32, {B, 784}), by(DType::i64, {B});
  std::mt19937_64 rng(1);
  std::vector<int64_t> order(8000);
  std::iota(order.begin(), order.end(), 0);
  double first = 0, last = 0;
  for (int s = 0; s < 375; ++s) {  // 3 epochs of 125 steps
    if (s % 125 == 0) std::shuffle(order.begin(), order.end(), rng);
    for (int64_t i = 0; i < B; ++i) {
      int64_t r = order[(s % 125) * B + i];
      std::memcpy(bx.data<float>() + i * 784, ds.train_x.data<float>() + r * 784, 784 * sizeof(float));
      by.data<int64_t>()[i] = ds.train_y.get_int(r);
    }
    double l = tr.step({bx, by})[0].get(0);
    if (s < 10) first += l / 10;
    if (s >= 365) last += l / 10;
  }
  EXPECT_LT(last, first * 0.5);
  CompiledModel eval(models::mlp_loss_graph(sizes, 2000), CompileOptions{});
  std::vector<Tensor> in(tr.params().begin(), tr.params().end());
  in.push_back(ds.test_x);
  in.push_back(ds.test_y);
  double acc = eval.run(in)[1].get(0) / 2000.0;
  std::printf("MNIST 2k split accuracy after 375 steps: %.4f\n", acc);
  EXPECT_GE(acc, 0.90);
}

// ---- mixed precision: the amp pass's choices and f16 dynamic loss scaling --------------------

TEST(Amp, PassChoicesFollowThePolicy) {
  for (DType low : {DType::bf16, DType::f16}) {
    train::AmpConfig amp;
    amp.dtype = low;
    train::Trainer tr(models::mlp_loss_graph({6, 5, 3}, 4), models::mlp_init({6, 5, 3}, 1), train::OptimizerConfig{}, {},
                      {}, amp);
    int low_dots = 0;
    for (auto& c : tr.amp_report().choices) {
      if (c.op == "dot_general") {
        EXPECT_EQ(c.dtype, low) << c.node;
        ++low_dots;
      } else {
        EXPECT_TRUE(is_float(c.dtype) ? c.dtype == DType::f32 : true) << c.op << " " << c.node;
      }
    }
    EXPECT_EQ(low_dots, 2);
    EXPECT_NE(tr.amp_report().table().find("dot_general " + std::string(dtype_name(low))), std::string::npos);
    // In the compiled step graph: every contraction (forward and backward) computes in `low`;
    // every reduction, exp and log in f32; parameters in and out stay f32 (master weights).
    const Graph& g = tr.step_graph();
    int dots = 0;
    for (auto& n : g.nodes) {
      DType in0 = g.type(n.inputs.empty() ? n.outputs[0] : n.inputs[0]).dtype;
      if (n.op == OpKind::DotGeneral) {
        EXPECT_EQ(in0, low);
        ++dots;
      }
      if (n.op == OpKind::ReduceSum || n.op == OpKind::ReduceMax || n.op == OpKind::Exp || n.op == OpKind::Log) {
        EXPECT_EQ(g.type(n.outputs[0]).dtype, DType::f32) << op_name(n.op);
      }
    }
    EXPECT_GE(dots, 3);  // forward 2 + backward (dW0, dW1, dX1)
    for (int i = 0; i < 4; ++i) EXPECT_EQ(g.type(g.inputs[i]).dtype, DType::f32);
    for (size_t i = 2; i < 6; ++i) EXPECT_EQ(g.type(g.outputs[i]).dtype, DType::f32);
    EXPECT_EQ(g.outputs.size(), low == DType::f16 ? 9u : 6u);  // f16: + scale, good steps, skipped
  }
}

TEST(Amp, F16LossScalingSkipsOverflowAndTrains) {
  train::AmpConfig amp;
  amp.dtype = DType::f16;
  amp.init_scale = std::ldexp(1.0, 40);  // overflows f16 gradients: the first steps must be skipped
  amp.growth_interval = 1000;
  auto init = models::mlp_init({6, 5, 3}, 1);
  train::Trainer tr(models::mlp_loss_graph({6, 5, 3}, 4), init, train::OptimizerConfig{}, {}, {}, amp);
  Tensor x(DType::f32, {4, 6}), y(DType::i64, {4});
  for (int i = 0; i < 24; ++i) x.set(i, std::sin(i));
  for (int i = 0; i < 4; ++i) y.set_int(i, i % 3);
  tr.step({x, y});
  EXPECT_EQ(tr.skipped_steps(), 1);
  EXPECT_EQ(tr.loss_scale(), std::ldexp(1.0, 39));
  for (int64_t k = 0; k < init[0].numel(); ++k) EXPECT_EQ(tr.params()[0].get(k), init[0].get(k));  // no update
  for (int s = 0; s < 80; ++s) tr.step({x, y});
  EXPECT_LT(tr.loss_scale(), std::ldexp(1.0, 30));  // halved until the scaled gradients fit f16
  EXPECT_GT(tr.skipped_steps(), 10);
  // The applied steps match fp32 training for the same number of steps (f16 contractions aside).
  train::Trainer ref(models::mlp_loss_graph({6, 5, 3}, 4), init, train::OptimizerConfig{});
  for (int64_t s = 0; s < 81 - tr.skipped_steps(); ++s) ref.step({x, y});
  double l16 = tr.step({x, y})[0].get(0), l32 = ref.step({x, y})[0].get(0);
  std::printf("f16 amp loss %.5f vs f32 %.5f after %lld applied steps (scale %g)\n", l16, l32,
              (long long)(81 - tr.skipped_steps()), tr.loss_scale());
  EXPECT_NEAR(l16, l32, 5e-3);
  EXPECT_LT(l32, 1.05);  // it did train (initial loss ~1.079)
}

// bf16 AMP reaches fp32 accuracy. A converged setting (3 epochs of the 8k split, plain SGD): a
// one-epoch momentum run is chaotic (1-ulp GEMM rounding changes moved bf16 by 15 points).
// Measured: f32 0.9255, bf16 0.9250 (packed GEMM) / 0.9260 (BLAS).
TEST(Amp, Bf16TrainingReachesFp32Accuracy) {
  // ../shared/data/mnist beside the checkout (absent in a clone elsewhere: skipped), or RLX_MNIST_DIR,
  // which must then exist.
  std::string dir = mnist_dir();
  if (!std::filesystem::exists(dir)) {
    if (std::getenv("RLX_MNIST_DIR")) FAIL() << "RLX_MNIST_DIR=" << dir << " does not exist";
    GTEST_SKIP() << "no MNIST data at " << dir;
  }
  auto ds = data::load_dataset("mnist", dir);
  const int64_t B = 64, per_epoch = 8000 / B;
  std::vector<int64_t> sizes = {784, 32, 10};
  auto run = [&](DType dt) {
    train::OptimizerConfig c;
    c.lr = 0.1;
    train::AmpConfig amp;
    amp.dtype = dt;
    train::Trainer tr(models::mlp_loss_graph(sizes, B), models::mlp_init(sizes, 0), c, {}, {}, amp);
    Tensor bx(DType::f32, {B, 784}), by(DType::i64, {B});
    for (int64_t s = 0; s < 3 * per_epoch; ++s) {
      int64_t o = (s % per_epoch) * B;
      std::memcpy(bx.data<float>(), ds.train_x.data<float>() + o * 784, B * 784 * sizeof(float));
      for (int64_t i = 0; i < B; ++i) by.data<int64_t>()[i] = ds.train_y.get_int(o + i);
      tr.advance({bx, by});
    }
    CompiledModel eval(models::mlp_loss_graph(sizes, 2000), CompileOptions{});
    std::vector<Tensor> in(tr.params().begin(), tr.params().end());
    in.push_back(ds.test_x);
    in.push_back(ds.test_y);
    return eval.run(in)[1].get(0) / 2000.0;
  };
  double f32 = run(DType::f32), bf16 = run(DType::bf16);
  std::printf("MNIST split, 784-32-10, 375 steps: f32 %.4f, amp bf16 %.4f\n", f32, bf16);
  EXPECT_GT(f32, 0.9);
  EXPECT_GT(bf16, f32 - 0.03);
}
