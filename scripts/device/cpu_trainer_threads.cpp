// Prints the cpu Trainer's per-step outputs (loss, correct count) for a few MLP shapes, so that
// h200_cuda.sh's "cputhreads" stage can diff a 1-thread run against an all-cores run on the
// device host (16 real cores, AVX-512), which the 2-core development machine cannot exercise.
#include <cstdio>
#include <random>
#include "models/mlp.h"
#include "rlx/session.h"
#include "train/train.h"

int main() {
  using namespace rlx;
  struct Case {
    std::vector<int64_t> sizes;
    int64_t B;
  };
  for (const Case& c : {Case{{100, 37, 10}, 50}, Case{{784, 128, 10}, 128}, Case{{64, 48, 40, 10}, 33},
                        Case{{784, 128, 10}, 1024}}) {
    Graph loss = models::mlp_loss_graph(c.sizes, c.B);
    std::mt19937 rng(41);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    Tensor x(DType::f32, {c.B, c.sizes[0]}), y(DType::i64, {c.B});
    for (int64_t i = 0; i < x.numel(); ++i) x.set(i, u(rng));
    for (int64_t i = 0; i < c.B; ++i) y.data<int64_t>()[i] = static_cast<int64_t>(rng() % 10);
    CompileOptions cpu;
    cpu.device = "cpu";
    train::Trainer tr(loss, models::mlp_init(c.sizes, 7), train::OptimizerConfig{}, {}, cpu);
    for (int s = 0; s < 4; ++s) {
      const auto& o = tr.step({x, y});
      std::printf("h%lld b%lld step %d: loss %a correct %g\n", static_cast<long long>(c.sizes[1]),
                  static_cast<long long>(c.B), s, o[0].get(0), o[1].get(0));
    }
    // The parameters after the last step, as a sum and a position-weighted sum (printed exactly).
    for (const Tensor& p : tr.params()) {
      double sum = 0, weighted = 0;
      for (int64_t i = 0; i < p.numel(); ++i) sum += p.get(i), weighted += p.get(i) * static_cast<double>(i % 97 + 1);
      std::printf("  param %lld: %a %a\n", static_cast<long long>(p.numel()), sum, weighted);
    }
  }
  return 0;
}
