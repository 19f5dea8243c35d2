// One collective node (all_reduce, all_gather, reduce_scatter, all_to_all, collective_broadcast,
// send, recv) executed on host tensors through dist::current().
#pragma once
#include <vector>

#include "rlx/graph.h"
#include "rlx/tensor.h"

namespace rlx::dist {

// `out` holds preallocated tensors of the node's output types.
void execute_collective(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out);

}  // namespace rlx::dist
