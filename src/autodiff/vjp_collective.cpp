// VJP rules of the collective ops: exact transposes for the objective "sum over ranks" (each rank
// seeds its own cotangents; a loss replicated on N ranks is seeded with 1/N; docs/distributed.md).
// all_reduce(sum)ᵀ = all_reduce(sum), all_gatherᵀ = reduce_scatter(sum), reduce_scatter(sum)ᵀ =
// all_gather, all_to_allᵀ = all_to_all with the axes swapped, broadcast(root)ᵀ = reduce to root.
#include "autodiff/autodiff.h"

namespace rlx::ad {

namespace {

using Vs = std::vector<ValueId>;

// The replica-group attributes of `n`, to be copied onto the transpose.
Attrs groups_of(const Node& n) {
  Attrs a;
  for (const char* k : {"groups", "group_size"}) {
    auto it = n.attrs.find(k);
    if (it != n.attrs.end()) a[k] = it->second;
  }
  return a;
}

// Mask of the elements of x equal to y (the winners of a max/min), as x's dtype.
ValueId winners(Builder& b, ValueId x, ValueId y) { return b.convert(b.op1(OpKind::Eq, {x, y}), b.dtype(x)); }

}  // namespace

Vs vjp_all_reduce(Builder& b, const Node& n, const Vs& x, const Vs& y, const Vs& g) {
  if (g[0] < 0) return {-1};
  Attrs a = groups_of(n);
  int64_t root = attr_int(n, "root");
  std::string k = attr_str(n, "reduce");
  if (root >= 0) {  // reduce to root: every member's input reached root's output
    RLX_CHECK(k == "sum", "[autodiff] all_reduce(", k, ") to a root has no VJP rule (sum only)");
    a["root"] = root;
    return {b.op1(OpKind::CollectiveBroadcast, {g[0]}, a)};
  }
  a["reduce"] = std::string("sum");
  ValueId s = b.op1(OpKind::AllReduce, {g[0]}, a);
  if (k == "sum") return {s};
  if (k == "max" || k == "min") return {b.mul(s, winners(b, x[0], y[0]))};  // ties: every tied member
  return {b.div(b.mul(s, y[0]), x[0])};  // prod: y / x_r (inputs must be non-zero)
}

Vs vjp_all_gather(Builder& b, const Node& n, const Vs&, const Vs&, const Vs& g) {
  if (g[0] < 0) return {-1};
  Attrs a = groups_of(n);
  a["axis"] = attr_int(n, "axis");
  a["reduce"] = std::string("sum");
  return {b.op1(OpKind::ReduceScatter, {g[0]}, a)};
}

Vs vjp_reduce_scatter(Builder& b, const Node& n, const Vs& x, const Vs& y, const Vs& g) {
  if (g[0] < 0) return {-1};
  Attrs a = groups_of(n);
  a["axis"] = attr_int(n, "axis");
  std::string k = attr_str(n, "reduce");
  ValueId ag = b.op1(OpKind::AllGather, {g[0]}, a);
  if (k == "sum") return {ag};
  ValueId yall = b.op1(OpKind::AllGather, {y[0]}, a);
  if (k == "max" || k == "min") return {b.mul(ag, winners(b, x[0], yall))};
  return {b.div(b.mul(ag, yall), x[0])};
}

Vs vjp_all_to_all(Builder& b, const Node& n, const Vs&, const Vs&, const Vs& g) {
  if (g[0] < 0) return {-1};
  Attrs a = groups_of(n);
  a["split_axis"] = attr_int(n, "concat_axis");
  a["concat_axis"] = attr_int(n, "split_axis");
  return {b.op1(OpKind::AllToAll, {g[0]}, a)};
}

Vs vjp_collective_broadcast(Builder& b, const Node& n, const Vs&, const Vs&, const Vs& g) {
  if (g[0] < 0) return {-1};
  Attrs a = groups_of(n);
  a["reduce"] = std::string("sum");
  a["root"] = attr_int(n, "root");
  return {b.op1(OpKind::AllReduce, {g[0]}, a)};
}

}  // namespace rlx::ad
