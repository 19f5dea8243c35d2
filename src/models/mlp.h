// MLP and small CNN classifiers for MNIST-style data, as loss graphs for rlx::train::Trainer.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "rlx/graph.h"
#include "rlx/tensor.h"

namespace rlx::models {

// MLP sizes e.g. {784, 128, 10}: ReLU between layers; weights [in,out], biases [out].
// Inputs: w0, b0, w1, b1, ..., x f32 [batch, sizes[0]], labels i64 [batch].
// Outputs: mean softmax cross-entropy (scalar), number of correct argmax predictions (f32 scalar).
Graph mlp_loss_graph(const std::vector<int64_t>& sizes, int64_t batch, DType dt = DType::f32);
// Same parameters; input x; output logits [batch, classes].
Graph mlp_logits_graph(const std::vector<int64_t>& sizes, int64_t batch, DType dt = DType::f32);
// PyTorch-style default init (uniform +-1/sqrt(fan_in)), seeded.
std::vector<Tensor> mlp_init(const std::vector<int64_t>& sizes, uint64_t seed, DType dt = DType::f32);

// Small CNN for 28x28x1: conv 3x3 (c1, stride 2, pad 1) + relu, conv 3x3 (c2, stride 2, pad 1)
// + relu, linear to 10. Strided convs instead of max-pool keep every op differentiable.
Graph cnn_loss_graph(int64_t batch, int64_t c1 = 8, int64_t c2 = 16);
std::vector<Tensor> cnn_init(uint64_t seed, int64_t c1 = 8, int64_t c2 = 16);
int64_t cnn_num_params();

// Softmax cross-entropy + correct count of logits [B,C] against labels i64 [B] (emitted into b).
std::vector<ValueId> classification_head(class Builder& b, ValueId logits, ValueId labels);

}  // namespace rlx::models
