// `rlx train-mnist`: trains an MLP or small CNN on Fashion-MNIST or the MNIST 8k/2k split with one
// compiled training-step graph; progress bar, per-epoch test accuracy, checkpoint, PNG of curves.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>

#include "commands.h"
#include "data/idx.h"
#include "models/mlp.h"
#include "train/plot.h"
#include "train/train.h"

namespace rlx::cli {

namespace {

std::vector<int64_t> layer_sizes(const Args& a) {
  std::vector<int64_t> r{784};
  for (auto& h : a.items("hidden")) r.push_back(*to_int(h));  // the parser checked each is >= 1
  r.push_back(10);
  return r;
}

// Copies rows `idx[from..from+n)` of x/y into the batch tensors.
void fill_batch(const data::Dataset& ds, bool train, const std::vector<int64_t>& idx, int64_t from, int64_t n, Tensor& bx,
                Tensor& by) {
  const Tensor& X = train ? ds.train_x : ds.test_x;
  const Tensor& Y = train ? ds.train_y : ds.test_y;
  int64_t px = X.shape()[1];
  for (int64_t i = 0; i < n; ++i) {
    int64_t r = idx.empty() ? from + i : idx[from + i];
    std::memcpy(bx.data<float>() + i * px, X.data<float>() + r * px, px * sizeof(float));
    by.data<int64_t>()[i] = Y.data<int64_t>()[r];
  }
}

}  // namespace

int cmd_train_mnist(const Args& a) {
  std::string which = a.get("data"), model = a.get("model");
  int epochs = static_cast<int>(a.integer("epochs"));  // the table caps it at a million
  int64_t batch = a.integer("batch"), max_steps = a.integer("max-steps");
  uint64_t seed = static_cast<uint64_t>(a.integer("seed"));
  bool quiet = a.has("quiet"), bench = a.has("bench-steps");
  train::OptimizerConfig opt;
  opt.kind = a.get("optimizer");
  opt.lr = a.has("lr") ? a.number("lr") : opt.kind == "sgd" ? 0.1 : 0.001;
  opt.momentum = a.number("momentum");
  opt.nesterov = a.has("nesterov");
  opt.weight_decay = a.number("weight-decay");
  train::LrSchedule sched;
  sched.kind = a.get("schedule");
  sched.warmup = a.integer("warmup");
  CompileOptions co;
  co.device = a.get("device");
  // What the run writes at the end is checked now, before the data loads and training starts.
  if (!bench) {
    check_output(a, "checkpoint");
    check_output(a, "plot");
  }
  for (const char* f : {"read-every", "profile", "dump"})
    if (a.has(f) && !bench) usage_fail("train-mnist --", f, " goes with --bench-steps");
  if (a.has("report") && a.get("amp") == "f32") usage_fail("train-mnist --report goes with --amp bf16|f16");

  data::Dataset ds = data::load_dataset(which, a.get("data-dir"));
  int64_t ntrain = ds.train_x.shape()[0], ntest = ds.test_x.shape()[0];
  int64_t steps_per_epoch = ntrain / batch;
  RLX_CHECK(steps_per_epoch >= 1, "[train-mnist] batch ", batch, " larger than the training set");
  sched.total = steps_per_epoch * epochs;

  std::vector<int64_t> sizes = layer_sizes(a);
  Graph loss = model == "mlp" ? models::mlp_loss_graph(sizes, batch) : models::cnn_loss_graph(batch);
  std::vector<Tensor> init = model == "mlp" ? models::mlp_init(sizes, seed) : models::cnn_init(seed);
  train::AmpConfig amp;  // --amp bf16|f16: the amp pass (src/train/amp.cpp); --report prints its choices
  std::string amp_s = a.get("amp");
  if (amp_s == "bf16") amp.dtype = DType::bf16;
  if (amp_s == "f16") amp.dtype = DType::f16;
  train::Trainer tr(loss, init, opt, sched, co, amp);
  if (a.has("report") && amp.dtype != DType::f32) std::printf("%s", tr.amp_report().table().c_str());
  if (a.has("resume")) tr.load(a.get("resume"));
  if (bench) {  // bench/mnist_train.py: timed steps over the unshuffled training set
    int64_t n = a.integer("bench-steps"), warm = 5;
    // --read-every K: the loss is read back every K steps (Trainer::advance otherwise), so a device
    // that keeps the parameters resident runs K steps with no host round-trip.
    int64_t every = a.integer("read-every");
    Tensor x(DType::f32, {batch, 784}), y(DType::i64, {batch});
    std::vector<double> ms;  // per step; with --read-every K, per block of K steps (one batch) / K
    for (int64_t s = 0; s < n + warm; s += (s < warm ? 1 : every)) {
      int64_t k = s < warm ? 1 : every;
      fill_batch(ds, true, {}, (s % steps_per_epoch) * batch, batch, x, y);  // a block reuses its batch
      auto t0 = std::chrono::steady_clock::now();
      for (int64_t j = 0; j < k; ++j) tr.advance({x, y});  // the batch is still written in every step
      (void)tr.outputs()[0].get(0);  // reading the loss is part of the timed step(s)
      if (s >= warm)
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / double(k));
    }
    std::sort(ms.begin(), ms.end());
    double p50 = ms[ms.size() / 2], p90 = ms[std::min(ms.size() - 1, ms.size() * 9 / 10)];
    std::printf("{\"p50_ms\": %.4f, \"p90_ms\": %.4f, \"throughput\": %.1f, \"loss\": %.6f}\n", p50, p90,
                double(batch) * 1000.0 / p50, tr.step({x, y})[0].get(0));
    if (a.has("profile")) std::fprintf(stderr, "%s", tr.compiled().profile().c_str());  // with RLX_PROFILE=1
    if (a.has("dump")) std::fprintf(stderr, "%s", tr.compiled().dump(a.get("dump")).c_str());
    return 0;
  }
  // Evaluation graph: the same loss graph at an eval batch that divides the test set.
  int64_t eb = 500;
  while (ntest % eb) --eb;
  Graph eval_g = model == "mlp" ? models::mlp_loss_graph(sizes, eb) : models::cnn_loss_graph(eb);
  CompiledModel eval(eval_g, co);
  size_t np = init.size();

  std::printf("rlx train-mnist: %s %s, %lld train / %lld test, batch %lld, %s lr %g, %d epochs, device %s\n",
              which.c_str(), model.c_str(), (long long)ntrain, (long long)ntest, (long long)batch, opt.kind.c_str(),
              opt.lr, epochs, co.device.c_str());
  std::mt19937_64 rng(seed + 1);
  std::vector<int64_t> order(ntrain);
  Tensor bx(DType::f32, {batch, 784}), by(DType::i64, {batch});
  Tensor ex(DType::f32, {eb, 784}), ey(DType::i64, {eb});
  std::vector<double> step_loss, epoch_acc;
  double total_time = 0;
  int64_t total_images = 0;
  for (int ep = 0; ep < epochs; ++ep) {
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    double sum_loss = 0, correct = 0;
    auto t0 = std::chrono::steady_clock::now();
    int64_t steps = max_steps > 0 ? std::min(max_steps, steps_per_epoch) : steps_per_epoch;
    for (int64_t s = 0; s < steps; ++s) {
      fill_batch(ds, true, order, s * batch, batch, bx, by);
      const auto& outs = tr.step({bx, by});
      double l = outs[0].get(0);
      correct += outs[1].get(0);
      sum_loss += l;
      step_loss.push_back(l);
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!quiet && (s % 10 == 0 || s + 1 == steps)) {
        int w = 30, done = static_cast<int>(w * (s + 1) / steps);
        std::fprintf(stderr, "\repoch %d/%d [%s%s] %lld/%lld loss %.4f  %.0f img/s ", ep + 1, epochs,
                     std::string(done, '=').c_str(), std::string(w - done, ' ').c_str(), (long long)(s + 1),
                     (long long)steps, sum_loss / double(s + 1), double((s + 1) * batch) / std::max(secs, 1e-9));
      }
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    total_time += secs;
    total_images += steps * batch;
    if (!quiet) std::fprintf(stderr, "\n");
    double tc = 0;
    for (int64_t s = 0; s < ntest / eb; ++s) {
      fill_batch(ds, false, {}, s * eb, eb, ex, ey);
      const auto& P = tr.params();
      std::vector<Tensor> in(P.begin(), P.begin() + static_cast<long>(np));
      in.push_back(ex);
      in.push_back(ey);
      tc += eval.run(in)[1].get(0);
    }
    double acc = tc / double(ntest);
    epoch_acc.push_back(acc);
    std::printf("epoch %d: train loss %.4f, train acc %.4f, test acc %.4f, %.0f img/s (%.2f s)\n", ep + 1,
                sum_loss / double(steps), correct / double(steps * batch), acc, double(steps * batch) / secs, secs);
    std::fflush(stdout);
  }
  std::printf("final test accuracy %.4f; training throughput %.0f img/s\n", epoch_acc.back(),
              double(total_images) / total_time);
  if (amp.loss_scaling())
    std::printf("amp f16: loss scale %g, %lld steps skipped (non-finite gradients)\n", tr.loss_scale(),
                (long long)tr.skipped_steps());
  std::string ckpt = a.get("checkpoint");
  if (ckpt != "none") {
    tr.save(ckpt);
    std::printf("checkpoint: %s (step %lld)\n", ckpt.c_str(), (long long)tr.step_count());
  }
  std::string png = a.get("plot");
  if (png != "none") {
    // loss smoothed over ~100 points (blue, auto range), test accuracy per epoch (red, 0..1)
    std::vector<double> sm;
    size_t win = std::max<size_t>(1, step_loss.size() / 100);
    for (size_t i = 0; i + win <= step_loss.size(); i += win)
      sm.push_back(std::accumulate(step_loss.begin() + static_cast<long>(i), step_loss.begin() + static_cast<long>(i + win), 0.0) / double(win));
    train::write_curves_png(png, {{sm, 0x1f77b4, 0, 0}, {epoch_acc, 0xd62728, 0, 1}});
    std::printf("curves: %s (blue: training loss, red: test accuracy)\n", png.c_str());
  }
  return 0;
}

}  // namespace rlx::cli
