// MLP / CNN loss graphs built from HIR + MIR ops (the step compiler decomposes and differentiates).
#include "models/mlp.h"

#include <cmath>
#include <random>

#include "rlx/builder.h"

namespace rlx::models {

std::vector<ValueId> classification_head(Builder& b, ValueId logits, ValueId labels) {
  Shape s = b.shape(logits);
  int64_t B = s[0].v, C = s[1].v;
  DType dt = b.dtype(logits);
  // loss = mean_b(logsumexp(z_b) - z_b[label_b]) with z = logits - max (stable). The max goes
  // through a stop-gradient (its gradient cancels exactly), so the backward pass is the closed
  // form (softmax - onehot) / B: exp, a row sum, one fused elementwise region.
  ValueId mx = b.stop_gradient(b.broadcast_in_dim(b.reduce(OpKind::ReduceMax, logits, {1}, false), Shape{B, C}, {0}));
  ValueId z = b.sub(logits, mx);
  ValueId lse = b.unary(OpKind::Log, b.reduce(OpKind::ReduceSum, b.unary(OpKind::Exp, z), {1}, false));
  ValueId cls = b.op1(OpKind::Iota, {}, {{"shape", Shape{B, C}}, {"dim", int64_t{1}}, {"dtype", DType::i64}});
  ValueId lab = b.broadcast_in_dim(labels, Shape{B, C}, {0});
  ValueId onehot = b.convert(b.op1(OpKind::Eq, {cls, lab}), dt);
  ValueId picked = b.reduce(OpKind::ReduceSum, b.mul(onehot, z), {0, 1}, false);
  ValueId nll = b.sub(b.reduce(OpKind::ReduceSum, lse, {0}, false), picked);
  ValueId loss = b.mul(nll, b.scalar(1.0 / static_cast<double>(B), dt));
  ValueId pred = b.op1(OpKind::ArgMax, {logits}, {{"axis", int64_t{1}}});
  ValueId correct = b.reduce(OpKind::ReduceSum, b.convert(b.op1(OpKind::Eq, {pred, labels}), dt), {0}, false);
  return {loss, correct};
}

namespace {
ValueId mlp_body(Builder& b, const std::vector<int64_t>& sizes, int64_t batch, DType dt, std::vector<ValueId>& params,
                 ValueId* x_out) {
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    params.push_back(b.input("w" + std::to_string(i), dt, {sizes[i], sizes[i + 1]}));
    params.push_back(b.input("b" + std::to_string(i), dt, {sizes[i + 1]}));
  }
  ValueId x = b.input("x", dt, {batch, sizes[0]});
  *x_out = x;
  ValueId h = x;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    h = b.add(b.dot_general(h, params[2 * i], {}, {}, {1}, {0}), params[2 * i + 1]);
    if (i + 2 < sizes.size()) h = b.max(h, b.scalar(0, dt));
  }
  return h;
}
}  // namespace

Graph mlp_loss_graph(const std::vector<int64_t>& sizes, int64_t batch, DType dt) {
  Graph g;
  g.name = "mlp";
  Builder b(g);
  std::vector<ValueId> params;
  ValueId x;
  ValueId logits = mlp_body(b, sizes, batch, dt, params, &x);
  ValueId labels = b.input("labels", DType::i64, {batch});
  auto h = classification_head(b, logits, labels);
  g.values[h[0]].name = "loss";
  g.values[h[1]].name = "correct";
  b.output(h[0]);
  b.output(h[1]);
  return g;
}

Graph mlp_logits_graph(const std::vector<int64_t>& sizes, int64_t batch, DType dt) {
  Graph g;
  g.name = "mlp_logits";
  Builder b(g);
  std::vector<ValueId> params;
  ValueId x;
  b.output(mlp_body(b, sizes, batch, dt, params, &x));
  return g;
}

namespace {
Tensor uniform(std::mt19937_64& rng, DType dt, std::vector<int64_t> shape, double bound) {
  Tensor t(dt, std::move(shape));
  std::uniform_real_distribution<double> u(-bound, bound);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, u(rng));
  return t;
}
}  // namespace

std::vector<Tensor> mlp_init(const std::vector<int64_t>& sizes, uint64_t seed, DType dt) {
  std::mt19937_64 rng(seed);
  std::vector<Tensor> p;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    double bound = 1.0 / std::sqrt(static_cast<double>(sizes[i]));
    p.push_back(uniform(rng, dt, {sizes[i], sizes[i + 1]}, bound));
    p.push_back(uniform(rng, dt, {sizes[i + 1]}, bound));
  }
  return p;
}

Graph cnn_loss_graph(int64_t batch, int64_t c1, int64_t c2) {
  Graph g;
  g.name = "cnn";
  Builder b(g);
  DType dt = DType::f32;
  ValueId w1 = b.input("conv1_w", dt, {c1, 1, 3, 3}), b1 = b.input("conv1_b", dt, {c1});
  ValueId w2 = b.input("conv2_w", dt, {c2, c1, 3, 3}), b2 = b.input("conv2_b", dt, {c2});
  ValueId w3 = b.input("fc_w", dt, {c2 * 7 * 7, 10}), b3 = b.input("fc_b", dt, {10});
  ValueId x = b.input("x", dt, {batch, 784});
  ValueId labels = b.input("labels", DType::i64, {batch});
  auto conv = [&](ValueId in, ValueId w, ValueId bias, int64_t c, int64_t hw) {
    ValueId y = b.op1(OpKind::Conv, {in, w}, {{"strides", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    y = b.add(y, b.broadcast_in_dim(bias, Shape{batch, c, hw, hw}, {1}));
    return b.max(y, b.scalar(0, dt));
  };
  ValueId h = conv(b.reshape(x, Shape{batch, 1, 28, 28}), w1, b1, c1, 14);
  h = conv(h, w2, b2, c2, 7);
  ValueId logits = b.add(b.dot_general(b.reshape(h, Shape{batch, c2 * 49}), w3, {}, {}, {1}, {0}), b3);
  auto hd = classification_head(b, logits, labels);
  b.output(hd[0]);
  b.output(hd[1]);
  return g;
}

int64_t cnn_num_params() { return 6; }

std::vector<Tensor> cnn_init(uint64_t seed, int64_t c1, int64_t c2) {
  std::mt19937_64 rng(seed);
  DType dt = DType::f32;
  double k1 = 1.0 / 3.0, k2 = 1.0 / std::sqrt(9.0 * static_cast<double>(c1)), k3 = 1.0 / std::sqrt(49.0 * static_cast<double>(c2));
  return {uniform(rng, dt, {c1, 1, 3, 3}, k1), uniform(rng, dt, {c1}, k1), uniform(rng, dt, {c2, c1, 3, 3}, k2),
          uniform(rng, dt, {c2}, k2), uniform(rng, dt, {c2 * 49, 10}, k3), uniform(rng, dt, {10}, k3)};
}

}  // namespace rlx::models
