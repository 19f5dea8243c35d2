// The text form of HIR/MIR graphs (.rlx files) and the verifier.
#pragma once
#include <string>

#include "rlx/graph.h"

namespace rlx {

std::string print_graph(const Graph& g);
// Parses the text form; errors name the line and column ("[parse] FILE:LINE:COL: ...").
Graph parse_graph(const std::string& text, const std::string& filename = "<text>");
Graph load_graph_file(const std::string& path);

// Structural checks: SSA (defined before use, single definition), arity, attribute kinds,
// shape/dtype rules re-run and compared, outputs defined. `mir_only` also rejects HIR ops.
void verify_graph(const Graph& g, bool mir_only = false);

}  // namespace rlx
