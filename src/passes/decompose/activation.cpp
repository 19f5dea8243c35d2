// Decompositions of the pointwise activations and the softmax family.
#include <cmath>

#include "passes/decompose/common.h"

namespace rlx {

using namespace decomp;

std::vector<int32_t> decompose_gelu(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  ValueId x = in[0];
  const std::string& approx = attr_str(n, "approximate");
  ValueId inner;
  if (approx == "none") {
    // 0.5·x·(1 + erf(x/√2))
    inner = b.unary(OpKind::Erf, b.mul(x, scalar_like(b, M_SQRT1_2, x)));
  } else {
    RLX_CHECK(approx == "tanh", "[decompose] gelu: approximate must be none|tanh, got '", approx, "'");
    // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
    ValueId x3 = b.mul(b.mul(x, x), x);
    ValueId u = b.add(x, b.mul(x3, scalar_like(b, 0.044715, x)));
    inner = b.unary(OpKind::Tanh, b.mul(u, scalar_like(b, std::sqrt(2.0 / M_PI), x)));
  }
  ValueId half_x = b.mul(x, scalar_like(b, 0.5, x));
  return {b.mul(half_x, b.add(inner, scalar_like(b, 1.0, x)))};
}

std::vector<int32_t> decompose_silu(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  return {b.mul(in[0], b.unary(OpKind::Logistic, in[0]))};
}

std::vector<int32_t> decompose_relu(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  return {b.max(in[0], scalar_like(b, 0.0, in[0]))};
}

namespace {

// Max-subtracted softmax pieces over `axis`: shifted = x - max, sum = Σ exp(shifted).
struct SoftmaxParts {
  ValueId shifted, exp, sum;
};

SoftmaxParts softmax_parts(Builder& b, ValueId x, int64_t axis) {
  ValueId m = b.reduce(OpKind::ReduceMax, x, {axis}, true);
  ValueId shifted = b.sub(x, m);
  ValueId e = b.unary(OpKind::Exp, shifted);
  return {shifted, e, b.reduce(OpKind::ReduceSum, e, {axis}, true)};
}

}  // namespace

std::vector<int32_t> decompose_softmax(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  DType dt = b.dtype(in[0]);
  ValueId x = to_compute(b, in[0]);
  int64_t axis = norm_axis(attr_int(n, "axis"), b.rank(x), "softmax axis");
  auto p = softmax_parts(b, x, axis);
  return {restore(b, b.div(p.exp, p.sum), dt)};
}

std::vector<int32_t> decompose_log_softmax(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  DType dt = b.dtype(in[0]);
  ValueId x = to_compute(b, in[0]);
  int64_t axis = norm_axis(attr_int(n, "axis"), b.rank(x), "log_softmax axis");
  auto p = softmax_parts(b, x, axis);
  return {restore(b, b.sub(p.shifted, b.unary(OpKind::Log, p.sum)), dt)};
}

}  // namespace rlx
