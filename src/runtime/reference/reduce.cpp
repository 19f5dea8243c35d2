// Reductions: reduce_{sum,max,min,prod,mean}, argmax/argmin, cumsum, reduce_window.
#include <cmath>
#include <limits>
#include <set>

#include "runtime/reference/common.h"

namespace rlx::ref {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// For each input dim, its stride in the (keepdims) output; 0 for reduced dims.
Dims out_strides(const Dims& in, const std::set<int64_t>& axes) {
  Dims kept(in);
  for (auto a : axes) kept[a] = 1;
  Dims s = strides_of(kept);
  for (auto a : axes) s[a] = 0;
  return s;
}

std::set<int64_t> norm_axes(const std::vector<int64_t>& axes, int64_t rank, const char* what) {
  std::set<int64_t> r;
  for (auto a : axes) r.insert(axis_of(a, rank, what));
  return r;
}

double combine_f(OpKind k, double acc, double x) {
  switch (k) {
    case OpKind::ReduceSum:
    case OpKind::ReduceMean: return acc + x;
    case OpKind::ReduceProd: return acc * x;
    case OpKind::ReduceMax: return (std::isnan(acc) || std::isnan(x)) ? kNaN : (x > acc ? x : acc);
    default: return (std::isnan(acc) || std::isnan(x)) ? kNaN : (x < acc ? x : acc);
  }
}

int64_t combine_i(OpKind k, int64_t acc, int64_t x, bool u) {  // u: u64 bits, unsigned order
  switch (k) {
    case OpKind::ReduceSum: return wadd(acc, x);
    case OpKind::ReduceProd: return wmul(acc, x);
    case OpKind::ReduceMax: return lt_i(acc, x, u) ? x : acc;
    default: return lt_i(x, acc, u) ? x : acc;
  }
}

}  // namespace

Outs eval_reduce(const Node& n, const Ins& in, const Types& ot) {
  const Tensor& x = in[0];
  OpKind k = n.op;
  Tensor out = alloc(ot[0]);
  Dims xd = x.shape(), idx;
  auto axes = norm_axes(attr_ints(n, "axes"), x.rank(), op_name(k).data());
  Dims os = out_strides(xd, axes);
  int64_t M = out.numel();
  std::vector<int64_t> cnt(static_cast<size_t>(M), 0);  // elements folded into each output so far
  Dom d = dom_of(x.dtype());
  RLX_CHECK(d != Dom::B && !(d == Dom::C && (k == OpKind::ReduceMax || k == OpKind::ReduceMin)),
            "[reference] ", op_name(k), ": dtype ", dtype_name(x.dtype()), " not supported");
  std::vector<double> accf(d == Dom::F ? M : 0);
  std::vector<cplx> accc(d == Dom::C ? M : 0);
  std::vector<int64_t> acci(d == Dom::I ? M : 0);
  // Fold in row-major input order, starting each output from its first element.
  for (int64_t i = 0; i < x.numel(); ++i) {
    unravel(i, xd, idx);
    int64_t o = 0;
    for (size_t j = 0; j < xd.size(); ++j) o += idx[j] * os[j];
    bool first = cnt[o]++ == 0;
    if (d == Dom::F) accf[o] = first ? ld(x, i) : combine_f(k, accf[o], ld(x, i));
    else if (d == Dom::I) acci[o] = first ? ldi(x, i) : combine_i(k, acci[o], ldi(x, i), is_u64(x.dtype()));
    else if (first) accc[o] = ldc(x, i);
    else accc[o] = k == OpKind::ReduceProd ? accc[o] * ldc(x, i) : accc[o] + ldc(x, i);
  }
  for (int64_t o = 0; o < M; ++o) {
    bool empty = cnt[o] == 0;
    if (d == Dom::F) {
      double v = accf[o];
      if (empty) {
        v = k == OpKind::ReduceProd ? 1.0
            : k == OpKind::ReduceMax ? -kInf
            : k == OpKind::ReduceMin ? kInf
            : k == OpKind::ReduceMean ? kNaN
                                      : 0.0;
      } else if (k == OpKind::ReduceMean) {
        v /= static_cast<double>(cnt[o]);
      }
      st(out, o, v);
    } else if (d == Dom::I) {
      int64_t v = acci[o];
      if (empty) {
        v = k == OpKind::ReduceProd ? 1
            : k == OpKind::ReduceMax ? int_min(x.dtype())
            : k == OpKind::ReduceMin ? int_max(x.dtype())
                                     : 0;
      }
      sti(out, o, v);
    } else {
      stc(out, o, empty ? cplx(k == OpKind::ReduceProd ? 1.0 : 0.0, 0.0) : accc[o]);
    }
  }
  return {out};
}

Outs eval_arg_reduce(const Node& n, const Ins& in, const Types& ot) {
  const Tensor& x = in[0];
  bool is_max = n.op == OpKind::ArgMax;
  Tensor out = alloc(ot[0]);
  Dims xd = x.shape(), idx;
  int64_t ax = axis_of(attr_int(n, "axis"), x.rank(), op_name(n.op).data());
  RLX_CHECK(xd[ax] > 0 || out.numel() == 0, "[reference] ", op_name(n.op), " over an empty axis");
  Dims os = out_strides(xd, {ax});
  int64_t M = out.numel();
  std::vector<int64_t> best(static_cast<size_t>(M), -1);
  Dom d = dom_of(x.dtype());
  std::vector<double> bf(static_cast<size_t>(M));
  std::vector<int64_t> bi(static_cast<size_t>(M));
  // Row-major order visits each output's candidates in increasing index: strict comparisons keep
  // the first extreme. A NaN is the extreme (the first NaN wins), as in numpy.
  for (int64_t i = 0; i < x.numel(); ++i) {
    unravel(i, xd, idx);
    int64_t o = 0;
    for (size_t j = 0; j < xd.size(); ++j) o += idx[j] * os[j];
    bool take = best[o] < 0;
    if (d == Dom::F) {
      double v = ld(x, i), b = bf[o];
      if (!take && !std::isnan(b)) take = std::isnan(v) || (is_max ? v > b : v < b);
      if (take) bf[o] = v;
    } else {
      int64_t v = ldi(x, i), b = bi[o];
      if (!take) take = is_max ? lt_i(b, v, is_u64(x.dtype())) : lt_i(v, b, is_u64(x.dtype()));
      if (take) bi[o] = v;
    }
    if (take) best[o] = idx[ax];
  }
  for (int64_t o = 0; o < M; ++o) sti(out, o, best[o] < 0 ? 0 : best[o]);
  return {out};
}

Outs eval_cumsum(const Node& n, const Ins& in, const Types& ot) {
  const Tensor& x = in[0];
  Tensor out = alloc(ot[0]);
  Dims xd = x.shape();
  int64_t ax = axis_of(attr_int(n, "axis"), x.rank(), "cumsum");
  bool rev = attr_int(n, "reverse") != 0, excl = attr_int(n, "exclusive") != 0;
  Dom d = dom_of(x.dtype());
  RLX_CHECK(d != Dom::B, "[reference] cumsum: dtype bool not supported");
  if (x.numel() == 0) return {out};
  int64_t len = xd[ax], inner = strides_of(xd)[ax];
  int64_t outer = x.numel() / (len * inner);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in_ = 0; in_ < inner; ++in_) {
      double af = 0;
      cplx ac = 0;
      int64_t ai = 0;
      auto add = [&](int64_t f) {
        if (d == Dom::F) af += ld(x, f);
        else if (d == Dom::C) ac += ldc(x, f);
        else ai = wadd(ai, ldi(x, f));
      };
      for (int64_t s = 0; s < len; ++s) {
        int64_t p = rev ? len - 1 - s : s;
        int64_t f = (o * len + p) * inner + in_;
        if (!excl) add(f);
        if (d == Dom::F) st(out, f, af);
        else if (d == Dom::C) stc(out, f, ac);
        else sti(out, f, ai);
        if (excl) add(f);
      }
    }
  }
  return {out};
}

Outs eval_reduce_window(const Node& n, const Ins& in, const Types& ot) {
  const Tensor& x = in[0];
  Tensor out = alloc(ot[0]);
  const std::string& kind = attr_str(n, "kind");
  RLX_CHECK(kind == "sum" || kind == "max" || kind == "min", "[reference] reduce_window kind '", kind, "'");
  int64_t r = x.rank();
  Dims win = attr_ints(n, "window"), stv = attr_ints(n, "strides"), pads = attr_ints(n, "pads");
  if (stv.empty()) stv.assign(r, 1);
  if (pads.empty()) pads.assign(2 * r, 0);
  RLX_CHECK(static_cast<int64_t>(win.size()) == r && static_cast<int64_t>(stv.size()) == r &&
                static_cast<int64_t>(pads.size()) == 2 * r,
            "[reference] reduce_window: window/strides/pads must have one entry per dim");
  Dims lo(pads.begin(), pads.begin() + r);
  Dom d = dom_of(x.dtype());
  RLX_CHECK(d == Dom::F || d == Dom::I, "[reference] reduce_window: dtype ", dtype_name(x.dtype()), " not supported");
  OpKind k = kind == "sum" ? OpKind::ReduceSum : kind == "max" ? OpKind::ReduceMax : OpKind::ReduceMin;
  // Pad taps hold the kind's identity (0, -inf, +inf), so they are simply skipped; a window made
  // only of padding gives that identity (for ints: 0, dtype min, dtype max).
  for_each_window(x.shape(), out.shape(), win, stv, lo, Dims(r, 1), [&](int64_t o, const std::vector<int64_t>& taps) {
    bool any = false;
    double af = 0;
    int64_t ai = 0;
    for (int64_t t : taps) {
      if (t < 0) continue;
      if (d == Dom::F) af = any ? combine_f(k, af, ld(x, t)) : ld(x, t);
      else ai = any ? combine_i(k, ai, ldi(x, t), is_u64(x.dtype())) : ldi(x, t);
      any = true;
    }
    if (d == Dom::F) st(out, o, any ? af : (kind == "sum" ? 0.0 : kind == "max" ? -kInf : kInf));
    else sti(out, o, any ? ai : (kind == "sum" ? 0 : kind == "max" ? int_min(x.dtype()) : int_max(x.dtype())));
  });
  return {out};
}

}  // namespace rlx::ref
