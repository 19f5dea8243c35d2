// The MNIST-shaped training check every device's model test shares: the losses of `steps`
// SGD+momentum steps of the 784-64-10 MLP on four fixed seeded batches (each class with its own
// mean image, so the loss can fall), compiled for `device`; a device's curve is compared with cpu's.
#pragma once
#include <random>
#include <string>
#include <vector>

#include "models/mlp.h"
#include "rlx/session.h"
#include "train/train.h"

namespace rlx_test {

inline std::vector<double> mlp_losses(const std::string& device, int steps) {
  using namespace rlx;
  const std::vector<int64_t> sizes = {784, 64, 10};
  const int64_t batch = 32;
  train::OptimizerConfig opt;
  opt.lr = 0.05;
  opt.momentum = 0.9;
  CompileOptions co;
  co.device = device;
  train::Trainer tr(models::mlp_loss_graph(sizes, batch), models::mlp_init(sizes, 3), opt, {}, co);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<Tensor> xs, ys;
  for (int k = 0; k < 4; ++k) {
    Tensor x(DType::f32, {batch, 784}), y(DType::i64, {batch});
    for (int64_t i = 0; i < batch; ++i) {
      int64_t c = static_cast<int64_t>(rng() % 10);
      y.set_int(i, c);
      for (int64_t p = 0; p < 784; ++p) x.data<float>()[i * 784 + p] = 0.5f * u(rng) + (p % 10 == c ? 0.5f : 0.0f);
    }
    xs.push_back(x);
    ys.push_back(y);
  }
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) losses.push_back(tr.step({xs[s % 4], ys[s % 4]})[0].get(0));
  return losses;
}

}  // namespace rlx_test
