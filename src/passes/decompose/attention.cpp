// Decompositions of attention (masked, grouped-query) and rotary position embedding.
#include <cmath>
#include <limits>

#include "passes/decompose/common.h"

namespace rlx {

using namespace decomp;

namespace {

// Bool [S,T]: key t is visible to query s iff t <= s + (T - S) (queries are the last S positions).
ValueId causal_allowed(Builder& b, int64_t S, int64_t T) {
  Shape st = to_shape({S, T});
  ValueId s = b.op1(OpKind::Iota, {}, {{"shape", st}, {"dim", int64_t{0}}, {"dtype", DType::i64}});
  ValueId t = b.op1(OpKind::Iota, {}, {{"shape", st}, {"dim", int64_t{1}}, {"dtype", DType::i64}});
  return b.op1(OpKind::Le, {t, b.add(s, b.scalar(static_cast<double>(T - S), DType::i64))});
}

// Bool [B,1,1,T] from a [B,T] padding mask of any dtype: nonzero = keep.
ValueId padding_allowed(Builder& b, ValueId mask) {
  Ints d = dims_of(b, mask);
  ValueId keep = b.op1(OpKind::Ne, {mask, b.scalar(0.0, b.dtype(mask))});
  return b.reshape(keep, to_shape({d[0], 1, 1, d[1]}));
}

}  // namespace

// softmax(scale·q·kᵀ [+ bias], restricted to allowed keys)·v. Query head h reads kv head h / G with
// G = Hq / Hkv; grouping q as [B, Hkv, G·S, D] shares each kv head without materializing copies.
std::vector<int32_t> decompose_attention(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  DType dt = b.dtype(in[0]);
  ValueId q = to_compute(b, in[0]), k = to_compute(b, in[1]), v = to_compute(b, in[2]);
  DType ct = b.dtype(q);
  Ints dq = dims_of(b, q), dk = dims_of(b, k), dv = dims_of(b, v);
  int64_t B = dq[0], Hq = dq[1], S = dq[2], D = dq[3], Hkv = dk[1], T = dk[2], Dv = dv[3];
  int64_t G = Hq / Hkv;
  const std::string& kind = attr_str(n, "mask");
  double scale = attr_float(n, "scale");
  if (scale == 0) scale = 1.0 / std::sqrt(static_cast<double>(D));

  ValueId qg = G == 1 ? q : b.reshape(q, to_shape({B, Hkv, G * S, D}));
  ValueId scores = b.dot_general(qg, k, {0, 1}, {0, 1}, {3}, {3});  // [B, Hkv, G·S, T]
  if (G != 1) scores = b.reshape(scores, to_shape({B, Hq, S, T}));
  scores = b.mul(scores, b.scalar(scale, ct));
  if (kind == "bias") scores = b.add(scores, to_compute(b, in[3]));

  ValueId allowed = -1;
  if (kind == "causal" || kind == "causal_padding") allowed = causal_allowed(b, S, T);
  if (kind == "padding" || kind == "causal_padding") {
    ValueId pad = padding_allowed(b, in[3]);
    allowed = allowed < 0 ? pad : b.op1(OpKind::And, {allowed, pad});
  }

  ValueId probs;
  if (allowed < 0) {
    ValueId m = b.reduce(OpKind::ReduceMax, scores, {3}, true);
    ValueId e = b.unary(OpKind::Exp, b.sub(scores, m));
    probs = b.div(e, b.reduce(OpKind::ReduceSum, e, {3}, true));
  } else {
    // Masked keys score -inf, so exp gives exactly 0. A row with no allowed key has max -inf: the
    // max is clamped to the lowest finite value (exp stays 0, no inf - inf) and the sum to a tiny
    // positive value, so that row comes out as exact zeros instead of NaN.
    double lowest = ct == DType::f64 ? std::numeric_limits<double>::lowest()
                                     : static_cast<double>(std::numeric_limits<float>::lowest());
    double tiny = ct == DType::f64 ? std::numeric_limits<double>::min()
                                   : static_cast<double>(std::numeric_limits<float>::min());
    ValueId ninf = b.scalar(-std::numeric_limits<double>::infinity(), ct);
    ValueId masked = b.select(allowed, scores, ninf);
    ValueId m = b.max(b.reduce(OpKind::ReduceMax, masked, {3}, true), b.scalar(lowest, ct));
    ValueId e = b.unary(OpKind::Exp, b.sub(masked, m));
    ValueId sum = b.max(b.reduce(OpKind::ReduceSum, e, {3}, true), b.scalar(tiny, ct));
    probs = b.div(e, sum);
  }

  ValueId pg = G == 1 ? probs : b.reshape(probs, to_shape({B, Hkv, G * S, T}));
  ValueId out = b.dot_general(pg, v, {0, 1}, {0, 1}, {3}, {2});  // [B, Hkv, G·S, Dv]
  if (G != 1) out = b.reshape(out, to_shape({B, Hq, S, Dv}));
  return {restore(b, out, dt)};
}

// Rotary embedding. Angles (pos · theta^(-2i/D)) and their cos/sin are computed in at least f32 —
// half-precision angles lose whole radians at large positions — then the rotation runs in x's dtype.
std::vector<int32_t> decompose_rope(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  ValueId x = in[0], pos = in[1];
  DType dt = b.dtype(x), ct = compute_dtype(dt);
  Ints d = dims_of(b, x);
  int64_t B = d[0], H = d[1], S = d[2], D = d[3], half = D / 2;
  double theta = attr_float(n, "theta");
  bool interleaved = attr_int(n, "interleaved") != 0;

  ValueId i = b.op1(OpKind::Iota, {}, {{"shape", to_shape({half})}, {"dim", int64_t{0}}, {"dtype", ct}});
  ValueId inv_freq =
      b.unary(OpKind::Exp, b.mul(i, b.scalar(-2.0 * std::log(theta) / static_cast<double>(D), ct)));
  ValueId p = b.reshape(b.convert(pos, ct), to_shape({S, 1}));
  ValueId angle = b.mul(p, inv_freq);  // [S, half]
  ValueId cos = restore(b, b.unary(OpKind::Cos, angle), dt);
  ValueId sin = restore(b, b.unary(OpKind::Sin, angle), dt);

  ValueId x1, x2;
  if (!interleaved) {
    x1 = slice(b, x, {0, 0, 0, 0}, {B, H, S, half});
    x2 = slice(b, x, {0, 0, 0, half}, {B, H, S, D});
  } else {
    // Pairs (x[2i], x[2i+1]) become the last dim of a [B,H,S,half,2] view; cos/sin get a unit dim.
    ValueId xp = b.reshape(x, to_shape({B, H, S, half, 2}));
    x1 = slice(b, xp, {0, 0, 0, 0, 0}, {B, H, S, half, 1});
    x2 = slice(b, xp, {0, 0, 0, 0, 1}, {B, H, S, half, 2});
    cos = b.reshape(cos, to_shape({S, half, 1}));
    sin = b.reshape(sin, to_shape({S, half, 1}));
  }
  ValueId o1 = b.sub(b.mul(x1, cos), b.mul(x2, sin));
  ValueId o2 = b.add(b.mul(x2, cos), b.mul(x1, sin));
  int64_t axis = interleaved ? 4 : 3;
  ValueId y = b.op1(OpKind::Concatenate, {o1, o2}, {{"axis", axis}});
  if (interleaved) y = b.reshape(y, to_shape({B, H, S, D}));
  return {y};
}

}  // namespace rlx
