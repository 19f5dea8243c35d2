// LIR: an ordered schedule of kernels over planned buffers.
// A buffer is a graph input, an output, a constant, a slice of one arena (offset, size, lifetime),
// or a view of another buffer (same bytes, another shape). A kernel is a library kernel (one
// MIR/HIR op executed by a device kernel) or a generated kernel (a fused elementwise region, kept
// as a small MIR graph that a backend renders or interprets).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "rlx/graph.h"

namespace rlx {

enum class BufferKind { Input, Output, Const, Arena, View };

struct LirBuffer {
  ValueType type;          // concrete
  BufferKind kind = BufferKind::Arena;
  std::string name;        // graph input/output name
  int64_t offset = 0;      // Arena: byte offset
  int view_of = -1;        // View: base buffer
  Tensor value;            // Const
  int def = -1, last = -1;  // first and last kernel index touching it (liveness)
  int64_t bytes() const;
};

enum class KernelKind { Library, Generated };

struct LirKernel {
  KernelKind kind = KernelKind::Library;
  OpKind op = OpKind::Constant;  // Library: the op it executes
  Attrs attrs;                   // Library: the op's attributes
  Graph body;                    // Generated: inputs = kernel inputs, outputs = kernel outputs
  std::vector<int> in, out;      // buffer ids
  std::string origin;            // source node name(s), for diagnostics and profiles
  bool in_place = false;         // output shares bytes with a dying input (planner decision)
  std::string label() const;     // "dot_general" or "fused[mul,add,max]"
};

struct LirProgram {
  std::string name = "main";
  std::vector<LirBuffer> buffers;
  std::vector<LirKernel> kernels;
  std::vector<int> inputs, outputs;  // buffer ids in graph order
  int64_t arena_bytes = 0;
  int64_t naive_bytes = 0;  // sum of arena buffer sizes before reuse, for the report
  // The backend's LIR passes that ran on it (src/lir/rewrite), each with its count of rewrites;
  // `scheduled` once they ran (make_executable then runs none again).
  std::vector<std::pair<std::string, int>> passes;
  bool scheduled = false;
};

// Lowers a legalized MIR graph (concrete shapes; native HIR ops allowed) to a schedule:
// fuses elementwise chains (when `fuse`), turns reshapes into views, plans the arena (unless
// `plan` is false: the session plans once, after the backend's passes).
LirProgram lower_to_lir(const Graph& g, bool fuse, bool plan = true);
std::string print_lir(const LirProgram& p, bool elide_constants = false);
LirProgram parse_lir(const std::string& text);
// Checks buffer ids, kinds, def-before-use in schedule order, view sizes, and that no two
// arena buffers with overlapping lifetimes overlap in memory (except planned in-place pairs).
void verify_lir(const LirProgram& p);

}  // namespace rlx
