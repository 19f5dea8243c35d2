// fuse-elementwise (planning half): chains of elementwise primitives with one output shape become
// one generated kernel, so intermediates never touch memory. lower_to_lir builds the kernels.
#include "passes/passes.h"

namespace rlx {

std::vector<int> plan_fusion(const Graph& g) {
  std::vector<int> uses(g.values.size(), 0);
  for (auto& n : g.nodes)
    for (auto v : n.inputs) ++uses[v];
  for (auto o : g.outputs) uses[o] += 2;  // outputs must materialize
  std::vector<int> group(g.nodes.size(), -1);
  int next = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (!is_elementwise(n.op)) continue;
    const Shape& out = g.type(n.outputs[0]).shape;
    for (auto v : n.inputs) {
      int p = g.values[v].producer;
      if (p < 0 || group[p] < 0 || uses[v] != 1) continue;
      if (g.type(g.nodes[p].outputs[0]).shape != out) continue;
      group[i] = group[p];
      break;
    }
    if (group[i] < 0) group[i] = next++;
  }
  return group;
}

}  // namespace rlx
