// eliminate-dead-code: drops nodes none of whose outputs reach a graph output (a send is kept: its
// effect is on another rank).
#include "passes/passes.h"

namespace rlx {

Graph eliminate_dead_code(const Graph& g) {
  std::vector<bool> live_val(g.values.size(), false), live_node(g.nodes.size(), false);
  for (auto o : g.outputs) live_val[o] = true;
  for (size_t i = g.nodes.size(); i-- > 0;) {
    for (auto o : g.nodes[i].outputs)
      if (live_val[o]) live_node[i] = true;
    if (g.nodes[i].op == OpKind::Send) live_node[i] = true;
    if (live_node[i])
      for (auto v : g.nodes[i].inputs) live_val[v] = true;
  }
  GraphRebuild r(g);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (live_node[i]) r.copy(g.nodes[i], r.inputs_of(g.nodes[i]), g.nodes[i].attrs);
  return r.finish();
}

}  // namespace rlx
