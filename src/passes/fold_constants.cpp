// fold-constants: nodes fed only by constants are evaluated once at compile time by the reference
// interpreter, so devices never run them (e.g. RoPE frequency tables, iota masks of fixed shapes).
#include <map>

#include "passes/passes.h"
#include "rlx/reference.h"

namespace rlx {

Graph fold_constants(const Graph& g, int64_t max_elems) {
  Graph r;
  r.name = g.name;
  std::map<ValueId, ValueId> m;
  std::map<ValueId, Tensor> known;  // new value id -> constant tensor
  for (auto i : g.inputs) m[i] = r.add_input(g.values[i].name, g.type(i).dtype, g.type(i).shape);
  for (auto& n : g.nodes) {
    std::vector<ValueId> ins;
    std::vector<Tensor> vals;
    bool all_const = true;
    for (auto v : n.inputs) {
      ins.push_back(m.at(v));
      auto it = known.find(m.at(v));
      if (it == known.end()) all_const = false;
      else vals.push_back(it->second);
    }
    bool small = true;
    for (auto o : n.outputs)
      if (numel(g.type(o).shape) > max_elems) small = false;
    bool foldable = all_const && small && n.op != OpKind::Constant && !n.inputs.empty() &&
                    op_info(n.op).level == Level::Mir;
    std::vector<ValueId> outs;
    if (foldable) {
      std::vector<ValueType> ot;
      for (auto o : n.outputs) ot.push_back(g.type(o));
      auto res = reference_eval(n, vals, ot);
      for (auto& t : res) outs.push_back(r.add_node(OpKind::Constant, {}, {{"value", t}}, n.name)[0]);
    } else {
      outs = r.add_node(n.op, ins, n.attrs, n.name);
    }
    for (size_t k = 0; k < outs.size(); ++k) {
      m[n.outputs[k]] = outs[k];
      r.values[outs[k]].name = g.values[n.outputs[k]].name;
      const Node& made = r.nodes[r.values[outs[k]].producer];
      if (made.op == OpKind::Constant) known[outs[k]] = attr_tensor(made, "value");
    }
  }
  for (auto o : g.outputs) r.outputs.push_back(m.at(o));
  return r;
}

}  // namespace rlx
