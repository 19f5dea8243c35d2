// One VJP rule per differentiable MIR primitive, keyed by OpKind. Rules emit MIR only, so the
// backward graph is itself differentiable (jvp is built as the transpose of vjp).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "autodiff/autodiff.h"

namespace rlx::ad {

namespace {

using Ints = std::vector<int64_t>;
using Vs = std::vector<ValueId>;

Ints dims(Builder& b, ValueId v) {
  RLX_CHECK(is_static(b.shape(v)), "[autodiff] needs static shapes, got ", shape_str(b.shape(v)));
  return static_dims(b.shape(v));
}
Ints iota_ints(int64_t from, int64_t to) {
  Ints r;
  for (int64_t i = from; i < to; ++i) r.push_back(i);
  return r;
}
ValueId sc(Builder& b, double v, ValueId like) { return b.scalar(v, b.dtype(like)); }
ValueId zeros_like(Builder& b, ValueId v) {
  return b.broadcast_in_dim(sc(b, 0, v), b.shape(v), {});
}
Ints norm(Ints a, int64_t r) {
  for (auto& x : a) x = x < 0 ? x + r : x;
  return a;
}
bool identity(const Ints& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}
ValueId transpose_if(Builder& b, ValueId v, const Ints& perm) { return identity(perm) ? v : b.transpose(v, perm); }

}  // namespace

// Sums a broadcast cotangent `c` back to the shape of `target` (numpy trailing alignment).
ValueId unbroadcast(Builder& b, ValueId c, ValueId target) {
  Ints cd = dims(b, c), td = dims(b, target);
  if (cd == td) return c;
  int64_t off = static_cast<int64_t>(cd.size() - td.size());
  Ints axes;
  for (int64_t i = 0; i < static_cast<int64_t>(cd.size()); ++i)
    if (i < off || (td[i - off] == 1 && cd[i] != 1)) axes.push_back(i);
  ValueId r = axes.empty() ? c : b.reduce(OpKind::ReduceSum, c, axes, false);
  return dims(b, r) == td ? r : b.reshape(r, to_shape(td));
}

namespace {

Vs one(ValueId v) { return {v}; }

// ---- unary -------------------------------------------------------------------------------------
Vs vjp_neg(Builder& b, const Node&, const Vs&, const Vs&, const Vs& g) { return one(b.unary(OpKind::Neg, g[0])); }
Vs vjp_abs(Builder& b, const Node&, const Vs& x, const Vs&, const Vs& g) {
  return one(b.mul(g[0], b.unary(OpKind::Sign, x[0])));
}
Vs vjp_exp(Builder& b, const Node&, const Vs&, const Vs& y, const Vs& g) { return one(b.mul(g[0], y[0])); }
Vs vjp_log(Builder& b, const Node&, const Vs& x, const Vs&, const Vs& g) { return one(b.div(g[0], x[0])); }
Vs vjp_sqrt(Builder& b, const Node&, const Vs&, const Vs& y, const Vs& g) {
  return one(b.div(b.mul(g[0], sc(b, 0.5, y[0])), y[0]));
}
Vs vjp_rsqrt(Builder& b, const Node&, const Vs& x, const Vs& y, const Vs& g) {  // d x^-1/2 = -y/(2x)
  return one(b.mul(g[0], b.div(b.mul(y[0], sc(b, -0.5, y[0])), x[0])));
}
Vs vjp_tanh(Builder& b, const Node&, const Vs&, const Vs& y, const Vs& g) {
  return one(b.mul(g[0], b.sub(sc(b, 1, y[0]), b.mul(y[0], y[0]))));
}
Vs vjp_erf(Builder& b, const Node&, const Vs& x, const Vs&, const Vs& g) {
  ValueId e = b.unary(OpKind::Exp, b.unary(OpKind::Neg, b.mul(x[0], x[0])));
  return one(b.mul(g[0], b.mul(e, sc(b, 2.0 / std::sqrt(M_PI), x[0]))));
}
Vs vjp_sin(Builder& b, const Node&, const Vs& x, const Vs&, const Vs& g) {
  return one(b.mul(g[0], b.unary(OpKind::Cos, x[0])));
}
Vs vjp_cos(Builder& b, const Node&, const Vs& x, const Vs&, const Vs& g) {
  return one(b.unary(OpKind::Neg, b.mul(g[0], b.unary(OpKind::Sin, x[0]))));
}
Vs vjp_logistic(Builder& b, const Node&, const Vs&, const Vs& y, const Vs& g) {
  return one(b.mul(g[0], b.mul(y[0], b.sub(sc(b, 1, y[0]), y[0]))));
}
Vs vjp_zero(Builder&, const Node& n, const Vs&, const Vs&, const Vs&) { return Vs(n.inputs.size(), -1); }
Vs vjp_convert(Builder& b, const Node&, const Vs& x, const Vs&, const Vs& g) {
  if (!is_float(b.dtype(x[0]))) return {-1};
  return one(b.convert(g[0], b.dtype(x[0])));
}

// ---- binary ------------------------------------------------------------------------------------
Vs vjp_add(Builder& b, const Node&, const Vs& x, const Vs&, const Vs& g) {
  return {unbroadcast(b, g[0], x[0]), unbroadcast(b, g[0], x[1])};
}
Vs vjp_sub(Builder& b, const Node&, const Vs& x, const Vs&, const Vs& g) {
  return {unbroadcast(b, g[0], x[0]), unbroadcast(b, b.unary(OpKind::Neg, g[0]), x[1])};
}
Vs vjp_mul(Builder& b, const Node&, const Vs& x, const Vs&, const Vs& g) {
  return {unbroadcast(b, b.mul(g[0], x[1]), x[0]), unbroadcast(b, b.mul(g[0], x[0]), x[1])};
}
Vs vjp_div(Builder& b, const Node&, const Vs& x, const Vs& y, const Vs& g) {
  ValueId gx = b.div(g[0], x[1]);
  return {unbroadcast(b, gx, x[0]), unbroadcast(b, b.unary(OpKind::Neg, b.mul(gx, y[0])), x[1])};
}
Vs vjp_pow(Builder& b, const Node&, const Vs& x, const Vs& y, const Vs& g) {
  ValueId da = b.mul(g[0], b.mul(x[1], b.op1(OpKind::Pow, {x[0], b.sub(x[1], sc(b, 1, x[1]))})));
  ValueId pos = b.op1(OpKind::Gt, {x[0], sc(b, 0, x[0])});
  ValueId safe = b.select(pos, x[0], sc(b, 1, x[0]));
  ValueId lg = b.select(pos, b.unary(OpKind::Log, safe), sc(b, 0, x[0]));
  ValueId db = b.mul(g[0], b.mul(y[0], lg));
  return {unbroadcast(b, da, x[0]), unbroadcast(b, db, x[1])};
}
// max/min: the cotangent goes to the winning operand (the first one on ties).
Vs minmax(Builder& b, const Vs& x, const Vs& g, OpKind cmp) {
  ValueId m = b.op1(cmp, {x[0], x[1]});
  ValueId z = sc(b, 0, g[0]);
  return {unbroadcast(b, b.select(m, g[0], z), x[0]), unbroadcast(b, b.select(m, z, g[0]), x[1])};
}
// max(a, constant) (ReLU and clamps): the mask comes from the output, y > c, so the pre-activation
// need not stay alive for the backward pass and the forward add+max fuse into one region. It
// differs from the general rule only at a == c, where it gives the zero gradient (PyTorch's relu).
Vs vjp_max(Builder& b, const Node&, const Vs& x, const Vs& y, const Vs& g) {
  const Graph& gr = b.graph();
  int32_t p = gr.values[x[1]].producer;
  if (p >= 0 && gr.nodes[p].op == OpKind::Constant) {
    ValueId m = b.op1(OpKind::Gt, {y[0], x[1]});
    return {unbroadcast(b, b.select(m, g[0], sc(b, 0, g[0])), x[0]), -1};
  }
  return minmax(b, x, g, OpKind::Ge);
}
Vs vjp_min(Builder& b, const Node&, const Vs& x, const Vs&, const Vs& g) { return minmax(b, x, g, OpKind::Le); }
Vs vjp_rem(Builder& b, const Node&, const Vs& x, const Vs&, const Vs& g) {  // a - trunc(a/b)*b
  ValueId q = b.div(x[0], x[1]);
  ValueId tr = b.mul(b.unary(OpKind::Sign, q), b.unary(OpKind::Floor, b.unary(OpKind::Abs, q)));
  return {unbroadcast(b, g[0], x[0]), unbroadcast(b, b.unary(OpKind::Neg, b.mul(g[0], tr)), x[1])};
}
Vs vjp_select(Builder& b, const Node&, const Vs& x, const Vs&, const Vs& g) {
  ValueId z = sc(b, 0, g[0]);
  return {-1, unbroadcast(b, b.select(x[0], g[0], z), x[1]), unbroadcast(b, b.select(x[0], z, g[0]), x[2])};
}

// ---- reductions --------------------------------------------------------------------------------
Ints keep_shape(const Ints& xd, const Ints& axes) {
  Ints k = xd;
  for (auto a : axes) k[a] = 1;
  return k;
}
// The reduced cotangent (or output), brought back to x's shape.
ValueId expand_back(Builder& b, ValueId v, const Ints& xd, const Ints& axes) {
  Ints kd = keep_shape(xd, axes);
  if (dims(b, v) != kd) v = b.reshape(v, to_shape(kd));
  return b.broadcast_in_dim(v, to_shape(xd), iota_ints(0, static_cast<int64_t>(xd.size())));
}
Vs vjp_reduce_sum(Builder& b, const Node& n, const Vs& x, const Vs&, const Vs& g) {
  Ints xd = dims(b, x[0]);
  return one(expand_back(b, g[0], xd, norm(attr_ints(n, "axes"), static_cast<int64_t>(xd.size()))));
}
// max/min: the cotangent is shared evenly among the elements equal to the result.
Vs vjp_reduce_extremum(Builder& b, const Node& n, const Vs& x, const Vs& y, const Vs& g) {
  Ints xd = dims(b, x[0]);
  Ints axes = norm(attr_ints(n, "axes"), static_cast<int64_t>(xd.size()));
  ValueId mask = b.convert(b.op1(OpKind::Eq, {x[0], expand_back(b, y[0], xd, axes)}), b.dtype(x[0]));
  ValueId cnt = b.reduce(OpKind::ReduceSum, mask, axes, true);
  ValueId gk = b.div(b.reshape(g[0], to_shape(keep_shape(xd, axes))), cnt);
  return one(b.mul(mask, expand_back(b, gk, xd, axes)));
}
// reduce_window (max-pool, sum-pool) for non-overlapping windows (stride == window, no padding),
// the pooling layers of CNNs: the cotangent is upsampled (broadcast + reshape) onto the windows'
// elements; max/min route it to the extreme element(s), shared evenly among ties like reduce_max.
// Input rows past the last whole window get zero. Other configurations are rejected by name.
Vs vjp_reduce_window(Builder& b, const Node& n, const Vs& x, const Vs& y, const Vs& g) {
  Ints xd = dims(b, x[0]), yd = dims(b, y[0]);
  int64_t r = static_cast<int64_t>(xd.size());
  Ints win = attr_ints(n, "window"), st = attr_ints(n, "strides"), pads = attr_ints(n, "pads");
  if (st.empty()) st.assign(static_cast<size_t>(r), 1);
  bool ok = static_cast<int64_t>(win.size()) == r;
  for (int64_t i = 0; ok && i < r; ++i) ok = st[i] == win[i] && yd[i] == xd[i] / win[i];
  for (auto p : pads) ok = ok && p == 0;
  RLX_CHECK(ok, "[autodiff] reduce_window: VJP implemented for non-overlapping windows (strides == window, "
                "no padding) only");
  const std::string& kind = attr_str(n, "kind");
  Ints split, core, odd, even, lo(static_cast<size_t>(r), 0), hi(static_cast<size_t>(r), 0);
  bool cut = false;
  for (int64_t i = 0; i < r; ++i) {
    split.push_back(yd[i]);
    split.push_back(win[i]);
    core.push_back(yd[i] * win[i]);
    even.push_back(2 * i);
    odd.push_back(2 * i + 1);
    hi[i] = xd[i] - core[i];
    cut |= hi[i] != 0;
  }
  auto up = [&](ValueId v) { return b.reshape(b.broadcast_in_dim(v, to_shape(split), even), to_shape(core)); };
  ValueId gc = up(g[0]);
  if (kind != "sum") {
    ValueId xc = cut ? b.op1(OpKind::Slice, {x[0]}, {{"start", lo}, {"limit", core}}) : x[0];
    ValueId mask = b.convert(b.op1(OpKind::Eq, {xc, up(y[0])}), b.dtype(x[0]));
    ValueId cnt = b.reduce(OpKind::ReduceSum, b.reshape(mask, to_shape(split)), odd, false);
    gc = b.mul(mask, up(b.div(g[0], cnt)));
  }
  if (cut) gc = b.op1(OpKind::Pad, {gc}, {{"low", lo}, {"high", hi}});
  return one(gc);
}
Vs vjp_reduce_prod(Builder& b, const Node& n, const Vs& x, const Vs& y, const Vs& g) {
  Ints xd = dims(b, x[0]);
  Ints axes = norm(attr_ints(n, "axes"), static_cast<int64_t>(xd.size()));
  return one(b.div(b.mul(expand_back(b, g[0], xd, axes), expand_back(b, y[0], xd, axes)), x[0]));
}
Vs vjp_cumsum(Builder& b, const Node& n, const Vs&, const Vs&, const Vs& g) {
  return one(b.op1(OpKind::Cumsum, {g[0]},
                   {{"axis", attr_int(n, "axis")}, {"reverse", int64_t{attr_int(n, "reverse") == 0}},
                    {"exclusive", attr_int(n, "exclusive")}}));
}

// ---- dot_general -------------------------------------------------------------------------------
int64_t rank_in_sorted(const Ints& set, int64_t v) {
  Ints s = set;
  std::sort(s.begin(), s.end());
  return std::find(s.begin(), s.end(), v) - s.begin();
}
Ints free_axes(int64_t r, const Ints& a, const Ints& c) {
  Ints f;
  for (int64_t i = 0; i < r; ++i)
    if (std::find(a.begin(), a.end(), i) == a.end() && std::find(c.begin(), c.end(), i) == c.end()) f.push_back(i);
  return f;
}
// Cotangent of one operand `me` (batch mb, contract mc, free mf) given the other `ot`
// (batch ob, contract oc, free of); g's free block for me starts at gme, for the other at got.
ValueId dot_operand_grad(Builder& b, ValueId g, ValueId ot, const Ints& mb, const Ints& mc, const Ints& mf,
                         const Ints& ob, const Ints& oc, const Ints& of, int64_t gme, int64_t got, int64_t rme) {
  int64_t nb = static_cast<int64_t>(mb.size()), nf = static_cast<int64_t>(mf.size());
  Ints gb = iota_ints(0, nb), gof = iota_ints(got, got + static_cast<int64_t>(of.size()));
  // Order A: dot(g, other) -> [batch, my free, my contract (sorted by the other's axes)].
  Ints permA(rme), permB(rme);
  for (int64_t i = 0; i < rme; ++i) {
    auto in = [&](const Ints& s) { return std::find(s.begin(), s.end(), i) - s.begin(); };
    if (auto k = in(mb); k < nb) {
      permA[i] = k;
      permB[i] = k;
    } else if (auto j = in(mf); j < nf) {
      permA[i] = nb + j;
      permB[i] = nb + static_cast<int64_t>(mc.size()) + j;
    } else {
      auto m = in(mc);
      permA[i] = nb + nf + rank_in_sorted(oc, oc[m]);
      permB[i] = nb + rank_in_sorted(oc, oc[m]);
    }
  }
  (void)gme;
  if (!identity(permA) && identity(permB))  // Order B: dot(other, g) -> [batch, contract, free]
    return b.dot_general(ot, g, ob, gb, of, gof);
  return transpose_if(b, b.dot_general(g, ot, gb, ob, gof, of), permA);
}
Vs vjp_dot_general(Builder& b, const Node& n, const Vs& x, const Vs&, const Vs& g) {
  int64_t lr = static_cast<int64_t>(dims(b, x[0]).size()), rr = static_cast<int64_t>(dims(b, x[1]).size());
  Ints lb = norm(attr_ints(n, "lhs_batch"), lr), rb = norm(attr_ints(n, "rhs_batch"), rr);
  Ints lc = norm(attr_ints(n, "lhs_contract"), lr), rc = norm(attr_ints(n, "rhs_contract"), rr);
  Ints lf = free_axes(lr, lb, lc), rf = free_axes(rr, rb, rc);
  int64_t nb = static_cast<int64_t>(lb.size()), nlf = static_cast<int64_t>(lf.size());
  ValueId dl = dot_operand_grad(b, g[0], x[1], lb, lc, lf, rb, rc, rf, nb, nb + nlf, lr);
  ValueId dr = dot_operand_grad(b, g[0], x[0], rb, rc, rf, lb, lc, lf, nb + nlf, nb, rr);
  return {dl, dr};
}

// ---- data movement -----------------------------------------------------------------------------
Vs vjp_broadcast_in_dim(Builder& b, const Node& n, const Vs& x, const Vs&, const Vs& g) {
  Ints xd = dims(b, x[0]), od = dims(b, g[0]);
  Ints bd = norm(attr_ints(n, "dims"), static_cast<int64_t>(od.size()));
  Ints axes;
  for (int64_t i = 0; i < static_cast<int64_t>(od.size()); ++i) {
    auto it = std::find(bd.begin(), bd.end(), i);
    if (it == bd.end() || (xd[it - bd.begin()] == 1 && od[i] != 1)) axes.push_back(i);
  }
  ValueId r = axes.empty() ? g[0] : b.reduce(OpKind::ReduceSum, g[0], axes, true);
  if (!std::is_sorted(bd.begin(), bd.end())) {
    Ints perm = bd;
    for (int64_t i = 0; i < static_cast<int64_t>(od.size()); ++i)
      if (std::find(bd.begin(), bd.end(), i) == bd.end()) perm.push_back(i);
    r = b.transpose(r, perm);
  }
  return one(dims(b, r) == xd ? r : b.reshape(r, to_shape(xd)));
}
Vs vjp_reshape(Builder& b, const Node&, const Vs& x, const Vs&, const Vs& g) {
  return one(b.reshape(g[0], b.shape(x[0])));
}
Vs vjp_transpose(Builder& b, const Node& n, const Vs&, const Vs&, const Vs& g) {
  const Ints& p = attr_ints(n, "perm");
  Ints inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[p[i]] = static_cast<int64_t>(i);
  return one(b.transpose(g[0], inv));
}
ValueId pad(Builder& b, ValueId v, Ints lo, Ints hi) {
  return b.op1(OpKind::Pad, {v}, {{"low", std::move(lo)}, {"high", std::move(hi)}, {"value", 0.0}});
}
ValueId slice(Builder& b, ValueId v, Ints st, Ints li) {
  return b.op1(OpKind::Slice, {v}, {{"start", std::move(st)}, {"limit", std::move(li)}});
}
// Inserts s-1 zeros after every element of axis `ax` (interior padding from reshape + pad).
ValueId interleave(Builder& b, ValueId v, int64_t ax, int64_t s) {
  Ints d = dims(b, v), e = d;
  e.insert(e.begin() + ax + 1, 1);
  Ints lo(e.size(), 0), hi(e.size(), 0);
  hi[ax + 1] = s - 1;
  ValueId p = pad(b, b.reshape(v, to_shape(e)), lo, hi);
  d[ax] *= s;
  return b.reshape(p, to_shape(d));
}
Vs vjp_slice(Builder& b, const Node& n, const Vs& x, const Vs&, const Vs& g) {
  Ints xd = dims(b, x[0]);
  int64_t r = static_cast<int64_t>(xd.size());
  Ints st = attr_ints(n, "start"), sd = attr_ints(n, "stride");
  if (sd.empty()) sd.assign(r, 1);
  ValueId v = g[0];
  for (int64_t a = 0; a < r; ++a)
    if (sd[a] > 1) v = interleave(b, v, a, sd[a]);
  Ints vd = dims(b, v), lo(r, 0), hi(r, 0), cut = vd;
  bool need_cut = false;
  for (int64_t a = 0; a < r; ++a) {
    lo[a] = st[a];
    hi[a] = xd[a] - st[a] - vd[a];
    if (hi[a] < 0) {  // the trailing zeros of an interleave overhang: drop them
      cut[a] = vd[a] + hi[a];
      hi[a] = 0;
      need_cut = true;
    }
  }
  if (need_cut) v = slice(b, v, Ints(r, 0), cut);
  return one(pad(b, v, lo, hi));
}
Vs vjp_pad(Builder& b, const Node& n, const Vs& x, const Vs&, const Vs& g) {
  Ints xd = dims(b, x[0]), lo = attr_ints(n, "low");
  for (auto l : lo) RLX_CHECK(l >= 0, "[autodiff] pad: negative padding has no VJP rule yet");
  Ints li(xd.size());
  for (size_t i = 0; i < xd.size(); ++i) li[i] = lo[i] + xd[i];
  return one(slice(b, g[0], lo, li));
}
Vs vjp_concatenate(Builder& b, const Node& n, const Vs& x, const Vs&, const Vs& g) {
  Ints gd = dims(b, g[0]);
  int64_t ax = attr_int(n, "axis");
  if (ax < 0) ax += static_cast<int64_t>(gd.size());
  Vs r;
  int64_t at = 0;
  for (auto v : x) {
    Ints st(gd.size(), 0), li = gd;
    st[ax] = at;
    at += dims(b, v)[ax];
    li[ax] = at;
    r.push_back(slice(b, g[0], st, li));
  }
  return r;
}
Vs vjp_gather(Builder& b, const Node& n, const Vs& x, const Vs&, const Vs& g) {
  ValueId z = zeros_like(b, x[0]);
  return {b.op1(OpKind::ScatterAdd, {z, x[1], g[0]}, {{"axis", attr_int(n, "axis")}}), -1};
}
Vs vjp_scatter_add(Builder& b, const Node& n, const Vs& x, const Vs&, const Vs& g) {
  return {g[0], -1, b.op1(OpKind::Gather, {g[0], x[1]}, {{"axis", attr_int(n, "axis")}})};
}

// ---- conv (groups 1; any strides, dilations and non-negative pads up to dilation*(k-1)) --------
ValueId conv(Builder& b, ValueId x, ValueId w, Ints pads, Ints strides, Ints dil) {
  return b.op1(OpKind::Conv, {x, w},
               {{"pads", std::move(pads)}, {"strides", std::move(strides)}, {"dilations", std::move(dil)}});
}
// y = conv(x, w; stride s, dilation d, pads p). dx: the cotangent dilated by s, correlated with the
// flipped, transposed kernel at dilation d. dw: x and the cotangent with batch/channel swapped,
// correlated at stride d and dilation s. Both are convs again, so the rule differentiates itself
// (jvp of a strided conv needs the dilated case).
Vs vjp_conv(Builder& b, const Node& n, const Vs& x, const Vs&, const Vs& g) {
  Ints xd = dims(b, x[0]), wd = dims(b, x[1]), gd = dims(b, g[0]);
  int64_t sp = static_cast<int64_t>(xd.size()) - 2;
  Ints st = attr_ints(n, "strides"), pads = attr_ints(n, "pads"), dil = attr_ints(n, "dilations");
  if (st.empty()) st.assign(sp, 1);
  if (pads.empty()) pads.assign(2 * sp, 0);
  if (dil.empty()) dil.assign(sp, 1);
  RLX_CHECK(attr_int(n, "groups") == 1, "[autodiff] conv: groups > 1 has no VJP rule yet");
  ValueId gdil = g[0];
  for (int64_t i = 0; i < sp; ++i)
    if (st[i] > 1) {
      gdil = interleave(b, gdil, 2 + i, st[i]);
      Ints dd = dims(b, gdil), lim = dd;
      lim[2 + i] = (gd[2 + i] - 1) * st[i] + 1;
      gdil = slice(b, gdil, Ints(dd.size(), 0), lim);
    }
  ValueId wf = b.transpose(x[1], [&] {
    Ints p = iota_ints(0, sp + 2);
    std::swap(p[0], p[1]);
    return p;
  }());
  for (int64_t i = 0; i < sp; ++i) {
    int64_t k = wd[2 + i];
    Tensor idx(DType::i64, {k});
    for (int64_t j = 0; j < k; ++j) idx.set_int(j, k - 1 - j);
    wf = b.op1(OpKind::Gather, {wf, b.constant(idx)}, {{"axis", int64_t{2 + i}}});
  }
  Ints dpads(2 * sp);
  for (int64_t i = 0; i < sp; ++i) {
    int64_t span = dil[i] * (wd[2 + i] - 1);  // the dilated kernel's extent - 1
    int64_t rem = (xd[2 + i] + pads[i] + pads[sp + i] - span - 1) % st[i];
    dpads[i] = span - pads[i];
    dpads[sp + i] = span - pads[sp + i] + rem;
    RLX_CHECK(dpads[i] >= 0 && dpads[sp + i] >= 0,
              "[autodiff] conv: padding larger than dilation*(kernel-1) has no VJP rule yet");
  }
  ValueId dx = conv(b, gdil, wf, dpads, Ints(sp, 1), dil);
  Ints sw = iota_ints(0, sp + 2);
  std::swap(sw[0], sw[1]);
  ValueId dw = conv(b, b.transpose(x[0], sw), b.transpose(g[0], sw), pads, dil, st);
  Ints dwd = dims(b, dw);
  Ints want = dwd;
  for (int64_t i = 0; i < sp; ++i) want[2 + i] = wd[2 + i];
  if (dwd != want) dw = slice(b, dw, Ints(dwd.size(), 0), want);
  dw = b.transpose(dw, sw);
  return {dx, dw};
}

// sort / topk: the values output selects elements of x along `axis` by the indices
// output, so dx[.., j, ..] = sum_i g[.., i, ..] * (idx[.., i, ..] == j): a one-hot over a new last
// axis (k x n per row), summed over the selected positions, moved back to `axis`. MIR only.
Vs vjp_sort_topk(Builder& b, const Node& n, const Vs& x, const Vs& y, const Vs& g) {
  Ints xd = dims(b, x[0]), id = dims(b, y[1]);
  int64_t r = static_cast<int64_t>(xd.size()), ax = attr_int(n, "axis");
  if (ax < 0) ax += r;
  Ints ed = id;
  ed.push_back(xd[ax]);
  Ints keep = iota_ints(0, r);
  ValueId idx = b.broadcast_in_dim(y[1], to_shape(ed), keep);
  ValueId pos = b.op1(OpKind::Iota, {}, {{"shape", to_shape(ed)}, {"dim", r}, {"dtype", b.dtype(y[1])}});
  ValueId hit = b.convert(b.op1(OpKind::Eq, {idx, pos}), b.dtype(x[0]));
  ValueId s = b.reduce(OpKind::ReduceSum, b.mul(hit, b.broadcast_in_dim(g[0], to_shape(ed), keep)), {ax}, false);
  Ints perm;
  for (int64_t i = 0; i < r; ++i) perm.push_back(i == ax ? r - 1 : (i < ax ? i : i - 1));
  return one(transpose_if(b, s, perm));
}

}  // namespace
void add_linalg_vjp_rules(VjpRule* table);
namespace {

struct RuleTable {
  VjpRule r[256] = {};
  RuleTable() {
    auto set = [&](OpKind k, VjpRule f) { r[static_cast<int>(k)] = f; };
    set(OpKind::Neg, vjp_neg);
    set(OpKind::Abs, vjp_abs);
    set(OpKind::Exp, vjp_exp);
    set(OpKind::Log, vjp_log);
    set(OpKind::Sqrt, vjp_sqrt);
    set(OpKind::Rsqrt, vjp_rsqrt);
    set(OpKind::Tanh, vjp_tanh);
    set(OpKind::Erf, vjp_erf);
    set(OpKind::Sin, vjp_sin);
    set(OpKind::Cos, vjp_cos);
    set(OpKind::Logistic, vjp_logistic);
    for (auto k : {OpKind::Floor, OpKind::Ceil, OpKind::Round, OpKind::Sign}) set(k, vjp_zero);
    set(OpKind::Convert, vjp_convert);
    set(OpKind::Add, vjp_add);
    set(OpKind::Sub, vjp_sub);
    set(OpKind::Mul, vjp_mul);
    set(OpKind::Div, vjp_div);
    set(OpKind::Pow, vjp_pow);
    set(OpKind::Max, vjp_max);
    set(OpKind::Min, vjp_min);
    set(OpKind::Rem, vjp_rem);
    set(OpKind::Select, vjp_select);
    set(OpKind::ReduceSum, vjp_reduce_sum);
    set(OpKind::ReduceMax, vjp_reduce_extremum);
    set(OpKind::ReduceWindow, vjp_reduce_window);  // max/sum pooling (non-overlapping)
    set(OpKind::ReduceMin, vjp_reduce_extremum);
    set(OpKind::ReduceProd, vjp_reduce_prod);
    set(OpKind::Cumsum, vjp_cumsum);
    set(OpKind::DotGeneral, vjp_dot_general);
    set(OpKind::Conv, vjp_conv);
    set(OpKind::BroadcastInDim, vjp_broadcast_in_dim);
    set(OpKind::Reshape, vjp_reshape);
    set(OpKind::Transpose, vjp_transpose);
    set(OpKind::Slice, vjp_slice);
    set(OpKind::Pad, vjp_pad);
    set(OpKind::Concatenate, vjp_concatenate);
    set(OpKind::Gather, vjp_gather);
    set(OpKind::ScatterAdd, vjp_scatter_add);
    set(OpKind::Sort, vjp_sort_topk);
    set(OpKind::TopK, vjp_sort_topk);
    add_linalg_vjp_rules(r);  // vjp_linalg.cpp
  }
};
const RuleTable& table() {
  static RuleTable t;
  return t;
}

}  // namespace

VjpRule vjp_rule(OpKind op) { return table().r[static_cast<int>(op)]; }

bool is_nondifferentiable(OpKind op) {
  switch (op) {
    case OpKind::Constant: case OpKind::Iota: case OpKind::RngUniform: case OpKind::Not:
    case OpKind::IsNan: case OpKind::And: case OpKind::Or: case OpKind::Xor: case OpKind::Eq:
    case OpKind::Ne: case OpKind::Lt: case OpKind::Le: case OpKind::Gt: case OpKind::Ge:
    case OpKind::ArgMax: case OpKind::ArgMin:
    case OpKind::Dequantize:  // packed integer weights in, no float input to differentiate
    case OpKind::StopGradient:  // identity in value, zero VJP by definition
      return true;
    default:
      return false;
  }
}

bool has_vjp(OpKind op) { return is_nondifferentiable(op) || vjp_rule(op) != nullptr; }

}  // namespace rlx::ad
