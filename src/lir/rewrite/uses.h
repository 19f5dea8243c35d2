// Use-def facts of a schedule that every LIR rewrite asks: who writes a buffer, who reads it, how
// many views hang off it. Computed once per pass (a pass that edits the program recomputes).
#pragma once
#include <vector>

#include "rlx/lir.h"

namespace rlx {

struct LirUses {
  std::vector<std::vector<int>> readers;  // buffer -> kernels reading it directly, in schedule order
  std::vector<int> producer;              // buffer -> the kernel writing it, or -1
  std::vector<int> views;                 // buffer -> number of views of it
  // buffer -> kernel inputs reading it, plus 2 per view of it and 2 when it is a program output:
  // uses[b] == 1 means exactly one kernel reads b and nothing else can see it.
  std::vector<int> uses;
};
LirUses lir_uses(const LirProgram& p);

// The buffer a view chain ends at (b itself when b is no view).
int lir_root(const LirProgram& p, int b);
// Only kernel k reads arena temporary b, through no view.
bool lir_sole_reader(const LirProgram& p, const LirUses& u, int b, int k);
// b is an arena temporary that one kernel reads and nothing else sees (uses == 1).
bool lir_used_once(const LirProgram& p, const LirUses& u, int b);
// Appends a buffer; returns its id.
int lir_add_buffer(LirProgram& p, LirBuffer b);
// Removes the kernels marked in `dead`, keeping the order; returns how many went. Buffers are not
// planned here: the pipeline (schedule_lir, passes.cpp) plans memory once after the last pass.
int lir_drop(LirProgram& p, const std::vector<bool>& dead);
// The kernel's attrs as a Node, for the attr_* readers.
inline Node lir_node(const LirKernel& k) { return Node{k.op, {}, {}, k.attrs, k.origin}; }
inline bool lir_is_lib(const LirKernel& k, OpKind op) { return k.kind == KernelKind::Library && k.op == op; }
// A library Transpose with perm (0,2,1,3): a head split/merge.
bool lir_head_transpose(const LirKernel& k);
// An f32 Linear with a 2-D weight and nothing fused into it yet (no cpu_res / cpu_ln_g).
bool lir_plain_linear(const LirProgram& p, const LirKernel& k);

}  // namespace rlx
