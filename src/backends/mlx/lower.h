// MIR -> mlx::core ops: one function that, given the flat graph and its argument arrays (graph
// inputs then constants), builds the output arrays. Traced once by mlx::core::compile.
#pragma once
#ifdef RLX_HAVE_MLX
#include <mlx/mlx.h>

#include <vector>

#include "backends/graph_api/flat.h"

namespace rlx::mlx_backend {

namespace mx = mlx::core;

mx::Dtype to_mlx(DType t);  // throws for a dtype MLX cannot hold
// args: one array per f.inputs, then one per f.constants (in that order).
std::vector<mx::array> lower_graph(const graph_api::FlatProgram& f, const std::vector<mx::array>& args);

}  // namespace rlx::mlx_backend
#endif
