// ONNX vision ops: GridSample, Col2Im, MaxUnpool, RoiAlign, DeformConv (gathers with
// run-time indices plus weights), and NonMaxSuppression / Unique, whose output shapes depend on
// the data: those two are computed at import when their inputs are known then (constants, or
// values the caller feeds through ImportOptions::input_values) and fail otherwise.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "formats/onnx/importer.h"
#include "formats/onnx/ops_util.h"

namespace rlx::onnx {

namespace {

V k_(Ctx& c, double v, DType dt) { return c.scalar(v, dt); }

// Reflects v into [lo, hi] by bouncing off the borders (GridSample's reflection padding).
V reflect(Ctx& c, V v, double lo, double hi) {
  DType dt = c.dtype(v);
  double rng = hi - lo;
  if (rng <= 0) return c.broadcast_to(k_(c, lo, dt), c.shape(v));
  auto fold = [&](V dx, bool below) {
    V n = c.unary(OpKind::Floor, c.bin(OpKind::Div, dx, k_(c, rng, dt)));
    V r = c.bin(OpKind::Sub, dx, c.bin(OpKind::Mul, n, k_(c, rng, dt)));
    V half = c.bin(OpKind::Mul, n, k_(c, 0.5, dt));
    V even = c.bin(OpKind::Eq, c.unary(OpKind::Floor, half), half);
    V from_lo = c.bin(OpKind::Add, k_(c, lo, dt), r), from_hi = c.bin(OpKind::Sub, k_(c, hi, dt), r);
    return below ? c.select(even, from_lo, from_hi) : c.select(even, from_hi, from_lo);
  };
  V below = c.bin(OpKind::Lt, v, k_(c, lo, dt)), above = c.bin(OpKind::Gt, v, k_(c, hi, dt));
  V lo_v = fold(c.bin(OpKind::Sub, k_(c, lo, dt), v), true);
  V hi_v = fold(c.bin(OpKind::Sub, v, k_(c, hi, dt)), false);
  return c.select(below, lo_v, c.select(above, hi_v, v));
}

// Samples `table` [rows, C] at row index n_base + Σ_d idx_d · stride_d; returns [pts..., C].
V fetch(Ctx& c, V table, V lin) { return c.op1(OpKind::Gather, {table, lin}, {{"axis", int64_t{0}}}); }

void cubic_coeffs(Ctx& c, V t, V out[4]) {
  DType dt = c.dtype(t);
  const double A = -0.75;
  auto k = [&](double v) { return k_(c, v, dt); };
  auto mul = [&](V a, V b) { return c.bin(OpKind::Mul, a, b); };
  auto add = [&](V a, V b) { return c.bin(OpKind::Add, a, b); };
  auto far = [&](V x) {  // ((A(x) - 5A) x + 8A) x - 4A for 1 <= x <= 2
    return c.bin(OpKind::Sub, mul(add(mul(c.bin(OpKind::Sub, mul(k(A), x), k(5 * A)), x), k(8 * A)), x), k(4 * A));
  };
  auto near = [&](V x) {  // ((A+2) x - (A+3)) x² + 1 for x <= 1
    return add(mul(c.bin(OpKind::Sub, mul(k(A + 2), x), k(A + 3)), mul(x, x)), k(1));
  };
  V one_m = c.bin(OpKind::Sub, k(1), t);
  out[0] = far(add(t, k(1)));
  out[1] = near(t);
  out[2] = near(one_m);
  out[3] = far(add(one_m, k(1)));
}

void grid_sample(Ctx& c) {
  V X = c.in(0), grid = c.in(1);
  auto xd = c.static_shape(X, "X"), gd = c.static_shape(grid, "grid");
  int64_t nd = static_cast<int64_t>(xd.size()) - 2;
  if (nd < 1 || static_cast<int64_t>(gd.size()) != nd + 2 || gd.back() != nd) c.error("grid must be [N, out..., spatial rank]");
  std::string mode = c.attr_s("mode", c.opset() >= 20 ? "linear" : "bilinear");
  if (mode == "bilinear") mode = "linear";
  if (mode == "bicubic") mode = "cubic";
  std::string pad = c.attr_s("padding_mode", "zeros");
  bool ac = c.attr_i("align_corners", 0) != 0;
  if (mode != "linear" && mode != "nearest" && mode != "cubic") c.error("unsupported mode '" + mode + "'");
  if (pad != "zeros" && pad != "border" && pad != "reflection") c.error("unsupported padding_mode '" + pad + "'");
  DType odt = c.dtype(X);
  DType dt = DType::f32;
  int64_t N = xd[0], C = xd[1];
  std::vector<int64_t> sp(xd.begin() + 2, xd.end());
  std::vector<int64_t> os(gd.begin(), gd.end() - 1);  // [N, out...]
  int64_t S = 1;
  for (auto v : sp) S *= v;
  // table: [N*S, C]
  std::vector<int64_t> perm{0};
  for (int64_t i = 0; i < nd; ++i) perm.push_back(2 + i);
  perm.push_back(1);
  V table = c.reshape(c.transpose(c.convert(X, dt), perm), {N * S, C});
  V g = c.convert(grid, dt);
  V nbase = c.bin(OpKind::Mul, c.op1(OpKind::Iota, {}, {{"shape", to_shape(os)}, {"dim", int64_t{0}}, {"dtype", DType::i64}}),
                  c.scalar(static_cast<double>(S), DType::i64));
  // Per spatial dim d: continuous coordinate x_d [N, out...].
  std::vector<V> xs;
  std::vector<double> lo(nd), hi(nd);
  for (int64_t d = 0; d < nd; ++d) {
    int64_t len = sp[d];
    V gn = c.reshape(c.slice_axis(g, nd + 1, nd - 1 - d, nd - d), os);
    V x = ac ? c.bin(OpKind::Mul, c.bin(OpKind::Add, gn, k_(c, 1, dt)), k_(c, (len - 1) / 2.0, dt))
             : c.bin(OpKind::Div, c.bin(OpKind::Sub, c.bin(OpKind::Mul, c.bin(OpKind::Add, gn, k_(c, 1, dt)), k_(c, static_cast<double>(len), dt)), k_(c, 1, dt)), k_(c, 2, dt));
    if (mode == "nearest") x = c.unary(OpKind::Round, x);
    lo[d] = ac ? 0.0 : -0.5;
    hi[d] = ac ? len - 1.0 : len - 0.5;
    if (pad == "border") x = c.bin(OpKind::Min, c.bin(OpKind::Max, x, k_(c, 0, dt)), k_(c, len - 1.0, dt));
    else if (pad == "reflection") x = reflect(c, x, lo[d], hi[d]);
    xs.push_back(x);
  }
  // Taps per dim: integer positions and weights.
  std::vector<std::vector<std::pair<V, V>>> taps(static_cast<size_t>(nd));  // (index f32, weight)
  for (int64_t d = 0; d < nd; ++d) {
    V x = xs[d];
    if (mode == "nearest") {
      taps[d].push_back({x, c.broadcast_to(k_(c, 1, dt), to_shape(os))});
      continue;
    }
    V x0 = c.unary(OpKind::Floor, x), t = c.bin(OpKind::Sub, x, x0);
    if (mode == "linear") {
      taps[d].push_back({x0, c.bin(OpKind::Sub, k_(c, 1, dt), t)});
      taps[d].push_back({c.bin(OpKind::Add, x0, k_(c, 1, dt)), t});
    } else {
      V w[4];
      cubic_coeffs(c, t, w);
      for (int j = 0; j < 4; ++j) taps[d].push_back({c.bin(OpKind::Add, x0, k_(c, j - 1.0, dt)), w[j]});
    }
  }
  // Pixel index with the padding mode applied to each tap: (i64 clamped index, validity).
  std::vector<std::vector<std::pair<V, std::optional<V>>>> tix(static_cast<size_t>(nd));
  for (int64_t d = 0; d < nd; ++d)
    for (auto& [pos, w] : taps[d]) {
      (void)w;
      V p = pos;
      std::optional<V> valid;
      if (pad == "zeros")
        valid = c.bin(OpKind::And, c.bin(OpKind::Ge, p, k_(c, 0, dt)), c.bin(OpKind::Le, p, k_(c, sp[d] - 1.0, dt)));
      else if (pad == "reflection") p = reflect(c, p, lo[d], hi[d]);
      V i = c.convert(p, DType::i64);
      i = c.bin(OpKind::Min, c.bin(OpKind::Max, i, c.scalar(0, DType::i64)), c.scalar(static_cast<double>(sp[d] - 1), DType::i64));
      tix[d].push_back({i, valid});
    }
  std::vector<int64_t> strides(static_cast<size_t>(nd), 1);
  for (int64_t d = nd - 2; d >= 0; --d) strides[d] = strides[d + 1] * sp[d + 1];
  std::vector<int64_t> os1 = os;
  os1.push_back(1);
  std::optional<V> acc;
  std::vector<size_t> sel(static_cast<size_t>(nd), 0);
  while (true) {
    V lin = nbase, w = c.broadcast_to(k_(c, 1, dt), to_shape(os));
    std::optional<V> valid;
    for (int64_t d = 0; d < nd; ++d) {
      auto& [i, vd] = tix[d][sel[d]];
      lin = c.bin(OpKind::Add, lin, c.bin(OpKind::Mul, i, c.scalar(static_cast<double>(strides[d]), DType::i64)));
      w = c.bin(OpKind::Mul, w, taps[d][sel[d]].second);
      if (vd) valid = valid ? c.bin(OpKind::And, *valid, *vd) : *vd;
    }
    if (valid) w = c.select(*valid, w, c.broadcast_to(k_(c, 0, dt), to_shape(os)));
    V term = c.bin(OpKind::Mul, fetch(c, table, lin), c.reshape(w, os1));
    acc = acc ? c.bin(OpKind::Add, *acc, term) : term;
    int64_t d = nd - 1;
    while (d >= 0 && ++sel[d] == taps[d].size()) sel[d--] = 0;
    if (d < 0) break;
  }
  // [N, out..., C] -> [N, C, out...]
  std::vector<int64_t> back{0, nd + 1};
  for (int64_t i = 0; i < nd; ++i) back.push_back(1 + i);
  c.set_output(0, c.convert(c.transpose(*acc, back), odt));
}

void col2im(Ctx& c) {
  V x = c.in(0);
  auto img = c.ints_in(1, "image_shape"), blk = c.ints_in(2, "block_shape");
  auto xd = c.static_shape(x, "input");
  int64_t nd = static_cast<int64_t>(img.size());
  if (static_cast<int64_t>(blk.size()) != nd || xd.size() != 3) c.error("bad Col2Im shapes");
  auto dil = c.attr_ints("dilations", std::vector<int64_t>(nd, 1));
  auto st = c.attr_ints("strides", std::vector<int64_t>(nd, 1));
  auto pads = c.attr_ints("pads", std::vector<int64_t>(2 * nd, 0));
  int64_t nb = 1;
  for (auto v : blk) nb *= v;
  int64_t N = xd[0], C = xd[1] / nb, L = xd[2];
  if (C * nb != xd[1]) c.error("input dim 1 must be C x prod(block_shape)");
  std::vector<int64_t> P(nd), nl(nd);
  int64_t ltot = 1, ptot = 1;
  for (int64_t d = 0; d < nd; ++d) {
    P[d] = img[d] + pads[d] + pads[nd + d];
    nl[d] = (P[d] - (dil[d] * (blk[d] - 1) + 1)) / st[d] + 1;
    ltot *= nl[d];
    ptot *= P[d];
  }
  if (ltot != L) c.error("input dim 2 (" + std::to_string(L) + ") does not match the number of blocks " + std::to_string(ltot));
  Tensor idx(DType::i64, {nb, L});
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t l = 0; l < L; ++l) {
      int64_t rb = b, rl = l, lin = 0;
      std::vector<int64_t> bi(nd), li(nd);
      for (int64_t d = nd - 1; d >= 0; --d) {
        bi[d] = rb % blk[d];
        rb /= blk[d];
        li[d] = rl % nl[d];
        rl /= nl[d];
      }
      for (int64_t d = 0; d < nd; ++d) lin = lin * P[d] + li[d] * st[d] + bi[d] * dil[d];
      idx.set_int(b * L + l, lin);
    }
  V upd = c.reshape(x, {N, C, nb, L});
  V zero = c.broadcast_to(c.scalar(0, c.dtype(x)), to_shape({N, C, ptot}));
  V y = c.op1(OpKind::ScatterAdd, {zero, c.constant(idx), upd}, {{"axis", int64_t{2}}});
  std::vector<int64_t> ps{N, C};
  ps.insert(ps.end(), P.begin(), P.end());
  y = c.reshape(y, ps);
  for (int64_t d = 0; d < nd; ++d) y = c.slice_axis(y, 2 + d, pads[d], pads[d] + img[d]);
  c.set_output(0, y);
}

void max_unpool(Ctx& c) {
  V x = c.in(0), I = c.in(1);
  auto xd = c.static_shape(x, "X");
  int64_t nd = static_cast<int64_t>(xd.size()) - 2;
  auto ks = c.attr_ints("kernel_shape");
  auto st = c.attr_ints("strides", std::vector<int64_t>(nd, 1));
  auto pads = c.attr_ints("pads", std::vector<int64_t>(2 * nd, 0));
  if (static_cast<int64_t>(ks.size()) != nd) c.error("kernel_shape must have one entry per spatial dim");
  // Indices address the inferred (un-padded pooling) shape; output_shape, when larger, pads at the end.
  std::vector<int64_t> inf{xd[0], xd[1]};
  for (int64_t d = 0; d < nd; ++d) inf.push_back((xd[2 + d] - 1) * st[d] + ks[d] - pads[d] - pads[nd + d]);
  std::vector<int64_t> out = c.has_input(2) ? c.ints_in(2, "output_shape") : inf;
  if (out.size() != inf.size()) c.error("output_shape has the wrong rank");
  int64_t tot = 1, n = 1;
  for (auto v : inf) tot *= v;
  for (auto v : xd) n *= v;
  V zero = c.broadcast_to(c.scalar(0, c.dtype(x)), to_shape({tot}));
  V y = c.op1(OpKind::ScatterAdd, {zero, c.reshape(c.convert(I, DType::i64), {n}), c.reshape(x, {n})}, {{"axis", int64_t{0}}});
  y = c.reshape(y, inf);
  std::vector<int64_t> lo(inf.size(), 0), hi(inf.size(), 0);
  bool grow = false;
  for (size_t d = 0; d < inf.size(); ++d) {
    if (out[d] < inf[d]) c.error("output_shape smaller than the inferred unpooled shape is unsupported");
    hi[d] = out[d] - inf[d];
    grow = grow || hi[d] > 0;
  }
  if (grow) y = c.op1(OpKind::Pad, {y}, {{"low", lo}, {"high", hi}});
  c.set_output(0, y);
}

// The four bilinear corner terms table[row] * weight ([P..., C] each, for sample coordinates y, x of
// shape [P...]; row = nb + y_i * W + x_j) in the order (y0,x0), (y0,x1), (y1,x0), (y1,x1), shared by
// RoiAlign (avg sums them, max takes their maximum) and DeformConv. Edge rules:
// - kRoiAlign: coordinates clamped to >= 0 and the last row/column repeated; `outside` marks points
//   outside (-1, H) x (-1, W), which the caller zeroes after combining the terms;
// - kZeros: corners outside the image weigh 0.
enum class BilinearEdge { kRoiAlign, kZeros };
struct BilinearTerms {
  V term[4];
  std::optional<V> outside;
};
BilinearTerms bilinear_terms(Ctx& c, V table, V nb, V y, V x, int64_t H, int64_t W, BilinearEdge edge) {
  DType dt = c.dtype(y);
  auto k = [&](double v) { return k_(c, v, dt); };
  std::vector<int64_t> ps = c.static_shape(y, "sample coordinates"), ps1 = ps;
  ps1.push_back(1);
  BilinearTerms r;
  V y0, x0, y1, x1;
  if (edge == BilinearEdge::kRoiAlign) {
    r.outside = c.bin(OpKind::Or, c.bin(OpKind::Or, c.bin(OpKind::Lt, y, k(-1)), c.bin(OpKind::Gt, y, k(static_cast<double>(H)))),
                      c.bin(OpKind::Or, c.bin(OpKind::Lt, x, k(-1)), c.bin(OpKind::Gt, x, k(static_cast<double>(W)))));
    y = c.bin(OpKind::Max, y, k(0));
    x = c.bin(OpKind::Max, x, k(0));
    y0 = c.unary(OpKind::Floor, y);
    x0 = c.unary(OpKind::Floor, x);
    V yhi = c.bin(OpKind::Ge, y0, k(H - 1.0)), xhi = c.bin(OpKind::Ge, x0, k(W - 1.0));
    y0 = c.bin(OpKind::Min, y0, k(H - 1.0));
    x0 = c.bin(OpKind::Min, x0, k(W - 1.0));
    y1 = c.bin(OpKind::Min, c.bin(OpKind::Add, y0, k(1)), k(H - 1.0));
    x1 = c.bin(OpKind::Min, c.bin(OpKind::Add, x0, k(1)), k(W - 1.0));
    y = c.select(yhi, y0, y);
    x = c.select(xhi, x0, x);
  } else {
    y0 = c.unary(OpKind::Floor, y);
    x0 = c.unary(OpKind::Floor, x);
    y1 = c.bin(OpKind::Add, y0, k(1));
    x1 = c.bin(OpKind::Add, x0, k(1));
  }
  V ly = c.bin(OpKind::Sub, y, y0), lx = c.bin(OpKind::Sub, x, x0);
  V ys[2] = {y0, y1}, xs[2] = {x0, x1};
  V wy[2] = {c.bin(OpKind::Sub, k(1), ly), ly}, wx[2] = {c.bin(OpKind::Sub, k(1), lx), lx};
  // Row index of an integral coordinate (clamped into the image for kZeros, whose outside corners weigh 0).
  auto index = [&](V v, int64_t len) {
    if (edge == BilinearEdge::kZeros) v = c.bin(OpKind::Min, c.bin(OpKind::Max, v, k(0)), k(len - 1.0));
    return c.convert(v, DType::i64);
  };
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b) {
      V w = c.bin(OpKind::Mul, wy[a], wx[b]);
      if (edge == BilinearEdge::kZeros) {
        V ok = c.bin(OpKind::And, c.bin(OpKind::And, c.bin(OpKind::Ge, ys[a], k(0)), c.bin(OpKind::Le, ys[a], k(H - 1.0))),
                     c.bin(OpKind::And, c.bin(OpKind::Ge, xs[b], k(0)), c.bin(OpKind::Le, xs[b], k(W - 1.0))));
        w = c.select(ok, w, c.broadcast_to(k(0), to_shape(ps)));
      }
      V lin = c.bin(OpKind::Add, nb, c.bin(OpKind::Add, c.bin(OpKind::Mul, index(ys[a], H), c.scalar(static_cast<double>(W), DType::i64)),
                                           index(xs[b], W)));
      r.term[2 * a + b] = c.bin(OpKind::Mul, fetch(c, table, lin), c.reshape(w, ps1));
    }
  return r;
}

void roi_align(Ctx& c) {
  V X = c.in(0), rois = c.in(1), bi = c.in(2);
  auto xd = c.static_shape(X, "X"), rd = c.static_shape(rois, "rois");
  if (xd.size() != 4 || rd.size() != 2 || rd[1] != 4) c.error("expects X [N,C,H,W] and rois [R,4]");
  int64_t N = xd[0], C = xd[1], H = xd[2], W = xd[3], R = rd[0];
  int64_t oh = c.attr_i("output_height", 1), ow = c.attr_i("output_width", 1), sr = c.attr_i("sampling_ratio", 0);
  double scale = c.attr_f("spatial_scale", 1.0);
  std::string mode = c.attr_s("mode", "avg");
  bool half = c.attr_s("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  if (sr <= 0) c.error("sampling_ratio 0 (adaptive, data-dependent sample counts) is unsupported");
  DType odt = c.dtype(X), dt = DType::f32;
  V table = c.reshape(c.transpose(c.convert(X, dt), {0, 2, 3, 1}), {N * H * W, C});
  V rf = c.convert(rois, dt);
  auto colv = [&](int64_t j) { return c.reshape(c.slice_axis(rf, 1, j, j + 1), {R}); };
  double off = half ? 0.5 : 0.0;
  auto k = [&](double v) { return k_(c, v, dt); };
  V x1 = c.bin(OpKind::Sub, c.bin(OpKind::Mul, colv(0), k(scale)), k(off));
  V y1 = c.bin(OpKind::Sub, c.bin(OpKind::Mul, colv(1), k(scale)), k(off));
  V x2 = c.bin(OpKind::Sub, c.bin(OpKind::Mul, colv(2), k(scale)), k(off));
  V y2 = c.bin(OpKind::Sub, c.bin(OpKind::Mul, colv(3), k(scale)), k(off));
  V rw = c.bin(OpKind::Sub, x2, x1), rh = c.bin(OpKind::Sub, y2, y1);
  if (!half) {
    rw = c.bin(OpKind::Max, rw, k(1));
    rh = c.bin(OpKind::Max, rh, k(1));
  }
  V bh = c.bin(OpKind::Div, rh, k(static_cast<double>(oh))), bw = c.bin(OpKind::Div, rw, k(static_cast<double>(ow)));
  // Sample grid [R, oh, ow, sr, sr]: y = y1 + ph*bh + (iy + .5)*bh/sr.
  std::vector<int64_t> gs{R, oh, ow, sr, sr};
  auto io = [&](int64_t d) { return c.convert(c.op1(OpKind::Iota, {}, {{"shape", to_shape(gs)}, {"dim", d}, {"dtype", DType::i64}}), dt); };
  auto per_roi = [&](V v) { return c.reshape(v, {R, 1, 1, 1, 1}); };
  V ys = c.bin(OpKind::Add, per_roi(y1), c.bin(OpKind::Mul, c.bin(OpKind::Add, io(1), c.bin(OpKind::Div, c.bin(OpKind::Add, io(3), k(0.5)), k(static_cast<double>(sr)))), per_roi(bh)));
  V xs = c.bin(OpKind::Add, per_roi(x1), c.bin(OpKind::Mul, c.bin(OpKind::Add, io(2), c.bin(OpKind::Div, c.bin(OpKind::Add, io(4), k(0.5)), k(static_cast<double>(sr)))), per_roi(bw)));
  int64_t pts = R * oh * ow * sr * sr;
  V nb = c.bin(OpKind::Mul, c.convert(bi, DType::i64), c.scalar(static_cast<double>(H * W), DType::i64));
  nb = c.reshape(c.broadcast_to(c.reshape(nb, {R, 1, 1, 1, 1}), to_shape(gs)), {pts});
  if (mode != "avg" && mode != "max") c.error("unsupported mode '" + mode + "'");
  // avg: the mean of the bilinear samples; max (as the ONNX reference does it): the max over samples
  // of each bilinear term product.
  auto t = bilinear_terms(c, table, nb, c.reshape(ys, {pts}), c.reshape(xs, {pts}), H, W, BilinearEdge::kRoiAlign);
  OpKind combine = mode == "avg" ? OpKind::Add : OpKind::Max;
  V v = t.term[0];
  for (int i = 1; i < 4; ++i) v = c.bin(combine, v, t.term[i]);  // [pts, C]
  v = c.select(c.broadcast_to(c.reshape(*t.outside, {pts, 1}), c.shape(v)), c.broadcast_to(k(0), c.shape(v)), v);
  v = c.reshape(v, {R, oh, ow, sr * sr, C});
  v = mode == "avg" ? c.bin(OpKind::Div, c.reduce(OpKind::ReduceSum, v, {3}, false), k(static_cast<double>(sr * sr)))
                    : c.reduce(OpKind::ReduceMax, v, {3}, false);
  c.set_output(0, c.convert(c.transpose(v, {0, 3, 1, 2}), odt));
}

// DeformConv (2-D): bilinear samples (zeros outside) at kernel taps shifted by the offsets, scaled
// by the mask, then a grouped contraction with W as one dot_general.
void deform_conv(Ctx& c) {
  V X = c.in(0), Wt = c.in(1), off = c.in(2);
  auto xd = c.static_shape(X, "X"), wd = c.static_shape(Wt, "W"), od = c.static_shape(off, "offset");
  if (xd.size() != 4) c.error("only 2-D DeformConv is supported");
  if (wd.size() != 4 || od.size() != 4) c.error("W and offset must have rank 4 like X");
  int64_t N = xd[0], C = xd[1], H = xd[2], W = xd[3], OC = wd[0], icg = wd[1], kh = wd[2], kw = wd[3];
  int64_t G = c.attr_i("group", 1), OG = c.attr_i("offset_group", 1);
  auto st = c.attr_ints("strides", {1, 1}), dil = c.attr_ints("dilations", {1, 1}), pads = c.attr_ints("pads", {0, 0, 0, 0});
  int64_t oh = od[2], ow = od[3];
  if (icg * G != C || OC % G || C % OG || od[1] != OG * 2 * kh * kw) c.error("inconsistent DeformConv shapes");
  DType odt = c.dtype(X), dt = DType::f32;
  auto k = [&](double v) { return k_(c, v, dt); };
  V table = c.reshape(c.transpose(c.convert(X, dt), {0, 2, 3, 1}), {N * H * W, C});
  V of = c.reshape(c.convert(off, dt), {N, OG, kh, kw, 2, oh, ow});
  std::vector<int64_t> ps{N, OG, kh, kw, oh, ow};
  auto io = [&](int64_t d) { return c.convert(c.op1(OpKind::Iota, {}, {{"shape", to_shape(ps)}, {"dim", d}, {"dtype", DType::i64}}), dt); };
  auto comp = [&](int64_t j) { return c.reshape(c.slice_axis(of, 4, j, j + 1), ps); };
  V y = c.bin(OpKind::Add, c.bin(OpKind::Add, c.bin(OpKind::Mul, io(4), k(static_cast<double>(st[0]))), c.bin(OpKind::Mul, io(2), k(static_cast<double>(dil[0])))),
              c.bin(OpKind::Sub, comp(0), k(static_cast<double>(pads[0]))));
  V x = c.bin(OpKind::Add, c.bin(OpKind::Add, c.bin(OpKind::Mul, io(5), k(static_cast<double>(st[1]))), c.bin(OpKind::Mul, io(3), k(static_cast<double>(dil[1])))),
              c.bin(OpKind::Sub, comp(1), k(static_cast<double>(pads[1]))));
  V nb = c.op1(OpKind::Iota, {}, {{"shape", to_shape(ps)}, {"dim", int64_t{0}}, {"dtype", DType::i64}});
  nb = c.bin(OpKind::Mul, nb, c.scalar(static_cast<double>(H * W), DType::i64));
  std::vector<int64_t> ps1 = ps;
  ps1.push_back(1);
  auto t = bilinear_terms(c, table, nb, y, x, H, W, BilinearEdge::kZeros);  // [N, OG, kh, kw, oh, ow, C] each
  V S = c.bin(OpKind::Add, c.bin(OpKind::Add, c.bin(OpKind::Add, t.term[0], t.term[1]), t.term[2]), t.term[3]);
  if (c.has_input(4)) S = c.bin(OpKind::Mul, S, c.reshape(c.convert(c.in(4), dt), ps1));
  // Keep, for channel ch, the samples of its offset group og(ch) = ch / (C / OG).
  if (OG > 1) {
    std::vector<int64_t> s8{N, OG, kh, kw, oh, ow, OG, C / OG};
    S = c.reshape(S, s8);
    V eq = c.bin(OpKind::Eq, c.op1(OpKind::Iota, {}, {{"shape", to_shape(s8)}, {"dim", int64_t{1}}, {"dtype", DType::i64}}),
                 c.op1(OpKind::Iota, {}, {{"shape", to_shape(s8)}, {"dim", int64_t{6}}, {"dtype", DType::i64}}));
    S = c.reduce(OpKind::ReduceSum, c.select(eq, S, c.broadcast_to(k(0), to_shape(s8))), {1}, false);  // [N,kh,kw,oh,ow,OG,C/OG]
  } else {
    S = c.reshape(S, {N, kh, kw, oh, ow, C});
  }
  S = c.reshape(S, {N, kh, kw, oh * ow, G, icg});
  S = c.reshape(c.transpose(S, {0, 4, 5, 1, 2, 3}), {N, G, icg * kh * kw, oh * ow});
  V Wg = c.reshape(c.convert(Wt, dt), {G, OC / G, icg * kh * kw});
  V out = c.op1(OpKind::DotGeneral, {Wg, S}, {{"lhs_batch", std::vector<int64_t>{0}}, {"rhs_batch", std::vector<int64_t>{1}},
                                              {"lhs_contract", std::vector<int64_t>{2}}, {"rhs_contract", std::vector<int64_t>{2}}});
  out = c.reshape(c.transpose(out, {2, 0, 1, 3}), {N, OC, oh, ow});  // [G, OC/G, N, ohw] -> [N, OC, oh, ow]
  if (c.has_input(3)) out = c.bin(OpKind::Add, out, c.reshape(c.convert(c.in(3), dt), {1, OC, 1, 1}));
  c.set_output(0, c.convert(out, odt));
}

// ---- import-time ops (data-dependent output shapes) -------------------------------------------------

void nms(Ctx& c) {
  const Tensor& boxes = c.const_in(0, "boxes");
  const Tensor& scores = c.const_in(1, "scores");
  int64_t maxo = c.has_input(2) && c.const_in(2, "max_output_boxes_per_class").numel() ? c.ints_in(2, "max_output_boxes_per_class")[0] : 0;
  maxo = std::max<int64_t>(maxo, 0);
  bool has_iou = c.has_input(3) && c.const_in(3, "iou_threshold").numel();
  float iou_t = has_iou ? static_cast<float>(c.const_in(3, "iou_threshold").get(0)) : 0.f;
  bool has_st = c.has_input(4) && c.const_in(4, "score_threshold").numel();
  float sc_t = has_st ? static_cast<float>(c.const_in(4, "score_threshold").get(0)) : 0.f;
  bool center = c.attr_i("center_point_box", 0) != 0;
  auto& bd = boxes.shape();
  auto& sd = scores.shape();
  if (bd.size() != 3 || bd[2] != 4 || sd.size() != 3 || sd[0] != bd[0] || sd[2] != bd[1]) c.error("bad boxes/scores shapes");
  int64_t B = bd[0], NB = bd[1], NC = sd[1];
  auto box = [&](int64_t b, int64_t i, int k) { return static_cast<float>(boxes.get((b * NB + i) * 4 + k)); };
  auto suppress = [&](int64_t b, int64_t i, int64_t j) {
    float x1a, x1b, y1a, y1b, x2a, x2b, y2a, y2b;
    if (!center) {
      x1a = std::min(box(b, i, 1), box(b, i, 3)); x1b = std::max(box(b, i, 1), box(b, i, 3));
      x2a = std::min(box(b, j, 1), box(b, j, 3)); x2b = std::max(box(b, j, 1), box(b, j, 3));
      y1a = std::min(box(b, i, 0), box(b, i, 2)); y1b = std::max(box(b, i, 0), box(b, i, 2));
      y2a = std::min(box(b, j, 0), box(b, j, 2)); y2b = std::max(box(b, j, 0), box(b, j, 2));
    } else {
      x1a = box(b, i, 0) - box(b, i, 2) / 2; x1b = box(b, i, 0) + box(b, i, 2) / 2;
      x2a = box(b, j, 0) - box(b, j, 2) / 2; x2b = box(b, j, 0) + box(b, j, 2) / 2;
      y1a = box(b, i, 1) - box(b, i, 3) / 2; y1b = box(b, i, 1) + box(b, i, 3) / 2;
      y2a = box(b, j, 1) - box(b, j, 3) / 2; y2b = box(b, j, 1) + box(b, j, 3) / 2;
    }
    float ix0 = std::max(x1a, x2a), ix1 = std::min(x1b, x2b);
    if (ix1 <= ix0) return false;
    float iy0 = std::max(y1a, y2a), iy1 = std::min(y1b, y2b);
    if (iy1 <= iy0) return false;
    float inter = (ix1 - ix0) * (iy1 - iy0);
    if (inter <= 0) return false;
    float a1 = (x1b - x1a) * (y1b - y1a), a2 = (x2b - x2a) * (y2b - y2a), uni = a1 + a2 - inter;
    if (a1 <= 0 || a2 <= 0 || uni <= 0) return false;
    return inter / uni > iou_t;
  };
  std::vector<int64_t> sel;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = 0; k < NC; ++k) {
      std::vector<std::pair<float, int64_t>> cand;
      for (int64_t i = 0; i < NB; ++i) {
        float s = static_cast<float>(scores.get((b * NC + k) * NB + i));
        if (!has_st || s > sc_t) cand.push_back({s, i});
      }
      // Highest score first; ties keep the lower box index first.
      std::stable_sort(cand.begin(), cand.end(), [](auto& x, auto& y) { return x.first > y.first; });
      std::vector<int64_t> kept;
      for (auto& [s, i] : cand) {
        if (static_cast<int64_t>(kept.size()) >= maxo) break;
        bool ok = true;
        for (int64_t j : kept)
          if (suppress(b, i, j)) {
            ok = false;
            break;
          }
        if (ok) {
          kept.push_back(i);
          sel.insert(sel.end(), {b, k, i});
        }
      }
    }
  Tensor out(DType::i64, {static_cast<int64_t>(sel.size() / 3), 3});
  for (size_t i = 0; i < sel.size(); ++i) out.set_int(static_cast<int64_t>(i), sel[i]);
  c.set_output(0, c.constant(out));
}

void unique(Ctx& c) {
  const Tensor& x = c.const_in(0, "X");
  bool sorted = c.attr_i("sorted", 1) != 0;
  std::vector<int64_t> d = x.shape();
  bool has_axis = c.has_attr("axis");
  int64_t r = static_cast<int64_t>(d.size());
  int64_t ax = has_axis ? c.attr_i("axis", 0) : 0;
  if (has_axis && (ax < -r || ax >= r)) c.error("axis out of range");
  if (ax < 0) ax += r;
  // Slices along the axis (or single elements when no axis) as vectors of doubles.
  int64_t outer = 1, n = x.numel(), inner = 1;
  if (has_axis) {
    for (int64_t i = 0; i < ax; ++i) outer *= d[i];
    for (int64_t i = ax + 1; i < r; ++i) inner *= d[i];
    n = d[ax];
  }
  auto slice = [&](int64_t s) {
    std::vector<double> v;
    if (!has_axis) return std::vector<double>{x.get(s)};
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) v.push_back(x.get((o * n + s) * inner + i));
    return v;
  };
  std::vector<std::vector<double>> sl(static_cast<size_t>(n));
  for (int64_t s = 0; s < n; ++s) sl[s] = slice(s);
  std::vector<int64_t> first;  // representative slice index per unique value, in output order
  std::map<std::vector<double>, int64_t> seen;  // value -> first index
  for (int64_t s = 0; s < n; ++s)
    if (!seen.count(sl[s])) {
      seen[sl[s]] = s;
      first.push_back(s);
    }
  if (sorted) {
    first.clear();
    for (auto& [v, s] : seen) first.push_back(s);
  }
  std::map<std::vector<double>, int64_t> pos;
  for (size_t u = 0; u < first.size(); ++u) pos[sl[first[u]]] = static_cast<int64_t>(u);
  int64_t U = static_cast<int64_t>(first.size());
  Tensor counts(DType::i64, {U}), idx(DType::i64, {U}), invt(DType::i64, {n});
  for (int64_t s = 0; s < n; ++s) {
    int64_t u = pos[sl[s]];
    invt.set_int(s, u);
    counts.set_int(u, counts.get_int(u) + 1);
  }
  for (int64_t u = 0; u < U; ++u) idx.set_int(u, first[u]);
  std::vector<int64_t> yd = has_axis ? d : std::vector<int64_t>{U};
  if (has_axis) yd[ax] = U;
  Tensor y(x.dtype(), yd);
  for (int64_t u = 0; u < U; ++u) {
    int64_t s = first[u];
    if (!has_axis) {
      if (is_float(x.dtype())) y.set(u, x.get(s));
      else y.set_int(u, x.get_int(s));
      continue;
    }
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t src = (o * n + s) * inner + i, dst = (o * U + u) * inner + i;
        if (is_float(x.dtype())) y.set(dst, x.get(src));
        else y.set_int(dst, x.get_int(src));
      }
  }
  c.set_output(0, c.constant(y));
  c.set_output(1, c.constant(idx));
  c.set_output(2, c.constant(invt));
  c.set_output(3, c.constant(counts));
}

}  // namespace

void register_vision_ops(std::map<std::string, Converter>& r) {
  r["GridSample"] = grid_sample;
  r["Col2Im"] = col2im;
  r["MaxUnpool"] = max_unpool;
  r["RoiAlign"] = roi_align;
  r["NonMaxSuppression"] = nms;
  r["Unique"] = unique;
  r["DeformConv"] = deform_conv;
}

}  // namespace rlx::onnx
