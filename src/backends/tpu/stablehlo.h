// MIR -> StableHLO (MLIR text), the program format every PJRT plugin compiles. The module's
// @main takes the graph inputs, then the constants (uploaded once as device buffers, so weights
// never appear in the text), and returns the graph outputs.
#pragma once
#include <string>

#include "backends/graph_api/flat.h"

namespace rlx::pjrt {

std::string emit_stablehlo(const graph_api::FlatProgram& f);
std::string mlir_type(const ValueType& t);  // "tensor<2x3xf32>"

}  // namespace rlx::pjrt
