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
