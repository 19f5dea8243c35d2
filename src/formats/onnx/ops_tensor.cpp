// ONNX shape, data-movement, indexing and reduction ops.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "formats/onnx/importer.h"
#include "formats/onnx/ops_util.h"

namespace rlx::onnx {

namespace {


Tensor ints_tensor(const std::vector<int64_t>& v) {
  Tensor t(DType::i64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.set_int(static_cast<int64_t>(i), v[i]);
  return t;
}

// Axes of a reduction: attribute (older opsets) or input 1 (ReduceSum >= 13, others >= 18).
bool reduce_axes(Ctx& c, int axes_input_opset, std::vector<int64_t>* axes) {
  int64_t r = c.rank(c.in(0));
  bool from_input = c.opset() >= axes_input_opset;
  std::vector<int64_t> ax = from_input ? (c.has_input(1) ? c.ints_in(1, "axes") : std::vector<int64_t>{}) : c.attr_ints("axes");
  if (ax.empty()) {
    if (c.attr_i("noop_with_empty_axes", 0)) return false;
    ax.resize(static_cast<size_t>(r));
    std::iota(ax.begin(), ax.end(), 0);
  }
  for (auto& a : ax) a = axis_norm(c, a, r);
  std::sort(ax.begin(), ax.end());
  ax.erase(std::unique(ax.begin(), ax.end()), ax.end());
  *axes = ax;
  return true;
}

// Reverses `v` along `axis` (a gather with constant descending indices).
V reverse_axis(Ctx& c, V v, int64_t axis) {
  int64_t n = c.static_shape(v, "input")[axis];
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) idx[i] = n - 1 - i;
  return c.op1(OpKind::Gather, {v, c.ints_const(idx)}, {{"axis", axis}});
}

// Row-major linear index of every element of an index grid where dim `axis` is replaced by `idx`.
// Used by GatherElements/ScatterElements: both become a gather/scatter over the flattened data.
V linear_index(Ctx& c, V idx, int64_t axis, const std::vector<int64_t>& data_dims) {
  std::vector<int64_t> id = c.static_shape(idx, "indices");
  int64_t r = static_cast<int64_t>(id.size());
  V ix = c.convert(idx, DType::i64);
  // Negative indices count from the end.
  V neg = c.bin(OpKind::Lt, ix, c.scalar(0, DType::i64));
  ix = c.select(neg, c.bin(OpKind::Add, ix, c.scalar(static_cast<double>(data_dims[axis]), DType::i64)), ix);
  V lin = c.scalar(0, DType::i64);
  int64_t stride = 1;
  std::vector<int64_t> strides(static_cast<size_t>(r));
  for (int64_t d = r - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= data_dims[d];
  }
  for (int64_t d = 0; d < r; ++d) {
    V coord = d == axis ? ix : c.op1(OpKind::Iota, {}, {{"shape", to_shape(id)}, {"dim", d}, {"dtype", DType::i64}});
    lin = c.bin(OpKind::Add, lin, c.bin(OpKind::Mul, coord, c.scalar(static_cast<double>(strides[d]), DType::i64)));
  }
  return c.broadcast_to(lin, to_shape(id));
}

void reduce_op(std::map<std::string, Converter>& r, const char* name, int axes_opset) {
  std::string nm = name;
  r[name] = [nm, axes_opset](Ctx& c) {
    V x = c.in(0);
    std::vector<int64_t> axes;
    if (!reduce_axes(c, axes_opset, &axes)) return c.set_output(0, x);
    bool keep = c.attr_i("keepdims", 1) != 0;
    DType dt = c.dtype(x);
    auto sum = [&](V v) { return c.reduce(OpKind::ReduceSum, v, axes, keep); };
    V y = -1;
    if (nm == "ReduceSum") y = sum(x);
    else if (nm == "ReduceMax" || nm == "ReduceMin") {
      OpKind k = nm == "ReduceMax" ? OpKind::ReduceMax : OpKind::ReduceMin;
      // bool reduces as u8 (max = any, min = all).
      y = dt == DType::boolean ? c.convert(c.reduce(k, c.convert(x, DType::u8), axes, keep), dt) : c.reduce(k, x, axes, keep);
    }
    else if (nm == "ReduceProd") y = c.reduce(OpKind::ReduceProd, x, axes, keep);
    else if (nm == "ReduceMean") {
      if (is_float(dt)) y = c.reduce(OpKind::ReduceMean, x, axes, keep);
      else {
        auto d = c.static_shape(x, "input");
        int64_t n = 1;
        for (auto a : axes) n *= d[a];
        y = c.bin(OpKind::Div, sum(x), c.scalar(static_cast<double>(n), dt));
      }
    } else if (nm == "ReduceL1") y = sum(c.unary(OpKind::Abs, x));
    else if (nm == "ReduceL2") {
      DType ct = is_float(dt) ? dt : DType::f64;
      V xf = c.convert(x, ct);
      y = c.convert(c.unary(OpKind::Sqrt, c.reduce(OpKind::ReduceSum, c.bin(OpKind::Mul, xf, xf), axes, keep)), dt);
    } else if (nm == "ReduceSumSquare") y = sum(c.bin(OpKind::Mul, x, x));
    else if (nm == "ReduceLogSum") y = c.unary(OpKind::Log, sum(x));
    else if (nm == "ReduceLogSumExp") {
      V m = c.reduce(OpKind::ReduceMax, x, axes, true);
      // Rows of -inf keep m finite so exp(x - m) does not produce NaN.
      V fin = c.unary(OpKind::Not, c.bin(OpKind::Eq, m, c.scalar(-std::numeric_limits<double>::infinity(), dt)));
      m = c.select(fin, m, c.scalar(0, dt));
      V s = c.reduce(OpKind::ReduceSum, c.unary(OpKind::Exp, c.bin(OpKind::Sub, x, m)), axes, keep);
      V mk = keep ? m : c.reshape_dims(m, c.shape(s));
      y = c.bin(OpKind::Add, c.unary(OpKind::Log, s), mk);
    }
    if (y < 0) c.error("no lowering for this reduction");
    c.set_output(0, y);
  };
}

}  // namespace

void register_tensor_ops(std::map<std::string, Converter>& r) {
  r["Constant"] = [](Ctx& c) {
    if (c.has_attr("value")) return c.set_output(0, c.constant(c.attr_tensor("value")));
    if (c.has_attr("value_float")) return c.set_output(0, c.scalar(c.attr_f("value_float", 0), DType::f32));
    if (c.has_attr("value_int")) return c.set_output(0, c.scalar(static_cast<double>(c.attr_i("value_int", 0)), DType::i64));
    if (c.has_attr("value_floats")) {
      auto f = c.attr_floats("value_floats");
      Tensor t(DType::f32, {static_cast<int64_t>(f.size())});
      for (size_t i = 0; i < f.size(); ++i) t.set(static_cast<int64_t>(i), f[i]);
      return c.set_output(0, c.constant(t));
    }
    if (c.has_attr("value_ints")) return c.set_output(0, c.constant(ints_tensor(c.attr_ints("value_ints"))));
    c.error("only tensor/float/int constants are supported (string or sparse constant)");
  };
  r["ConstantOfShape"] = [](Ctx& c) {
    auto s = c.ints_in(0, "shape");
    Tensor v = c.has_attr("value") ? c.attr_tensor("value") : Tensor(DType::f32, {1});
    V sv = c.constant(v.reshaped({}));
    c.set_output(0, c.broadcast_to(sv, to_shape(s)));
  };
  r["Shape"] = [](Ctx& c) {
    auto d = c.static_shape(c.in(0), "input");
    int64_t rk = static_cast<int64_t>(d.size());
    int64_t st = c.attr_i("start", 0), en = c.attr_i("end", rk);
    st = std::clamp<int64_t>(st < 0 ? st + rk : st, 0, rk);
    en = std::clamp<int64_t>(en < 0 ? en + rk : en, 0, rk);
    std::vector<int64_t> out(d.begin() + st, d.begin() + std::max(st, en));
    c.set_output(0, c.constant(ints_tensor(out)));
  };
  r["Size"] = [](Ctx& c) {
    auto d = c.static_shape(c.in(0), "input");
    int64_t n = 1;
    for (auto x : d) n *= x;
    c.set_output(0, c.scalar(static_cast<double>(n), DType::i64));
  };
  r["Reshape"] = [](Ctx& c) {
    V x = c.in(0);
    auto s = c.opset() < 5 ? c.attr_ints("shape") : c.ints_in(1, "shape");
    bool allowzero = c.attr_i("allowzero", 0);
    Shape t;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == 0 && !allowzero) {
        if (static_cast<int64_t>(i) >= c.rank(x)) c.error("shape 0 copies a dim the input lacks");
        t.push_back(c.shape(x)[i]);
      } else {
        t.push_back(Dim(s[i]));
      }
    }
    c.set_output(0, c.reshape_dims(x, t));
  };
  r["Flatten"] = [](Ctx& c) {
    V x = c.in(0);
    auto d = c.static_shape(x, "input");
    int64_t rk = static_cast<int64_t>(d.size());
    int64_t ax = c.attr_i("axis", 1);
    if (ax < 0) ax += rk;
    if (ax < 0 || ax > rk) c.error("axis out of range");
    int64_t a = 1, b = 1;
    for (int64_t i = 0; i < rk; ++i) (i < ax ? a : b) *= d[i];
    c.set_output(0, c.reshape(x, {a, b}));
  };
  r["Squeeze"] = [](Ctx& c) {
    V x = c.in(0);
    auto axes = c.opset() >= 13 ? (c.has_input(1) ? c.ints_in(1, "axes") : std::vector<int64_t>{}) : c.attr_ints("axes");
    if (axes.empty())
      for (int64_t i = 0; i < c.rank(x); ++i)
        if (c.shape(x)[i].is_static() && c.shape(x)[i].v == 1) axes.push_back(i);
    c.set_output(0, c.op1(OpKind::Squeeze, {x}, {{"axes", axes}}));
  };
  r["Unsqueeze"] = [](Ctx& c) {
    V x = c.in(0);
    auto axes = c.opset() >= 13 ? c.ints_in(1, "axes") : c.attr_ints("axes");
    c.set_output(0, c.op1(OpKind::Unsqueeze, {x}, {{"axes", axes}}));
  };
  r["Transpose"] = [](Ctx& c) {
    V x = c.in(0);
    std::vector<int64_t> perm = c.attr_ints("perm");
    if (perm.empty())
      for (int64_t i = c.rank(x) - 1; i >= 0; --i) perm.push_back(i);
    c.set_output(0, c.transpose(x, perm));
  };
  r["Concat"] = [](Ctx& c) {
    std::vector<V> ins;
    for (int i = 0; i < c.num_inputs(); ++i)
      if (c.has_input(i)) {
        V v = c.in(i);
        // Empty operands contribute nothing (ONNX allows them with mismatched rank in old models).
        if (is_static(c.shape(v)) && numel(c.shape(v)) == 0 && c.num_inputs() > 1) continue;
        ins.push_back(v);
      }
    if (ins.empty()) ins.push_back(c.in(0));
    int64_t ax = axis_norm(c, c.attr_i("axis", 0), c.rank(ins[0]));
    c.set_output(0, ins.size() == 1 ? ins[0] : c.op1(OpKind::Concatenate, ins, {{"axis", ax}}));
  };
  r["Slice"] = [](Ctx& c) {
    V x = c.in(0);
    auto d = c.static_shape(x, "input");
    int64_t rk = static_cast<int64_t>(d.size());
    std::vector<int64_t> starts, ends, axes, steps;
    if (c.opset() < 10) {
      starts = c.attr_ints("starts");
      ends = c.attr_ints("ends");
      axes = c.attr_ints("axes");
    } else {
      starts = c.ints_in(1, "starts");
      ends = c.ints_in(2, "ends");
      if (c.has_input(3)) axes = c.ints_in(3, "axes");
      if (c.has_input(4)) steps = c.ints_in(4, "steps");
    }
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (starts.size() != ends.size() || axes.size() != starts.size() || steps.size() != starts.size())
      c.error("starts/ends/axes/steps lengths differ");
    std::vector<int64_t> st(rk, 0), li(d), sd(rk, 1);
    std::vector<int64_t> flip;
    for (size_t k = 0; k < axes.size(); ++k) {
      int64_t a = axis_norm(c, axes[k], rk), n = d[a], s = starts[k], e = ends[k], p = steps[k];
      if (p == 0) c.error("slice step 0");
      if (s < 0) s += n;
      if (e < 0) e += n;
      if (p > 0) {
        s = std::clamp<int64_t>(s, 0, n);
        e = std::clamp<int64_t>(e, 0, n);
        st[a] = s;
        li[a] = std::max(s, e);
        sd[a] = p;
      } else {
        // Negative step: slice the mirrored range forward, then reverse.
        s = std::clamp<int64_t>(s, 0, n - 1);
        e = std::clamp<int64_t>(e, -1, n - 1);
        int64_t cnt = s > e ? (s - e + (-p) - 1) / (-p) : 0;
        int64_t last = s + (cnt - 1) * p;  // smallest index taken
        st[a] = cnt ? last : 0;
        li[a] = cnt ? s + 1 : 0;
        sd[a] = -p;
        if (cnt) flip.push_back(a);
      }
    }
    V y = c.op1(OpKind::Slice, {x}, {{"start", st}, {"limit", li}, {"stride", sd}});
    for (auto a : flip) y = reverse_axis(c, y, a);
    c.set_output(0, y);
  };
  r["Gather"] = [](Ctx& c) {
    V x = c.in(0), idx = c.in(1);
    int64_t ax = axis_norm(c, c.attr_i("axis", 0), c.rank(x));
    const Dim& n = c.shape(x)[ax];
    if (n.is_static()) {
      V i64 = c.convert(idx, DType::i64);
      V neg = c.bin(OpKind::Lt, i64, c.scalar(0, DType::i64));
      idx = c.select(neg, c.bin(OpKind::Add, i64, c.scalar(static_cast<double>(n.v), DType::i64)), i64);
    }
    c.set_output(0, c.op1(OpKind::Gather, {x, idx}, {{"axis", ax}}));
  };
  r["GatherElements"] = [](Ctx& c) {
    V x = c.in(0), idx = c.in(1);
    auto d = c.static_shape(x, "data");
    int64_t ax = axis_norm(c, c.attr_i("axis", 0), c.rank(x));
    V lin = linear_index(c, idx, ax, d);
    int64_t n = 1;
    for (auto v : d) n *= v;
    c.set_output(0, c.op1(OpKind::Gather, {c.reshape(x, {n}), lin}, {{"axis", int64_t{0}}}));
  };
  r["GatherND"] = [](Ctx& c) {
    V x = c.in(0);
    const Tensor& it = c.const_in(1, "indices");
    auto d = c.static_shape(x, "data");
    // batch_dims b: the first b dims of data and indices are paired; index tuples address
    // dims [b, b+k) within each batch. Everything folds to one gather over the flattened data.
    int64_t b = c.attr_i("batch_dims", 0);
    int64_t q = it.rank(), k = it.shape().back(), rk = static_cast<int64_t>(d.size());
    if (b < 0 || b >= q || b + k > rk) c.error("bad batch_dims / index depth");
    int64_t batches = 1, lead = 1;
    for (int64_t i = 0; i < b; ++i) batches *= d[i];
    for (int64_t i = b; i < b + k; ++i) lead *= d[i];
    int64_t outer = it.numel() / std::max<int64_t>(k, 1), per_batch = outer / std::max<int64_t>(batches, 1);
    std::vector<int64_t> lin(static_cast<size_t>(outer));
    for (int64_t o = 0; o < outer; ++o) {
      int64_t l = 0;
      for (int64_t j = 0; j < k; ++j) {
        int64_t v = it.get_int(o * k + j);
        if (v < 0) v += d[b + j];
        l = l * d[b + j] + v;
      }
      lin[o] = (o / std::max<int64_t>(per_batch, 1)) * lead + l;
    }
    std::vector<int64_t> flat_shape{batches * lead};
    for (int64_t i = b + k; i < rk; ++i) flat_shape.push_back(d[i]);
    V g = c.op1(OpKind::Gather, {c.reshape(x, flat_shape), c.ints_const(lin)}, {{"axis", int64_t{0}}});
    std::vector<int64_t> os(it.shape().begin(), it.shape().begin() + (q - 1));
    for (int64_t i = b + k; i < rk; ++i) os.push_back(d[i]);
    c.set_output(0, c.reshape(g, os));
  };
  auto scatter = [](Ctx& c, V x, V lin, V upd) {
    auto d = c.static_shape(x, "data");
    int64_t n = 1;
    for (auto v : d) n *= v;
    std::string red = c.attr_s("reduction", "none");
    V flat = c.reshape(x, {n});
    auto ls = c.static_shape(lin, "indices");
    int64_t m = 1;
    for (auto v : ls) m *= v;
    lin = c.reshape(lin, {m});
    upd = c.reshape(upd, {m});
    V zeros = c.broadcast_to(c.scalar(0, c.dtype(x)), to_shape({n}));
    V added = c.op1(OpKind::ScatterAdd, {zeros, lin, upd}, {{"axis", int64_t{0}}});
    V y;
    if (red == "add") y = c.bin(OpKind::Add, flat, added);
    else if (red == "none") {
      V ones = c.broadcast_to(c.scalar(1, c.dtype(x)), to_shape({m}));
      V hit = c.bin(OpKind::Gt, c.op1(OpKind::ScatterAdd, {zeros, lin, ones}, {{"axis", int64_t{0}}}), c.scalar(0, c.dtype(x)));
      y = c.select(hit, added, flat);
    } else if (red == "max" || red == "min" || red == "mul") {
      // No scatter-max/min/mul primitive: a dense [m, n] hit mask folds the updates per
      // position with reduce_max/min/prod, then combines with the data where any update landed.
      if (m * n > (int64_t{1} << 26)) c.error("reduction '" + red + "' over " + std::to_string(m) + " x " + std::to_string(n) + " is too large");
      DType dt = c.dtype(x);
      V pos = c.op1(OpKind::Iota, {}, {{"shape", to_shape({m, n})}, {"dim", int64_t{1}}, {"dtype", DType::i64}});
      V mask = c.bin(OpKind::Eq, c.broadcast_to(c.reshape(c.convert(lin, DType::i64), {m, 1}), to_shape({m, n})), pos);
      V u = c.broadcast_to(c.reshape(upd, {m, 1}), to_shape({m, n}));
      double ident = red == "mul" ? 1.0 : red == "max" ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
      OpKind rk = red == "mul" ? OpKind::ReduceProd : red == "max" ? OpKind::ReduceMax : OpKind::ReduceMin;
      V folded = c.reduce(rk, c.select(mask, u, c.scalar(ident, dt)), {0}, false);
      V any = c.reduce(OpKind::ReduceMax, c.convert(mask, DType::i32), {0}, false);
      V hit = c.bin(OpKind::Gt, any, c.scalar(0, DType::i32));
      OpKind comb = red == "mul" ? OpKind::Mul : red == "max" ? OpKind::Max : OpKind::Min;
      y = c.select(hit, c.bin(comb, flat, folded), flat);
    } else {
      c.error("reduction '" + red + "' is unsupported");
    }
    return c.reshape(y, d);
  };
  r["ScatterElements"] = [scatter](Ctx& c) {
    V x = c.in(0), idx = c.in(1), upd = c.in(2);
    auto d = c.static_shape(x, "data");
    int64_t ax = axis_norm(c, c.attr_i("axis", 0), c.rank(x));
    c.set_output(0, scatter(c, x, linear_index(c, idx, ax, d), upd));
  };
  r["Scatter"] = r["ScatterElements"];
  r["ScatterND"] = [scatter](Ctx& c) {
    V x = c.in(0), upd = c.in(2);
    const Tensor& it = c.const_in(1, "indices");
    auto d = c.static_shape(x, "data");
    int64_t k = it.shape().back(), rk = static_cast<int64_t>(d.size());
    int64_t inner = 1;
    for (int64_t i = k; i < rk; ++i) inner *= d[i];
    int64_t outer = it.numel() / std::max<int64_t>(k, 1);
    std::vector<int64_t> lin;
    for (int64_t o = 0; o < outer; ++o) {
      int64_t l = 0;
      for (int64_t j = 0; j < k; ++j) {
        int64_t v = it.get_int(o * k + j);
        if (v < 0) v += d[j];
        l = l * d[j] + v;
      }
      for (int64_t e = 0; e < inner; ++e) lin.push_back(l * inner + e);
    }
    c.set_output(0, scatter(c, x, c.ints_const(lin), upd));
  };
  r["Expand"] = [](Ctx& c) {
    V x = c.in(0);
    auto s = c.ints_in(1, "shape");
    c.set_output(0, c.op1(OpKind::Expand, {x}, {{"shape", to_shape(s)}}));
  };
  r["Range"] = [](Ctx& c) {
    const Tensor &s = c.const_in(0, "start"), &l = c.const_in(1, "limit"), &d = c.const_in(2, "delta");
    DType dt = s.dtype();
    double a = s.get(0), b = l.get(0), st = d.get(0);
    if (st == 0) c.error("delta is 0");
    int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((b - a) / st)));
    Tensor t(dt, {n});
    for (int64_t i = 0; i < n; ++i) {
      if (is_float(dt)) t.set(i, a + i * st);
      else t.set_int(i, s.get_int(0) + i * d.get_int(0));
    }
    c.set_output(0, c.constant(t));
  };
  r["Split"] = [](Ctx& c) {
    V x = c.in(0);
    auto d = c.static_shape(x, "input");
    int64_t ax = axis_norm(c, c.attr_i("axis", 0), c.rank(x));
    std::vector<int64_t> sizes = c.opset() >= 13 ? (c.has_input(1) ? c.ints_in(1, "split") : std::vector<int64_t>{}) : c.attr_ints("split");
    int64_t no = c.num_outputs();
    if (sizes.empty()) {
      int64_t ns = c.attr_i("num_outputs", no);
      int64_t chunk = (d[ax] + ns - 1) / ns;
      for (int64_t i = 0; i < ns; ++i) sizes.push_back(std::max<int64_t>(0, std::min(chunk, d[ax] - i * chunk)));
    }
    if (static_cast<int64_t>(sizes.size()) != no) c.error("split sizes do not match the number of outputs");
    int64_t off = 0;
    for (int64_t i = 0; i < no; ++i) {
      c.set_output(static_cast<int>(i), c.slice_axis(x, ax, off, off + sizes[i]));
      off += sizes[i];
    }
  };
  r["Tile"] = [](Ctx& c) {
    V x = c.in(0);
    auto d = c.static_shape(x, "input");
    auto rep = c.ints_in(1, "repeats");
    int64_t rk = static_cast<int64_t>(d.size());
    if (static_cast<int64_t>(rep.size()) != rk) c.error("repeats length must equal rank");
    // [d0..] -> broadcast to [r0,d0,r1,d1,...] -> reshape [r0*d0, ...].
    Shape big;
    std::vector<int64_t> dims, fin;
    for (int64_t i = 0; i < rk; ++i) {
      big.push_back(Dim(rep[i]));
      big.push_back(Dim(d[i]));
      dims.push_back(2 * i + 1);
      fin.push_back(rep[i] * d[i]);
    }
    V b = c.op1(OpKind::BroadcastInDim, {x}, {{"shape", big}, {"dims", dims}});
    c.set_output(0, c.reshape(b, fin));
  };
  r["Pad"] = [](Ctx& c) {
    V x = c.in(0);
    auto d = c.static_shape(x, "input");
    int64_t rk = static_cast<int64_t>(d.size());
    std::string mode = c.attr_s("mode", "constant");
    std::vector<int64_t> pads;
    double value = 0;
    std::vector<int64_t> axes;
    if (c.opset() < 11) {
      pads = c.attr_ints("pads");
      value = c.attr_f("value", 0);
    } else {
      pads = c.ints_in(1, "pads");
      if (c.has_input(2)) value = c.const_in(2, "constant_value").get(0);
      if (c.has_input(3)) axes = c.ints_in(3, "axes");
    }
    if (axes.empty())
      for (int64_t i = 0; i < rk; ++i) axes.push_back(i);
    if (pads.size() != 2 * axes.size()) c.error("pads length must be 2 x number of axes");
    std::vector<int64_t> lo(rk, 0), hi(rk, 0);
    for (size_t k = 0; k < axes.size(); ++k) {
      int64_t a = axis_norm(c, axes[k], rk);
      lo[a] = pads[k];
      hi[a] = pads[k + axes.size()];
    }
    if (mode == "constant") {
      // Negative pads crop.
      std::vector<int64_t> st(rk, 0), li(d);
      bool crop = false;
      for (int64_t i = 0; i < rk; ++i) {
        if (lo[i] < 0) st[i] = -lo[i], lo[i] = 0, crop = true;
        if (hi[i] < 0) li[i] = d[i] + hi[i], hi[i] = 0, crop = true;
      }
      if (crop) x = c.op1(OpKind::Slice, {x}, {{"start", st}, {"limit", li}});
      if (!is_float(c.dtype(x)) && value != std::floor(value)) c.error("non-integer pad value for integer data");
      return c.set_output(0, c.op1(OpKind::Pad, {x}, {{"low", lo}, {"high", hi}, {"value", value}}));
    }
    // reflect / edge / wrap: a gather per axis with precomputed source indices.
    for (int64_t a = 0; a < rk; ++a) {
      if (lo[a] == 0 && hi[a] == 0) continue;
      if (lo[a] < 0 || hi[a] < 0) c.error("negative pads with mode " + mode);
      int64_t n = d[a];
      std::vector<int64_t> idx;
      for (int64_t i = -lo[a]; i < n + hi[a]; ++i) {
        int64_t j = i;
        if (mode == "edge") j = std::clamp<int64_t>(i, 0, n - 1);
        else if (mode == "wrap") j = ((i % n) + n) % n;
        else if (mode == "reflect") {
          if (n == 1) j = 0;
          else {
            int64_t p = 2 * (n - 1);
            j = ((i % p) + p) % p;
            if (j >= n) j = p - j;
          }
        } else c.error("pad mode '" + mode + "' is unsupported");
        idx.push_back(j);
      }
      x = c.op1(OpKind::Gather, {x, c.ints_const(idx)}, {{"axis", a}});
    }
    c.set_output(0, x);
  };
  r["Trilu"] = [](Ctx& c) {
    V x = c.in(0);
    auto d = c.static_shape(x, "input");
    int64_t rk = static_cast<int64_t>(d.size());
    if (rk < 2) c.error("input must have rank >= 2 (a batch of matrices), got rank " + std::to_string(rk));
    int64_t k = c.has_input(1) ? c.int_in(1, "k") : 0;
    bool upper = c.attr_i("upper", 1) != 0;
    Shape s2{Dim(d[rk - 2]), Dim(d[rk - 1])};
    V row = c.op1(OpKind::Iota, {}, {{"shape", s2}, {"dim", int64_t{0}}, {"dtype", DType::i64}});
    V col = c.op1(OpKind::Iota, {}, {{"shape", s2}, {"dim", int64_t{1}}, {"dtype", DType::i64}});
    V diff = c.bin(OpKind::Sub, col, row);  // keep j - i >= k (upper) or <= k (lower)
    V keep = c.bin(upper ? OpKind::Ge : OpKind::Le, diff, c.scalar(static_cast<double>(k), DType::i64));
    c.set_output(0, c.select(keep, x, c.scalar(0, c.dtype(x))));
  };
  r["Dropout"] = [](Ctx& c) {
    V x = c.in(0);
    if (c.has_input(2) && c.const_in(2, "training_mode").get(0) != 0) c.error("training_mode=true is unsupported");
    c.set_output(0, x);
    if (c.wants_output(1)) c.set_output(1, c.broadcast_to(c.scalar(1, DType::boolean), c.shape(x)));
  };
  r["EyeLike"] = [](Ctx& c) {
    V x = c.in(0);
    auto d = c.static_shape(x, "input");
    DType dt = c.dtype(x);
    if (c.has_attr("dtype")) {
      if (!onnx_dtype(static_cast<int>(c.attr_i("dtype", 1)), &dt)) c.error("unsupported dtype");
    }
    int64_t k = c.attr_i("k", 0);
    V row = c.op1(OpKind::Iota, {}, {{"shape", to_shape(d)}, {"dim", int64_t{0}}, {"dtype", DType::i64}});
    V col = c.op1(OpKind::Iota, {}, {{"shape", to_shape(d)}, {"dim", int64_t{1}}, {"dtype", DType::i64}});
    V on = c.bin(OpKind::Eq, c.bin(OpKind::Sub, col, row), c.scalar(static_cast<double>(k), DType::i64));
    c.set_output(0, c.convert(on, dt));
  };
  r["OneHot"] = [](Ctx& c) {
    V idx = c.in(0);
    double depth = c.const_in(1, "depth").get(0);
    V vals = c.in(2);
    int64_t dep = static_cast<int64_t>(depth);
    int64_t rk = c.rank(idx) + 1;
    int64_t ax = axis_norm(c, c.attr_i("axis", -1), rk);
    V ix = c.convert(idx, DType::i64);
    if (is_float(c.dtype(idx))) ix = c.convert(c.unary(OpKind::Floor, idx), DType::i64);
    V neg = c.bin(OpKind::Lt, ix, c.scalar(0, DType::i64));
    ix = c.select(neg, c.bin(OpKind::Add, ix, c.scalar(static_cast<double>(dep), DType::i64)), ix);
    Shape os = c.shape(idx);
    os.insert(os.begin() + ax, Dim(dep));
    V ixu = c.op1(OpKind::Unsqueeze, {ix}, {{"axes", std::vector<int64_t>{ax}}});
    V io = c.op1(OpKind::Iota, {}, {{"shape", os}, {"dim", ax}, {"dtype", DType::i64}});
    V hit = c.bin(OpKind::Eq, io, ixu);
    V off = c.slice_axis(vals, 0, 0, 1), on = c.slice_axis(vals, 0, 1, 2);
    c.set_output(0, c.select(hit, c.reshape(on, {}), c.reshape(off, {})));
  };
  r["DepthToSpace"] = [](Ctx& c) {
    V x = c.in(0);
    auto d = c.static_shape(x, "input");
    if (d.size() != 4) c.error("input must have rank 4");
    int64_t b = c.attr_i("blocksize", 1), N = d[0], C = d[1], H = d[2], W = d[3];
    if (b < 1 || C % (b * b) != 0) c.error("blocksize must be positive and divide the channels by blocksize^2");
    std::string mode = c.attr_s("mode", "DCR");
    V y;
    if (mode == "DCR") {
      y = c.transpose(c.reshape(x, {N, b, b, C / (b * b), H, W}), {0, 3, 4, 1, 5, 2});
    } else {
      y = c.transpose(c.reshape(x, {N, C / (b * b), b, b, H, W}), {0, 1, 4, 2, 5, 3});
    }
    c.set_output(0, c.reshape(y, {N, C / (b * b), H * b, W * b}));
  };
  r["SpaceToDepth"] = [](Ctx& c) {
    V x = c.in(0);
    auto d = c.static_shape(x, "input");
    if (d.size() != 4) c.error("input must have rank 4");
    int64_t b = c.attr_i("blocksize", 1), N = d[0], C = d[1], H = d[2], W = d[3];
    if (b < 1 || H % b != 0 || W % b != 0) c.error("blocksize must be positive and divide the spatial dims");
    bool crd = c.attr_s("mode", "DCR") == "CRD";
    V y = c.transpose(c.reshape(x, {N, C, H / b, b, W / b, b}), crd ? std::vector<int64_t>{0, 1, 3, 5, 2, 4} : std::vector<int64_t>{0, 3, 5, 1, 2, 4});
    c.set_output(0, c.reshape(y, {N, C * b * b, H / b, W / b}));
  };
  r["CumSum"] = [](Ctx& c) {
    V x = c.in(0);
    int64_t ax = axis_norm(c, c.int_in(1, "axis"), c.rank(x));
    c.set_output(0, c.op1(OpKind::Cumsum, {x}, {{"axis", ax}, {"reverse", c.attr_i("reverse", 0)}, {"exclusive", c.attr_i("exclusive", 0)}}));
  };
  r["TopK"] = [](Ctx& c) {
    V x = c.in(0);
    int64_t k = c.opset() < 10 ? c.attr_i("k", 1) : c.int_in(1, "K");
    int64_t ax = axis_norm(c, c.attr_i("axis", -1), c.rank(x));
    if (!c.attr_i("sorted", 1)) c.error("sorted=0 is unsupported");
    auto o = c.op(OpKind::TopK, {x}, {{"k", k}, {"axis", ax}, {"largest", c.attr_i("largest", 1)}});
    c.set_output(0, o[0]);
    c.set_output(1, o[1]);
  };
  for (auto [name, k] : {std::pair{"ArgMax", OpKind::ArgMax}, {"ArgMin", OpKind::ArgMin}}) {
    OpKind kk = k;
    r[name] = [kk](Ctx& c) {
      V x = c.in(0);
      int64_t ax = axis_norm(c, c.attr_i("axis", 0), c.rank(x));
      bool keep = c.attr_i("keepdims", 1) != 0;
      if (c.attr_i("select_last_index", 0)) {
        int64_t n = c.static_shape(x, "input")[ax];
        V i = c.op1(kk, {reverse_axis(c, x, ax)}, {{"axis", ax}, {"keepdims", int64_t{keep}}});
        return c.set_output(0, c.bin(OpKind::Sub, c.scalar(static_cast<double>(n - 1), DType::i64), i));
      }
      c.set_output(0, c.op1(kk, {x}, {{"axis", ax}, {"keepdims", int64_t{keep}}}));
    };
  }
  reduce_op(r, "ReduceSum", 13);
  for (const char* n : {"ReduceMax", "ReduceMin", "ReduceProd", "ReduceMean", "ReduceL1", "ReduceL2", "ReduceSumSquare",
                        "ReduceLogSum", "ReduceLogSumExp"})
    reduce_op(r, n, 18);
  r["NonZero"] = [](Ctx& c) {
    const Tensor& t = c.const_in(0, "X");
    int64_t rk = t.rank();
    std::vector<int64_t> hits;
    for (int64_t i = 0; i < t.numel(); ++i)
      if (t.get(i) != 0) hits.push_back(i);
    int64_t n = static_cast<int64_t>(hits.size());
    Tensor o(DType::i64, {rk, n});
    for (int64_t j = 0; j < n; ++j) {
      int64_t l = hits[j];
      for (int64_t d = rk - 1; d >= 0; --d) {
        o.set_int(d * n + j, l % t.shape()[d]);
        l /= t.shape()[d];
      }
    }
    c.set_output(0, c.constant(o));
  };
}

}  // namespace rlx::onnx
