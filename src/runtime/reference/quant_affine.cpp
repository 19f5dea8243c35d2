// Affine int8 ops (quantize_affine, dequantize_affine, qmatmul, requantize, qlinear, qconv): plain loops over
// the shared element functions of src/quant/fixed_point.h; integer products accumulate in int64.
#include "quant/fixed_point.h"
#include "runtime/reference/common.h"

namespace rlx::ref {

namespace {

// Channel of flat index i along `axis` (0 when per tensor).
struct Channel {
  int64_t inner = 1, count = 1;
  bool per = false;
  Channel(const Dims& d, int64_t axis) {
    if (axis < 0) return;
    per = true;
    count = d[static_cast<size_t>(axis)];
    for (size_t j = static_cast<size_t>(axis) + 1; j < d.size(); ++j) inner *= d[j];
  }
  int64_t of(int64_t i) const { return per ? (i / inner) % count : 0; }
};

quant::Rounding rounding_of(const Node& n) {
  quant::Rounding r;
  RLX_CHECK(quant::parse_rounding(attr_str(n, "rounding"), &r), "[reference] ", op_name(n.op), ": bad rounding");
  return r;
}

int64_t pick(const std::vector<int64_t>& v, int64_t c, int64_t def = 0) {
  if (v.empty()) return def;
  return v.size() == 1 ? v[0] : v[static_cast<size_t>(c)];
}

}  // namespace

Outs eval_quantize_affine(const Node& n, const Ins& in, const Types& ot) {
  const Tensor& x = in[0];
  Channel ch(x.shape(), attr_int(n, "axis"));
  int32_t lo, hi;
  quant::int8_range(ot[0].dtype == DType::u8, &lo, &hi);
  Tensor out = alloc(ot[0]);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t c = ch.of(i);
    float s = static_cast<float>(ld(in[1], c));
    sti(out, i, quant::quantize(static_cast<float>(ld(x, i)), s, static_cast<int32_t>(ldi(in[2], c)), lo, hi));
  }
  return {out};
}

Outs eval_dequantize_affine(const Node& n, const Ins& in, const Types& ot) {
  const Tensor& q = in[0];
  Channel ch(q.shape(), attr_int(n, "axis"));
  Tensor out = alloc(ot[0]);
  for (int64_t i = 0; i < q.numel(); ++i) {
    int64_t c = ch.of(i);
    float s = static_cast<float>(ld(in[1], c));
    st(out, i, quant::dequantize(static_cast<int32_t>(ldi(q, i)), static_cast<int32_t>(ldi(in[2], c)), s));
  }
  return {out};
}

Outs eval_qmatmul(const Node&, const Ins& in, const Types& ot) {
  const Tensor &a = in[0], &b = in[1];
  int64_t K = b.shape()[0], N = b.shape()[1], M = a.numel() / K;
  int64_t azp = in.size() > 2 ? ldi(in[2], 0) : 0;
  bool bper = in.size() > 3 && in[3].rank() == 1;
  Tensor out = alloc(ot[0]);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = 0; j < N; ++j) {
      int64_t bzp = in.size() > 3 ? ldi(in[3], bper ? j : 0) : 0;
      int64_t acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += (ldi(a, m * K + k) - azp) * (ldi(b, k * N + j) - bzp);
      sti(out, m * N + j, acc);
    }
  return {out};
}

Outs eval_requantize(const Node& n, const Ins& in, const Types& ot) {
  const Tensor& x = in[0];
  Channel ch(x.shape(), attr_int(n, "axis"));
  const auto& mul = attr_ints(n, "multiplier");
  const auto& sh = attr_ints(n, "shift");
  int32_t zp = static_cast<int32_t>(attr_int(n, "zero_point"));
  quant::Rounding r = rounding_of(n);
  int32_t lo, hi;
  quant::int8_range(ot[0].dtype == DType::u8, &lo, &hi);
  Tensor out = alloc(ot[0]);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t c = ch.of(i);
    sti(out, i, quant::requantize(static_cast<int32_t>(ldi(x, i)), static_cast<int32_t>(pick(mul, c)),
                                  static_cast<int32_t>(pick(sh, c)), zp, lo, hi, r));
  }
  return {out};
}

// The output step qlinear and qconv share: the i32 accumulator of output channel `ch` (wrapped as
// hardware does) times the f32 scale (+ ReLU), or requantized to i8/u8 with the fixed-point rule,
// ReLU at the zero point and qconv's max_q cap.
struct IntEpilogue {
  std::vector<int64_t> mul, sh;
  std::vector<double> sc;
  int32_t zp = 0, lo = 0, hi = 0;
  bool relu = false, f32 = false;
  quant::Rounding r;
  IntEpilogue(const Node& n, DType dt)
      : mul(attr_ints(n, "multiplier")), sh(attr_ints(n, "shift")), sc(attr_floats(n, "scale")),
        zp(static_cast<int32_t>(attr_int(n, "zero_point"))), relu(attr_int(n, "relu") != 0), f32(dt == DType::f32),
        r(rounding_of(n)) {
    quant::int8_range(dt == DType::u8, &lo, &hi);
    if (n.attrs.count("max_q")) hi = static_cast<int32_t>(std::min<int64_t>(hi, attr_int(n, "max_q")));
  }
  void put(Tensor& out, int64_t i, int64_t acc, int64_t ch) const {
    int32_t a32 = static_cast<int32_t>(acc);
    if (f32) {
      float y = static_cast<float>(a32) * static_cast<float>(sc.size() == 1 ? sc[0] : sc[static_cast<size_t>(ch)]);
      st(out, i, relu && y < 0 ? 0.0 : y);
    } else {
      sti(out, i, quant::requantize(a32, static_cast<int32_t>(pick(mul, ch)), static_cast<int32_t>(pick(sh, ch)), zp,
                                    relu ? std::max(zp, lo) : lo, hi, r));
    }
  }
};

Outs eval_qlinear(const Node& n, const Ins& in, const Types& ot) {
  const Tensor &x = in[0], &w = in[1];
  int64_t N = w.shape()[0], K = w.shape()[1], M = x.numel() / K;
  int64_t xzp = attr_int(n, "x_zero_point");
  const auto& wzp = attr_ints(n, "w_zero_point");
  const IntEpilogue epi(n, ot[0].dtype);
  Tensor out = alloc(ot[0]);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = 0; j < N; ++j) {
      int64_t z = pick(wzp, j);
      int64_t acc = in.size() > 2 ? ldi(in[2], j) : 0;
      for (int64_t k = 0; k < K; ++k) acc += (ldi(x, m * K + k) - xzp) * (ldi(w, j * K + k) - z);
      epi.put(out, m * N + j, acc, j);
    }
  return {out};
}

Outs eval_qconv(const Node& n, const Ins& in, const Types& ot) {
  const Tensor &x = in[0], &w = in[1];
  Tensor out = alloc(ot[0]);
  const Dims &xd = x.shape(), &wd = w.shape(), &od = out.shape();
  int64_t N = xd[0], C = xd[1], H = xd[2], W = xd[3], O = wd[0], Cg = wd[1], KH = wd[2], KW = wd[3];
  int64_t OH = od[2], OW = od[3], G = attr_int(n, "groups"), Og = O / G;
  auto sd = attr_ints(n, "strides"), dil = attr_ints(n, "dilations"), pads = attr_ints(n, "pads");
  if (sd.empty()) sd = {1, 1};
  if (dil.empty()) dil = {1, 1};
  if (pads.empty()) pads = {0, 0, 0, 0};
  int64_t xzp = attr_int(n, "x_zero_point");
  const auto& wzp = attr_ints(n, "w_zero_point");
  const IntEpilogue epi(n, ot[0].dtype);
  for (int64_t b = 0; b < N; ++b)
    for (int64_t o = 0; o < O; ++o) {
      int64_t z = pick(wzp, o), c0 = (o / Og) * Cg;
      for (int64_t oy = 0; oy < OH; ++oy)
        for (int64_t ox = 0; ox < OW; ++ox) {
          int64_t acc = in.size() > 2 ? ldi(in[2], o) : 0;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t ky = 0; ky < KH; ++ky)
              for (int64_t kx = 0; kx < KW; ++kx) {
                int64_t iy = oy * sd[0] - pads[0] + ky * dil[0], ix = ox * sd[1] - pads[1] + kx * dil[1];
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;  // padding: x_zero_point, centered 0
                int64_t xv = ldi(x, ((b * C + c0 + c) * H + iy) * W + ix) - xzp;
                acc += xv * (ldi(w, ((o * Cg + c) * KH + ky) * KW + kx) - z);
              }
          epi.put(out, ((b * O + o) * OH + oy) * OW + ox, acc, o);
        }
    }
  return {out};
}

}  // namespace rlx::ref
