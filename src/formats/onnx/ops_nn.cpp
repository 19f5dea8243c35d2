// ONNX neural-network ops: matmul/gemm, conv, pooling, normalizations, softmax family.
#include <algorithm>
#include <cmath>
#include <limits>

#include "formats/onnx/importer.h"
#include "formats/onnx/ops_util.h"

namespace rlx::onnx {

// ---- conv/pool windows (declared in ops_util.h) ----------------------------------------------------

void check_window(Ctx& c, size_t sp, const std::vector<int64_t>& k, const std::vector<int64_t>& st,
                  const std::vector<int64_t>& dil) {
  if (k.size() != sp) c.error("kernel must have one entry per spatial dim");
  if (st.size() != sp) c.error("strides must have one entry per spatial dim");
  if (dil.size() != sp) c.error("dilations must have one entry per spatial dim");
  for (size_t i = 0; i < sp; ++i)
    if (k[i] < 1 || st[i] < 1 || dil[i] < 1 || k[i] > (int64_t{1} << 20) || st[i] > (int64_t{1} << 20) ||
        dil[i] > (int64_t{1} << 20))
      c.error("kernel, strides and dilations must be positive (and sane)");
}

namespace {

// Spatial padding from auto_pad / pads for input dims `in`, kernel `k`, strides `st`, dilations `dil`.
std::vector<int64_t> resolve_pads(Ctx& c, const std::vector<int64_t>& in, const std::vector<int64_t>& k,
                                  const std::vector<int64_t>& st, const std::vector<int64_t>& dil) {
  size_t sp = in.size();
  check_window(c, sp, k, st, dil);
  std::string ap = c.attr_s("auto_pad", "NOTSET");
  std::vector<int64_t> pads = c.attr_ints("pads");
  if (ap == "NOTSET") {
    if (pads.empty()) pads.assign(2 * sp, 0);
    if (pads.size() != 2 * sp) c.error("pads must have 2 x spatial-rank entries");
    for (auto p : pads)
      if (p < 0 || p > (int64_t{1} << 20)) c.error("pads must be non-negative (and sane)");
    return pads;
  }
  pads.assign(2 * sp, 0);
  if (ap == "VALID") return pads;
  if (ap != "SAME_UPPER" && ap != "SAME_LOWER") c.error("unsupported auto_pad '" + ap + "'");
  for (size_t i = 0; i < sp; ++i) {
    int64_t out = (in[i] + st[i] - 1) / st[i];
    int64_t eff = dil[i] * (k[i] - 1) + 1;
    int64_t total = std::max<int64_t>(0, (out - 1) * st[i] + eff - in[i]);
    int64_t small = total / 2, big = total - small;
    pads[i] = ap == "SAME_UPPER" ? small : big;
    pads[sp + i] = ap == "SAME_UPPER" ? big : small;
  }
  return pads;
}

Window window(Ctx& c, const std::vector<int64_t>& xd, std::vector<int64_t> k) {
  size_t sp = xd.size() - 2;
  Window w{{xd.begin() + 2, xd.end()}, std::move(k), c.attr_ints("strides", std::vector<int64_t>(sp, 1)),
           c.attr_ints("dilations", std::vector<int64_t>(sp, 1)), {}};
  w.pads = resolve_pads(c, w.in, w.k, w.st, w.dil);
  return w;
}

}  // namespace

Window conv_window(Ctx& c, const std::vector<int64_t>& xd, const std::vector<int64_t>& wd) {
  if (xd.size() < 3 || wd.size() != xd.size()) c.error("X and W must have the same rank >= 3");
  return window(c, xd, {wd.begin() + 2, wd.end()});
}

Window pool_window(Ctx& c, const std::vector<int64_t>& xd) {
  if (xd.size() < 3) c.error("X must have rank >= 3 (N, C, spatial...)");
  auto k = c.attr_ints("kernel_shape");
  if (k.size() != xd.size() - 2) c.error("kernel_shape must have one entry per spatial dim");
  return window(c, xd, k);
}

namespace {

V sc(Ctx& c, double v, V like) { return c.scalar(v, c.dtype(like)); }

// Softmax-family with the pre-13 "flatten to 2D at axis" semantics.
void softmax_like(std::map<std::string, Converter>& r, const char* name) {
  std::string nm = name;
  r[name] = [nm](Ctx& c) {
    V x = c.in(0);
    int64_t rk = c.rank(x);
    bool old = c.opset() < 13;
    int64_t ax = axis_norm(c, c.attr_i("axis", old ? 1 : -1), std::max<int64_t>(rk, 1));
    auto body = [&](V v, int64_t a) -> V {
      if (nm == "Softmax") return c.op1(OpKind::Softmax, {v}, {{"axis", a}});
      if (nm == "LogSoftmax") return c.op1(OpKind::LogSoftmax, {v}, {{"axis", a}});
      // Hardmax: one-hot of the first maximum.
      auto d = c.static_shape(v, "input");
      V am = c.op1(OpKind::ArgMax, {v}, {{"axis", a}, {"keepdims", int64_t{1}}});
      V io = c.op1(OpKind::Iota, {}, {{"shape", to_shape(d)}, {"dim", a}, {"dtype", DType::i64}});
      return c.convert(c.bin(OpKind::Eq, io, am), c.dtype(v));
    };
    if (!old || ax == rk - 1) return c.set_output(0, body(x, ax));
    auto d = c.static_shape(x, "input");
    int64_t a = 1, b = 1;
    for (int64_t i = 0; i < rk; ++i) (i < ax ? a : b) *= d[i];
    c.set_output(0, c.reshape(body(c.reshape(x, {a, b}), 1), d));
  };
}

// Shape [1, C, 1, ...] view of a per-channel vector for rank-r NC... data.
V per_channel(Ctx& c, V v, int64_t r) {
  auto d = c.static_shape(v, "per-channel parameter");
  std::vector<int64_t> s(static_cast<size_t>(r), 1);
  s[1] = d.empty() ? 1 : d[0];
  return c.reshape(v, s);
}

// (x - mean) / sqrt(var + eps) over `axes`, statistics in the input dtype.
V normalize(Ctx& c, V x, const std::vector<int64_t>& axes, double eps) {
  V mean = c.reduce(OpKind::ReduceMean, x, axes, true);
  V xc = c.bin(OpKind::Sub, x, mean);
  V var = c.reduce(OpKind::ReduceMean, c.bin(OpKind::Mul, xc, xc), axes, true);
  return c.bin(OpKind::Mul, xc, c.unary(OpKind::Rsqrt, c.bin(OpKind::Add, var, sc(c, eps, var))));
}

// The first stage LayerNormalization and RMSNormalization share (both ONNX functions):
// the normalized axes [axis, rank), epsilon, and the dtype the statistics are computed in.
// stash_type (a TensorProto code: 1 float, 10 float16, 11 double, 16 bfloat16; default 1 in both
// specs) names the computation dtype; we use the more precise of it and X's dtype (f16 and bf16,
// neither finer than the other, meet in f32): f16/bf16 inputs compute in f32 whether or not the
// attribute is written, f64 stays f64, stash_type 11 on f32 computes in f64. Other codes are refused.
struct NormStage {
  std::vector<int64_t> axes;
  double eps;
  DType dt, ct;  // X's dtype, the computation (stash) dtype
};
NormStage norm_stage(Ctx& c, V x) {
  NormStage s;
  int64_t rk = c.rank(x);
  for (int64_t i = axis_norm(c, c.attr_i("axis", -1), rk); i < rk; ++i) s.axes.push_back(i);
  s.eps = c.attr_f("epsilon", 1e-5);
  s.dt = c.dtype(x);
  const int64_t stash = c.attr_i("stash_type", 1);
  DType sd;
  switch (stash) {
    case 1: sd = DType::f32; break;
    case 10: sd = DType::f16; break;
    case 11: sd = DType::f64; break;
    case 16: sd = DType::bf16; break;
    default:
      c.error("stash_type " + std::to_string(stash) + " unsupported (float types only: 1, 10, 11, 16)");
  }
  auto rank = [](DType t) { return t == DType::f64 ? 3 : t == DType::f32 ? 2 : 1; };
  s.ct = rank(sd) > rank(s.dt) ? sd : rank(s.dt) > rank(sd) ? s.dt : sd == s.dt ? sd : DType::f32;
  return s;
}

// Pooling with dilations and/or MaxPool's Indices output: each spatial dim of the padded
// input is gathered into (out, k) window taps (index o*stride + j*dilation), the taps are moved
// last and reduced. Indices (MaxPool) index the unpadded input flattened row-major (storage_order 0)
// or column-major over the spatial dims (storage_order 1), picked at the first maximum.
void gather_pool(Ctx& c, V x, const std::vector<int64_t>& xd, const std::vector<int64_t>& k,
                 const std::vector<int64_t>& st, const std::vector<int64_t>& dil, const std::vector<int64_t>& pads,
                 bool is_max) {
  if (xd.size() < 3) c.error("X must have rank >= 3 (N, C, spatial...)");
  int64_t rk = static_cast<int64_t>(xd.size());
  size_t sp = xd.size() - 2;
  bool ceil = c.attr_i("ceil_mode", 0) != 0, include = c.attr_i("count_include_pad", 0) != 0;
  std::vector<int64_t> out(sp), extra(sp, 0);
  for (size_t i = 0; i < sp; ++i) {
    int64_t ke = (k[i] - 1) * dil[i] + 1, span = xd[2 + i] + pads[i] + pads[sp + i] - ke;
    out[i] = (ceil ? (span + st[i] - 1) / st[i] : span / st[i]) + 1;
    if (ceil && (out[i] - 1) * st[i] >= xd[2 + i] + pads[i]) --out[i];
    extra[i] = std::max<int64_t>(0, (out[i] - 1) * st[i] + ke - (xd[2 + i] + pads[i] + pads[sp + i]));
  }
  auto pad = [&](V v, double explicit_val, double extra_val) {
    std::vector<int64_t> lo(rk, 0), hi(rk, 0), hi2(rk, 0);
    bool any_extra = false;
    for (size_t i = 0; i < sp; ++i) lo[2 + i] = pads[i], hi[2 + i] = pads[sp + i], hi2[2 + i] = extra[i], any_extra |= extra[i] > 0;
    v = c.op1(OpKind::Pad, {v}, {{"low", lo}, {"high", hi}, {"value", explicit_val}});
    if (any_extra) v = c.op1(OpKind::Pad, {v}, {{"low", std::vector<int64_t>(rk, 0)}, {"high", hi2}, {"value", extra_val}});
    return v;
  };
  // [N, C, s1, s2, ...] -> [N, C, o1, ..., K]
  auto windows = [&](V v) {
    for (size_t i = 0; i < sp; ++i) {
      Tensor idx(DType::i64, {out[i], k[i]});
      for (int64_t o = 0; o < out[i]; ++o)
        for (int64_t j = 0; j < k[i]; ++j) idx.set_int(o * k[i] + j, o * st[i] + j * dil[i]);
      v = c.op1(OpKind::Gather, {v, c.constant(idx)}, {{"axis", static_cast<int64_t>(2 + 2 * i)}});
    }
    std::vector<int64_t> perm{0, 1}, shape{xd[0], xd[1]};
    int64_t kel = 1;
    for (size_t i = 0; i < sp; ++i) perm.push_back(static_cast<int64_t>(2 + 2 * i)), shape.push_back(out[i]);
    for (size_t i = 0; i < sp; ++i) perm.push_back(static_cast<int64_t>(3 + 2 * i)), kel *= k[i];
    shape.push_back(kel);
    return c.reshape(c.transpose(v, perm), shape);
  };
  int64_t last = static_cast<int64_t>(sp) + 2;
  DType dt = c.dtype(x);
  if (!is_max) {
    V sum = c.reduce(OpKind::ReduceSum, windows(pad(x, 0.0, 0.0)), {last}, false);
    std::vector<int64_t> od(xd);
    od[0] = od[1] = 1;
    V ones = c.broadcast_to(sc(c, 1, x), to_shape(od));
    V cnt = c.reduce(OpKind::ReduceSum, windows(pad(ones, include ? 1.0 : 0.0, 0.0)), {last}, false);
    return c.set_output(0, c.bin(OpKind::Div, sum, cnt));
  }
  double lowest = is_float(dt) ? -std::numeric_limits<double>::infinity() : -9.3e18;  // Pad saturates ints to their min
  V w = windows(pad(x, lowest, lowest));
  c.set_output(0, c.reduce(OpKind::ReduceMax, w, {last}, false));
  if (!c.wants_output(1)) return;
  // Flat input position of every tap (-1 in the padding), windowed the same way.
  Tensor pos(DType::i64, xd);
  bool col = c.attr_i("storage_order", 0) != 0;
  int64_t spatial = 1;
  for (size_t i = 0; i < sp; ++i) spatial *= xd[2 + i];
  for (int64_t f = 0; f < pos.numel(); ++f) {
    int64_t rem = f, sidx = 0, cstride = 1;
    std::vector<int64_t> id(rk);
    for (int64_t d = rk - 1; d >= 0; --d) id[d] = rem % xd[d], rem /= xd[d];
    for (size_t i = 0; i < sp; ++i) sidx += id[2 + i] * cstride, cstride *= xd[2 + i];
    pos.set_int(f, col ? (id[0] * xd[1] + id[1]) * spatial + sidx : f);
  }
  V wp = windows(pad(c.constant(pos), -1.0, -1.0));
  V am = c.op1(OpKind::ArgMax, {w}, {{"axis", last}, {"keepdims", int64_t{1}}});
  auto wshape = c.static_shape(w, "windows");
  V iota = c.op1(OpKind::Iota, {}, {{"shape", to_shape(wshape)}, {"dim", last}, {"dtype", DType::i64}});
  V hit = c.bin(OpKind::Eq, iota, c.broadcast_to(am, to_shape(wshape)));
  V picked = c.select(hit, wp, c.broadcast_to(c.scalar(0, DType::i64), to_shape(wshape)));
  c.set_output(1, c.reduce(OpKind::ReduceSum, picked, {last}, false));
}

}  // namespace

void register_nn_ops(std::map<std::string, Converter>& r) {
  r["MatMul"] = [](Ctx& c) { c.set_output(0, c.op1(OpKind::MatMul, {c.in(0), c.in(1)})); };
  r["Gemm"] = [](Ctx& c) {
    V a = c.in(0), b = c.in(1);
    // A·Bᵀ (+ bias [N]) is a Linear layer: B is already [out, in], so no transpose runs, and the
    // cpu device packs a constant B once.
    const bool lin = c.attr_i("transB", 0) && !c.attr_i("transA", 0) && c.attr_f("alpha", 1.0) == 1.0 &&
                     is_float(c.dtype(a)) && c.dtype(b) == c.dtype(a) && c.rank(a) == 2 && c.rank(b) == 2 &&
                     (!c.has_input(2) || (c.attr_f("beta", 1.0) == 1.0 && c.rank(c.in(2)) == 1 &&
                                          c.dtype(c.in(2)) == c.dtype(a) && c.shape(c.in(2))[0] == c.shape(b)[0]));
    if (lin) {
      std::vector<V> ins{a, b};
      if (c.has_input(2)) ins.push_back(c.in(2));
      return c.set_output(0, c.op1(OpKind::Linear, ins));
    }
    if (c.attr_i("transA", 0)) a = c.transpose(a, {1, 0});
    if (c.attr_i("transB", 0)) b = c.transpose(b, {1, 0});
    V y = c.op1(OpKind::MatMul, {a, b});
    double alpha = c.attr_f("alpha", 1.0), beta = c.attr_f("beta", 1.0);
    if (alpha != 1.0) y = c.bin(OpKind::Mul, y, sc(c, alpha, y));
    if (c.has_input(2)) {
      V bias = c.in(2);
      if (beta != 1.0) bias = c.bin(OpKind::Mul, bias, sc(c, beta, bias));
      y = c.bin(OpKind::Add, y, bias);
    }
    c.set_output(0, y);
  };
  r["Conv"] = [](Ctx& c) {
    V x = c.in(0), w = c.in(1);
    Window win = conv_window(c, c.static_shape(x, "X"), c.static_shape(w, "W"));
    std::vector<V> ins{x, w};
    if (c.has_input(2)) ins.push_back(c.in(2));
    c.set_output(0, c.op1(OpKind::Convolution, ins,
                          {{"strides", win.st}, {"pads", win.pads}, {"dilations", win.dil}, {"groups", c.attr_i("group", 1)}}));
  };
  auto pool = [](Ctx& c, bool is_max) {
    V x = c.in(0);
    auto xd = c.static_shape(x, "X");
    auto [in, k, st, dil, pads] = pool_window(c, xd);
    int64_t rk = static_cast<int64_t>(xd.size());
    size_t sp = xd.size() - 2;
    bool dilated = false;
    for (auto d : dil) dilated = dilated || d != 1;
    if (dilated || c.wants_output(1)) return gather_pool(c, x, xd, k, st, dil, pads, is_max);
    // ceil_mode: extend the end padding so the last partial window is kept.
    std::vector<int64_t> extra(sp, 0);
    if (c.attr_i("ceil_mode", 0)) {
      for (size_t i = 0; i < sp; ++i) {
        int64_t span = in[i] + pads[i] + pads[sp + i] - k[i];
        int64_t out = (span + st[i] - 1) / st[i] + 1;
        if ((out - 1) * st[i] >= in[i] + pads[i]) --out;  // last window must start inside input or left pad
        extra[i] = std::max<int64_t>(0, (out - 1) * st[i] + k[i] - (in[i] + pads[i] + pads[sp + i]));
      }
    }
    std::vector<int64_t> win{1, 1}, strides{1, 1}, wp(2 * rk, 0);
    int64_t kel = 1;
    bool padded = false;
    for (size_t i = 0; i < sp; ++i) {
      win.push_back(k[i]);
      strides.push_back(st[i]);
      wp[2 + i] = pads[i];
      wp[rk + 2 + i] = pads[sp + i] + extra[i];
      kel *= k[i];
      padded = padded || pads[i] || pads[sp + i] || extra[i];
    }
    Attrs wa{{"kind", is_max ? "max" : "sum"}, {"window", win}, {"strides", strides}, {"pads", wp}};
    V y = c.op1(OpKind::ReduceWindow, {x}, wa);
    if (is_max) return c.set_output(0, y);
    bool include = c.attr_i("count_include_pad", 0) != 0;
    if (!padded) return c.set_output(0, c.bin(OpKind::Div, y, sc(c, static_cast<double>(kel), y)));
    // Divisor: count of real elements (or of explicit-pad elements when count_include_pad, but
    // never the ceil_mode overhang).
    std::vector<int64_t> od(xd.begin(), xd.end());
    od[0] = od[1] = 1;
    V ones = c.broadcast_to(sc(c, 1, x), to_shape(od));
    if (include) {
      std::vector<int64_t> lo(rk, 0), hi(rk, 0);
      for (size_t i = 0; i < sp; ++i) lo[2 + i] = pads[i], hi[2 + i] = pads[sp + i];
      ones = c.op1(OpKind::Pad, {ones}, {{"low", lo}, {"high", hi}, {"value", 1.0}});
      std::vector<int64_t> wp2 = wp;
      for (size_t i = 0; i < sp; ++i) wp2[2 + i] = 0, wp2[rk + 2 + i] = extra[i];
      Attrs wa2{{"kind", "sum"}, {"window", win}, {"strides", strides}, {"pads", wp2}};
      return c.set_output(0, c.bin(OpKind::Div, y, c.op1(OpKind::ReduceWindow, {ones}, wa2)));
    }
    c.set_output(0, c.bin(OpKind::Div, y, c.op1(OpKind::ReduceWindow, {ones}, wa)));
  };
  r["MaxPool"] = [pool](Ctx& c) { pool(c, true); };
  r["AveragePool"] = [pool](Ctx& c) { pool(c, false); };
  r["GlobalAveragePool"] = [](Ctx& c) { c.set_output(0, c.op1(OpKind::GlobalAvgPool, {c.in(0)})); };
  r["GlobalMaxPool"] = [](Ctx& c) {
    V x = c.in(0);
    std::vector<int64_t> axes;
    for (int64_t i = 2; i < c.rank(x); ++i) axes.push_back(i);
    c.set_output(0, c.reduce(OpKind::ReduceMax, x, axes, true));
  };
  r["BatchNormalization"] = [](Ctx& c) {
    V x = c.in(0);
    if (c.attr_i("training_mode", 0)) c.error("training_mode=1 is unsupported");
    int64_t rk = c.rank(x);
    double eps = c.attr_f("epsilon", 1e-5);
    V s = per_channel(c, c.in(1), rk), b = per_channel(c, c.in(2), rk);
    V m = per_channel(c, c.in(3), rk), v = per_channel(c, c.in(4), rk);
    V inv = c.unary(OpKind::Rsqrt, c.bin(OpKind::Add, v, sc(c, eps, v)));
    V y = c.bin(OpKind::Add, c.bin(OpKind::Mul, c.bin(OpKind::Mul, c.bin(OpKind::Sub, x, m), inv), s), b);
    c.set_output(0, y);
  };
  r["InstanceNormalization"] = [](Ctx& c) {
    V x = c.in(0);
    int64_t rk = c.rank(x);
    std::vector<int64_t> axes;
    for (int64_t i = 2; i < rk; ++i) axes.push_back(i);
    V y = normalize(c, x, axes, c.attr_f("epsilon", 1e-5));
    y = c.bin(OpKind::Add, c.bin(OpKind::Mul, y, per_channel(c, c.in(1), rk)), per_channel(c, c.in(2), rk));
    c.set_output(0, y);
  };
  r["LayerNormalization"] = [](Ctx& c) {
    V x = c.in(0);
    NormStage st = norm_stage(c, x);
    // Over the last axis, computed in X's dtype, with a [N] scale (and bias) and only Y read: the
    // layer_norm op itself (what a transformer export gives), so the device's LayerNorm kernel and
    // the LIR passes that fold it into a GEMM apply. Otherwise the function body below.
    const int64_t rk = c.rank(x);
    auto vec_n = [&](V v) {
      return c.rank(v) == 1 && c.dtype(v) == st.dt && c.shape(v)[0] == c.shape(x)[static_cast<size_t>(rk - 1)];
    };
    if (rk >= 1 && st.axes.size() == 1 && st.ct == st.dt && !c.wants_output(1) && !c.wants_output(2) && vec_n(c.in(1)) &&
        (!c.has_input(2) || vec_n(c.in(2)))) {
      std::vector<V> ins{x, c.in(1)};
      if (c.has_input(2)) ins.push_back(c.in(2));
      return c.set_output(0, c.op1(OpKind::LayerNorm, ins, {{"eps", st.eps}, {"axis", int64_t{-1}}}));
    }
    V xf = c.convert(x, st.ct);
    V mean = c.reduce(OpKind::ReduceMean, xf, st.axes, true);
    V xc = c.bin(OpKind::Sub, xf, mean);
    V var = c.reduce(OpKind::ReduceMean, c.bin(OpKind::Mul, xc, xc), st.axes, true);
    V inv = c.unary(OpKind::Rsqrt, c.bin(OpKind::Add, var, sc(c, st.eps, var)));
    V y = c.convert(c.bin(OpKind::Mul, xc, inv), st.dt);
    y = c.bin(OpKind::Mul, y, c.in(1));
    if (c.has_input(2)) y = c.bin(OpKind::Add, y, c.in(2));
    c.set_output(0, y);
    if (c.wants_output(1)) c.set_output(1, mean);
    if (c.wants_output(2)) c.set_output(2, inv);
  };
  r["RMSNormalization"] = [](Ctx& c) {
    V x = c.in(0);
    NormStage st = norm_stage(c, x);
    V xf = c.convert(x, st.ct);
    V ms = c.reduce(OpKind::ReduceMean, c.bin(OpKind::Mul, xf, xf), st.axes, true);
    V y = c.convert(c.bin(OpKind::Mul, xf, c.unary(OpKind::Rsqrt, c.bin(OpKind::Add, ms, sc(c, st.eps, ms)))), st.dt);
    c.set_output(0, c.bin(OpKind::Mul, y, c.in(1)));
  };
  r["GroupNormalization"] = [](Ctx& c) {
    V x = c.in(0);
    auto d = c.static_shape(x, "X");
    int64_t rk = static_cast<int64_t>(d.size());
    if (rk < 2) c.error("X must have rank >= 2 (N, C, ...), got rank " + std::to_string(rk));
    int64_t g = c.attr_i("num_groups", 1), N = d[0], C = d[1];
    if (g < 1 || C % g) c.error("num_groups " + std::to_string(g) + " must be positive and divide the " + std::to_string(C) + " channels");
    // scale/bias: one per channel (opset 21), one per group before.
    int64_t per = c.opset() < 21 ? g : C;
    for (int i = 1; i <= 2; ++i)
      if (c.static_shape(c.in(i), i == 1 ? "scale" : "bias") != std::vector<int64_t>{per})
        c.error(std::string(i == 1 ? "scale" : "bias") + " must have shape [" + std::to_string(per) + "]" +
                (c.opset() < 21 ? " (one per group before opset 21)" : " (one per channel)"));
    double eps = c.attr_f("epsilon", 1e-5);
    int64_t rest = 1;
    for (int64_t i = 2; i < rk; ++i) rest *= d[i];
    V xg = c.reshape(x, {N, g, (C / g) * rest});
    V y = c.reshape(normalize(c, xg, {2}, eps), d);
    V s = c.in(1), b = c.in(2);
    if (c.opset() < 21) {  // opset 18: per-group scale/bias
      s = c.reshape(c.op1(OpKind::BroadcastInDim, {s}, {{"shape", to_shape({g, C / g})}, {"dims", std::vector<int64_t>{0}}}), {C});
      b = c.reshape(c.op1(OpKind::BroadcastInDim, {b}, {{"shape", to_shape({g, C / g})}, {"dims", std::vector<int64_t>{0}}}), {C});
    }
    c.set_output(0, c.bin(OpKind::Add, c.bin(OpKind::Mul, y, per_channel(c, s, rk)), per_channel(c, b, rk)));
  };
  r["MeanVarianceNormalization"] = [](Ctx& c) {
    V x = c.in(0);
    auto axes = c.attr_ints("axes", {0, 2, 3});
    for (auto& a : axes) a = axis_norm(c, a, c.rank(x));
    V mean = c.reduce(OpKind::ReduceMean, x, axes, true);
    V xc = c.bin(OpKind::Sub, x, mean);
    V var = c.reduce(OpKind::ReduceMean, c.bin(OpKind::Mul, xc, xc), axes, true);
    c.set_output(0, c.bin(OpKind::Div, xc, c.bin(OpKind::Add, c.unary(OpKind::Sqrt, var), sc(c, 1e-9, var))));
  };
  r["LpNormalization"] = [](Ctx& c) {
    V x = c.in(0);
    int64_t ax = axis_norm(c, c.attr_i("axis", -1), c.rank(x));
    int64_t p = c.attr_i("p", 2);
    V n = p == 1 ? c.reduce(OpKind::ReduceSum, c.unary(OpKind::Abs, x), {ax}, true)
                 : c.unary(OpKind::Sqrt, c.reduce(OpKind::ReduceSum, c.bin(OpKind::Mul, x, x), {ax}, true));
    V zero = c.bin(OpKind::Eq, n, sc(c, 0, n));
    c.set_output(0, c.select(zero, sc(c, 0, x), c.bin(OpKind::Div, x, c.select(zero, sc(c, 1, n), n))));
  };
  softmax_like(r, "Softmax");
  softmax_like(r, "LogSoftmax");
  softmax_like(r, "Hardmax");
  r["LRN"] = [](Ctx& c) {
    V x = c.in(0);
    auto d = c.static_shape(x, "X");
    int64_t rk = static_cast<int64_t>(d.size()), size = c.attr_i("size", 1);
    double alpha = c.attr_f("alpha", 1e-4), beta = c.attr_f("beta", 0.75), bias = c.attr_f("bias", 1.0);
    std::vector<int64_t> win(rk, 1), pads(2 * rk, 0);
    win[1] = size;
    pads[1] = (size - 1) / 2;
    pads[rk + 1] = size - 1 - (size - 1) / 2;
    V sq = c.op1(OpKind::ReduceWindow, {c.bin(OpKind::Mul, x, x)}, {{"kind", "sum"}, {"window", win}, {"pads", pads}});
    V den = c.bin(OpKind::Add, sc(c, bias, x), c.bin(OpKind::Mul, sc(c, alpha / size, x), sq));
    c.set_output(0, c.bin(OpKind::Div, x, c.bin(OpKind::Pow, den, sc(c, beta, x))));
  };
}

}  // namespace rlx::onnx
