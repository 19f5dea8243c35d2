// Shape and dtype rules of the affine quantization ops (quantize_affine, dequantize_affine, qmatmul,
// requantize, qlinear, qconv); semantics in ops.def and src/quant/fixed_point.h.
#include "quant/fixed_point.h"
#include "rlx/graph.h"

namespace rlx {

namespace {

using In = std::vector<ValueType>;
using Out = std::vector<ValueType>;

#define REQUIRE(cond, msg)     \
  do {                         \
    if (!(cond)) return (msg); \
  } while (0)

template <class T>
const T* get(OpKind k, const Attrs& a, const char* n) {
  const Attr* at = find_attr(k, a, n);
  return at ? std::get_if<T>(&at->v) : nullptr;
}

bool is_q8(DType t) { return t == DType::i8 || t == DType::u8; }
int64_t rank_of(const ValueType& t) { return static_cast<int64_t>(t.shape.size()); }

// scale f32 and zero point (dtype zdt) of rank 0 (axis -1) or [C] with C = x's dim `axis`.
std::string check_qparams(OpKind k, const ValueType& x, const ValueType& scale, const ValueType& zp, DType zdt,
                          const Attrs& a) {
  int64_t axis = *get<int64_t>(k, a, "axis");
  REQUIRE(scale.dtype == DType::f32, "scale must be f32");
  REQUIRE(zp.dtype == zdt, "zero_point must be " + std::string(dtype_name(zdt)));
  REQUIRE(scale.shape == zp.shape, "scale and zero_point shapes differ");
  if (axis == -1) {
    REQUIRE(scale.shape.empty(), "per-tensor (axis -1) scale and zero_point must be rank 0");
    return "";
  }
  REQUIRE(axis >= 0 && axis < rank_of(x), "axis " + std::to_string(axis) + " out of range");
  REQUIRE(scale.shape.size() == 1 && scale.shape[0] == x.shape[static_cast<size_t>(axis)],
          "per-channel scale and zero_point must be [dim " + std::to_string(axis) + "]");
  return "";
}

// multiplier/shift lists of 1 or `channels` entries, each encodable; rounding and dtype valid.
std::string check_requant(OpKind k, const Attrs& a, int64_t channels, bool allow_f32) {
  const auto& m = *get<std::vector<int64_t>>(k, a, "multiplier");
  const auto& s = *get<std::vector<int64_t>>(k, a, "shift");
  DType dt = *get<DType>(k, a, "dtype");
  quant::Rounding r;
  REQUIRE(quant::parse_rounding(*get<std::string>(k, a, "rounding"), &r), "rounding must be half_even|half_away");
  REQUIRE(is_q8(dt) || (allow_f32 && dt == DType::f32), allow_f32 ? "dtype must be i8|u8|f32" : "dtype must be i8|u8");
  if (dt == DType::f32) return "";
  REQUIRE(m.size() == s.size(), "multiplier and shift have different lengths");
  REQUIRE(m.size() == 1 || static_cast<int64_t>(m.size()) == channels,
          "multiplier/shift need 1 or " + std::to_string(channels) + " entries");
  for (size_t i = 0; i < m.size(); ++i) {
    REQUIRE(m[i] >= 0 && m[i] <= INT32_MAX, "multiplier out of [0, 2^31)");
    REQUIRE(s[i] >= quant::kMinShift && s[i] <= quant::kMaxShift, "shift out of [-30, 31]");
  }
  int64_t zp = *get<int64_t>(k, a, "zero_point");
  int32_t lo, hi;
  quant::int8_range(dt == DType::u8, &lo, &hi);
  REQUIRE(zp >= lo && zp <= hi, "zero_point out of the output type's range");
  return "";
}

}  // namespace

std::string infer_quantize_affine(const In& in, const Attrs& a, Out& o) {
  REQUIRE(is_q8(in[2].dtype), "zero_point must be i8|u8 (it sets the output type)");
  std::string e = check_qparams(OpKind::QuantizeAffine, in[0], in[1], in[2], in[2].dtype, a);
  if (!e.empty()) return e;
  o = {ValueType{in[2].dtype, in[0].shape}};
  return "";
}

std::string infer_dequantize_affine(const In& in, const Attrs& a, Out& o) {
  std::string e = check_qparams(OpKind::DequantizeAffine, in[0], in[1], in[2], in[0].dtype, a);
  if (!e.empty()) return e;
  o = {ValueType{DType::f32, in[0].shape}};
  return "";
}

std::string infer_qmatmul(const In& in, const Attrs&, Out& o) {
  REQUIRE(is_q8(in[1].dtype), "b must be i8|u8");
  REQUIRE(rank_of(in[0]) >= 2 && rank_of(in[1]) == 2, "qmatmul needs a [..., M, K] and b [K, N]");
  const Dim& K = in[0].shape.back();
  REQUIRE(K == in[1].shape[0], "contraction dims differ: a " + shape_str(in[0].shape) + " b " + shape_str(in[1].shape));
  if (in.size() > 2) REQUIRE(in[2].dtype == in[0].dtype && in[2].shape.empty(), "a_zero_point must be a rank-0 tensor of a's dtype");
  if (in.size() > 3)
    REQUIRE(in[3].dtype == in[1].dtype && (in[3].shape.empty() || (in[3].shape.size() == 1 && in[3].shape[0] == in[1].shape[1])),
            "b_zero_point must be rank 0 or [N], of b's dtype");
  Shape s = in[0].shape;
  s.back() = in[1].shape[1];
  o = {ValueType{DType::i32, s}};
  return "";
}

std::string infer_requantize(const In& in, const Attrs& a, Out& o) {
  int64_t axis = *get<int64_t>(OpKind::Requantize, a, "axis");
  int64_t ch = 1;
  if (axis != -1) {
    REQUIRE(axis >= 0 && axis < rank_of(in[0]), "axis " + std::to_string(axis) + " out of range");
    const Dim& d = in[0].shape[static_cast<size_t>(axis)];
    REQUIRE(d.is_static(), "per-channel axis must be static");
    ch = d.v;
  }
  std::string e = check_requant(OpKind::Requantize, a, ch, false);
  if (!e.empty()) return e;
  if (axis == -1) REQUIRE(get<std::vector<int64_t>>(OpKind::Requantize, a, "multiplier")->size() == 1, "per-tensor requantize needs one multiplier");
  o = {ValueType{*get<DType>(OpKind::Requantize, a, "dtype"), in[0].shape}};
  return "";
}

std::string infer_qlinear(const In& in, const Attrs& a, Out& o) {
  const OpKind k = OpKind::QLinear;
  REQUIRE(in[1].dtype == DType::i8, "w must be i8 [N, K]");
  REQUIRE(rank_of(in[0]) >= 1 && rank_of(in[1]) == 2, "qlinear needs x [..., K] and w [N, K]");
  REQUIRE(in[0].shape.back() == in[1].shape[1], "in-features differ: x " + shape_str(in[0].shape) + " w " + shape_str(in[1].shape));
  REQUIRE(in[1].shape[0].is_static(), "N must be static");
  int64_t N = in[1].shape[0].v;
  if (in.size() > 2) REQUIRE(in[2].dtype == DType::i32 && in[2].shape.size() == 1 && in[2].shape[0] == in[1].shape[0], "bias must be i32 [N]");
  int64_t xzp = *get<int64_t>(k, a, "x_zero_point");
  int32_t lo, hi;
  quant::int8_range(in[0].dtype == DType::u8, &lo, &hi);
  REQUIRE(xzp >= lo && xzp <= hi, "x_zero_point out of x's range");
  const auto& wzp = *get<std::vector<int64_t>>(k, a, "w_zero_point");
  REQUIRE(wzp.size() <= 1 || static_cast<int64_t>(wzp.size()) == N, "w_zero_point needs 0, 1 or N entries");
  for (int64_t z : wzp) REQUIRE(z >= -128 && z <= 127, "w_zero_point out of i8 range");
  std::string e = check_requant(k, a, N, true);
  if (!e.empty()) return e;
  DType dt = *get<DType>(k, a, "dtype");
  if (dt == DType::f32) {
    const auto& sc = *get<std::vector<double>>(k, a, "scale");
    REQUIRE(sc.size() == 1 || static_cast<int64_t>(sc.size()) == N, "f32 output needs scale with 1 or N entries");
  }
  Shape s = in[0].shape;
  s.back() = in[1].shape[0];
  o = {ValueType{dt, s}};
  return "";
}

std::string infer_qconv(const In& in, const Attrs& a, Out& o) {
  const OpKind k = OpKind::QConv;
  const auto &x = in[0], &w = in[1];
  REQUIRE(w.dtype == DType::i8, "w must be i8 [O, C/groups, kh, kw]");
  REQUIRE(rank_of(x) == 4 && rank_of(w) == 4, "qconv needs x [N, C, H, W] and w [O, C/groups, kh, kw]");
  REQUIRE(x.shape[1].is_static() && w.shape[0].is_static() && w.shape[1].is_static() && w.shape[2].is_static() &&
              w.shape[3].is_static(), "channel and kernel dims must be static");
  int64_t g = *get<int64_t>(k, a, "groups");
  int64_t O = w.shape[0].v;
  REQUIRE(g >= 1 && x.shape[1].v == w.shape[1].v * g && O % g == 0,
          "channels " + shape_str(x.shape) + " vs weight " + shape_str(w.shape) + " with groups " + std::to_string(g));
  auto st = *get<std::vector<int64_t>>(k, a, "strides"), pads = *get<std::vector<int64_t>>(k, a, "pads"),
       dil = *get<std::vector<int64_t>>(k, a, "dilations");
  if (st.empty()) st.assign(2, 1);
  if (dil.empty()) dil.assign(2, 1);
  if (pads.empty()) pads.assign(4, 0);
  REQUIRE(st.size() == 2 && dil.size() == 2 && pads.size() == 4, "strides/dilations need 2 entries, pads 4");
  Shape s{x.shape[0], w.shape[0]};
  for (size_t i = 0; i < 2; ++i) {
    const Dim& d = x.shape[2 + i];
    REQUIRE(d.is_static(), "spatial dims must be static");
    REQUIRE(st[i] >= 1 && dil[i] >= 1 && pads[i] >= 0 && pads[2 + i] >= 0, "bad stride/dilation/padding");
    int64_t span = d.v + pads[i] + pads[2 + i] - (dil[i] * (w.shape[2 + i].v - 1) + 1);
    REQUIRE(span >= 0, "kernel larger than the padded input");
    s.push_back(Dim(span / st[i] + 1));
  }
  if (in.size() > 2) REQUIRE(in[2].dtype == DType::i32 && rank_of(in[2]) == 1 && in[2].shape[0] == w.shape[0], "bias must be i32 [O]");
  int64_t xzp = *get<int64_t>(k, a, "x_zero_point");
  int32_t lo, hi;
  quant::int8_range(x.dtype == DType::u8, &lo, &hi);
  REQUIRE(xzp >= lo && xzp <= hi, "x_zero_point out of x's range");
  const auto& wzp = *get<std::vector<int64_t>>(k, a, "w_zero_point");
  REQUIRE(wzp.size() <= 1 || static_cast<int64_t>(wzp.size()) == O, "w_zero_point needs 0, 1 or O entries");
  for (int64_t z : wzp) REQUIRE(z >= -128 && z <= 127, "w_zero_point out of i8 range");
  std::string e = check_requant(k, a, O, true);
  if (!e.empty()) return e;
  DType dt = *get<DType>(k, a, "dtype");
  if (dt == DType::f32) {
    const auto& sc = *get<std::vector<double>>(k, a, "scale");
    REQUIRE(sc.size() == 1 || static_cast<int64_t>(sc.size()) == O, "f32 output needs scale with 1 or O entries");
  }
  o = {ValueType{dt, s}};
  return "";
}

}  // namespace rlx
