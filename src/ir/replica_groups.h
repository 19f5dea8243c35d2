// Replica groups of the collective ops (ops.def): the `groups` / `group_size` attributes read once,
// so shape rules, the reference semantics and the transports agree on who talks to whom.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "rlx/graph.h"

namespace rlx {

struct ReplicaGroups {
  std::vector<std::vector<int64_t>> groups;  // each a list of world ranks, all of one size
  int64_t size() const { return groups.empty() ? 0 : static_cast<int64_t>(groups[0].size()); }
  // The group holding world rank `rank` and the rank's index in it; false when no group holds it.
  bool find(int64_t rank, const std::vector<int64_t>** group, int64_t* index) const;
};

// Reads `groups`/`group_size` of collective node attributes; "" on success, else the reason.
std::string read_replica_groups(OpKind op, const Attrs& a, ReplicaGroups* out);
// The reduction named by the `reduce` attribute ("sum", "max", "min", "prod"); "" when unknown.
std::string reduce_kind(OpKind op, const Attrs& a);

}  // namespace rlx
