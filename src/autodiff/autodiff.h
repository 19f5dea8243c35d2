// Program transforms on MIR: reverse mode (vjp/grad/value_and_grad), forward mode (jvp) and
// vmap over a leading axis. Each takes a graph and returns a new one; HIR ops are decomposed to
// MIR first (all but stop_gradient, which the transforms keep), and shapes must be static. One
// VJP rule per differentiable primitive lives in vjp_rules.cpp (a table generated from the VJP column of ops.def).
#pragma once
#include <string>
#include <vector>

#include "rlx/builder.h"
#include "rlx/graph.h"

namespace rlx::ad {

// vjp: inputs = f.inputs, then one cotangent per f output (same type, named "ct_<i>");
// outputs = f.outputs, then d/dx of sum_i <ct_i, y_i> for each input listed in `wrt`
// (default: every float input). Inputs that do not reach an output get zero gradients.
Graph vjp(const Graph& f, std::vector<int> wrt = {});
// value_and_grad: f's output 0 must be a float scalar; outputs = f.outputs, then gradients of
// output 0 for each `wrt` input (other outputs are carried along, not differentiated).
Graph value_and_grad(const Graph& f, std::vector<int> wrt = {});
// grad: like value_and_grad but outputs only the gradients.
Graph grad(const Graph& f, std::vector<int> wrt = {});
// jvp: inputs = f.inputs, then one tangent per float input ("t_<name>"); outputs = f.outputs,
// then the tangent of each float output. Built as the transpose of the (linear) VJP.
Graph jvp(const Graph& f);
// vmap: every input listed in `batched` (default: all) gains a leading axis of `size`; every
// output gains it. Uses batching rules where they exist and unrolls the rest per node.
Graph vmap(const Graph& f, int64_t size, std::vector<int> batched = {});

// Emits a copy of `src` into `b`'s graph with src inputs bound to `inputs`; returns its outputs.
std::vector<ValueId> inline_graph(Builder& b, const Graph& src, const std::vector<ValueId>& inputs);

// Stop-gradient is the IR op `stop_gradient` (Builder::stop_gradient): identity in value, no cotangent
// (and so no tangent) flows through it. The transforms keep it through decomposition
// (decompose_for_ad); compilation lowers it to its input. Used where a value's gradient is known to
// cancel, e.g. the max subtracted for a stable log-softmax (models/mlp.cpp), so the backward pass
// stays closed-form.
// decompose_for_ad: every HIR op lowered to MIR except stop_gradient (shapes must be static).
Graph decompose_for_ad(const Graph& f);

// Emits f (HIR-free but for stop_gradient: decompose_for_ad) and its reverse pass into b's graph; `seeds` holds one cotangent per f output
// (-1 = none). Returns f's outputs followed by the gradients of the `wrt` inputs (autodiff.cpp).
std::vector<ValueId> emit_vjp(Builder& b, const Graph& f, const std::vector<ValueId>& inputs,
                              const std::vector<ValueId>& seeds, const std::vector<int>& wrt);
// Sums cotangent c down to the (broadcast-from) shape of target (vjp_rules.cpp).
ValueId unbroadcast(Builder& b, ValueId c, ValueId target);

// Coverage: true when `op` has a VJP rule (or is a non-differentiable primitive with a zero rule).
bool has_vjp(OpKind op);
bool is_nondifferentiable(OpKind op);

// Internal: one VJP rule. `x` are the node's inputs, `y` its outputs and `g` the output
// cotangents (-1 where none), all in the builder's graph. Returns one cotangent per input (-1 =
// none/zero); each has exactly its input's type.
using VjpRule = std::vector<ValueId> (*)(Builder& b, const Node& n, const std::vector<ValueId>& x,
                                         const std::vector<ValueId>& y, const std::vector<ValueId>& g);
// The rule the VJP column of src/ir/ops.def names for `op`; nullptr for nondiff/decomposed/pending.
// A rule defined outside vjp_rules.cpp is declared here, so the generated table sees it.
VjpRule vjp_rule(OpKind op);

// Rules defined outside vjp_rules.cpp, by the file of their op family.
#define RLX_VJP_DECL(name)                                                                    \
  std::vector<ValueId> name(Builder& b, const Node& n, const std::vector<ValueId>& x,       \
                            const std::vector<ValueId>& y, const std::vector<ValueId>& g);
// vjp_sparse.cpp
RLX_VJP_DECL(vjp_sparse_matvec) RLX_VJP_DECL(vjp_sparse_add_dense) RLX_VJP_DECL(vjp_sparse_transpose)
RLX_VJP_DECL(vjp_sparse_sddmm) RLX_VJP_DECL(vjp_sparse_sample) RLX_VJP_DECL(vjp_sparse_solve)
// vjp_linalg.cpp
RLX_VJP_DECL(vjp_cholesky) RLX_VJP_DECL(vjp_triangular_solve) RLX_VJP_DECL(vjp_solve) RLX_VJP_DECL(vjp_inv)
RLX_VJP_DECL(vjp_det) RLX_VJP_DECL(vjp_slogdet) RLX_VJP_DECL(vjp_eigh) RLX_VJP_DECL(vjp_qr) RLX_VJP_DECL(vjp_svd)
RLX_VJP_DECL(vjp_lu) RLX_VJP_DECL(vjp_lstsq) RLX_VJP_DECL(vjp_matrix_exp)
// vjp_splat.cpp
RLX_VJP_DECL(vjp_splat_project) RLX_VJP_DECL(vjp_splat_rasterize)
// vjp_collective.cpp
RLX_VJP_DECL(vjp_all_reduce) RLX_VJP_DECL(vjp_all_gather) RLX_VJP_DECL(vjp_reduce_scatter) RLX_VJP_DECL(vjp_all_to_all)
RLX_VJP_DECL(vjp_collective_broadcast)

}  // namespace rlx::ad
