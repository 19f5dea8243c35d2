// The embedding-norm kernel: a transformer's input block
//   x = embedding(table, ids) (+ broadcast adds: position, token type) ; y = layer_norm(x)
// (made one LayerNorm kernel with attr cuda_embed by the embedding-norm pass, src/lir/rewrite/norm.cpp)
// as one kernel (one warp per row: gather, adds rounded at every node as the fused kernel would
// store them, LayerNorm over the row in registers) instead of three launches.
#pragma once
#include <vector>

#include "backends/cuda/render.h"
#include "rlx/lir.h"

namespace rlx::cuda {

// The kernel of such a LayerNorm (render_library dispatches here on attr cuda_embed).
KernelSource render_embed_norm(const LirKernel& k, const std::vector<ValueType>& in, const ValueType& out);

}  // namespace rlx::cuda
