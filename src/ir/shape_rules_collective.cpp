// Shape rules of the collective ops (all_reduce, all_gather, reduce_scatter, all_to_all,
// collective_broadcast, send, recv) and the replica-group reader they share; see ops.def.
#include <algorithm>
#include <set>

#include "ir/replica_groups.h"

namespace rlx {

bool ReplicaGroups::find(int64_t rank, const std::vector<int64_t>** group, int64_t* index) const {
  for (auto& g : groups)
    for (size_t i = 0; i < g.size(); ++i)
      if (g[i] == rank) {
        *group = &g;
        *index = static_cast<int64_t>(i);
        return true;
      }
  return false;
}

std::string read_replica_groups(OpKind op, const Attrs& a, ReplicaGroups* out) {
  const Attr* ga = find_attr(op, a, "groups");
  const Attr* sa = find_attr(op, a, "group_size");
  const auto* ranks = ga ? std::get_if<std::vector<int64_t>>(&ga->v) : nullptr;
  const auto* gs = sa ? std::get_if<int64_t>(&sa->v) : nullptr;
  if (!ranks || ranks->empty()) return "needs attribute groups (ints): the world ranks of the replica groups";
  int64_t n = static_cast<int64_t>(ranks->size());
  int64_t size = gs && *gs > 0 ? *gs : n;
  if (n % size != 0) return "groups lists " + std::to_string(n) + " ranks, not a multiple of group_size " + std::to_string(size);
  std::set<int64_t> seen;
  for (int64_t r : *ranks) {
    if (r < 0) return "groups holds a negative rank " + std::to_string(r);
    if (!seen.insert(r).second) return "rank " + std::to_string(r) + " appears twice in groups";
  }
  out->groups.clear();
  for (int64_t i = 0; i < n; i += size) out->groups.emplace_back(ranks->begin() + i, ranks->begin() + i + size);
  return "";
}

std::string reduce_kind(OpKind op, const Attrs& a) {
  const Attr* r = find_attr(op, a, "reduce");
  const auto* s = r ? std::get_if<std::string>(&r->v) : nullptr;
  if (!s || (*s != "sum" && *s != "max" && *s != "min" && *s != "prod")) return "";
  return *s;
}

namespace {

// Common checks: replica groups parse, the reduction is known (ops that reduce); the group size in `n`.
std::string check(OpKind op, const Attrs& a, int64_t* n) {
  ReplicaGroups g;
  std::string e = read_replica_groups(op, a, &g);
  if (!e.empty()) return e;
  if ((op == OpKind::AllReduce || op == OpKind::ReduceScatter) && reduce_kind(op, a).empty())
    return "reduce must be sum, max, min or prod";
  *n = g.size();
  return "";
}

int64_t int_attr(OpKind op, const Attrs& a, const char* name) {
  const Attr* x = find_attr(op, a, name);
  const auto* v = x ? std::get_if<int64_t>(&x->v) : nullptr;
  return v ? *v : 0;
}

// Normalizes `axis` against rank r; false when out of range.
bool axis_in(int64_t* axis, size_t r) {
  if (*axis < 0) *axis += static_cast<int64_t>(r);
  return *axis >= 0 && *axis < static_cast<int64_t>(r);
}

}  // namespace

std::string infer_all_reduce(const std::vector<ValueType>& in, const Attrs& a, std::vector<ValueType>& o) {
  int64_t n = 0;
  std::string e = check(OpKind::AllReduce, a, &n);
  if (!e.empty()) return e;
  if (int_attr(OpKind::AllReduce, a, "root") >= n) return "root is outside a group of " + std::to_string(n);
  o = {in[0]};
  return "";
}

std::string infer_collective_broadcast(const std::vector<ValueType>& in, const Attrs& a, std::vector<ValueType>& o) {
  int64_t n = 0, root = int_attr(OpKind::CollectiveBroadcast, a, "root");
  std::string e = check(OpKind::CollectiveBroadcast, a, &n);
  if (!e.empty()) return e;
  if (root < 0 || root >= n) return "root " + std::to_string(root) + " is outside a group of " + std::to_string(n);
  o = {in[0]};
  return "";
}

std::string infer_send(const std::vector<ValueType>& in, const Attrs& a, std::vector<ValueType>& o) {
  if (int_attr(OpKind::Send, a, "peer") < 0) return "peer must be a world rank (>= 0)";
  o = {in[0]};
  return "";
}

std::string infer_all_gather(const std::vector<ValueType>& in, const Attrs& a, std::vector<ValueType>& o) {
  int64_t n = 0, axis = int_attr(OpKind::AllGather, a, "axis");
  std::string e = check(OpKind::AllGather, a, &n);
  if (!e.empty()) return e;
  if (!axis_in(&axis, in[0].shape.size())) return "axis out of range for a rank-" + std::to_string(in[0].shape.size()) + " input";
  if (!in[0].shape[axis].is_static()) return "the gathered axis must be static";
  ValueType t = in[0];
  t.shape[axis] = Dim(t.shape[axis].v * n);
  o = {t};
  return "";
}

std::string infer_reduce_scatter(const std::vector<ValueType>& in, const Attrs& a, std::vector<ValueType>& o) {
  int64_t n = 0, axis = int_attr(OpKind::ReduceScatter, a, "axis");
  std::string e = check(OpKind::ReduceScatter, a, &n);
  if (!e.empty()) return e;
  if (!axis_in(&axis, in[0].shape.size())) return "axis out of range for a rank-" + std::to_string(in[0].shape.size()) + " input";
  const Dim& d = in[0].shape[axis];
  if (!d.is_static() || d.v % n != 0)
    return "axis " + std::to_string(axis) + " must be static and divisible by the group size " + std::to_string(n);
  ValueType t = in[0];
  t.shape[axis] = Dim(d.v / n);
  o = {t};
  return "";
}

std::string infer_all_to_all(const std::vector<ValueType>& in, const Attrs& a, std::vector<ValueType>& o) {
  int64_t n = 0, sa = int_attr(OpKind::AllToAll, a, "split_axis"), ca = int_attr(OpKind::AllToAll, a, "concat_axis");
  std::string e = check(OpKind::AllToAll, a, &n);
  if (!e.empty()) return e;
  size_t r = in[0].shape.size();
  if (!axis_in(&sa, r) || !axis_in(&ca, r)) return "split_axis/concat_axis out of range";
  const Dim& d = in[0].shape[sa];
  if (!d.is_static() || d.v % n != 0 || !in[0].shape[ca].is_static())
    return "split_axis must be static and divisible by the group size " + std::to_string(n) + " (concat_axis static)";
  ValueType t = in[0];
  t.shape[sa] = Dim(d.v / n);
  t.shape[ca] = Dim(t.shape[ca].v * n);
  o = {t};
  return "";
}

std::string infer_recv(const std::vector<ValueType>&, const Attrs& a, std::vector<ValueType>& o) {
  const Attr* sa = find_attr(OpKind::Recv, a, "shape");
  const Attr* da = find_attr(OpKind::Recv, a, "dtype");
  const auto* s = sa ? std::get_if<Shape>(&sa->v) : nullptr;
  const auto* d = da ? std::get_if<DType>(&da->v) : nullptr;
  if (!s || !d) return "needs attributes shape (dims) and dtype";
  if (int_attr(OpKind::Recv, a, "peer") < 0) return "peer must be a world rank (>= 0)";
  o = {ValueType{*d, *s}};
  return "";
}

}  // namespace rlx
