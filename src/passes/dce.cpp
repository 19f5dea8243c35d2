// eliminate-dead-code: drops nodes none of whose outputs reach a graph output.
#include <map>

#include "passes/passes.h"

namespace rlx {

Graph eliminate_dead_code(const Graph& g) {
  std::vector<bool> live_val(g.values.size(), false), live_node(g.nodes.size(), false);
  for (auto o : g.outputs) live_val[o] = true;
  for (size_t i = g.nodes.size(); i-- > 0;) {
    for (auto o : g.nodes[i].outputs)
      if (live_val[o]) live_node[i] = true;
    if (live_node[i])
      for (auto v : g.nodes[i].inputs) live_val[v] = true;
  }
  Graph r;
  r.name = g.name;
  std::map<ValueId, ValueId> m;
  for (auto i : g.inputs) m[i] = r.add_input(g.values[i].name, g.type(i).dtype, g.type(i).shape);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!live_node[i]) continue;
    const Node& n = g.nodes[i];
    std::vector<ValueId> ins;
    for (auto v : n.inputs) ins.push_back(m.at(v));
    auto outs = r.add_node(n.op, ins, n.attrs, n.name);
    for (size_t k = 0; k < outs.size(); ++k) {
      m[n.outputs[k]] = outs[k];
      r.values[outs[k]].name = g.values[n.outputs[k]].name;
    }
  }
  for (auto o : g.outputs) r.outputs.push_back(m.at(o));
  return r;
}

}  // namespace rlx
