// GraphRebuild: the shared skeleton of node-by-node graph rebuilding passes.
#include "passes/passes.h"

namespace rlx {

GraphRebuild::GraphRebuild(const Graph& g, const Bindings* bind) : src(g) {
  dst.name = g.name;
  for (auto i : g.inputs) {
    Shape s = bind ? bind_shape(g.type(i).shape, *bind) : g.type(i).shape;
    map[i] = dst.add_input(g.values[i].name, g.type(i).dtype, s);
  }
}

std::vector<ValueId> GraphRebuild::inputs_of(const Node& n) const {
  std::vector<ValueId> ins;
  for (auto v : n.inputs) ins.push_back(map.at(v));
  return ins;
}

void GraphRebuild::bind(const Node& n, const std::vector<ValueId>& outs) {
  for (size_t k = 0; k < outs.size(); ++k) {
    map[n.outputs[k]] = outs[k];
    dst.values[outs[k]].name = src.values[n.outputs[k]].name;
  }
}

std::vector<ValueId> GraphRebuild::copy(const Node& n, const std::vector<ValueId>& ins, const Attrs& attrs) {
  auto outs = dst.add_node(n.op, ins, attrs, n.name);
  bind(n, outs);
  return outs;
}

Graph GraphRebuild::finish() {
  for (auto o : src.outputs) dst.outputs.push_back(map.at(o));
  return std::move(dst);
}

}  // namespace rlx
