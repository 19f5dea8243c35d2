// lower-to-lir: one kernel per non-fused node, one generated kernel per fusion group, views for
// reshapes, then the memory plan (plan_memory.cpp).
#include <map>

#include "lir/plan.h"
#include "passes/passes.h"
#include "rlx/lir.h"

namespace rlx {

int64_t LirBuffer::bytes() const {
  int64_t b = 0;
  RLX_CHECK(!__builtin_mul_overflow(numel(type.shape), static_cast<int64_t>(dtype_size(type.dtype)), &b),
            "[lir] buffer of ", shape_str(type.shape), " ", dtype_name(type.dtype), " is larger than int64 bytes");
  return b;
}

std::string LirKernel::label() const {
  if (kind == KernelKind::Library) return std::string(op_name(op));
  std::string s = "fused[";
  for (size_t i = 0; i < body.nodes.size(); ++i) s += (i ? "," : "") + std::string(op_name(body.nodes[i].op));
  return s + "]";
}

namespace {

struct Lowering {
  const Graph& g;
  LirProgram p;
  std::map<ValueId, int> buf;  // graph value -> buffer

  int new_buffer(const ValueType& t, BufferKind k, const std::string& name = "") {
    LirBuffer b;
    b.type = t;
    b.kind = k;
    b.name = name;
    p.buffers.push_back(std::move(b));
    return static_cast<int>(p.buffers.size() - 1);
  }
  int buffer_of(ValueId v) {
    auto it = buf.find(v);
    RLX_CHECK(it != buf.end(), "[lir] value ", g.value_label(v), " has no buffer");
    return it->second;
  }
};

}  // namespace

LirProgram lower_to_lir(const Graph& g, bool fuse, bool plan) {
  Lowering L{g, {}, {}};
  L.p.name = g.name;
  for (auto i : g.inputs) {
    int b = L.new_buffer(g.type(i), BufferKind::Input, g.values[i].name);
    L.buf[i] = b;
    L.p.inputs.push_back(b);
  }
  std::vector<int> groups = fuse ? plan_fusion(g) : std::vector<int>(g.nodes.size(), -1);
  // The last node of each group emits the kernel; members before it are folded into its body.
  std::map<int, std::vector<size_t>> members;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (groups[i] >= 0) members[groups[i]].push_back(i);

  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.op == OpKind::Constant) {
      int b = L.new_buffer(g.type(n.outputs[0]), BufferKind::Const);
      L.p.buffers[b].value = attr_tensor(n, "value");
      L.buf[n.outputs[0]] = b;
      continue;
    }
    if (n.op == OpKind::Reshape) {  // buffers are contiguous: a reshape is a view
      int b = L.new_buffer(g.type(n.outputs[0]), BufferKind::View);
      L.p.buffers[b].view_of = L.buffer_of(n.inputs[0]);
      L.buf[n.outputs[0]] = b;
      continue;
    }
    int grp = groups[i];
    if (grp >= 0 && members[grp].back() != i) continue;  // emitted with its group's last node
    LirKernel k;
    if (grp >= 0 && members[grp].size() > 1) {
      k.kind = KernelKind::Generated;
      Graph& body = k.body;
      body.name = "fused";
      std::map<ValueId, ValueId> m;
      std::vector<bool> inside(g.values.size(), false);
      for (auto j : members[grp])
        for (auto o : g.nodes[j].outputs) inside[o] = true;
      for (auto j : members[grp]) {
        const Node& mn = g.nodes[j];
        std::vector<ValueId> ins;
        for (auto v : mn.inputs) {
          if (!m.count(v)) {
            RLX_CHECK(!inside[v], "[lir] fusion group uses a value before its definition");
            m[v] = body.add_input("a" + std::to_string(k.in.size()), g.type(v).dtype, g.type(v).shape);
            k.in.push_back(L.buffer_of(v));
          }
          ins.push_back(m[v]);
        }
        auto outs = body.add_node(mn.op, ins, mn.attrs, mn.name);
        for (size_t q = 0; q < outs.size(); ++q) m[mn.outputs[q]] = outs[q];
        k.origin += (k.origin.empty() ? "" : ",") + (mn.name.empty() ? g.value_label(mn.outputs[0]) : mn.name);
      }
      body.outputs.push_back(m.at(n.outputs[0]));
    } else {
      k.kind = KernelKind::Library;
      k.op = n.op;
      k.attrs = n.attrs;
      for (auto v : n.inputs) k.in.push_back(L.buffer_of(v));
      k.origin = n.name.empty() ? g.value_label(n.outputs[0]) : n.name;
    }
    for (auto o : n.outputs) {
      int b = L.new_buffer(g.type(o), BufferKind::Arena);
      L.buf[o] = b;
      k.out.push_back(b);
    }
    L.p.kernels.push_back(std::move(k));
  }

  // Graph outputs own their memory: a produced arena buffer becomes the output buffer; anything
  // else (an input, a constant, a view, a repeated output) is copied by a reshape kernel.
  std::vector<bool> taken(L.p.buffers.size(), false);
  for (auto o : g.outputs) {
    int b = L.buffer_of(o);
    LirBuffer& lb = L.p.buffers[b];
    std::string name = g.values[o].name.empty() ? "output_" + std::to_string(L.p.outputs.size()) : g.values[o].name;
    if (lb.kind == BufferKind::Arena && !taken[b]) {
      lb.kind = BufferKind::Output;
      lb.name = name;
      taken[b] = true;
      L.p.outputs.push_back(b);
      continue;
    }
    LirKernel k;
    k.op = OpKind::Reshape;
    k.attrs = {{"shape", lb.type.shape}};
    k.in = {b};
    int ob = L.new_buffer(lb.type, BufferKind::Output, name);
    taken.push_back(true);
    k.out = {ob};
    k.origin = "output copy";
    L.p.kernels.push_back(std::move(k));
    L.p.outputs.push_back(ob);
  }
  if (plan) plan_memory(L.p);
  return L.p;
}

}  // namespace rlx
