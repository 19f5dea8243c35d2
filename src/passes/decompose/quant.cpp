// Decomposition of dequant_matmul for devices without a packed kernel: dequantize the blocks (MIR
// `dequantize`) into a dense f32 weight, then an ordinary contraction.
#include "passes/decompose/common.h"

namespace rlx {

using namespace decomp;

std::vector<int32_t> decompose_dequant_matmul(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  DType dt = b.dtype(in[0]);
  ValueId x = to_compute(b, in[0]);
  ValueId w = b.op1(OpKind::Dequantize, {in[1]}, {{"type", attr_str(n, "type")}, {"k", attr_int(n, "k")}});
  if (b.dtype(x) != DType::f32) w = b.convert(w, b.dtype(x));
  ValueId y = b.dot_general(x, w, {}, {}, {b.rank(x) - 1}, {1});
  return {restore(b, y, dt)};
}

}  // namespace rlx
