// Decompositions of the shape ops: expand -> broadcast_in_dim; squeeze/unsqueeze -> reshape.
#include "passes/decompose/common.h"

namespace rlx {

using namespace decomp;

std::vector<int32_t> decompose_expand(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  // The target is numpy broadcast(x.shape, shape), exactly what the shape rule computes.
  auto t = out_types(b, n, in);
  return {broadcast_to(b, in[0], static_dims(t[0].shape), true)};
}

std::vector<int32_t> decompose_squeeze(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  return {b.reshape(in[0], out_types(b, n, in)[0].shape)};
}

std::vector<int32_t> decompose_unsqueeze(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  return {b.reshape(in[0], out_types(b, n, in)[0].shape)};
}

}  // namespace rlx

namespace rlx {
// stop_gradient is the identity in value: it lowers to its input (no node, no copy).
std::vector<int32_t> decompose_stop_gradient(Builder&, const Node&, const std::vector<int32_t>& in) { return {in[0]}; }
}  // namespace rlx
