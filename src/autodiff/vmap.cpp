// vmap over a leading axis: batching rules for elementwise ops, reductions, reshape, transpose,
// broadcast_in_dim and dot_general; every other op is unrolled (slice per batch element, apply,
// concatenate), which is always correct and visible in the graph.
#include <algorithm>

#include "autodiff/autodiff.h"
#include "passes/passes.h"

namespace rlx::ad {

namespace {

using Ints = std::vector<int64_t>;

Ints sdims(const Graph& g, ValueId v) { return static_dims(g.type(v).shape); }
Ints plus1(Ints a, int64_t r) {
  for (auto& x : a) x = (x < 0 ? x + r : x) + 1;
  return a;
}

}  // namespace

Graph vmap(const Graph& f0, int64_t size, std::vector<int> batched) {
  Graph f = decompose_for_ad(f0);
  for (auto& v : f.values)
    RLX_CHECK(is_static(v.type.shape), "[vmap] needs static shapes, got ", shape_str(v.type.shape));
  if (batched.empty())
    for (size_t i = 0; i < f.inputs.size(); ++i) batched.push_back(static_cast<int>(i));
  Graph out;
  out.name = f0.name + "_vmap";
  Builder b(out);
  std::vector<ValueId> map(f.values.size(), -1);
  std::vector<bool> isb(f.values.size(), false);
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    ValueId v = f.inputs[i];
    bool bt = std::find(batched.begin(), batched.end(), static_cast<int>(i)) != batched.end();
    Shape s = f.type(v).shape;
    if (bt) s.insert(s.begin(), Dim(size));
    map[v] = out.add_input(f.values[v].name, f.type(v).dtype, s);
    isb[v] = bt;
  }
  for (const Node& n : f.nodes) {
    std::vector<ValueId> ins;
    bool any = false;
    for (auto v : n.inputs) {
      ins.push_back(map[v]);
      any |= isb[v];
    }
    std::vector<ValueId> outs;
    if (!any) {
      outs = out.add_node(n.op, ins, n.attrs, n.name);
      for (size_t i = 0; i < outs.size(); ++i) map[n.outputs[i]] = outs[i];
      continue;
    }
    Attrs a = n.attrs;
    auto get = [&](const char* k) { return attr_ints(n, k); };
    int64_t r0 = static_cast<int64_t>(f.type(n.inputs[0]).shape.size());
    bool done = true;
    if (is_elementwise(n.op) || n.op == OpKind::StopGradient) {
      int64_t R = 0;
      for (auto v : n.inputs) R = std::max<int64_t>(R, static_cast<int64_t>(f.type(v).shape.size()));
      for (size_t i = 0; i < ins.size(); ++i) {
        if (!isb[n.inputs[i]]) continue;
        Ints d = sdims(f, n.inputs[i]);
        if (static_cast<int64_t>(d.size()) < R) {
          Ints e{size};
          e.insert(e.end(), R - static_cast<int64_t>(d.size()), 1);
          e.insert(e.end(), d.begin(), d.end());
          ins[i] = b.reshape(ins[i], to_shape(e));
        }
      }
      outs = out.add_node(n.op, ins, a, n.name);
    } else if (n.op == OpKind::ReduceSum || n.op == OpKind::ReduceMax || n.op == OpKind::ReduceMin ||
               n.op == OpKind::ReduceProd) {
      a["axes"] = plus1(get("axes"), r0);
      a["keepdims"] = attr_int(n, "keepdims");
      outs = out.add_node(n.op, ins, a, n.name);
    } else if (n.op == OpKind::Reshape) {
      Shape s = attr_dims(n, "shape");
      s.insert(s.begin(), Dim(size));
      a["shape"] = s;
      outs = out.add_node(n.op, ins, a, n.name);
    } else if (n.op == OpKind::Transpose) {
      Ints p{0};
      for (auto x : get("perm")) p.push_back(x + 1);
      a["perm"] = p;
      outs = out.add_node(n.op, ins, a, n.name);
    } else if (n.op == OpKind::BroadcastInDim) {
      Shape s = attr_dims(n, "shape");
      int64_t R = static_cast<int64_t>(s.size());
      s.insert(s.begin(), Dim(size));
      Ints d{0};
      for (auto x : plus1(get("dims"), R)) d.push_back(x);
      a["shape"] = s;
      a["dims"] = d;
      outs = out.add_node(n.op, ins, a, n.name);
    } else if (n.op == OpKind::DotGeneral && get("lhs_batch").empty()) {
      int64_t lr = r0, rr = static_cast<int64_t>(f.type(n.inputs[1]).shape.size());
      bool bl = isb[n.inputs[0]], br = isb[n.inputs[1]];
      Ints lc = get("lhs_contract"), rc = get("rhs_contract");
      if (bl) lc = plus1(lc, lr);
      if (br) rc = plus1(rc, rr);
      Ints lb, rb;
      if (bl && br) lb = rb = {0};
      a["lhs_batch"] = lb;
      a["rhs_batch"] = rb;
      a["lhs_contract"] = lc;
      a["rhs_contract"] = rc;
      outs = out.add_node(n.op, ins, a, n.name);
      if (!bl) {  // B sits after the lhs free dims: move it to the front
        int64_t orank = static_cast<int64_t>(out.type(outs[0]).shape.size());
        int64_t pos = lr - static_cast<int64_t>(lc.size());
        Ints p{pos};
        for (int64_t i = 0; i < orank; ++i)
          if (i != pos) p.push_back(i);
        outs[0] = b.transpose(outs[0], p);
      }
    } else {
      done = false;
    }
    if (!done) {  // unroll: one copy of the node per batch element
      std::vector<std::vector<ValueId>> parts(n.outputs.size());
      for (int64_t k = 0; k < size; ++k) {
        std::vector<ValueId> ki;
        for (size_t i = 0; i < ins.size(); ++i) {
          if (!isb[n.inputs[i]]) {
            ki.push_back(ins[i]);
            continue;
          }
          Ints d = sdims(out, ins[i]), st(d.size(), 0), li = d;
          st[0] = k;
          li[0] = k + 1;
          ValueId s = b.op1(OpKind::Slice, {ins[i]}, {{"start", st}, {"limit", li}});
          ki.push_back(b.reshape(s, to_shape(Ints(d.begin() + 1, d.end()))));
        }
        auto ko = out.add_node(n.op, ki, n.attrs, n.name);
        for (size_t j = 0; j < ko.size(); ++j) {
          Ints d = sdims(out, ko[j]);
          d.insert(d.begin(), 1);
          parts[j].push_back(b.reshape(ko[j], to_shape(d)));
        }
      }
      for (auto& p : parts) outs.push_back(b.op1(OpKind::Concatenate, p, {{"axis", int64_t{0}}}));
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      map[n.outputs[i]] = outs[i];
      isb[n.outputs[i]] = true;
    }
  }
  for (auto v : f.outputs) {
    ValueId m = map[v];
    if (!isb[v]) {  // an unbatched output is broadcast along the new axis
      Ints d = sdims(f, v), e{size};
      e.insert(e.end(), d.begin(), d.end());
      Ints bd;
      for (size_t i = 0; i < d.size(); ++i) bd.push_back(static_cast<int64_t>(i) + 1);
      m = b.broadcast_in_dim(m, to_shape(e), bd);
    }
    out.outputs.push_back(m);
  }
  return eliminate_dead_code(out);
}

}  // namespace rlx::ad
