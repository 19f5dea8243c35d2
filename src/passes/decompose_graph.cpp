// decompose-graph: lowers chosen nodes to their op-table decompositions, round by round.
#include <algorithm>
#include <string>

#include "passes/passes.h"
#include "rlx/builder.h"

namespace rlx {

namespace {

constexpr int kMaxRounds = 16;

// One rebuild of `g`: lowered nodes are replaced by their decomposition, others copied.
Graph rebuild(const Graph& g, const std::function<bool(const Node&, const Graph&)>& lower) {
  Graph out;
  out.name = g.name;
  std::vector<ValueId> map(g.values.size(), -1);
  for (auto v : g.inputs) map[v] = out.add_input(g.values[v].name, g.type(v).dtype, g.type(v).shape);
  for (const Node& n : g.nodes) {
    std::vector<ValueId> ins;
    for (auto v : n.inputs) ins.push_back(map.at(v));
    std::vector<ValueId> outs;
    const auto& info = op_info(n.op);
    if (lower(n, g)) {
      RLX_CHECK(info.decompose != nullptr, "[decompose] node ", g.node_label(n), " has no decomposition");
      Builder b(out);
      b.set_origin(n.name);
      try {
        outs = info.decompose(b, n, ins);
      } catch (const Error& e) {
        std::string msg = e.what();
        if (msg.rfind("[decompose] ", 0) == 0) msg = msg.substr(12);
        fail("[decompose] node ", g.node_label(n), ": ", msg);
      }
      RLX_CHECK(outs.size() == n.outputs.size(), "[decompose] node ", g.node_label(n),
                ": decomposition gave ", outs.size(), " outputs, expected ", n.outputs.size());
      for (size_t i = 0; i < outs.size(); ++i) {
        const ValueType &want = g.type(n.outputs[i]), &got = out.type(outs[i]);
        RLX_CHECK(want.dtype == got.dtype && want.shape == got.shape, "[decompose] node ", g.node_label(n),
                  ": output ", i, " is ", dtype_name(got.dtype), shape_str(got.shape), ", expected ",
                  dtype_name(want.dtype), shape_str(want.shape));
      }
    } else {
      outs = out.add_node(n.op, ins, n.attrs, n.name);
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      map[n.outputs[i]] = outs[i];
      // Keep value names (a decomposition may return an existing value; never rename that).
      const std::string& name = g.values[n.outputs[i]].name;
      if (!name.empty() && out.values[outs[i]].name.empty()) out.values[outs[i]].name = name;
    }
  }
  for (auto v : g.outputs) out.outputs.push_back(map.at(v));
  return out;
}

}  // namespace

Graph decompose_graph(const Graph& g, const std::function<bool(const Node&, const Graph&)>& lower) {
  Graph cur = rebuild(g, lower);
  for (int round = 1;; ++round) {
    bool pending =
        std::any_of(cur.nodes.begin(), cur.nodes.end(), [&](const Node& n) { return lower(n, cur); });
    if (!pending) return cur;
    RLX_CHECK(round < kMaxRounds, "[decompose] graph '", g.name, "' still has nodes to lower after ",
              kMaxRounds, " rounds (a decomposition re-emits what it lowers?)");
    cur = rebuild(cur, lower);
  }
}

Graph decompose_all(const Graph& g) {
  // Native-only HIR ops (no decomposition) are left for the device to claim.
  return decompose_graph(g, [](const Node& n, const Graph&) {
    return op_info(n.op).level == Level::Hir && op_info(n.op).decompose != nullptr;
  });
}

}  // namespace rlx
