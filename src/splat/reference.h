// The float64 reference of the splat ops, called by the reference interpreter
// (src/runtime/reference/reference.cpp).
#pragma once
#include <vector>

#include "rlx/graph.h"
#include "rlx/tensor.h"

namespace rlx::splat {

// Evaluates a splat op in double precision and rounds once into the output types `ot`.
std::vector<Tensor> reference_eval(const Node& n, const std::vector<Tensor>& in, const std::vector<ValueType>& ot);

}  // namespace rlx::splat
