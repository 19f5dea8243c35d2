// Data movement: broadcast_in_dim, expand, reshape/squeeze/unsqueeze, transpose, slice, pad,
// concatenate, gather/embedding, scatter_add. Values are copied bit-exactly.
#include <algorithm>

#include "runtime/reference/common.h"

namespace rlx::ref {

Outs eval_broadcast_in_dim(const Node& n, const Ins& in, const Types& ot) {
  const Tensor& x = in[0];
  Tensor out = alloc(ot[0]);
  const auto& dims = attr_ints(n, "dims");
  Dims xd = x.shape(), xs = strides_of(xd), od = out.shape(), idx;
  RLX_CHECK(dims.size() == xd.size(), "[reference] broadcast_in_dim: dims must name one output dim per input dim");
  for (size_t i = 0; i < dims.size(); ++i)
    RLX_CHECK(dims[i] >= 0 && dims[i] < static_cast<int64_t>(od.size()) && (xd[i] == 1 || xd[i] == od[dims[i]]),
              "[reference] broadcast_in_dim: cannot broadcast dim ", i);
  for (int64_t o = 0; o < out.numel(); ++o) {
    unravel(o, od, idx);
    int64_t s = 0;
    for (size_t i = 0; i < dims.size(); ++i) s += (xd[i] == 1 ? 0 : idx[dims[i]]) * xs[i];
    copy_elem(out, o, x, s);
  }
  return {out};
}

Outs eval_expand(const Node&, const Ins& in, const Types& ot) {
  Tensor out = alloc(ot[0]);
  auto m = broadcast_map(in[0].shape(), out.shape());
  for (int64_t o = 0; o < out.numel(); ++o) copy_elem(out, o, in[0], m[o]);
  return {out};
}

Outs eval_reshape(const Node& n, const Ins& in, const Types& ot) {
  Tensor out = alloc(ot[0]);
  RLX_CHECK(out.numel() == in[0].numel(), "[reference] ", op_name(n.op), ": ", in[0].numel(), " elements to ",
            out.numel());
  for (int64_t i = 0; i < out.numel(); ++i) copy_elem(out, i, in[0], i);
  return {out};
}

Outs eval_transpose(const Node& n, const Ins& in, const Types& ot) {
  const Tensor& x = in[0];
  Tensor out = alloc(ot[0]);
  const auto& perm = attr_ints(n, "perm");
  Dims xs = strides_of(x.shape()), od = out.shape(), idx;
  RLX_CHECK(perm.size() == od.size(), "[reference] transpose: perm length must equal rank");
  for (int64_t o = 0; o < out.numel(); ++o) {
    unravel(o, od, idx);
    int64_t s = 0;
    for (size_t i = 0; i < perm.size(); ++i) s += idx[i] * xs[perm[i]];  // out dim i = in dim perm[i]
    copy_elem(out, o, x, s);
  }
  return {out};
}

Outs eval_slice(const Node& n, const Ins& in, const Types& ot) {
  const Tensor& x = in[0];
  Tensor out = alloc(ot[0]);
  Dims start = attr_ints(n, "start"), stride = attr_ints(n, "stride");
  if (stride.empty()) stride.assign(x.rank(), 1);
  RLX_CHECK(static_cast<int64_t>(start.size()) == x.rank() && static_cast<int64_t>(stride.size()) == x.rank(),
            "[reference] slice: start/stride need one entry per dim");
  Dims xs = strides_of(x.shape()), od = out.shape(), idx;
  for (int64_t o = 0; o < out.numel(); ++o) {
    unravel(o, od, idx);
    int64_t s = 0;
    for (size_t i = 0; i < od.size(); ++i) s += (start[i] + idx[i] * stride[i]) * xs[i];
    copy_elem(out, o, x, s);
  }
  return {out};
}

Outs eval_pad(const Node& n, const Ins& in, const Types& ot) {
  const Tensor& x = in[0];
  Tensor out = alloc(ot[0]);
  const auto& low = attr_ints(n, "low");
  RLX_CHECK(static_cast<int64_t>(low.size()) == x.rank(), "[reference] pad: low needs one entry per dim");
  Tensor fill(x.dtype(), {1});
  st(fill, 0, attr_float(n, "value"));
  Dims xd = x.shape(), xs = strides_of(xd), od = out.shape(), idx;
  for (int64_t o = 0; o < out.numel(); ++o) {
    unravel(o, od, idx);
    int64_t s = 0;
    bool inside = true;
    for (size_t i = 0; i < od.size(); ++i) {
      int64_t p = idx[i] - low[i];  // negative low crops: p starts past 0
      if (p < 0 || p >= xd[i]) inside = false;
      s += p * xs[i];
    }
    if (inside) copy_elem(out, o, x, s);
    else copy_elem(out, o, fill, 0);
  }
  return {out};
}

Outs eval_concatenate(const Node& n, const Ins& in, const Types& ot) {
  Tensor out = alloc(ot[0]);
  int64_t ax = axis_of(attr_int(n, "axis"), out.rank(), "concatenate");
  Dims od = out.shape(), idx;
  int64_t off = 0;
  for (const Tensor& x : in) {
    RLX_CHECK(x.dtype() == out.dtype() && x.rank() == out.rank(), "[reference] concatenate: operand mismatch");
    Dims xd = x.shape(), os = strides_of(od);
    for (int64_t i = 0; i < x.numel(); ++i) {
      unravel(i, xd, idx);
      idx[ax] += off;
      int64_t o = 0;
      for (size_t j = 0; j < od.size(); ++j) o += idx[j] * os[j];
      copy_elem(out, o, x, i);
    }
    off += xd[ax];
  }
  RLX_CHECK(off == od[ax], "[reference] concatenate: sizes along the axis do not add up");
  return {out};
}

namespace {

// Index rules shared by gather, scatter_add and embedding: negative adds the size, then must be in range.
int64_t take_index(const Tensor& idx, int64_t i, int64_t size, std::string_view what) {
  int64_t v = ldi(idx, i);
  int64_t r = v < 0 ? v + size : v;
  RLX_CHECK(r >= 0 && r < size, "[reference] ", what, " index ", v, " out of range [0,", size, ")");
  return r;
}

}  // namespace

Outs eval_gather(const Node& n, const Ins& in, const Types& ot) {
  const Tensor &x = in[0], &ix = in[1];
  RLX_CHECK(dom_of(ix.dtype()) == Dom::I, "[reference] ", op_name(n.op), ": indices must be integer");
  int64_t ax = n.op == OpKind::Embedding ? 0 : axis_of(attr_int(n, "axis"), x.rank(), "gather");
  Tensor out = alloc(ot[0]);
  Dims xd = x.shape();
  int64_t outer = 1, inner = 1, len = xd[ax], ni = ix.numel();
  for (int64_t i = 0; i < ax; ++i) outer *= xd[i];
  for (int64_t i = ax + 1; i < x.rank(); ++i) inner *= xd[i];
  RLX_CHECK(out.numel() == outer * ni * inner, "[reference] ", op_name(n.op), ": output size mismatch");
  std::vector<int64_t> pos(static_cast<size_t>(ni));
  for (int64_t j = 0; j < ni; ++j) pos[j] = take_index(ix, j, len, op_name(n.op));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < ni; ++j)
      for (int64_t k = 0; k < inner; ++k) copy_elem(out, (o * ni + j) * inner + k, x, (o * len + pos[j]) * inner + k);
  return {out};
}

Outs eval_scatter_add(const Node& n, const Ins& in, const Types& ot) {
  const Tensor &x = in[0], &ix = in[1], &up = in[2];
  RLX_CHECK(dom_of(ix.dtype()) == Dom::I, "[reference] scatter_add: indices must be integer");
  RLX_CHECK(up.dtype() == x.dtype(), "[reference] scatter_add: updates dtype differs");
  Dom d = dom_of(x.dtype());
  RLX_CHECK(d != Dom::B, "[reference] scatter_add: dtype bool not supported");
  int64_t ax = axis_of(attr_int(n, "axis"), x.rank(), "scatter_add");
  Tensor out = alloc(ot[0]);
  Dims xd = x.shape();
  int64_t outer = 1, inner = 1, len = xd[ax], ni = ix.numel();
  for (int64_t i = 0; i < ax; ++i) outer *= xd[i];
  for (int64_t i = ax + 1; i < x.rank(); ++i) inner *= xd[i];
  RLX_CHECK(up.numel() == outer * ni * inner, "[reference] scatter_add: updates size mismatch");
  // Accumulate in the wide domain and round once at the end.
  int64_t N = x.numel();
  std::vector<double> af(d == Dom::F ? N : 0);
  std::vector<cplx> ac(d == Dom::C ? N : 0);
  std::vector<int64_t> ai(d == Dom::I ? N : 0);
  for (int64_t i = 0; i < N; ++i) {
    if (d == Dom::F) af[i] = ld(x, i);
    else if (d == Dom::C) ac[i] = ldc(x, i);
    else ai[i] = ldi(x, i);
  }
  for (int64_t j = 0; j < ni; ++j) {
    int64_t p = take_index(ix, j, len, "scatter_add");
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t k = 0; k < inner; ++k) {
        int64_t dst = (o * len + p) * inner + k, src = (o * ni + j) * inner + k;
        if (d == Dom::F) af[dst] += ld(up, src);
        else if (d == Dom::C) ac[dst] += ldc(up, src);
        else ai[dst] = wadd(ai[dst], ldi(up, src));
      }
    }
  }
  for (int64_t i = 0; i < N; ++i) {
    if (d == Dom::F) st(out, i, af[i]);
    else if (d == Dom::C) stc(out, i, ac[i]);
    else sti(out, i, ai[i]);
  }
  return {out};
}

}  // namespace rlx::ref
