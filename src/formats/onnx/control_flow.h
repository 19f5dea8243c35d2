// Subgraph import shared by the control-flow converters (control_flow.cpp) and the sequence ops
// (sequences.cpp): a subgraph body is imported inline into the graph under construction.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "formats/onnx/importer.h"

namespace rlx::onnx {

// One ONNX value at import: a tensor (v) or a sequence/optional (cv).
struct Item {
  bool composite = false;
  V v = -1;
  CompositeValue cv;
  static Item tensor(V x) {
    Item i;
    i.v = x;
    return i;
  }
  static Item of(CompositeValue c) {
    Item i;
    i.composite = true;
    i.cv = std::move(c);
    return i;
  }
};

// The value bound to an ONNX name (fails naming it when undefined).
Item lookup(Ctx& c, const std::string& name);
// Binds an ONNX name to a value (tensor names and composite names stay disjoint).
void bind_item(Ctx& c, const std::string& name, const Item& it);
// Imports `body` inline: binds its inputs to `args` in order, converts its nodes (outer-scope names
// stay visible, names it defines do not leak out) and returns its outputs.
std::vector<Item> import_subgraph(Ctx& c, const ::onnx::GraphProto& body, const std::vector<Item>& args);
// Attribute `name` of the current node as a graph; fails when missing.
const ::onnx::GraphProto& graph_attr(Ctx& c, const char* name);
// A scalar integer/bool known at import (constant or computed from fed input values).
std::optional<int64_t> known_int(Ctx& c, V v);
// rlx dtype -> ONNX TensorProto dtype (for sequence element types).
int onnx_elem_type(DType dt);

// Loops and scans are unrolled at import; beyond this many iterations import fails.
constexpr int64_t kMaxUnroll = 4096;

}  // namespace rlx::onnx
