// Graph-to-graph passes. Each takes a graph and returns a new one; inputs are never modified.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "rlx/graph.h"
#include "rlx/tensor.h"

namespace rlx {

// Rebuilds `g`, replacing every node for which `lower(node, graph)` holds by its op-table
// decomposition, and repeats on the result (decompositions may emit HIR ops) until no node wants
// lowering; throws rlx::Error after 16 rounds. Inputs, outputs and value names are preserved;
// emitted nodes carry their source node's name.
Graph decompose_graph(const Graph& g, const std::function<bool(const Node&, const Graph&)>& lower);

// decompose_graph lowering every HIR op: the result is HIR-free.
Graph decompose_all(const Graph& g);


// specialize-shapes: binds symbolic dims (inputs and dims attributes) and re-infers every shape.
Graph specialize_shapes(const Graph& g, const Bindings& b);
// Reads symbolic-dim sizes off concrete inputs; throws naming the input on dtype/rank/size mismatch.
Bindings bind_inputs(const Graph& g, const std::vector<Tensor>& inputs);
// eliminate-dead-code: drops nodes whose outputs never reach a graph output.
Graph eliminate_dead_code(const Graph& g);
// fold-constants: evaluates nodes whose inputs are all constants (outputs up to `max_elems`
// elements) with the reference interpreter and replaces them by constants.
Graph fold_constants(const Graph& g, int64_t max_elems = 1 << 16);
// fuse-qdq: matmul/linear between dequantize_affine'd i8/u8 values (a per-tensor activation, a
// constant weight) -> qlinear (int8 out when quantize_affine follows, else f32); folds the remaining
// constant dequantize_affine nodes. `report` gets one line per contraction: int8 or float, and why.
Graph fuse_qdq(const Graph& g, std::vector<std::string>* report = nullptr);
// attention-from-matmuls: MatMul(q, kᵀ) [· scale] [+ mask] -> Softmax -> MatMul(·, v) (an exporter's
// attention) -> Attention(q, k, v [, mask]); a padding mask is traced back to its [B, T] source.
// `changed` gets the number of attentions made.
Graph attention_from_matmuls(const Graph& g, int* changed = nullptr);
// gelu-into-linear: x · 0.5 · (1 + erf(x / sqrt 2)) -> Gelu(x), or, when x is MatMul(h, constant W) +
// constant bias, Linear(h, Wᵀ, bias, activation=gelu).
Graph gelu_into_linear(const Graph& g, int* changed = nullptr);
// The pattern rewrites the session runs on every specialized graph before dispatch, in order (the
// compile report names those that changed something; --dump-after=NAME prints the graph after one).
struct GraphPass {
  const char* name;
  const char* summary;  // one line: what it turns into what
  Graph (*run)(const Graph& g, int* changed);
};
const std::vector<GraphPass>& graph_passes();
const GraphPass* find_graph_pass(const std::string& name);

// Elementwise fusion groups: group id per node (-1 = not fused); nodes of a group share one output
// shape and form a chain whose intermediate values have a single consumer.
std::vector<int> plan_fusion(const Graph& g);


// The common skeleton of passes that rebuild a graph node by node: inputs keep their names (their
// shapes may be rewritten), copied nodes keep their output value names, outputs are remapped.
struct GraphRebuild {
  const Graph& src;
  Graph dst;
  std::map<ValueId, ValueId> map;  // src value -> dst value
  explicit GraphRebuild(const Graph& g, const Bindings* bind = nullptr);
  std::vector<ValueId> inputs_of(const Node& n) const;
  // Adds `n` with new inputs/attrs and records its outputs (names carried over).
  std::vector<ValueId> copy(const Node& n, const std::vector<ValueId>& ins, const Attrs& attrs);
  // Records that src node `n`'s outputs are `outs` in dst (names carried over).
  void bind(const Node& n, const std::vector<ValueId>& outs);
  Graph finish();
};

}  // namespace rlx
