// ONNX recurrent ops: RNN, GRU, LSTM, unrolled over the static sequence length at import.
// The input projection of every step is one dot_general; each step then adds H·Rᵀ and applies the
// gate activations. sequence_lens (forward direction) freezes the state and zeroes Y past each length.
#include <cmath>

#include "formats/onnx/importer.h"
#include "formats/onnx/ops_util.h"

namespace rlx::onnx {

namespace {

struct Act {
  std::string name;
  double alpha = 0, beta = 0;
};

V apply_act(Ctx& c, const Act& a, V x) {
  DType dt = c.dtype(x);
  auto k = [&](double v) { return c.scalar(v, dt); };
  const std::string& n = a.name;
  if (n == "Tanh") return c.unary(OpKind::Tanh, x);
  if (n == "Sigmoid") return c.unary(OpKind::Logistic, x);
  if (n == "Relu") return c.bin(OpKind::Max, x, k(0));
  if (n == "Affine") return c.bin(OpKind::Add, c.bin(OpKind::Mul, x, k(a.alpha)), k(a.beta));
  if (n == "LeakyRelu") return c.select(c.bin(OpKind::Ge, x, k(0)), x, c.bin(OpKind::Mul, x, k(a.alpha)));
  if (n == "ThresholdedRelu") return c.select(c.bin(OpKind::Gt, x, k(a.alpha)), x, c.broadcast_to(k(0), c.shape(x)));
  if (n == "ScaledTanh") return c.bin(OpKind::Mul, k(a.alpha), c.unary(OpKind::Tanh, c.bin(OpKind::Mul, x, k(a.beta))));
  if (n == "HardSigmoid")
    return c.bin(OpKind::Min, k(1), c.bin(OpKind::Max, k(0), c.bin(OpKind::Add, c.bin(OpKind::Mul, x, k(a.alpha)), k(a.beta))));
  if (n == "Elu")
    return c.select(c.bin(OpKind::Ge, x, k(0)), x, c.bin(OpKind::Mul, k(a.alpha), c.bin(OpKind::Sub, c.unary(OpKind::Exp, x), k(1))));
  if (n == "Softsign") return c.bin(OpKind::Div, x, c.bin(OpKind::Add, k(1), c.unary(OpKind::Abs, x)));
  if (n == "Softplus") return c.unary(OpKind::Log, c.bin(OpKind::Add, k(1), c.unary(OpKind::Exp, x)));
  c.error("unsupported activation '" + n + "'");
}

// kind: 0 RNN, 1 GRU, 2 LSTM.
void recurrent(Ctx& c, int kind) {
  const int G = kind == 0 ? 1 : kind == 1 ? 3 : 4;
  V X = c.in(0), W = c.in(1), R = c.in(2);
  DType dt = c.dtype(X);
  int64_t layout = c.attr_i("layout", 0);
  if (layout) X = c.transpose(X, {1, 0, 2});
  auto xd = c.static_shape(X, "X");
  int64_t T = xd[0], Bt = xd[1];
  auto wd = c.static_shape(W, "W");
  int64_t dirs = wd[0], H = c.attr_i("hidden_size", wd[1] / G);
  if (wd[1] != G * H) c.error("W's second dim must be " + std::to_string(G) + " x hidden_size");
  std::string dir = c.attr_s("direction", "forward");
  if ((dir == "bidirectional") != (dirs == 2)) c.error("direction and W's first dim disagree");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional") c.error("bad direction '" + dir + "'");
  double clip = c.attr_f("clip", 0);
  bool has_clip = c.has_attr("clip");
  bool lbr = kind == 1 && c.attr_i("linear_before_reset", 0) != 0;
  bool input_forget = kind == 2 && c.attr_i("input_forget", 0) != 0;
  // Activations: per direction f, g[, h].
  int na = kind == 2 ? 3 : kind == 1 ? 2 : 1;
  std::vector<std::string> an;
  if (auto* a = c.attr("activations"))
    for (auto& s : a->strings()) an.push_back(s);
  auto al = c.attr_floats("activation_alpha"), ab = c.attr_floats("activation_beta");
  std::vector<Act> acts;
  const char* defs[3] = {kind == 0 ? "Tanh" : "Sigmoid", "Tanh", "Tanh"};
  for (int64_t d = 0; d < dirs; ++d)
    for (int i = 0; i < na; ++i) {
      size_t j = static_cast<size_t>(d * na + i);
      Act a;
      a.name = j < an.size() ? an[j] : defs[i];
      // Defaults from the ONNX operator docs where the activation takes parameters.
      if (a.name == "LeakyRelu") a.alpha = 0.01;
      if (a.name == "ThresholdedRelu") a.alpha = 1.0;
      if (a.name == "HardSigmoid") a.alpha = 0.2, a.beta = 0.5;
      if (a.name == "Elu") a.alpha = 1.0;
      if (a.name == "ScaledTanh") a.alpha = 1.0, a.beta = 1.0;
      if (j < al.size()) a.alpha = al[j];
      if (j < ab.size()) a.beta = ab[j];
      acts.push_back(a);
    }
  std::optional<V> seq_mask_src;
  if (c.has_input(4)) seq_mask_src = c.convert(c.in(4), DType::i64);
  if (seq_mask_src && dir != "forward") c.error("sequence_lens with reverse/bidirectional direction is unsupported");
  auto clipv = [&](V v) {
    if (!has_clip) return v;
    return c.bin(OpKind::Min, c.bin(OpKind::Max, v, c.scalar(-clip, dt)), c.scalar(clip, dt));
  };
  std::vector<V> ys, hs, cs;
  for (int64_t d = 0; d < dirs; ++d) {
    bool rev = dir == "reverse" || d == 1;
    V Wd = c.reshape(c.slice_axis(W, 0, d, d + 1), {G * H, wd[2]});
    V Rd = c.reshape(c.slice_axis(R, 0, d, d + 1), {G * H, H});
    V xw = c.op1(OpKind::DotGeneral, {X, Wd}, {{"lhs_contract", std::vector<int64_t>{2}}, {"rhs_contract", std::vector<int64_t>{1}}});
    std::optional<V> wb, rb;
    if (c.has_input(3)) {
      V Bd = c.reshape(c.slice_axis(c.in(3), 0, d, d + 1), {2 * G * H});
      wb = c.slice_axis(Bd, 0, 0, G * H);
      rb = c.slice_axis(Bd, 0, G * H, 2 * G * H);
      if (!lbr) xw = c.bin(OpKind::Add, xw, c.bin(OpKind::Add, *wb, *rb));
      else xw = c.bin(OpKind::Add, xw, *wb);
    }
    V h = c.has_input(kind == 2 ? 5 : 5) ? c.reshape(c.slice_axis(c.in(5), 0, d, d + 1), {Bt, H})
                                         : c.broadcast_to(c.scalar(0, dt), to_shape({Bt, H}));
    V cell = h;
    if (kind == 2)
      cell = c.has_input(6) ? c.reshape(c.slice_axis(c.in(6), 0, d, d + 1), {Bt, H}) : c.broadcast_to(c.scalar(0, dt), to_shape({Bt, H}));
    std::optional<V> pi, po, pf;
    if (kind == 2 && c.has_input(7)) {
      V P = c.reshape(c.slice_axis(c.in(7), 0, d, d + 1), {3 * H});
      pi = c.slice_axis(P, 0, 0, H);
      po = c.slice_axis(P, 0, H, 2 * H);
      pf = c.slice_axis(P, 0, 2 * H, 3 * H);
    }
    const Act& f = acts[static_cast<size_t>(d * na)];
    std::vector<V> yd(static_cast<size_t>(T));
    for (int64_t s = 0; s < T; ++s) {
      int64_t t = rev ? T - 1 - s : s;
      V xt = c.reshape(c.slice_axis(xw, 0, t, t + 1), {Bt, G * H});
      V hr = c.op1(OpKind::DotGeneral, {h, Rd}, {{"lhs_contract", std::vector<int64_t>{1}}, {"rhs_contract", std::vector<int64_t>{1}}});
      auto gate = [&](V v, int g) { return c.slice_axis(v, 1, g * H, (g + 1) * H); };
      V hn, cn = cell;
      if (kind == 0) {
        hn = apply_act(c, f, clipv(c.bin(OpKind::Add, xt, hr)));
      } else if (kind == 1) {
        const Act& g = acts[static_cast<size_t>(d * na + 1)];
        V z = apply_act(c, f, clipv(c.bin(OpKind::Add, gate(xt, 0), gate(hr, 0))));
        V rr = apply_act(c, f, clipv(c.bin(OpKind::Add, gate(xt, 1), gate(hr, 1))));
        V pre;
        if (lbr) {
          V rh = gate(hr, 2);
          if (rb) rh = c.bin(OpKind::Add, rh, c.slice_axis(*rb, 0, 2 * H, 3 * H));
          pre = c.bin(OpKind::Add, gate(xt, 2), c.bin(OpKind::Mul, rr, rh));
        } else {
          V rh = c.op1(OpKind::DotGeneral, {c.bin(OpKind::Mul, rr, h), c.slice_axis(Rd, 0, 2 * H, 3 * H)},
                       {{"lhs_contract", std::vector<int64_t>{1}}, {"rhs_contract", std::vector<int64_t>{1}}});
          pre = c.bin(OpKind::Add, gate(xt, 2), rh);
        }
        V ht = apply_act(c, g, clipv(pre));
        hn = c.bin(OpKind::Add, c.bin(OpKind::Mul, c.bin(OpKind::Sub, c.scalar(1, dt), z), ht), c.bin(OpKind::Mul, z, h));
      } else {
        const Act& g = acts[static_cast<size_t>(d * na + 1)];
        const Act& hh = acts[static_cast<size_t>(d * na + 2)];
        V a = c.bin(OpKind::Add, xt, hr);
        V ig = gate(a, 0), og = gate(a, 1), fg = gate(a, 2), cg = gate(a, 3);
        if (pi) ig = c.bin(OpKind::Add, ig, c.bin(OpKind::Mul, *pi, cell));
        if (pf) fg = c.bin(OpKind::Add, fg, c.bin(OpKind::Mul, *pf, cell));
        V i_ = apply_act(c, f, clipv(ig));
        V f_ = input_forget ? c.bin(OpKind::Sub, c.scalar(1, dt), i_) : apply_act(c, f, clipv(fg));
        V c_ = apply_act(c, g, clipv(cg));
        cn = c.bin(OpKind::Add, c.bin(OpKind::Mul, f_, cell), c.bin(OpKind::Mul, i_, c_));
        if (po) og = c.bin(OpKind::Add, og, c.bin(OpKind::Mul, *po, cn));
        V o_ = apply_act(c, f, clipv(og));
        hn = c.bin(OpKind::Mul, o_, apply_act(c, hh, cn));
      }
      V yt = hn;
      if (seq_mask_src) {
        V m = c.reshape(c.bin(OpKind::Lt, c.scalar(static_cast<double>(t), DType::i64), *seq_mask_src), {Bt, 1});
        m = c.broadcast_to(m, to_shape({Bt, H}));
        hn = c.select(m, hn, h);
        if (kind == 2) cn = c.select(m, cn, cell);
        yt = c.select(m, yt, c.broadcast_to(c.scalar(0, dt), to_shape({Bt, H})));
      }
      h = hn;
      cell = cn;
      yd[static_cast<size_t>(t)] = c.reshape(yt, {1, 1, Bt, H});
    }
    ys.push_back(T == 1 ? yd[0] : c.op1(OpKind::Concatenate, yd, {{"axis", int64_t{0}}}));
    hs.push_back(c.reshape(h, {1, Bt, H}));
    cs.push_back(c.reshape(cell, {1, Bt, H}));
  }
  auto cat = [&](std::vector<V> v, int64_t ax) { return v.size() == 1 ? v[0] : c.op1(OpKind::Concatenate, v, {{"axis", ax}}); };
  V Y = cat(ys, 1), Yh = cat(hs, 0), Yc = cat(cs, 0);
  if (layout) {
    Y = c.transpose(Y, {2, 0, 1, 3});
    Yh = c.transpose(Yh, {1, 0, 2});
    Yc = c.transpose(Yc, {1, 0, 2});
  }
  c.set_output(0, Y);
  c.set_output(1, Yh);
  if (kind == 2) c.set_output(2, Yc);
}

}  // namespace

void register_rnn_ops(std::map<std::string, Converter>& r) {
  r["RNN"] = [](Ctx& c) { recurrent(c, 0); };
  r["GRU"] = [](Ctx& c) { recurrent(c, 1); };
  r["LSTM"] = [](Ctx& c) { recurrent(c, 2); };
}

}  // namespace rlx::onnx
