// The graph that carries HIR and MIR: SSA values produced by nodes, kept in topological order.
#pragma once
#include <string>
#include <vector>

#include "rlx/op.h"

namespace rlx {

using ValueId = int32_t;

struct Value {
  ValueType type;
  int32_t producer = -1;  // node index; -1 for graph inputs
  int32_t index = 0;      // which output of the producer
  std::string name;       // optional; printer invents "%N" when empty
};

struct Node {
  OpKind op;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  Attrs attrs;
  std::string name;  // origin name (e.g. the ONNX node), used in diagnostics
};

struct Graph {
  std::string name = "main";
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;

  ValueId add_input(const std::string& name, DType dt, Shape shape);
  // Appends a node after running its shape rule; throws rlx::Error with the node named.
  std::vector<ValueId> add_node(OpKind op, std::vector<ValueId> inputs, Attrs attrs = {},
                                std::string name = "");
  const ValueType& type(ValueId v) const { return values.at(v).type; }
  std::string value_label(ValueId v) const;  // "%name" or "%N"
  std::string node_label(const Node& n) const;  // "'name' (op)"
  bool is_hir_free() const;  // true when only MIR ops remain
  // Symbolic dims used by inputs, in first-seen order.
  std::vector<std::string> symbols() const;
};

// Runs `op`'s shape rule on given input types; throws with context on error.
std::vector<ValueType> infer_types(OpKind op, const std::vector<ValueType>& in, const Attrs& attrs,
                                   const std::string& where);

}  // namespace rlx
