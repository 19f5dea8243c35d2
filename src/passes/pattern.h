// Helpers the pattern-matching graph passes share (attention-from-matmuls, gelu-into-linear): who
// reads a value, the constant behind a value, and a scalar constant through the small chains an
// importer leaves around one (convert, reshape, sqrt of a folded shape entry, ...).
#pragma once
#include <optional>
#include <vector>

#include "passes/passes.h"
#include "rlx/graph.h"
#include "rlx/tensor.h"

namespace rlx {

struct GraphUses {
  std::vector<std::vector<int>> readers;  // per value: the nodes that read it (once per node)
  std::vector<bool> is_output;            // per value: a graph output
  explicit GraphUses(const Graph& g);
  // v is read by exactly one node (and is not a graph output).
  bool once(ValueId v) const { return !is_output[v] && readers[v].size() == 1; }
};

// The node producing v, when it is of kind k.
const Node* producer_of(const Graph& g, ValueId v, OpKind k);
const Node* producer_of(const Graph& g, ValueId v);
// The tensor of a Constant node's output, or nullptr.
const Tensor* constant_of(const Graph& g, ValueId v);
// The value of v when every element of it is one and the same constant (a Constant, or convert /
// reshape / unsqueeze / expand / broadcast / sqrt / neg / reciprocal / add / sub / mul / div of such).
std::optional<double> scalar_of(const Graph& g, ValueId v);

// The rewrite loop of a pattern pass: plan(g, uses, node) -> std::optional<P> on every node;
// where it matched, emit(rebuild, node, plan) writes the replacement and binds the node's outputs,
// every other node is copied, and the result goes through dead-code elimination (the matched
// chains' interior nodes drop out). *changed gets the number of matches; with none, `unchanged`
// is returned as it is.
template <class Plan, class Emit>
Graph rewrite_matches(const Graph& g, const Graph& unchanged, Plan plan, Emit emit, int* changed) {
  GraphUses u(g);
  std::vector<decltype(plan(g, u, g.nodes[0]))> plans(g.nodes.size());
  int n = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if ((plans[i] = plan(g, u, g.nodes[i]))) ++n;
  if (changed) *changed = n;
  if (n == 0) return unchanged;
  GraphRebuild r(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& nd = g.nodes[i];
    if (plans[i]) emit(r, nd, *plans[i]);
    else r.copy(nd, r.inputs_of(nd), nd.attrs);
  }
  return eliminate_dead_code(r.finish());
}

}  // namespace rlx
