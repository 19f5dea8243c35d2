// Running one graph across devices (`--fallback cpu`): the legalized graph is cut into segments,
// each a maximal run of live nodes placed on one device (the compiled device, or cpu where the
// device could not run a node); every segment compiles and runs on its own device's backend, and
// the values crossing a segment boundary pass through host tensors.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "rlx/graph.h"
#include "rlx/lir.h"

namespace rlx {

class Executable;

struct Segment {
  std::string device;
  Graph graph;                      // inputs: values from earlier segments or graph inputs
  std::vector<ValueId> ins, outs;   // the same values as ids of the whole graph
  LirProgram lir;                   // scheduled for `device`
};

// Cuts `g` by `placement` (per node: a device, "" for `device`). Constant nodes (no inputs) go with
// their first live reader, and a constant read by another segment is repeated there rather than passed.
std::vector<Segment> cut_segments(const Graph& g, const std::vector<std::string>& placement, const std::string& device);

// What the cut costs per run: nodes per device, segments, and the tensors crossing a boundary
// between a host device (cpu, oneapi) and a device with its own memory, with their bytes.
std::string segments_summary(const std::vector<Segment>& segs, const Graph& g);

// One executable over the segments: each runs on its device's executable in order.
std::unique_ptr<Executable> make_segmented_executable(const std::vector<Segment>& segs, const Graph& g);

}  // namespace rlx
