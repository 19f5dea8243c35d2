// Neural-network HIR ops: pooling, layer/rms norm, softmax/log_softmax, gelu/silu/relu, rope.
#include <cmath>
#include <limits>

#include "runtime/reference/common.h"

namespace rlx::ref {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void need_float(const Node& n, const Tensor& x) {
  RLX_CHECK(dom_of(x.dtype()) == Dom::F, "[reference] ", op_name(n.op), ": dtype ", dtype_name(x.dtype()),
            " not supported");
}

}  // namespace

Outs eval_pool(const Node& n, const Ins& in, const Types& ot) {
  const Tensor& x = in[0];
  Tensor out = alloc(ot[0]);
  int64_t r = x.rank(), sp = r - 2;
  RLX_CHECK(r >= 3, "[reference] ", op_name(n.op), " needs [N,C,spatial...]");
  Dims win(r, 1), stride(r, 1), lo(r, 0);
  if (n.op == OpKind::GlobalAvgPool) {
    for (int64_t i = 2; i < r; ++i) win[i] = x.shape()[i];
  } else {
    Dims k = attr_ints(n, "kernel"), s = attr_ints(n, "strides"), p = attr_ints(n, "pads");
    if (s.empty()) s.assign(sp, 1);
    if (p.empty()) p.assign(2 * sp, 0);
    RLX_CHECK(static_cast<int64_t>(k.size()) == sp && static_cast<int64_t>(s.size()) == sp &&
                  static_cast<int64_t>(p.size()) == 2 * sp,
              "[reference] ", op_name(n.op), ": kernel/strides/pads must match the spatial rank");
    for (int64_t i = 0; i < sp; ++i) win[2 + i] = k[i], stride[2 + i] = s[i], lo[2 + i] = p[i];
  }
  Dom d = dom_of(x.dtype());
  bool is_max = n.op == OpKind::MaxPool;
  RLX_CHECK(d == Dom::F || (is_max && d == Dom::I), "[reference] ", op_name(n.op), ": dtype ",
            dtype_name(x.dtype()), " not supported");
  bool include_pad = n.op == OpKind::AvgPool && attr_int(n, "count_include_pad") != 0;
  for_each_window(x.shape(), out.shape(), win, stride, lo, Dims(r, 1), [&](int64_t o, const std::vector<int64_t>& taps) {
    int64_t real = 0;
    if (is_max && d == Dom::I) {
      int64_t m = int_min(x.dtype());  // a window of only padding gives the dtype's min (-inf)
      for (int64_t t : taps)
        if (t >= 0 && lt_i(m, ldi(x, t), is_u64(x.dtype()))) m = ldi(x, t);
      sti(out, o, m);
      return;
    }
    double acc = is_max ? -kInf : 0.0;
    for (int64_t t : taps) {
      if (t < 0) continue;
      double v = ld(x, t);
      ++real;
      if (!is_max) acc += v;
      else acc = (std::isnan(acc) || std::isnan(v)) ? kNaN : std::max(acc, v);
    }
    if (!is_max) acc /= static_cast<double>(include_pad ? static_cast<int64_t>(taps.size()) : real);
    st(out, o, acc);
  });
  return {out};
}

Outs eval_norm(const Node& n, const Ins& in, const Types& ot) {
  const Tensor &x = in[0], &gamma = in[1];
  const Tensor* beta = in.size() > 2 ? &in[2] : nullptr;
  need_float(n, x);
  Tensor out = alloc(ot[0]);
  bool layer = n.op == OpKind::LayerNorm;
  int64_t ax = layer ? axis_of(attr_int(n, "axis"), x.rank(), "layer_norm") : x.rank() - 1;
  double eps = attr_float(n, "eps");
  int64_t inner = 1;
  for (int64_t i = ax; i < x.rank(); ++i) inner *= x.shape()[i];
  RLX_CHECK(gamma.numel() == inner && (!beta || beta->numel() == inner), "[reference] ", op_name(n.op),
            ": scale/shift size differs from the normalized size ", inner);
  if (inner == 0) return {out};
  int64_t rows = x.numel() / inner;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t base = r * inner;
    double denom;
    double mean = 0;
    if (layer) {
      for (int64_t i = 0; i < inner; ++i) mean += ld(x, base + i);
      mean /= static_cast<double>(inner);
      double var = 0;
      for (int64_t i = 0; i < inner; ++i) var += (ld(x, base + i) - mean) * (ld(x, base + i) - mean);
      denom = std::sqrt(var / static_cast<double>(inner) + eps);
    } else {
      double ms = 0;
      for (int64_t i = 0; i < inner; ++i) ms += ld(x, base + i) * ld(x, base + i);
      denom = std::sqrt(ms / static_cast<double>(inner) + eps);
    }
    for (int64_t i = 0; i < inner; ++i) {
      double y = (ld(x, base + i) - mean) / denom * ld(gamma, i);
      if (beta) y += ld(*beta, i);
      st(out, base + i, y);
    }
  }
  return {out};
}

Outs eval_softmax(const Node& n, const Ins& in, const Types& ot) {
  const Tensor& x = in[0];
  need_float(n, x);
  Tensor out = alloc(ot[0]);
  if (x.numel() == 0) return {out};
  bool log = n.op == OpKind::LogSoftmax;
  Dims xd = x.shape();
  int64_t ax = axis_of(attr_int(n, "axis"), x.rank(), op_name(n.op).data());
  int64_t len = xd[ax], inner = strides_of(xd)[ax], outer = x.numel() / (len * inner);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < inner; ++k) {
      auto at = [&](int64_t j) { return (o * len + j) * inner + k; };
      double m = -kInf;
      for (int64_t j = 0; j < len; ++j) {
        double v = ld(x, at(j));
        m = (std::isnan(m) || std::isnan(v)) ? kNaN : std::max(m, v);
      }
      double sum = 0;
      for (int64_t j = 0; j < len; ++j) sum += std::exp(ld(x, at(j)) - m);
      for (int64_t j = 0; j < len; ++j) {
        double z = ld(x, at(j)) - m;
        st(out, at(j), log ? z - std::log(sum) : std::exp(z) / sum);
      }
    }
  }
  return {out};
}

Outs eval_activation(const Node& n, const Ins& in, const Types& ot) {
  const Tensor& x = in[0];
  Tensor out = alloc(ot[0]);
  if (n.op == OpKind::Relu && dom_of(x.dtype()) == Dom::I) {
    for (int64_t i = 0; i < x.numel(); ++i) sti(out, i, is_u64(x.dtype()) ? ldi(x, i) : std::max<int64_t>(ldi(x, i), 0));
    return {out};
  }
  need_float(n, x);
  std::string approx = n.op == OpKind::Gelu ? attr_str(n, "approximate") : "";
  RLX_CHECK(n.op != OpKind::Gelu || approx == "none" || approx == "tanh",
            "[reference] gelu: approximate must be none|tanh, got '", approx, "'");
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = ld(x, i), y;
    if (n.op == OpKind::Relu) y = std::isnan(v) ? v : (v > 0 ? v : 0.0);
    else if (n.op == OpKind::Silu) y = v / (1.0 + std::exp(-v));
    else if (approx == "none") y = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    else y = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    st(out, i, y);
  }
  return {out};
}

Outs eval_rope(const Node& n, const Ins& in, const Types& ot) {
  const Tensor &x = in[0], &pos = in[1];
  need_float(n, x);
  RLX_CHECK(x.rank() == 4 && dom_of(pos.dtype()) == Dom::I && pos.rank() == 1 && pos.shape()[0] == x.shape()[2],
            "[reference] rope needs x [B,H,S,D] and integer positions [S]");
  Tensor out = alloc(ot[0]);
  int64_t S = x.shape()[2], D = x.shape()[3], half = D / 2;
  RLX_CHECK(D % 2 == 0, "[reference] rope head dim must be even");
  double theta = attr_float(n, "theta");
  bool inter = attr_int(n, "interleaved") != 0;
  int64_t rows = S == 0 || D == 0 ? 0 : x.numel() / (S * D);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t s = 0; s < S; ++s) {
      int64_t base = (r * S + s) * D;
      double p = static_cast<double>(ldi(pos, s));
      for (int64_t i = 0; i < half; ++i) {
        double ang = p * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(D));
        double c = std::cos(ang), sn = std::sin(ang);
        int64_t i0 = inter ? 2 * i : i, i1 = inter ? 2 * i + 1 : i + half;
        double a = ld(x, base + i0), b = ld(x, base + i1);
        st(out, base + i0, a * c - b * sn);
        st(out, base + i1, b * c + a * sn);
      }
    }
  }
  return {out};
}

}  // namespace rlx::ref
