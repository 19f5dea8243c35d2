// Decompositions of convolution and pooling onto conv / reduce_window / reduce_sum.
#include "passes/decompose/common.h"

namespace rlx {

using namespace decomp;

std::vector<int32_t> decompose_convolution(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  Attrs a{{"strides", attr_ints(n, "strides")},
          {"pads", attr_ints(n, "pads")},
          {"dilations", attr_ints(n, "dilations")},
          {"groups", attr_int(n, "groups")}};
  ValueId y = b.op1(OpKind::Conv, {in[0], in[1]}, std::move(a));
  if (in.size() > 2) {
    // bias [O] -> [1, O, 1, ...] so it broadcasts over batch and spatial dims.
    Ints bs(static_cast<size_t>(b.rank(y)), 1);
    bs[1] = dims_of(b, in[2])[0];
    y = b.add(y, b.reshape(in[2], to_shape(bs)));
  }
  return {y};
}

namespace {

// Pool attributes widened to reduce_window's per-dim form: N and C get window 1, stride 1, no pad.
struct Window {
  Ints window, strides, pads;
  int64_t kernel_elems = 1;
  bool padded = false;
};

Window pool_window(Builder& b, const Node& n, ValueId x) {
  int64_t r = b.rank(x), sp = r - 2;
  Ints k = attr_ints(n, "kernel"), st = attr_ints(n, "strides"), pads = attr_ints(n, "pads");
  if (st.empty()) st.assign(static_cast<size_t>(sp), 1);
  if (pads.empty()) pads.assign(static_cast<size_t>(2 * sp), 0);
  Window w;
  w.window = {1, 1};
  w.strides = {1, 1};
  w.pads.assign(static_cast<size_t>(2 * r), 0);
  for (int64_t i = 0; i < sp; ++i) {
    w.window.push_back(k[i]);
    w.strides.push_back(st[i]);
    w.pads[2 + i] = pads[i];
    w.pads[r + 2 + i] = pads[sp + i];
    w.kernel_elems *= k[i];
    w.padded = w.padded || pads[i] != 0 || pads[sp + i] != 0;
  }
  return w;
}

ValueId reduce_window(Builder& b, ValueId x, const char* kind, const Window& w) {
  return b.op1(OpKind::ReduceWindow, {x},
               {{"kind", kind}, {"window", w.window}, {"strides", w.strides}, {"pads", w.pads}});
}

}  // namespace

std::vector<int32_t> decompose_max_pool(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  return {reduce_window(b, in[0], "max", pool_window(b, n, in[0]))};
}

std::vector<int32_t> decompose_avg_pool(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  ValueId x = in[0];
  Window w = pool_window(b, n, x);
  ValueId sum = reduce_window(b, x, "sum", w);
  if (attr_int(n, "count_include_pad") != 0 || !w.padded)
    return {b.div(sum, scalar_like(b, static_cast<double>(w.kernel_elems), sum))};
  // Count only real elements: the same windowed sum over ones of one [1,1,spatial...] image.
  Ints ones_shape = dims_of(b, x);
  ones_shape[0] = ones_shape[1] = 1;
  ValueId ones = b.broadcast_in_dim(scalar_like(b, 1.0, x), to_shape(ones_shape), {});
  return {b.div(sum, reduce_window(b, ones, "sum", w))};
}

std::vector<int32_t> decompose_global_avg_pool(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  Ints d = dims_of(b, in[0]);
  Ints axes = range(2, static_cast<int64_t>(d.size()));
  ValueId s = b.reduce(OpKind::ReduceSum, in[0], axes, true);
  return {b.div(s, scalar_like(b, static_cast<double>(product(d, 2)), s))};
}

}  // namespace rlx
