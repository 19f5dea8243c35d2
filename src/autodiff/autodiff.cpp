// Reverse mode over a decomposed (HIR-free) graph, jvp as the transpose of vjp, and inlining.
#include "autodiff/autodiff.h"

#include "passes/passes.h"

namespace rlx::ad {

namespace {
// Copies src's nodes into b's graph, src inputs bound to `inputs`; returns src value -> new value.
std::vector<ValueId> inline_values(Builder& b, const Graph& src, const std::vector<ValueId>& inputs) {
  RLX_CHECK(inputs.size() == src.inputs.size(), "[autodiff] inline: ", inputs.size(), " inputs for ",
            src.inputs.size());
  std::vector<ValueId> map(src.values.size(), -1);
  for (size_t i = 0; i < inputs.size(); ++i) map[src.inputs[i]] = inputs[i];
  for (const Node& n : src.nodes) {
    std::vector<ValueId> ins;
    for (auto v : n.inputs) ins.push_back(map.at(v));
    auto outs = b.graph().add_node(n.op, ins, n.attrs, n.name);
    for (size_t i = 0; i < outs.size(); ++i) map[n.outputs[i]] = outs[i];
  }
  return map;
}
}  // namespace

std::vector<ValueId> inline_graph(Builder& b, const Graph& src, const std::vector<ValueId>& inputs) {
  auto map = inline_values(b, src, inputs);
  std::vector<ValueId> r;
  for (auto v : src.outputs) r.push_back(map.at(v));
  return r;
}

namespace {

Graph prepare(const Graph& f) {
  Graph g = decompose_for_ad(f);
  for (auto& v : g.values)
    RLX_CHECK(is_static(v.type.shape), "[autodiff] graph '", f.name, "' has symbolic shape ",
              shape_str(v.type.shape), "; specialize it first");
  return g;
}

std::vector<int> default_wrt(const Graph& g, std::vector<int> wrt) {
  if (!wrt.empty()) return wrt;
  for (size_t i = 0; i < g.inputs.size(); ++i)
    if (is_float(g.type(g.inputs[i]).dtype)) wrt.push_back(static_cast<int>(i));
  return wrt;
}

ValueId zeros(Builder& b, const ValueType& t) {
  return b.broadcast_in_dim(b.scalar(0, t.dtype), t.shape, {});
}

}  // namespace

Graph decompose_for_ad(const Graph& f) {
  return decompose_graph(f, [](const Node& n, const Graph&) {
    // Native-only HIR ops (no decomposition, e.g. the splat ops) stay: their VJP rules emit native ops.
    return op_info(n.op).level == Level::Hir && n.op != OpKind::StopGradient && op_info(n.op).decompose != nullptr;
  });
}

// Emits f (already HIR-free) and its reverse pass into b's graph. `seeds` holds one cotangent per
// f output (-1 = none). Returns f's outputs followed by the gradients of the `wrt` inputs.
std::vector<ValueId> emit_vjp(Builder& b, const Graph& f, const std::vector<ValueId>& inputs,
                              const std::vector<ValueId>& seeds, const std::vector<int>& wrt) {
  Graph& out = b.graph();
  std::vector<ValueId> map = inline_values(b, f, inputs);
  std::vector<ValueId> ct(f.values.size(), -1);
  auto accumulate = [&](ValueId v, ValueId c) {
    if (c < 0 || !is_float(f.type(v).dtype)) return;
    const ValueType &want = f.type(v), &got = out.type(c);
    RLX_CHECK(want.dtype == got.dtype && want.shape == got.shape, "[autodiff] cotangent for ",
              f.value_label(v), " is ", dtype_name(got.dtype), shape_str(got.shape), ", expected ",
              dtype_name(want.dtype), shape_str(want.shape));
    ct[v] = ct[v] < 0 ? c : b.add(ct[v], c);
  };
  for (size_t i = 0; i < f.outputs.size(); ++i) accumulate(f.outputs[i], seeds[i]);
  for (auto it = f.nodes.rbegin(); it != f.nodes.rend(); ++it) {
    const Node& n = *it;
    std::vector<ValueId> gs, xs, ys;
    bool any = false;
    for (auto o : n.outputs) {
      gs.push_back(ct[o]);
      any |= ct[o] >= 0;
    }
    if (!any || is_nondifferentiable(n.op)) continue;  // stop_gradient included
    VjpRule rule = vjp_rule(n.op);
    RLX_CHECK(rule != nullptr, "[autodiff] node ", f.node_label(n), ": op '", op_name(n.op),
              "' has no VJP rule");
    for (size_t i = 0; i < gs.size(); ++i)
      if (gs[i] < 0) gs[i] = zeros(b, f.type(n.outputs[i]));
    for (auto v : n.inputs) xs.push_back(map[v]);
    for (auto v : n.outputs) ys.push_back(map[v]);
    b.set_origin(n.name.empty() ? std::string("grad") : "grad/" + n.name);
    std::vector<ValueId> r;
    try {
      r = rule(b, n, xs, ys, gs);
    } catch (const Error& e) {
      fail("[autodiff] node ", f.node_label(n), ": ", e.what());
    }
    for (size_t j = 0; j < n.inputs.size() && j < r.size(); ++j) accumulate(n.inputs[j], r[j]);
  }
  b.set_origin("");
  std::vector<ValueId> res;
  for (auto v : f.outputs) res.push_back(map[v]);
  for (int i : wrt) {
    ValueId in = f.inputs.at(i);
    res.push_back(ct[in] >= 0 ? ct[in] : zeros(b, f.type(in)));
  }
  return res;
}

Graph vjp(const Graph& f0, std::vector<int> wrt) {
  Graph f = prepare(f0);
  wrt = default_wrt(f, wrt);
  Graph out;
  out.name = f0.name + "_vjp";
  Builder b(out);
  std::vector<ValueId> ins, seeds;
  for (auto v : f.inputs) ins.push_back(out.add_input(f.values[v].name, f.type(v).dtype, f.type(v).shape));
  for (size_t i = 0; i < f.outputs.size(); ++i) {
    const ValueType& t = f.type(f.outputs[i]);
    seeds.push_back(is_float(t.dtype) ? out.add_input("ct_" + std::to_string(i), t.dtype, t.shape) : -1);
  }
  out.outputs = emit_vjp(b, f, ins, seeds, wrt);
  return eliminate_dead_code(out);
}

Graph value_and_grad(const Graph& f0, std::vector<int> wrt) {
  Graph f = prepare(f0);
  RLX_CHECK(!f.outputs.empty(), "[autodiff] value_and_grad: graph has no outputs");
  const ValueType& t = f.type(f.outputs[0]);
  RLX_CHECK(is_float(t.dtype) && t.shape.empty(), "[autodiff] value_and_grad: output 0 must be a float scalar, got ",
            dtype_name(t.dtype), shape_str(t.shape));
  wrt = default_wrt(f, wrt);
  Graph out;
  out.name = f0.name + "_grad";
  Builder b(out);
  std::vector<ValueId> ins;
  for (auto v : f.inputs) ins.push_back(out.add_input(f.values[v].name, f.type(v).dtype, f.type(v).shape));
  std::vector<ValueId> seeds(f.outputs.size(), -1);
  seeds[0] = b.scalar(1, t.dtype);
  out.outputs = emit_vjp(b, f, ins, seeds, wrt);
  for (size_t i = 0; i < f.outputs.size(); ++i) {
    const std::string& nm = f.values[f.outputs[i]].name;
    if (!nm.empty() && out.values[out.outputs[i]].name.empty()) out.values[out.outputs[i]].name = nm;
  }
  return eliminate_dead_code(out);
}

Graph grad(const Graph& f, std::vector<int> wrt) {
  Graph g = value_and_grad(f, wrt);
  g.outputs.erase(g.outputs.begin(), g.outputs.begin() + static_cast<long>(f.outputs.size()));
  return eliminate_dead_code(g);
}

// jvp(f)(x, t) = J t. With V(x, u) = J^T u (linear in u), h(x, u, t) = <V(x, u), t> = <u, J t>, so
// d h / d u = J t: the tangent map is the VJP of the VJP, evaluated at u = 0.
Graph jvp(const Graph& f0) {
  Graph f = prepare(f0);
  std::vector<int> fin, fout;
  for (size_t i = 0; i < f.inputs.size(); ++i)
    if (is_float(f.type(f.inputs[i]).dtype)) fin.push_back(static_cast<int>(i));
  for (size_t i = 0; i < f.outputs.size(); ++i)
    if (is_float(f.type(f.outputs[i]).dtype)) fout.push_back(static_cast<int>(i));
  Graph V = vjp(f, fin);  // inputs: x, u (per float output); outputs: y, J^T u
  // H(x, u, t) -> (h, y...)
  Graph H;
  H.name = f0.name + "_h";
  {
    Builder hb(H);
    std::vector<ValueId> vin, ts;
    for (auto v : V.inputs) vin.push_back(H.add_input(V.values[v].name, V.type(v).dtype, V.type(v).shape));
    for (int i : fin) {
      ValueId x = f.inputs[i];
      ts.push_back(H.add_input("t_" + f.values[x].name, f.type(x).dtype, f.type(x).shape));
    }
    auto vo = inline_graph(hb, V, vin);
    ValueId h = -1;
    for (size_t k = 0; k < fin.size(); ++k) {
      ValueId gx = vo[f.outputs.size() + k];
      int64_t r = static_cast<int64_t>(H.type(gx).shape.size());
      std::vector<int64_t> axes;
      for (int64_t a = 0; a < r; ++a) axes.push_back(a);
      ValueId p = hb.mul(gx, ts[k]);
      ValueId s = r ? hb.reduce(OpKind::ReduceSum, p, axes, false) : p;
      if (H.type(s).dtype != DType::f64) s = hb.convert(s, DType::f64);
      h = h < 0 ? s : hb.add(h, s);
    }
    if (h < 0) h = hb.scalar(0, DType::f64);
    H.outputs.push_back(h);
    for (size_t i = 0; i < f.outputs.size(); ++i) H.outputs.push_back(vo[i]);
  }
  H = decompose_for_ad(H);
  Graph out;
  out.name = f0.name + "_jvp";
  Builder b(out);
  std::vector<ValueId> xs, ts, hin;
  for (auto v : f.inputs) xs.push_back(out.add_input(f.values[v].name, f.type(v).dtype, f.type(v).shape));
  for (int i : fin) {
    ValueId x = f.inputs[i];
    ts.push_back(out.add_input("t_" + f.values[x].name, f.type(x).dtype, f.type(x).shape));
  }
  hin = xs;
  std::vector<int> uwrt;
  for (int o : fout) {
    uwrt.push_back(static_cast<int>(hin.size()));
    hin.push_back(zeros(b, f.type(f.outputs[o])));
  }
  hin.insert(hin.end(), ts.begin(), ts.end());
  std::vector<ValueId> seeds(H.outputs.size(), -1);
  seeds[0] = b.scalar(1, DType::f64);
  auto r = emit_vjp(b, H, hin, seeds, uwrt);
  for (size_t i = 0; i < f.outputs.size(); ++i) out.outputs.push_back(r[1 + i]);
  for (size_t k = 0; k < fout.size(); ++k) out.outputs.push_back(r[1 + f.outputs.size() + k]);
  return eliminate_dead_code(out);
}

}  // namespace rlx::ad
