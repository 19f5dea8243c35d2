// Decompositions of the normalizations and mean reductions. Half inputs normalize in f32.
#include "passes/decompose/common.h"

namespace rlx {

using namespace decomp;

namespace {

// Σ over `axes` (kept) divided by the element count of those axes.
ValueId mean_over(Builder& b, ValueId x, const Ints& axes, bool keep) {
  Ints d = dims_of(b, x);
  int64_t count = 1;
  for (auto a : axes) count *= d[static_cast<size_t>(a)];
  ValueId s = b.reduce(OpKind::ReduceSum, x, axes, keep);
  return b.div(s, scalar_like(b, static_cast<double>(count), s));
}

}  // namespace

// (x - mean) / sqrt(var + eps) · gamma + beta over dims axis..end, biased variance.
std::vector<int32_t> decompose_layer_norm(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  DType dt = b.dtype(in[0]);
  ValueId x = to_compute(b, in[0]);
  int64_t r = b.rank(x);
  int64_t axis = norm_axis(attr_int(n, "axis"), r, "layer_norm axis");
  Ints axes = range(axis, r);
  ValueId centered = b.sub(x, mean_over(b, x, axes, true));
  ValueId var = mean_over(b, b.mul(centered, centered), axes, true);
  ValueId eps = scalar_like(b, attr_float(n, "eps"), var);
  ValueId y = b.mul(centered, b.unary(OpKind::Rsqrt, b.add(var, eps)));
  y = b.mul(y, to_compute(b, in[1]));
  if (in.size() > 2) y = b.add(y, to_compute(b, in[2]));
  return {restore(b, y, dt)};
}

// x · rsqrt(mean(x²) + eps) · gamma over the last dim.
std::vector<int32_t> decompose_rms_norm(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  DType dt = b.dtype(in[0]);
  ValueId x = to_compute(b, in[0]);
  ValueId ms = mean_over(b, b.mul(x, x), {b.rank(x) - 1}, true);
  ValueId eps = scalar_like(b, attr_float(n, "eps"), ms);
  ValueId y = b.mul(x, b.unary(OpKind::Rsqrt, b.add(ms, eps)));
  y = b.mul(y, to_compute(b, in[1]));
  return {restore(b, y, dt)};
}

std::vector<int32_t> decompose_reduce_mean(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  Ints axes = attr_ints(n, "axes");
  for (auto& a : axes) a = norm_axis(a, b.rank(in[0]), "reduce_mean axis");
  return {mean_over(b, in[0], axes, attr_int(n, "keepdims") != 0)};
}

}  // namespace rlx
