// `rlx train-mnist`: trains an MLP or small CNN on Fashion-MNIST or the MNIST 8k/2k split with one
// compiled training-step graph; progress bar (on a terminal), per-epoch test accuracy, checkpoints
// that resume bit-identically, a CSV metrics log and its plot (tools/plot_training.py, matplotlib).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <random>
#include <sstream>

#include "commands.h"
#include "data/idx.h"
#include "dist/communicator.h"
#include "models/mlp.h"
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

// Where the training loop stands; saved beside the Trainer's state in every checkpoint.
struct LoopState {
  int epoch = 0;           // 0-based epoch in progress
  int64_t epoch_step = 0;  // steps of it done
  std::mt19937_64 rng;     // the shuffle RNG before this epoch's shuffle
  double loss_sum = 0, correct = 0;  // this epoch's running sums
};

std::string hex(double v) {  // round-trips exactly through strtod
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

std::map<std::string, std::string> loop_meta(const LoopState& s) {
  std::ostringstream rng;
  rng << s.rng;
  return {{"train_mnist.epoch", std::to_string(s.epoch)},
          {"train_mnist.epoch_step", std::to_string(s.epoch_step)},
          {"train_mnist.rng", rng.str()},
          {"train_mnist.loss_sum", hex(s.loss_sum)},
          {"train_mnist.correct", hex(s.correct)}};
}

LoopState loop_state(const std::map<std::string, std::string>& m, const std::string& path) {
  auto get = [&](const char* k) -> const std::string& {
    auto it = m.find(std::string("train_mnist.") + k);
    RLX_CHECK(it != m.end(), "[train-mnist] ", path, ": no '", k,
              "' in the checkpoint (it was not written by train-mnist, which records where the run stands)");
    return it->second;
  };
  LoopState s;
  auto e = to_int(get("epoch")), es = to_int(get("epoch_step"));
  RLX_CHECK(e && *e >= 0 && *e < (1 << 30) && es && *es >= 0, "[train-mnist] ", path, ": bad epoch/epoch_step");
  s.epoch = static_cast<int>(*e);
  s.epoch_step = *es;
  std::istringstream rng(get("rng"));
  rng >> s.rng;
  RLX_CHECK(!rng.fail(), "[train-mnist] ", path, ": unreadable shuffle RNG state");
  auto num = [&](const char* k) {
    char* end = nullptr;
    const std::string& v = get(k);
    double d = std::strtod(v.c_str(), &end);
    RLX_CHECK(end && *end == 0 && !v.empty(), "[train-mnist] ", path, ": bad ", k, " '", v, "'");
    return d;
  };
  s.loss_sum = num("loss_sum");
  s.correct = num("correct");
  return s;
}

// The metrics log: one CSV row per step (step, epoch as a fraction, loss, lr) and one per epoch
// (train loss/accuracy, test accuracy at the epoch's end). A resumed run appends; a reader keeps
// the last row of each step (tools/plot_training.py).
class Metrics {
 public:
  Metrics(const std::string& path, bool append) {
    if (path == "none") return;
    bool fresh = !append || !std::filesystem::exists(path);
    f_ = std::fopen(path.c_str(), fresh ? "w" : "a");
    RLX_CHECK(f_, "[train-mnist] cannot write the metrics log '", path, "'");
    if (fresh) std::fprintf(f_, "kind,step,epoch,loss,lr,train_loss,train_acc,test_acc\n");
    flush();
  }
  ~Metrics() { close(); }
  void step(int64_t step, double epoch, double loss, double lr) {
    if (f_) std::fprintf(f_, "step,%lld,%.6f,%.9g,%.9g,,,\n", (long long)step, epoch, loss, lr);
  }
  void epoch(int64_t step, int epoch, double train_loss, double train_acc, double test_acc) {
    if (!f_) return;
    std::fprintf(f_, "epoch,%lld,%d,,,%.9g,%.9g,%.9g\n", (long long)step, epoch, train_loss, train_acc, test_acc);
    std::fflush(f_);
  }
  // Written with every checkpoint, so the log holds at least the steps the checkpoint holds when
  // the process dies later (a killed rank ends the run without unwinding).
  void flush() {
    if (f_) std::fflush(f_);
  }
  void close() {
    if (f_) std::fclose(f_);
    f_ = nullptr;
  }

 private:
  FILE* f_ = nullptr;
};

// tools/plot_training.py beside the binary: build/bin/../../tools (a build tree in the checkout)
// or bin/../share/rlx (an install); RLX_PLOT_SCRIPT overrides.
std::string find_plotter() {
  if (const char* e = std::getenv("RLX_PLOT_SCRIPT"); e && *e) return e;
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::vector<std::filesystem::path> tried;
  if (!ec)
    for (auto rel : {"../../tools/plot_training.py", "../share/rlx/plot_training.py", "../tools/plot_training.py"}) {
      auto p = (exe.parent_path() / rel).lexically_normal();
      if (std::filesystem::exists(p)) return p.string();
      tried.push_back(p);
    }
  std::string t;
  for (auto& p : tried) t += (t.empty() ? "" : ", ") + p.string();
  usage_fail("train-mnist --plot: tools/plot_training.py not found (looked at ", t,
             "; set RLX_PLOT_SCRIPT, or --plot none)");
}

std::string shell_quote(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

// Checks (before training) that the plotter runs: python3 with matplotlib.
void check_plotter(const std::string& script) {
  std::string cmd = "python3 " + shell_quote(script) + " --check >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0)
    usage_fail("train-mnist --plot needs python3 with matplotlib (pip install -r scripts/requirements-test.txt), "
               "checked with: python3 ", script, " --check; or --plot none (the metrics log is written either way)");
}

void render_plot(const std::string& script, const std::string& csv, const std::string& png) {
  std::string cmd = "python3 " + shell_quote(script) + " " + shell_quote(csv) + " " + shell_quote(png);
  RLX_CHECK(std::system(cmd.c_str()) == 0, "[train-mnist] plotting failed: ", cmd);
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
  std::string plotter;
  if (!bench) {
    check_output(a, "checkpoint");
    check_output(a, "plot");
    check_output(a, "metrics");
    if (a.get("plot") != "none") {
      if (a.get("metrics") == "none") usage_fail("train-mnist --plot draws the metrics log: it needs --metrics FILE");
      plotter = find_plotter();
      check_plotter(plotter);
    }
  }
  for (const char* f : {"read-every", "profile", "dump"})
    if (a.has(f) && !bench) usage_fail("train-mnist --", f, " goes with --bench-steps");
  if (a.has("report") && a.get("amp") == "f32") usage_fail("train-mnist --report goes with --amp bf16|f16");

  // Under `rlx launch -n N` (or mpirun): data parallelism. Each rank steps on its batch/N rows of
  // every batch; the step graph averages the gradients over the ranks (train::DataParallel), so all
  // ranks hold the same parameters. Rank 0 alone prints and writes files.
  dist::Communicator& comm = dist::current();
  const int ranks = comm.size(), rank = comm.rank();
  if (ranks > 1) {
    if (bench) usage_fail("train-mnist --bench-steps times one process; run it without rlx launch");
    if (batch % ranks != 0) usage_fail("train-mnist --batch ", batch, " must divide by the ", ranks, " data-parallel ranks");
    if (rank != 0) {
      quiet = true;
      if (!std::freopen("/dev/null", "w", stdout)) usage_fail("train-mnist: cannot silence rank ", rank);
    }
  }
  const int64_t local = batch / ranks;
  data::Dataset ds = data::load_dataset(which, a.get("data-dir"));
  int64_t ntrain = ds.train_x.shape()[0], ntest = ds.test_x.shape()[0];
  int64_t steps_per_epoch = ntrain / batch;
  RLX_CHECK(steps_per_epoch >= 1, "[train-mnist] batch ", batch, " larger than the training set");
  sched.total = steps_per_epoch * epochs;

  std::vector<int64_t> sizes = layer_sizes(a);
  Graph loss = model == "mlp" ? models::mlp_loss_graph(sizes, local) : models::cnn_loss_graph(local);
  std::vector<Tensor> init = model == "mlp" ? models::mlp_init(sizes, seed) : models::cnn_init(seed);
  train::AmpConfig amp;  // --amp bf16|f16: the amp pass (src/train/amp.cpp); --report prints its choices
  std::string amp_s = a.get("amp");
  if (amp_s == "bf16") amp.dtype = DType::bf16;
  if (amp_s == "f16") amp.dtype = DType::f16;
  train::Trainer tr(loss, init, opt, sched, co, amp, train::DataParallel{ranks});
  if (a.has("report") && amp.dtype != DType::f32) std::printf("%s", tr.amp_report().table().c_str());
  std::map<std::string, std::string> resume_meta;
  if (a.has("resume")) resume_meta = tr.load(a.get("resume"));
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
  const int64_t steps = max_steps > 0 ? std::min(max_steps, steps_per_epoch) : steps_per_epoch;  // per epoch
  // The loop's state, all of it in the checkpoint: the epoch, the steps done in it, the shuffle RNG
  // as it was before this epoch's shuffle, and the epoch's running sums.
  LoopState st;
  st.rng.seed(seed + 1);
  if (!resume_meta.empty()) {
    st = loop_state(resume_meta, a.get("resume"));
    RLX_CHECK(st.epoch_step <= steps, "[train-mnist] ", a.get("resume"), ": ", st.epoch_step,
              " steps into an epoch of ", steps, " (resume with the run's --batch and --max-steps)");
    std::printf("resumed: %s at epoch %d, step %lld of it (step %lld in all)\n", a.get("resume").c_str(), st.epoch + 1,
                (long long)st.epoch_step, (long long)tr.step_count());
  }
  std::vector<int64_t> order(ntrain);
  Tensor bx(DType::f32, {local, 784}), by(DType::i64, {local});
  Tensor ex(DType::f32, {eb, 784}), ey(DType::i64, {eb});
  double total_time = 0, last_acc = -1;
  int64_t total_images = 0;
  const bool bar = !quiet && isatty(STDERR_FILENO);  // \r frames only on a terminal, never into a log
  const bool stop_on_nan = a.has("stop-on-nan");
  const int64_t every = a.integer("checkpoint-every"), stop_after = a.has("stop-after") ? a.integer("stop-after") : -1;
  std::string ckpt = rank == 0 ? a.get("checkpoint") : "none";
  bool warned_nan = false, stopped = false;
  Metrics metrics(rank == 0 ? a.get("metrics") : "none", !resume_meta.empty());
  auto save = [&](const char* why) {
    if (ckpt == "none") return;
    tr.save(ckpt, loop_meta(st));
    metrics.flush();
    std::printf("checkpoint: %s (%s, step %lld)\n", ckpt.c_str(), why, (long long)tr.step_count());
  };
  for (; st.epoch < epochs && !stopped; ++st.epoch) {
    std::mt19937_64 at_start = st.rng;  // saved with the checkpoint: a resume reshuffles from here
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), st.rng);
    std::swap(at_start, st.rng);  // st.rng = before the shuffle (checkpointed), at_start = after
    auto t0 = std::chrono::steady_clock::now();
    int64_t first = st.epoch_step;
    for (int64_t s = st.epoch_step; s < steps; ++s) {
      fill_batch(ds, true, order, s * batch + rank * local, local, bx, by);
      double lr = tr.current_lr();
      const auto& outs = tr.step({bx, by});
      double l = outs[0].get(0);
      st.correct += outs[1].get(0);
      st.loss_sum += l;
      st.epoch_step = s + 1;
      metrics.step(tr.step_count(), st.epoch + double(s + 1) / double(steps), l, lr);
      if (!std::isfinite(l) && !warned_nan) {
        warned_nan = true;
        std::fprintf(stderr, "%srlx train-mnist: warning: the loss is %g at step %lld (epoch %d): training diverged%s\n",
                     bar ? "\n" : "", l, (long long)tr.step_count(), st.epoch + 1,
                     stop_on_nan ? "; stopping (--stop-on-nan)" : " (--stop-on-nan stops here)");
        if (stop_on_nan) return 1;
      }
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (bar && (s % 10 == 0 || s + 1 == steps)) {
        int w = 30, done = static_cast<int>(w * (s + 1) / steps);
        std::fprintf(stderr, "\repoch %d/%d [%s%s] %lld/%lld loss %.4f  %.0f img/s ", st.epoch + 1, epochs,
                     std::string(done, '=').c_str(), std::string(w - done, ' ').c_str(), (long long)(s + 1),
                     (long long)steps, st.loss_sum / double(s + 1), double((s + 1 - first) * batch) / std::max(secs, 1e-9));
      }
      if (every > 0 && tr.step_count() % every == 0 && s + 1 < steps) save("every");
      if (tr.step_count() == stop_after) {
        if (bar) std::fprintf(stderr, "\n");
        std::printf("stopped after step %lld (--stop-after), epoch %d step %lld\n", (long long)stop_after,
                    st.epoch + 1, (long long)st.epoch_step);
        save("stopped");
        stopped = true;
        break;
      }
    }
    if (stopped) break;
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    total_time += secs;
    total_images += (steps - first) * batch;
    if (bar) std::fprintf(stderr, "\n");
    double tc = 0;
    for (int64_t s = 0; s < ntest / eb; ++s) {
      fill_batch(ds, false, {}, s * eb, eb, ex, ey);
      const auto& P = tr.params();
      std::vector<Tensor> in(P.begin(), P.begin() + static_cast<long>(np));
      in.push_back(ex);
      in.push_back(ey);
      tc += eval.run(in)[1].get(0);
    }
    last_acc = tc / double(ntest);
    double train_loss = st.loss_sum / double(steps), train_acc = st.correct / double(steps * batch);
    std::printf("epoch %d: train loss %.4f, train acc %.4f, test acc %.4f, %.0f img/s (%.2f s)\n", st.epoch + 1,
                train_loss, train_acc, last_acc, double((steps - first) * batch) / secs, secs);
    metrics.epoch(tr.step_count(), st.epoch + 1, train_loss, train_acc, last_acc);
    std::fflush(stdout);
    st.rng = at_start;  // the next epoch shuffles from where this one's shuffle left the RNG
    st.epoch_step = 0;
    st.loss_sum = st.correct = 0;
    if (every > 0 && st.epoch + 1 < epochs && tr.step_count() % every == 0) {
      ++st.epoch;  // the checkpoint names the epoch about to start
      save("every");
      --st.epoch;
    }
  }
  if (stopped) return 0;
  if (last_acc >= 0)
    std::printf("final test accuracy %.4f; training throughput %.0f img/s\n", last_acc,
                double(total_images) / std::max(total_time, 1e-9));
  if (amp.loss_scaling())
    std::printf("amp f16: loss scale %g, %lld steps skipped (non-finite gradients)\n", tr.loss_scale(),
                (long long)tr.skipped_steps());
  save("end");
  metrics.close();
  std::string png = a.get("plot");
  if (png != "none" && rank == 0) {
    render_plot(plotter, a.get("metrics"), png);
    std::printf("curves: %s (from %s)\n", png.c_str(), a.get("metrics").c_str());
  }
  return 0;
}

}  // namespace rlx::cli
