// conv-epilogue: a conv whose only reader is an elementwise region that is, per output channel,
// affine in the conv's output (a bias, an inference BatchNorm: sub/mul/add/div by [1,O,1,1] or
// scalar operands) plus at most one tensor of the output's shape (a residual), then max/min by
// scalars (ReLU, ReLU6), takes that region as its epilogue (attrs cpu_conv_slots, cpu_epi; the
// region's body moves into the conv kernel): the conv writes the region's output while each block
// is in cache, and the region's pass over memory goes. Which convs and which bodies qualify is the
// backend's answer (LirAbsorbs::conv, conv_epilogue; cpu: conv.cpp / conv_fuse.cpp). Regions
// chain: the reader of what an absorbed region wrote is tried next.
#include <string>

#include "lir/rewrite/pass.h"
#include "lir/rewrite/uses.h"

namespace rlx {

namespace {

// The region a kernel runs as a body: its own, or a one-node body for a lone elementwise op (a bare
// ReLU). False for other kernels.
bool region_body(const LirProgram& p, const LirKernel& r, Graph& body) {
  if (r.kind == KernelKind::Generated) {
    body = r.body;
    return true;
  }
  if (r.kind != KernelKind::Library || !is_elementwise(r.op) || r.out.size() != 1) return false;
  body = Graph{};
  std::vector<ValueId> ins;
  for (size_t i = 0; i < r.in.size(); ++i) {
    const ValueType& t = p.buffers[r.in[i]].type;
    ins.push_back(body.add_input("a" + std::to_string(i), t.dtype, t.shape));
  }
  body.outputs = body.add_node(r.op, ins, r.attrs, r.origin);
  return true;
}

// `second` (reading first's output where second_in is y) after `first`: one body whose inputs are
// first's, then second's other inputs. Slots: kernel input per body input (-1: the conv's output),
// second's extra buffers appended to `kin` (the conv kernel's inputs) unless already there.
Graph chain(const Graph& first, std::vector<int>& slots, const Graph& second, const std::vector<int>& second_in, int y,
            std::vector<int>& kin) {
  Graph g;
  std::vector<ValueId> m1(first.values.size(), -1), m2(second.values.size(), -1);
  for (size_t s = 0; s < first.inputs.size(); ++s) {
    const ValueType& t = first.type(first.inputs[s]);
    m1[first.inputs[s]] = g.add_input("a" + std::to_string(s), t.dtype, t.shape);
  }
  auto copy = [&](const Graph& src, std::vector<ValueId>& m) {
    for (const Node& n : src.nodes) {
      std::vector<ValueId> ins;
      for (ValueId v : n.inputs) ins.push_back(m[v]);
      auto outs = g.add_node(n.op, ins, n.attrs, n.name);
      for (size_t i = 0; i < outs.size(); ++i) m[n.outputs[i]] = outs[i];
    }
  };
  copy(first, m1);
  for (size_t s = 0; s < second.inputs.size(); ++s) {
    if (second_in[s] == y) {
      m2[second.inputs[s]] = m1[first.outputs[0]];
      continue;
    }
    const ValueType& t = second.type(second.inputs[s]);
    m2[second.inputs[s]] = g.add_input("a" + std::to_string(g.inputs.size()), t.dtype, t.shape);
    int slot = -1;
    for (size_t i = 2; i < kin.size(); ++i)
      if (kin[i] == second_in[s]) slot = static_cast<int>(i);
    if (slot < 0) {
      slot = static_cast<int>(kin.size());
      kin.push_back(second_in[s]);
    }
    slots.push_back(slot);
  }
  copy(second, m2);
  g.outputs = {m2[second.outputs[0]]};
  return g;
}

}  // namespace

int pass_conv_epilogue(LirProgram& p, const LirAbsorbs& abs) {
  if (!abs.conv || !abs.conv_epilogue) return 0;
  const size_t nk = p.kernels.size();
  LirUses u = lir_uses(p);
  auto& readers = u.readers;
  auto& views = u.views;
  auto& def = u.producer;
  auto root = [&](int b) { return lir_root(p, b); };
  std::vector<bool> dead(nk, false);
  int changed = 0;
  for (size_t k = 0; k < nk; ++k) {
    LirKernel& d = p.kernels[k];
    if (dead[k] || d.kind != KernelKind::Library || d.op != OpKind::Conv || d.in.size() != 2 || d.out.size() != 1)
      continue;
    if (!abs.conv(d, p)) continue;
    // Absorb the reader, then the reader of what that wrote, while each is an epilogue form.
    Graph body;  // the epilogue so far (empty: none yet)
    std::vector<int> slots;
    for (;;) {
      const int y = d.out[0];
      const LirBuffer& yb = p.buffers[y];
      if (yb.kind != BufferKind::Arena || views[y] != 0 || readers[y].size() != 1) break;
      const int rk = readers[y][0];
      if (rk <= static_cast<int>(k) || dead[rk]) break;
      const LirKernel& r = p.kernels[rk];
      Graph rb;
      if (!region_body(p, r, rb) || r.out.size() != 1 || p.buffers[r.out[0]].kind == BufferKind::View ||
          p.buffers[r.out[0]].type.dtype != yb.type.dtype || p.buffers[r.out[0]].type.shape != yb.type.shape)
        break;
      // The region's other inputs must exist when the conv runs.
      bool ready = true;
      for (int b : r.in) ready &= b == y || def[root(b)] < static_cast<int>(k);
      if (!ready) break;
      std::vector<int> kin = d.in, s2 = slots;
      Graph g;
      if (body.nodes.empty() && body.inputs.empty()) {
        g = rb;
        for (int b : r.in) {
          if (b == y) {
            s2.push_back(-1);
            continue;
          }
          int slot = -1;
          for (size_t i = 2; i < kin.size(); ++i)
            if (kin[i] == b) slot = static_cast<int>(i);
          if (slot < 0) {
            slot = static_cast<int>(kin.size());
            kin.push_back(b);
          }
          s2.push_back(slot);
        }
      } else {
        g = chain(body, s2, rb, r.in, y, kin);
      }
      auto label = abs.conv_epilogue(g, s2, yb.type.shape);
      if (!label) break;
      for (size_t i = d.in.size(); i < kin.size(); ++i) readers[kin[i]].push_back(static_cast<int>(k));
      d.in = kin;
      d.out = {r.out[0]};
      def[r.out[0]] = static_cast<int>(k);
      body = std::move(g);
      slots = std::move(s2);
      d.attrs["cpu_epi"] = *label;
      dead[rk] = true;
      ++changed;
    }
    if (body.inputs.empty()) continue;
    d.body = std::move(body);
    d.attrs["cpu_conv_slots"] = std::vector<int64_t>(slots.begin(), slots.end());
    d.origin += " +" + attr_str(Node{d.op, {}, {}, d.attrs, ""}, "cpu_epi");
  }
  lir_drop(p, dead);
  return changed;
}

}  // namespace rlx
