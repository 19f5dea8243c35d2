// Collectives in the reference interpreter: a node runs through the current communicator
// (src/dist), and reference_collective gives the plain per-rank semantics for simulated ranks.
#include <algorithm>
#include <cmath>

#include "dist/execute.h"
#include "ir/replica_groups.h"
#include "rlx/reference.h"
#include "runtime/reference/common.h"

namespace rlx {

namespace ref {

Outs eval_collective(const Node& n, const Ins& in, const Types& ot) {
  Outs out;
  for (auto& t : ot) out.emplace_back(t.dtype, static_dims(t.shape));
  dist::execute_collective(n, in, out);
  return out;
}

}  // namespace ref

namespace {

// Element (i of shape `s`) as a multi-index and back, for the axis arithmetic below.
std::vector<int64_t> unravel(int64_t i, const std::vector<int64_t>& s) {
  std::vector<int64_t> ix(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    ix[d] = i % s[d];
    i /= s[d];
  }
  return ix;
}
int64_t ravel(const std::vector<int64_t>& ix, const std::vector<int64_t>& s) {
  int64_t i = 0;
  for (size_t d = 0; d < s.size(); ++d) i = i * s[d] + ix[d];
  return i;
}

double combine(const std::string& k, double a, double b) {
  if (k == "sum") return a + b;
  if (k == "prod") return a * b;
  if (k == "max") return std::max(a, b);
  return std::min(a, b);
}

// The reduction over the group of every element.
Tensor reduced(const std::string& k, const std::vector<int64_t>& grp, const std::vector<Tensor>& in) {
  const Tensor& x0 = in[grp[0]];
  Tensor r(x0.dtype(), x0.shape());
  for (int64_t i = 0; i < x0.numel(); ++i) {
    double acc = in[grp[0]].get(i);
    for (size_t m = 1; m < grp.size(); ++m) acc = combine(k, acc, in[grp[m]].get(i));
    r.set(i, acc);
  }
  return r;
}

}  // namespace

std::vector<Tensor> reference_collective(const Node& n, const std::vector<Tensor>& in) {
  ReplicaGroups g;
  std::string e = read_replica_groups(n.op, n.attrs, &g);
  RLX_CHECK(e.empty(), "[reference] ", op_name(n.op), ": ", e);
  std::vector<Tensor> out(in.size());
  for (size_t r = 0; r < in.size(); ++r) {
    const std::vector<int64_t>* grp = nullptr;
    int64_t me = 0;
    RLX_CHECK(g.find(static_cast<int64_t>(r), &grp, &me), "[reference] rank ", r, " is in no replica group");
    const int64_t gn = static_cast<int64_t>(grp->size());
    const Tensor& x = in[r];
    const int64_t rank = x.rank();
    auto axis_attr = [&](const char* a) {
      int64_t v = attr_int(n, a);
      return v < 0 ? v + rank : v;
    };
    switch (n.op) {
      case OpKind::AllReduce: {
        int64_t root = attr_int(n, "root");
        Tensor s = reduced(reduce_kind(n.op, n.attrs), *grp, in);
        out[r] = root < 0 || root == me ? s : Tensor(x.dtype(), x.shape());
        break;
      }
      case OpKind::CollectiveBroadcast: out[r] = in[(*grp)[attr_int(n, "root")]].clone(); break;
      case OpKind::AllGather: {
        int64_t ax = axis_attr("axis");
        std::vector<int64_t> os = x.shape();
        os[ax] *= gn;
        Tensor y(x.dtype(), os);
        for (int64_t i = 0; i < y.numel(); ++i) {
          auto ix = unravel(i, os);
          int64_t m = ix[ax] / x.shape()[ax];
          ix[ax] %= x.shape()[ax];
          y.set(i, in[(*grp)[m]].get(ravel(ix, x.shape())));
        }
        out[r] = y;
        break;
      }
      case OpKind::ReduceScatter: {
        int64_t ax = axis_attr("axis");
        Tensor s = reduced(reduce_kind(n.op, n.attrs), *grp, in);
        std::vector<int64_t> os = x.shape();
        os[ax] /= gn;
        Tensor y(x.dtype(), os);
        for (int64_t i = 0; i < y.numel(); ++i) {
          auto ix = unravel(i, os);
          ix[ax] += me * os[ax];
          y.set(i, s.get(ravel(ix, x.shape())));
        }
        out[r] = y;
        break;
      }
      case OpKind::AllToAll: {
        int64_t sa = axis_attr("split_axis"), ca = axis_attr("concat_axis");
        std::vector<int64_t> cs = x.shape();
        cs[sa] /= gn;  // one chunk
        std::vector<int64_t> os = cs;
        os[ca] *= gn;
        Tensor y(x.dtype(), os);
        for (int64_t i = 0; i < y.numel(); ++i) {
          auto ix = unravel(i, os);
          int64_t m = ix[ca] / cs[ca];  // the member that sent this element: its chunk `me`
          ix[ca] %= cs[ca];
          ix[sa] += me * cs[sa];
          y.set(i, in[(*grp)[m]].get(ravel(ix, x.shape())));
        }
        out[r] = y;
        break;
      }
      default: fail("[reference] ", op_name(n.op), ": simulated ranks cover the group collectives (send/recv pair up "
                    "across graphs; test them with make_local_world)");
    }
  }
  return out;
}

}  // namespace rlx
