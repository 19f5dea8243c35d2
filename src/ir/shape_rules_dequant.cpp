// Shape rules of the dequantize ops (dequantize, dequant_matmul): packed GGML weights; see ops.def.
#include "quant/blocks.h"
#include "rlx/graph.h"

namespace rlx {

namespace {

const Attr* qattr(OpKind k, const Attrs& a, const char* n) { return find_attr(k, a, n); }

// Checks w = u8 [N, row_bytes(type, k)]; "" on success.
std::string check_packed(OpKind op, const ValueType& w, const Attrs& a, int64_t* k_out) {
  const Attr* ta = qattr(op, a, "type");
  const Attr* ka = qattr(op, a, "k");
  const auto* type = ta ? std::get_if<std::string>(&ta->v) : nullptr;
  const auto* k = ka ? std::get_if<int64_t>(&ka->v) : nullptr;
  if (!type || !k) return "needs attributes type (str) and k (int)";
  const quant::TypeTraits* tr = quant::type_traits_by_name(*type);
  if (!tr || !tr->quantized) return "unknown quant type '" + *type + "'";
  if (*k <= 0 || *k % tr->block_elems != 0)
    return "k " + std::to_string(*k) + " is not a positive multiple of the " + tr->name + " block (" +
           std::to_string(tr->block_elems) + ")";
  if (w.dtype != DType::u8 || w.shape.size() != 2) return "packed weights must be u8 [N, row_bytes]";
  int64_t rb = *k / tr->block_elems * tr->block_bytes;
  if (!w.shape[1].is_static() || w.shape[1].v != rb)
    return std::string("packed rows must be ") + std::to_string(rb) + " bytes for k " + std::to_string(*k) + " " + tr->name;
  *k_out = *k;
  return "";
}

}  // namespace

std::string infer_dequantize(const std::vector<ValueType>& in, const Attrs& a, std::vector<ValueType>& o) {
  int64_t k = 0;
  std::string e = check_packed(OpKind::Dequantize, in[0], a, &k);
  if (!e.empty()) return e;
  o = {ValueType{DType::f32, Shape{in[0].shape[0], Dim(k)}}};
  return "";
}

std::string infer_dequant_matmul(const std::vector<ValueType>& in, const Attrs& a, std::vector<ValueType>& o) {
  int64_t k = 0;
  std::string e = check_packed(OpKind::DequantMatMul, in[1], a, &k);
  if (!e.empty()) return e;
  const Shape& xs = in[0].shape;
  if (xs.empty() || !xs.back().is_static() || xs.back().v != k)
    return "x's last dim must equal k " + std::to_string(k);
  Shape s = xs;
  s.back() = in[1].shape[0];
  o = {ValueType{in[0].dtype, s}};
  return "";
}

}  // namespace rlx
