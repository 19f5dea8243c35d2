// ONNX Attention (opset 23+) and the loss ops, composed from MIR/HIR ops at import.
#include <cmath>
#include <limits>

#include "formats/onnx/importer.h"

namespace rlx::onnx {

namespace {

V sc(Ctx& c, double v, V like) { return c.scalar(v, c.dtype(like)); }
V iota(Ctx& c, std::vector<int64_t> shape, int64_t dim) {
  return c.op1(OpKind::Iota, {}, {{"shape", to_shape(shape)}, {"dim", dim}, {"dtype", DType::i64}});
}
V bool_to_bias(Ctx& c, V m, DType dt) {
  return c.select(m, c.scalar(0, dt), c.scalar(-std::numeric_limits<double>::infinity(), dt));
}

// 3D [B, S, H*D] -> 4D [B, H, S, D].
V split_heads(Ctx& c, V x, int64_t heads) {
  auto d = c.static_shape(x, "input");
  return c.transpose(c.reshape(x, {d[0], d[1], heads, d[2] / heads}), {0, 2, 1, 3});
}

void attention(Ctx& c) {
  V q = c.in(0), k = c.in(1), v = c.in(2);
  DType dt = c.dtype(q);
  bool three_d = c.rank(q) == 3;
  if (three_d) {
    int64_t qh = c.attr_i("q_num_heads", 0), kvh = c.attr_i("kv_num_heads", 0);
    if (qh <= 0 || kvh <= 0) c.error("3D inputs need q_num_heads and kv_num_heads");
    q = split_heads(c, q, qh);
    k = split_heads(c, k, kvh);
    v = split_heads(c, v, kvh);
  }
  std::optional<V> nonpad = c.opt_in(6);  // per-batch valid kv length (external cache)
  if (nonpad && c.has_input(4)) c.error("nonpad_kv_seqlen cannot be combined with past_key/past_value");
  int64_t past = 0;
  if (c.has_input(4) != c.has_input(5)) c.error("past_key and past_value must be given together");
  if (c.has_input(4)) {
    past = c.static_shape(c.in(4), "past_key")[2];
    k = c.op1(OpKind::Concatenate, {c.in(4), k}, {{"axis", int64_t{2}}});
    v = c.op1(OpKind::Concatenate, {c.in(5), v}, {{"axis", int64_t{2}}});
  }
  c.set_output(1, k);
  c.set_output(2, v);
  auto qd = c.static_shape(q, "Q"), kd = c.static_shape(k, "K"), vd = c.static_shape(v, "V");
  int64_t S = qd[2], T = kd[2], qh = qd[1], kvh = kd[1];
  double scale = c.has_attr("scale") ? c.attr_f("scale", 0) : 1.0 / std::sqrt(static_cast<double>(qd[3]));
  double ninf = -std::numeric_limits<double>::infinity();
  // Query i sits at kv position i + offset: past length, or nonpad_kv_seqlen[b] - S per batch.
  V offset = c.scalar(static_cast<double>(past), DType::i64);
  if (nonpad) {
    int64_t B = qd[0];
    offset = c.bin(OpKind::Sub, c.reshape(c.convert(*nonpad, DType::i64), {B, 1, 1, 1}), c.scalar(static_cast<double>(S), DType::i64));
  }

  // Additive bias [.., S, T].
  V bias = c.broadcast_to(c.scalar(0, dt), to_shape({S, T}));
  std::optional<V> mask = c.opt_in(3);
  if (mask) {
    auto md = c.static_shape(*mask, "attn_mask");
    int64_t padw = T - md.back();
    if (padw > 0) {
      std::vector<int64_t> lo(md.size(), 0), hi(md.size(), 0);
      hi.back() = padw;
      bool is_bool = c.dtype(*mask) == DType::boolean;
      mask = c.op1(OpKind::Pad, {*mask}, {{"low", lo}, {"high", hi}, {"value", is_bool ? 0.0 : ninf}});
    }
  }
  if (c.attr_i("is_causal", 0)) {
    V base = bias;
    if (mask) base = c.dtype(*mask) == DType::boolean ? bool_to_bias(c, *mask, dt) : *mask;
    V allowed = c.bin(OpKind::Le, iota(c, {S, T}, 1), c.bin(OpKind::Add, iota(c, {S, T}, 0), offset));
    bias = c.bin(OpKind::Add, base, bool_to_bias(c, allowed, dt));
  } else if (mask) {
    bias = c.bin(OpKind::Add, bias, c.dtype(*mask) == DType::boolean ? bool_to_bias(c, *mask, dt) : *mask);
  }
  int64_t lw = c.attr_i("left_window_size", -1), rw = c.attr_i("right_window_size", -1);
  if (lw >= 0 || rw >= 0) {
    V diff = c.bin(OpKind::Sub, c.bin(OpKind::Add, iota(c, {S, T}, 0), offset), iota(c, {S, T}, 1));
    V ok = c.bin(OpKind::Eq, diff, diff);
    if (lw >= 0) ok = c.bin(OpKind::And, ok, c.bin(OpKind::Le, diff, c.scalar(static_cast<double>(lw), DType::i64)));
    if (rw >= 0) ok = c.bin(OpKind::And, ok, c.bin(OpKind::Le, c.unary(OpKind::Neg, diff), c.scalar(static_cast<double>(rw), DType::i64)));
    bias = c.bin(OpKind::Add, bias, bool_to_bias(c, ok, dt));
  }
  if (nonpad) {
    V valid = c.bin(OpKind::Lt, iota(c, {1, 1, 1, T}, 3), c.reshape(c.convert(*nonpad, DType::i64), {qd[0], 1, 1, 1}));
    bias = c.bin(OpKind::Add, bias, bool_to_bias(c, valid, dt));
  }
  // Grouped-query attention: each kv head serves qh/kvh consecutive query heads.
  auto repeat = [&](V x, const std::vector<int64_t>& d) {
    if (qh == kvh) return x;
    if (qh % kvh) c.error("q heads must be a multiple of kv heads");
    V u = c.op1(OpKind::BroadcastInDim, {x}, {{"shape", to_shape({d[0], kvh, qh / kvh, d[2], d[3]})}, {"dims", std::vector<int64_t>{0, 1, 3, 4}}});
    return c.reshape(u, {d[0], qh, d[2], d[3]});
  };
  V kr = repeat(k, kd), vr = repeat(v, vd);
  V s = sc(c, std::sqrt(scale), q);
  V qk = c.op1(OpKind::MatMul, {c.bin(OpKind::Mul, q, s), c.transpose(c.bin(OpKind::Mul, kr, s), {0, 1, 3, 2})});
  double cap = c.attr_f("softcap", 0);
  if (cap > 0) qk = c.bin(OpKind::Mul, c.unary(OpKind::Tanh, c.bin(OpKind::Div, qk, sc(c, cap, qk))), sc(c, cap, qk));
  V qkb = c.bin(OpKind::Add, qk, bias);
  int64_t mode = c.attr_i("qk_matmul_output_mode", 0);
  V qk_out = mode == 2 ? qkb : qk;
  V x = qkb;
  if (c.has_attr("softmax_precision")) {
    DType sp;
    if (!onnx_dtype(static_cast<int>(c.attr_i("softmax_precision", 1)), &sp)) c.error("unsupported softmax_precision");
    x = c.convert(x, sp);
  }
  // Softmax that maps fully masked rows to 0 rather than NaN.
  V m = c.reduce(OpKind::ReduceMax, x, {3}, true);
  V m_inf = c.bin(OpKind::Eq, m, sc(c, ninf, m));
  m = c.select(m_inf, sc(c, 0, m), m);
  V e = c.unary(OpKind::Exp, c.bin(OpKind::Sub, x, m));
  V sum = c.reduce(OpKind::ReduceSum, e, {3}, true);
  sum = c.select(c.bin(OpKind::Eq, sum, sc(c, 0, sum)), sc(c, 1, sum), sum);
  V p = c.bin(OpKind::Div, e, sum);
  V bmax = c.reduce(OpKind::ReduceMax, bias, {c.rank(bias) - 1}, true);
  p = c.select(c.bin(OpKind::Eq, bmax, sc(c, ninf, bmax)), sc(c, 0, p), p);
  if (mode == 3) qk_out = p;
  p = c.convert(p, dt);
  V y = c.op1(OpKind::MatMul, {p, vr});
  if (three_d) {
    auto yd = c.static_shape(y, "Y");
    y = c.reshape(c.transpose(y, {0, 2, 1, 3}), {yd[0], yd[2], yd[1] * yd[3]});
  }
  c.set_output(0, y);
  if (c.wants_output(3)) c.set_output(3, c.convert(qk_out, dt));
}

// Negative log-likelihood of `logp` [N, C, ...] at `target` [N, ...]: (loss, weights) per element.
V nll(Ctx& c, V logp, V target, std::optional<V> weight) {
  auto d = c.static_shape(logp, "input");
  int64_t rk = static_cast<int64_t>(d.size());
  DType dt = c.dtype(logp);
  V t = c.convert(target, DType::i64);
  bool has_ii = c.has_attr("ignore_index");
  int64_t ii = c.attr_i("ignore_index", 0);
  V valid = has_ii ? c.bin(OpKind::Ne, t, c.scalar(static_cast<double>(ii), DType::i64)) : V(-1);
  if (has_ii) t = c.select(valid, t, c.scalar(0, DType::i64));
  V tu = c.op1(OpKind::Unsqueeze, {t}, {{"axes", std::vector<int64_t>{1}}});
  V hit = c.bin(OpKind::Eq, iota(c, d, 1), tu);
  V picked = c.reduce(OpKind::ReduceSum, c.select(hit, logp, sc(c, 0, logp)), {1}, false);
  V w;
  if (weight) w = c.op1(OpKind::Gather, {*weight, t}, {{"axis", int64_t{0}}});
  else w = c.broadcast_to(c.scalar(1, dt), c.shape(picked));
  if (has_ii) w = c.select(valid, w, c.scalar(0, dt));
  V loss = c.bin(OpKind::Mul, c.unary(OpKind::Neg, picked), w);
  std::string red = c.attr_s("reduction", "mean");
  std::vector<int64_t> all;
  for (int64_t i = 0; i < rk - 1; ++i) all.push_back(i);
  if (red == "none") return loss;
  V s = c.reduce(OpKind::ReduceSum, loss, all, false);
  if (red == "sum") return s;
  if (red != "mean") c.error("unsupported reduction '" + red + "'");
  return c.bin(OpKind::Div, s, c.reduce(OpKind::ReduceSum, w, all, false));
}

}  // namespace

void register_attention_ops(std::map<std::string, Converter>& r) {
  r["Attention"] = attention;
  r["NegativeLogLikelihoodLoss"] = [](Ctx& c) { c.set_output(0, nll(c, c.in(0), c.in(1), c.opt_in(2))); };
  r["SoftmaxCrossEntropyLoss"] = [](Ctx& c) {
    V x = c.in(0);
    V lp = c.op1(OpKind::LogSoftmax, {x}, {{"axis", int64_t{1}}});
    c.set_output(0, nll(c, lp, c.in(1), c.opt_in(2)));
    c.set_output(1, lp);
  };
}

}  // namespace rlx::onnx
