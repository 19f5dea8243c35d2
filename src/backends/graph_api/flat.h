// The lowering skeleton the graph-API backends share (tpu: StableHLO through PJRT; mlx: the MLX C++
// API). Those runtimes take a whole dataflow graph, not a kernel schedule, so a scheduled LIR
// program is read back as one flat graph of MIR ops: every library kernel is one node, every
// generated kernel contributes its body's nodes, a view buffer becomes a reshape, a constant buffer
// a constant value. Each backend then emits one target op (or a few) per node.
#pragma once
#include <string>
#include <vector>

#include "rlx/device.h"
#include "rlx/lir.h"

namespace rlx::graph_api {

struct FlatNode {
  OpKind op;
  Attrs attrs;
  std::vector<int> in, out;  // value ids
  std::string origin;        // the LIR kernel's source node(s), for errors
};

struct FlatProgram {
  std::vector<ValueType> values;  // static shapes
  std::vector<int> inputs, outputs;
  std::vector<std::pair<int, Tensor>> constants;  // value id -> its tensor
  std::vector<FlatNode> nodes;                    // topological order
  std::vector<int64_t> dims(int v) const { return static_dims(values.at(v).shape); }
};

// Flattens a scheduled program. `device` names the backend in errors.
FlatProgram flatten_lir(const LirProgram& p, const std::string& device);

// Attribute access over a flat node with the op table's defaults.
int64_t attr_i(const FlatNode& n, const char* name);
double attr_f(const FlatNode& n, const char* name);
std::vector<int64_t> attr_is(const FlatNode& n, const char* name);
std::string attr_s(const FlatNode& n, const char* name);
DType attr_dt(const FlatNode& n, const char* name);
std::vector<int64_t> attr_shape(const FlatNode& n, const char* name);

// numpy broadcasting of an operand of shape `in` to `out` (MIR binary ops allow it): the output dim
// each operand dim maps to (right-aligned), for an explicit broadcast_in_dim.
std::vector<int64_t> broadcast_dims(size_t in_rank, size_t out_rank);

// The reduce axes of a reduce_* node, normalized and sorted.
std::vector<int64_t> reduce_axes(const FlatNode& n, int64_t rank);

// The capability set of tpu (pjrt: the StableHLO set) or mlx (caps.cpp).
CapabilitySet caps(bool pjrt);

}  // namespace rlx::graph_api
