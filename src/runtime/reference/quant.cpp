// dequantize (MIR) and dequant_matmul (HIR): GGML blocks expanded by the reference dequantizers
// (src/quant), the product accumulated in double.
#include "quant/blocks.h"
#include "runtime/reference/common.h"

namespace rlx::ref {

namespace {

// All N rows of w (u8 [N, row_bytes]) as f32 [N, k].
std::vector<float> unpack(const Node& n, const Tensor& w, int64_t k) {
  const quant::TypeTraits* tr = quant::type_traits_by_name(attr_str(n, "type"));
  RLX_CHECK(tr && tr->quantized, "[reference] ", op_name(n.op), ": unknown quant type '", attr_str(n, "type"), "'");
  RLX_CHECK(w.dtype() == DType::u8 && w.rank() == 2, "[reference] ", op_name(n.op), ": packed weights must be u8 [N, row_bytes]");
  int64_t N = w.shape()[0], rb = w.shape()[1];
  RLX_CHECK(static_cast<size_t>(rb) == quant::row_bytes(tr->type, k), "[reference] ", op_name(n.op), ": row bytes ", rb,
            " do not match k ", k, " of ", tr->name);
  std::vector<float> out(static_cast<size_t>(N * k));
  for (int64_t r = 0; r < N; ++r) quant::dequantize_row(tr->type, w.data<uint8_t>() + r * rb, out.data() + r * k, k);
  return out;
}

}  // namespace

Outs eval_dequantize(const Node& n, const Ins& in, const Types& ot) {
  int64_t k = attr_int(n, "k");
  std::vector<float> w = unpack(n, in[0], k);
  Tensor out = alloc(ot[0]);
  for (size_t i = 0; i < w.size(); ++i) out.data<float>()[i] = w[i];
  return {out};
}

Outs eval_dequant_matmul(const Node& n, const Ins& in, const Types& ot) {
  int64_t k = attr_int(n, "k");
  const Tensor& x = in[0];
  std::vector<float> w = unpack(n, in[1], k);
  int64_t N = in[1].shape()[0], M = x.numel() / k;
  Tensor out = alloc(ot[0]);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t e = 0; e < k; ++e) acc += ld(x, m * k + e) * static_cast<double>(w[j * k + e]);
      st(out, m * N + j, acc);
    }
  return {out};
}

}  // namespace rlx::ref
