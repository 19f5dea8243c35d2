// The table of graph pattern passes the session runs before dispatch (passes.h).
#include "passes/passes.h"

namespace rlx {

const std::vector<GraphPass>& graph_passes() {
  static const std::vector<GraphPass> t = {
      {"attention-from-matmuls",
       "MatMul(q, k^T) [*scale] [+mask] -> Softmax -> MatMul(., v) -> Attention (padding mask traced to its "
       "[B,T] "
       "source)",
       attention_from_matmuls},
      {"gelu-into-linear",
       "x*0.5*(1+erf(x/sqrt2)) -> Gelu; MatMul(h, const W) + const bias under it -> Linear(activation=gelu)",
       gelu_into_linear},
  };
  return t;
}

const GraphPass* find_graph_pass(const std::string& name) {
  for (auto& p : graph_passes())
    if (name == p.name) return &p;
  return nullptr;
}

}  // namespace rlx
