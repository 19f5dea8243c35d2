// ONNX import: a ModelProto (protobuf, parsed with the ONNX schema) becomes an rlx::Graph of HIR/MIR
// ops. Unsupported ops, dtypes or attributes fail at import with "[onnx] node 'N' (Op): why".
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include "rlx/graph.h"
#include "rlx/tensor.h"

namespace rlx::onnx {

struct ImportOptions {
  // Symbolic dims (dim_param) bound to sizes at import; unbound ones stay symbolic.
  Bindings bind;
  // Concrete shapes for named inputs (e.g. from the arrays about to be fed), overriding the model's.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Values of (small) inputs the caller is about to feed. Where the model needs an input's value
  // at import (a Reshape target, Pad pads, Slice starts, TopK K fed as graph inputs), the graph is
  // specialized on it, as it is on input shapes; elsewhere the input stays a run-time value.
  std::map<std::string, Tensor> input_values;
  // Sequence/optional-typed graph inputs: how many elements are fed (-1: an empty optional).
  // Element i is the graph input NAME[i]; its shape/value go in input_shapes/input_values as NAME[i].
  std::map<std::string, int64_t> sequence_lengths;
  // When set, receives the name of every symbolic dim (dim_param) of the model's inputs, bound or
  // not: the names a caller may bind.
  std::set<std::string>* dim_params = nullptr;
};

// Loads MODEL.onnx (external data resolved next to it).
Graph load_onnx(const std::string& path, const ImportOptions& opts = {});
// Imports serialized ModelProto bytes; `base_dir` resolves external data ("" forbids it).
Graph import_onnx(const std::string& bytes, const std::string& base_dir, const std::string& where,
                  const ImportOptions& opts = {});
// Human-readable summary: producer, IR version, opsets, inputs/outputs, initializers, op histogram.
std::string inspect_onnx(const std::string& path);
// A serialized TensorProto file (the node suite's input_N.pb / output_N.pb).
Tensor read_tensor_pb(const std::string& path);
// True when the bytes parse as a TensorProto holding a plain tensor (not a sequence/optional/map).
bool is_onnx_path(const std::string& path);

}  // namespace rlx::onnx

namespace rlx::onnx {
// Names of the model's runtime inputs (graph inputs that are not initializers), in order.
std::vector<std::string> onnx_input_names(const std::string& path);
}  // namespace rlx::onnx
