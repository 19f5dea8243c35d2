// Helpers the pattern-matching graph passes share (attention-from-matmuls, gelu-into-linear): who
// reads a value, the constant behind a value, and a scalar constant through the small chains an
// importer leaves around one (convert, reshape, sqrt of a folded shape entry, ...).
#pragma once
#include <optional>
#include <vector>

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

}  // namespace rlx
