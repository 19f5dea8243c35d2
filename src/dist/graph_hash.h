// A graph's structure-and-shapes hash, exchanged by the ranks before a graph with collectives
// first runs, so mismatched programs fail at start-up with a message, not as a hang.
#pragma once
#include <cstdint>

#include "rlx/graph.h"

namespace rlx::dist {

uint64_t graph_shape_hash(const Graph& g);
bool has_collectives(const Graph& g);
// Throws "[dist] ranks disagree on graph ..." when the ranks' hashes differ; a no-op on one rank,
// for a graph without collectives, and for one with send/recv (whose ranks run different graphs).
void check_graph_on_all_ranks(const Graph& g);

}  // namespace rlx::dist
