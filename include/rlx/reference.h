// The reference interpreter: plain, obviously-correct evaluation of every HIR and MIR op,
// computing in double (complex<double> for c64, int64 for integers) and rounding once on store.
// It is the oracle every device is tested against. Shapes must be concrete.
#pragma once
#include <vector>

#include "rlx/graph.h"
#include "rlx/tensor.h"

namespace rlx {

// Evaluates one node on concrete input tensors.
std::vector<Tensor> reference_eval(const Node& n, const std::vector<Tensor>& inputs,
                                   const std::vector<ValueType>& out_types);
// Evaluates a whole graph (inputs in graph order); symbolic dims are bound from the inputs.
std::vector<Tensor> reference_run(const Graph& g, const std::vector<Tensor>& inputs);

}  // namespace rlx

namespace rlx {

// The semantics of one collective node (all_reduce ... collective_broadcast; ops.def) over
// simulated ranks in one process: inputs[r] is world rank r's input, the result holds each
// rank's output, computed in double from the members of its replica group. No transport involved:
// the oracle the communicators (in-process threads, MPI) are tested against.
std::vector<Tensor> reference_collective(const Node& n, const std::vector<Tensor>& inputs);

}  // namespace rlx
