// Free helpers shared by the op converters (ops_nn/ops_misc/ops_signal/ops_extra/ops_rnn/ops_vision/ops_qlinear).
#pragma once
#include <string>
#include <vector>

#include "formats/onnx/importer.h"

namespace rlx::onnx {

// An ONNX axis (negative counts from the end) checked against `rank` and made non-negative.
inline int64_t axis_norm(Ctx& c, int64_t a, int64_t rank) {
  if (a < -rank || a >= rank)
    c.error("axis " + std::to_string(a) + " out of range for rank " + std::to_string(rank));
  return a < 0 ? a + rank : a;
}

// The window of a conv/pool node: spatial input dims, kernel, strides, dilations and the padding
// [begin..., end...] resolved from auto_pad / pads (ops_nn.cpp). Every conv/pool converter (Conv, the
// pools, LpPool, QLinearConv, ConvInteger) gets it here, so the attributes are checked once: one entry
// per spatial dim, positive and sane; failures name the node.
struct Window {
  std::vector<int64_t> in, k, st, dil, pads;
};
// X [N, C, spatial...] convolved with W [M, C/group, kernel...].
Window conv_window(Ctx& c, const std::vector<int64_t>& xd, const std::vector<int64_t>& wd);
// X [N, C, spatial...] pooled with the kernel_shape attribute.
Window pool_window(Ctx& c, const std::vector<int64_t>& xd);
// The kernel/strides/dilations checks alone (ConvTranspose pads by its own rule).
void check_window(Ctx& c, size_t spatial_rank, const std::vector<int64_t>& k, const std::vector<int64_t>& st,
                  const std::vector<int64_t>& dil);

// Element-wise dtype change of a host tensor (through double; ints through int64).
Tensor as_dtype(const Tensor& t, DType dt);

// A parsed einsum equation: each operand's labels and the output's, with "..." expanded to
// `ellipsis` distinct labels ('0', '1', ... are never letters). Implicit output ("ij,jk") is the
// ellipsis labels followed by the letters seen exactly once, alphabetically.
struct EinsumSpec {
  std::vector<std::string> inputs;
  std::string output;
};
// `ranks` are the operands' ranks (to size each "..."). Throws rlx::Error on a malformed equation.
EinsumSpec parse_einsum(const std::string& eq, const std::vector<int64_t>& ranks);

// DFT along `axis` of x [..., 1|2] (see ops_signal.cpp).
V onnx_dft(Ctx& c, V x, int64_t axis, int64_t len, bool inverse, bool onesided);

// atan of a float tensor composed from sqrt/div/mul/add (three half-angle reductions then a series).
V compose_atan(Ctx& c, V x);

}  // namespace rlx::onnx
