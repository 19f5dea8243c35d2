// Dense linear algebra: the reference evaluation of the `linear algebra` ops of ops.def (float64
// inside, complex<double> for c64, rounded once into the outputs) and the error policy every backend follows
// (docs/linalg.md): a failed factorization gives NaN values plus a nonzero info, never a throw.
#pragma once
#include <vector>

#include "rlx/graph.h"
#include "rlx/tensor.h"

namespace rlx::linalg {

// Evaluates one linear-algebra node (is_linalg(n.op)) on host tensors.
std::vector<Tensor> reference_eval(const Node& n, const std::vector<Tensor>& in, const std::vector<ValueType>& out_types);
// The c64 form (reference_complex.cpp), called by reference_eval for complex inputs.
std::vector<Tensor> reference_eval_complex(const Node& n, const std::vector<Tensor>& in,
                                           const std::vector<ValueType>& out_types);

// Batch size (product of the leading dims) of a [..., r, c] tensor.
int64_t batch_count(const Tensor& t);

}  // namespace rlx::linalg
