// ONNX ops that compose from a few others: quantization, Compress, CenterCropPad, LpPool, MatMulInteger.
#include <algorithm>
#include <cmath>

#include "formats/onnx/importer.h"
#include "formats/onnx/ops_util.h"
#include "formats/onnx/storage_formats.h"

namespace rlx::onnx {

namespace {

V sc(Ctx& c, double v, V like) { return c.scalar(v, c.dtype(like)); }

// Reshapes a per-axis parameter [C] to broadcast along `axis` of a rank-r tensor (scalars pass through).
V along(Ctx& c, V p, int64_t axis, int64_t r) {
  if (c.rank(p) == 0) return p;
  if (int64_t bs = c.attr_i("block_size", 0)) {
    // blocked: p has x's rank with dim `axis` = ceil(len / bs); repeat each entry bs times.
    if (c.rank(p) != r) c.error("blocked quantization needs a scale of the input's rank");
    int64_t len = c.static_shape(c.in(0), "input")[axis];
    std::vector<int64_t> idx(static_cast<size_t>(len));
    for (int64_t i = 0; i < len; ++i) idx[i] = i / bs;
    return c.op1(OpKind::Gather, {p, c.ints_const(idx)}, {{"axis", axis}});
  }
  if (c.rank(p) != 1) c.error("blocked quantization is unsupported");
  std::vector<int64_t> s(static_cast<size_t>(r), 1);
  s[axis] = c.static_shape(p, "scale")[0];
  return c.reshape(p, s);
}

// The common int8 case as the affine ops (quantize_affine / dequantize_affine, which fuse-qdq reads):
// f32 scale, i8/u8 (dequantize: also i32) zero point of the quantized dtype `qt`, rank 0 or [C] along
// `ax`, no blocks, no narrow storage type. False (nothing emitted) otherwise.
bool affine_params(Ctx& c, V x, DType qt, int64_t ax, V* out) {
  bool deq = c.node().op_type() == "DequantizeLinear";
  if (qt != DType::i8 && qt != DType::u8 && !(deq && qt == DType::i32)) return false;
  if (c.attr_i("block_size", 0) || c.storage_type(x) || (c.has_input(2) && c.storage_type(c.in(2)))) return false;
  if (!deq && c.has_attr("output_dtype") && !c.has_input(2)) return false;
  V s = c.in(1);
  if (c.dtype(s) != DType::f32 || c.rank(s) > 1) return false;
  if (c.has_input(2) && (c.dtype(c.in(2)) != qt || c.shape(c.in(2)) != c.shape(s))) return false;
  bool per = c.rank(s) == 1;
  if (per && (ax < 0 || ax >= c.rank(x) || !c.shape(s)[0].is_static() || !c.shape(x)[static_cast<size_t>(ax)].is_static() ||
              c.shape(s)[0].v != c.shape(x)[static_cast<size_t>(ax)].v))
    return false;
  V z = c.has_input(2) ? c.in(2) : c.scalar(0, qt);
  if (!c.has_input(2) && per) return false;
  Attrs a{{"axis", per ? ax : int64_t{-1}}};
  *out = deq ? c.op(OpKind::DequantizeAffine, {x, s, z}, a, /*fold=*/false)[0] : c.op1(OpKind::QuantizeAffine, {x, s, z}, a);
  return true;
}

}  // namespace

void register_misc_ops(std::map<std::string, Converter>& r) {
  r["DequantizeLinear"] = [](Ctx& c) {
    V x = c.in(0), s = c.in(1);
    int64_t rk = c.rank(x), ax = c.attr_i("axis", 1);
    if (ax < 0) ax += rk;
    if (V q; affine_params(c, x, c.dtype(x), ax, &q)) return c.set_output(0, q);
    DType ft = c.dtype(s);
    V xf = c.convert(x, DType::f32);
    if (c.has_input(2)) xf = c.bin(OpKind::Sub, xf, along(c, c.convert(c.in(2), DType::f32), ax, rk));
    V y = c.bin(OpKind::Mul, xf, along(c, c.convert(s, DType::f32), ax, rk));
    c.set_output(0, c.convert(y, ft));
  };
  r["QuantizeLinear"] = [](Ctx& c) {
    V x = c.in(0), s = c.in(1);
    int64_t rk = c.rank(x), ax = c.attr_i("axis", 1);
    if (ax < 0) ax += rk;
    if (V q; c.dtype(x) == DType::f32 && affine_params(c, x, c.has_input(2) ? c.dtype(c.in(2)) : DType::u8, ax, &q)) return c.set_output(0, q);
    DType qt = DType::u8;
    int narrow = 0;  // storage-only target (float8/float4/int4/int2), carried in f32/i32
    if (c.has_input(2)) {
      qt = c.dtype(c.in(2));
      narrow = c.storage_type(c.in(2));
    } else if (c.has_attr("output_dtype")) {
      int odt = static_cast<int>(c.attr_i("output_dtype", 2));
      if (!onnx_dtype(odt, &qt)) c.error("unsupported output_dtype");
      if (is_narrow_type(odt)) narrow = odt;
    }
    if (narrow && is_narrow_float(narrow)) {
      // Float formats: x / scale cast onto the grid (ONNX ignores the zero point for float8, which
      // must be 0; float4 adds it before the cast).
      V y = c.bin(OpKind::Div, c.convert(x, DType::f32), along(c, c.convert(s, DType::f32), ax, rk));
      if (narrow == ::onnx::TensorProto::FLOAT4E2M1 && c.has_input(2))
        y = c.bin(OpKind::Add, y, along(c, c.convert(c.in(2), DType::f32), ax, rk));
      y = emit_narrow_cast(c, y, narrow, c.attr_i("saturate", 1) != 0);
      c.set_storage_type(y, narrow);
      return c.set_output(0, y);
    }
    if (narrow) {
      V xf = c.convert(x, DType::f32);
      V y = c.unary(OpKind::Round, c.bin(OpKind::Div, xf, along(c, c.convert(s, DType::f32), ax, rk)));
      if (c.has_input(2)) y = c.bin(OpKind::Add, y, along(c, c.convert(c.in(2), DType::f32), ax, rk));
      y = emit_narrow_cast(c, y, narrow, true);
      c.set_storage_type(y, narrow);
      return c.set_output(0, y);
    }
    if (qt != DType::u8 && qt != DType::i8 && qt != DType::i16 && qt != DType::u16) c.error("unsupported quantized dtype");
    double lo = qt == DType::u8 || qt == DType::u16 ? 0 : qt == DType::i8 ? -128 : -32768,
           hi = qt == DType::u8 ? 255 : qt == DType::i8 ? 127 : qt == DType::u16 ? 65535 : 32767;
    V xf = c.convert(x, DType::f32);
    V y = c.unary(OpKind::Round, c.bin(OpKind::Div, xf, along(c, c.convert(s, DType::f32), ax, rk)));
    if (c.has_input(2)) y = c.bin(OpKind::Add, y, along(c, c.convert(c.in(2), DType::f32), ax, rk));
    y = c.bin(OpKind::Min, c.bin(OpKind::Max, y, sc(c, lo, y)), sc(c, hi, y));
    c.set_output(0, c.convert(y, qt));
  };
  // ai.onnx.ml ops that are plain tensor ops.
  r["Binarizer"] = [](Ctx& c) {
    V x = c.in(0);
    V hit = c.bin(OpKind::Gt, x, sc(c, c.attr_f("threshold", 0.0), x));
    c.set_output(0, c.convert(hit, c.dtype(x)));
  };
  r["ArrayFeatureExtractor"] = [](Ctx& c) {
    V x = c.in(0), idx = c.convert(c.in(1), DType::i64);
    auto d = c.static_shape(x, "X");
    auto id = c.static_shape(idx, "Y");
    int64_t n = 1;
    for (auto v : id) n *= v;
    V g = c.op1(OpKind::Gather, {x, c.reshape(idx, {n})}, {{"axis", static_cast<int64_t>(d.size()) - 1}});
    std::vector<int64_t> os(d.begin(), d.end() - 1);
    if (os.empty()) os.push_back(1);
    os.push_back(n);
    c.set_output(0, c.reshape(g, os));
  };
  r["MatMulInteger"] = [](Ctx& c) {
    V a = c.convert(c.in(0), DType::i32), b = c.convert(c.in(1), DType::i32);
    if (c.has_input(2)) {
      V za = c.convert(c.in(2), DType::i32);
      if (c.rank(za) == 1) za = c.reshape(za, {c.static_shape(za, "a_zero_point")[0], 1});
      a = c.bin(OpKind::Sub, a, za);
    }
    if (c.has_input(3)) b = c.bin(OpKind::Sub, b, c.convert(c.in(3), DType::i32));
    c.set_output(0, c.op1(OpKind::MatMul, {a, b}));
  };
  r["Compress"] = [](Ctx& c) {
    V x = c.in(0);
    const Tensor& cond = c.const_in(1, "condition");
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < cond.numel(); ++i)
      if (cond.get(i) != 0) idx.push_back(i);
    if (!c.has_attr("axis")) {
      auto d = c.static_shape(x, "input");
      int64_t n = 1;
      for (auto v : d) n *= v;
      x = c.reshape(x, {n});
    }
    int64_t ax = c.attr_i("axis", 0);
    if (ax < 0) ax += c.rank(x);
    c.set_output(0, c.op1(OpKind::Gather, {x, c.ints_const(idx)}, {{"axis", ax}}));
  };
  r["CenterCropPad"] = [](Ctx& c) {
    V x = c.in(0);
    auto d = c.static_shape(x, "input");
    int64_t rk = static_cast<int64_t>(d.size());
    auto shp = c.ints_in(1, "shape");
    auto axes = c.attr_ints("axes");
    if (axes.empty())
      for (int64_t i = 0; i < rk; ++i) axes.push_back(i);
    std::vector<int64_t> st(rk, 0), li(d), lo(rk, 0), hi(rk, 0);
    for (size_t k = 0; k < axes.size(); ++k) {
      int64_t a = axes[k] < 0 ? axes[k] + rk : axes[k], want = shp[k];
      if (want < d[a]) {
        st[a] = (d[a] - want) / 2;
        li[a] = st[a] + want;
      } else if (want > d[a]) {
        lo[a] = (want - d[a]) / 2;
        hi[a] = want - d[a] - lo[a];
      }
    }
    x = c.op1(OpKind::Slice, {x}, {{"start", st}, {"limit", li}});
    c.set_output(0, c.op1(OpKind::Pad, {x}, {{"low", lo}, {"high", hi}, {"value", 0.0}}));
  };
  r["LpPool"] = [](Ctx& c) {
    V x = c.in(0);
    auto xd = c.static_shape(x, "X");
    auto [in, k, st, dil, pads] = pool_window(c, xd);
    int64_t rk = static_cast<int64_t>(xd.size());
    size_t sp = xd.size() - 2;
    if (c.attr_i("ceil_mode", 0)) c.error("ceil_mode is unsupported");
    double p = static_cast<double>(c.attr_i("p", 2));
    std::vector<int64_t> win{1, 1}, strides{1, 1}, wp(2 * rk, 0);
    for (size_t i = 0; i < sp; ++i) {
      win.push_back(k[i]);
      strides.push_back(st[i]);
      wp[2 + i] = pads[i];
      wp[rk + 2 + i] = pads[sp + i];
    }
    V ax = c.bin(OpKind::Pow, c.unary(OpKind::Abs, x), sc(c, p, x));
    bool dilated = false;
    for (auto v : dil) dilated = dilated || v != 1;
    V s;
    if (!dilated) {
      s = c.op1(OpKind::ReduceWindow, {ax}, {{"kind", "sum"}, {"window", win}, {"strides", strides}, {"pads", wp}});
    } else {
      // Dilated windows: pad, gather each spatial dim into (out, k) taps, sum the taps.
      std::vector<int64_t> lo(rk, 0), hi(rk, 0), perm{0, 1}, shape{xd[0], xd[1]}, taps;
      for (size_t i = 0; i < sp; ++i) lo[2 + i] = pads[i], hi[2 + i] = pads[sp + i];
      V v = c.op1(OpKind::Pad, {ax}, {{"low", lo}, {"high", hi}, {"value", 0.0}});
      int64_t kel = 1;
      for (size_t i = 0; i < sp; ++i) {
        int64_t ke = (k[i] - 1) * dil[i] + 1, out = (xd[2 + i] + pads[i] + pads[sp + i] - ke) / st[i] + 1;
        Tensor idx(DType::i64, {out, k[i]});
        for (int64_t o = 0; o < out; ++o)
          for (int64_t j = 0; j < k[i]; ++j) idx.set_int(o * k[i] + j, o * st[i] + j * dil[i]);
        v = c.op1(OpKind::Gather, {v, c.constant(idx)}, {{"axis", static_cast<int64_t>(2 + 2 * i)}});
        perm.push_back(static_cast<int64_t>(2 + 2 * i));
        taps.push_back(static_cast<int64_t>(3 + 2 * i));
        shape.push_back(out);
        kel *= k[i];
      }
      perm.insert(perm.end(), taps.begin(), taps.end());
      shape.push_back(kel);
      s = c.reduce(OpKind::ReduceSum, c.reshape(c.transpose(v, perm), shape), {static_cast<int64_t>(sp) + 2}, false);
    }
    c.set_output(0, c.bin(OpKind::Pow, s, sc(c, 1.0 / p, s)));
  };
}

}  // namespace rlx::onnx

namespace rlx::onnx {

// ConvTranspose as a stride-1 convolution over the zero-interleaved input with the flipped,
// in/out-swapped kernel.
void register_conv_transpose(std::map<std::string, Converter>& r) {
  // CumProd in f64 as sign * exp(cumsum(log|x|)), with zeros tracked by a running count.
  r["CumProd"] = [](Ctx& c) {
    V x = c.in(0);
    DType dt = c.dtype(x);
    int64_t ax = axis_norm(c, c.int_in(1, "axis"), c.rank(x));
    Attrs ca{{"axis", ax}, {"reverse", c.attr_i("reverse", 0)}, {"exclusive", c.attr_i("exclusive", 0)}};
    V xf = c.convert(x, DType::f64);
    V zero = c.bin(OpKind::Eq, xf, c.scalar(0, DType::f64));
    V lg = c.unary(OpKind::Log, c.select(zero, c.scalar(1, DType::f64), c.unary(OpKind::Abs, xf)));
    V mag = c.unary(OpKind::Exp, c.op1(OpKind::Cumsum, {lg}, ca));
    V nneg = c.op1(OpKind::Cumsum, {c.convert(c.bin(OpKind::Lt, xf, c.scalar(0, DType::f64)), DType::f64)}, ca);
    V odd = c.bin(OpKind::Rem, nneg, c.scalar(2, DType::f64));
    V sign = c.bin(OpKind::Sub, c.scalar(1, DType::f64), c.bin(OpKind::Mul, c.scalar(2, DType::f64), odd));
    V nz = c.op1(OpKind::Cumsum, {c.convert(zero, DType::f64)}, ca);
    V y = c.select(c.bin(OpKind::Gt, nz, c.scalar(0, DType::f64)), c.scalar(0, DType::f64), c.bin(OpKind::Mul, mag, sign));
    if (!is_float(dt)) y = c.unary(OpKind::Round, y);
    c.set_output(0, c.convert(y, dt));
  };
  r["ConvTranspose"] = [](Ctx& c) {
    V x = c.in(0), w = c.in(1);
    auto xd = c.static_shape(x, "X"), wd = c.static_shape(w, "W");
    if (xd.size() < 3 || wd.size() != xd.size()) c.error("X and W must have the same rank >= 3");
    int64_t rk = static_cast<int64_t>(xd.size()), sp = rk - 2, g = c.attr_i("group", 1);
    std::vector<int64_t> k(wd.begin() + 2, wd.end());
    auto st = c.attr_ints("strides", std::vector<int64_t>(sp, 1));
    auto dil = c.attr_ints("dilations", std::vector<int64_t>(sp, 1));
    auto op = c.attr_ints("output_padding", std::vector<int64_t>(sp, 0));
    auto pads = c.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
    auto oshape = c.attr_ints("output_shape");
    check_window(c, static_cast<size_t>(sp), k, st, dil);
    if (static_cast<int64_t>(pads.size()) != 2 * sp) c.error("pads must have 2 x spatial-rank entries");
    if (static_cast<int64_t>(op.size()) != sp) c.error("output_padding must have one entry per spatial dim");
    std::string ap = c.attr_s("auto_pad", "NOTSET");
    if (!oshape.empty() || ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      if (oshape.empty())
        for (int64_t i = 0; i < sp; ++i) oshape.push_back(xd[2 + i] * st[i]);
      if (static_cast<int64_t>(oshape.size()) > sp) oshape.erase(oshape.begin(), oshape.end() - sp);
      for (int64_t i = 0; i < sp; ++i) {
        int64_t total = st[i] * (xd[2 + i] - 1) + op[i] + (k[i] - 1) * dil[i] + 1 - oshape[i];
        // Floor division (a larger output_shape gives a negative total: the extra rows go at the end).
        int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
        if (ap == "SAME_UPPER") pads[i] = half, pads[sp + i] = total - half;
        else pads[i] = total - half, pads[sp + i] = half;
      }
    } else if (ap == "VALID") {
      pads.assign(2 * sp, 0);
    }
    // Zero-interleave each spatial axis: [.., L] -> [.., (L-1)*s+1].
    for (int64_t i = 0; i < sp; ++i) {
      if (st[i] == 1) continue;
      int64_t a = 2 + i, L = c.static_shape(x, "X")[a];
      auto d = c.static_shape(x, "X");
      V u = c.op1(OpKind::Unsqueeze, {x}, {{"axes", std::vector<int64_t>{a + 1}}});
      std::vector<int64_t> lo(rk + 1, 0), hi(rk + 1, 0);
      hi[a + 1] = st[i] - 1;
      u = c.op1(OpKind::Pad, {u}, {{"low", lo}, {"high", hi}, {"value", 0.0}});
      d[a] = L * st[i];
      x = c.slice_axis(c.reshape(u, d), a, 0, (L - 1) * st[i] + 1);
    }
    // Kernel [C, M/g, k..] -> [M, C/g, k..], spatially flipped.
    int64_t C = wd[0], Mg = wd[1];
    std::vector<int64_t> s1{g, C / g, Mg}, perm{0, 2, 1}, s2{g * Mg, C / g};
    for (int64_t i = 0; i < sp; ++i) s1.push_back(k[i]), perm.push_back(3 + i), s2.push_back(k[i]);
    V wt = c.reshape(c.transpose(c.reshape(w, s1), perm), s2);
    for (int64_t i = 0; i < sp; ++i) {
      std::vector<int64_t> idx;
      for (int64_t j = k[i] - 1; j >= 0; --j) idx.push_back(j);
      wt = c.op1(OpKind::Gather, {wt, c.ints_const(idx)}, {{"axis", 2 + i}});
    }
    std::vector<int64_t> cp(2 * sp), st1(sp, 1), clo(rk, 0), chi;
    auto xd2 = c.static_shape(x, "X");
    chi = xd2;
    bool crop = false;
    for (int64_t i = 0; i < sp; ++i) {
      int64_t e = dil[i] * (k[i] - 1);
      int64_t b = e - pads[i], en = e - pads[sp + i] + op[i];
      if (b < 0) clo[2 + i] = -b, b = 0, crop = true;
      if (en < 0) chi[2 + i] = xd2[2 + i] + en, en = 0, crop = true;
      cp[i] = b;
      cp[sp + i] = en;
    }
    if (crop) x = c.op1(OpKind::Slice, {x}, {{"start", clo}, {"limit", chi}});
    std::vector<V> ins{x, wt};
    if (c.has_input(2)) ins.push_back(c.in(2));
    c.set_output(0, c.op1(OpKind::Convolution, ins, {{"strides", st1}, {"pads", cp}, {"dilations", dil}, {"groups", g}}));
  };
}

}  // namespace rlx::onnx
