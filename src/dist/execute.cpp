// Executes one collective node (ops.def) on host tensors through the current communicator: lays the
// chunks of the node's axis out contiguously for the transport and back, and marks the collective
// in flight for the watchdog. The reference interpreter and the cpu backend both call it.
#include "dist/execute.h"

#include <cstring>

#include "dist/communicator.h"
#include "rlx/error.h"

namespace rlx::dist {

namespace {

int64_t iattr(const Node& n, const char* name) { return attr_int(n, name); }

int64_t norm_axis(int64_t a, int64_t r) { return a < 0 ? a + r : a; }

// Bytes of dims [0, axis) (outer) and [axis, r) times the element size (inner).
void split_at(const Tensor& t, int64_t axis, int64_t* outer, int64_t* inner) {
  *outer = 1;
  *inner = static_cast<int64_t>(dtype_size(t.dtype()));
  for (int64_t d = 0; d < t.rank(); ++d) (d < axis ? *outer : *inner) *= t.shape()[d];
}

// src viewed as [outer][n][inner] -> dst [n][outer][inner] (to_front) or back (!to_front).
void regroup(const char* src, char* dst, int64_t outer, int64_t n, int64_t inner, bool to_front) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n; ++j) {
      const char* s = to_front ? src + (o * n + j) * inner : src + (j * outer + o) * inner;
      char* d = to_front ? dst + (j * outer + o) * inner : dst + (o * n + j) * inner;
      std::memcpy(d, s, static_cast<size_t>(inner));
    }
}

// The peers of this rank in the node's group (for the watchdog's message).
std::vector<int64_t> peers_of(const std::vector<int64_t>& grp, int self) {
  std::vector<int64_t> p;
  for (auto r : grp)
    if (r != self) p.push_back(r);
  return p;
}

}  // namespace

void execute_collective(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  Communicator& c = current();
  const char* name = op_name(n.op).data();
  if (n.op == OpKind::Send || n.op == OpKind::Recv) {
    int peer = static_cast<int>(iattr(n, "peer")), tag = static_cast<int>(iattr(n, "tag"));
    RLX_CHECK(peer < c.size(), "[dist] ", name, ": peer ", peer, " is outside a world of ", c.size(), " rank(s)");
    InFlight f(name, static_cast<int64_t>(out[0].nbytes()), {peer});
    if (n.op == OpKind::Send) {
      c.send(in[0].raw(), static_cast<int64_t>(in[0].nbytes()), peer, tag);
      if (in[0].nbytes() && out[0].raw() != in[0].raw()) std::memcpy(out[0].raw(), in[0].raw(), in[0].nbytes());
    } else {
      c.recv(out[0].raw(), static_cast<int64_t>(out[0].nbytes()), peer, tag);
    }
    return;
  }
  ReplicaGroups g;
  std::string e = read_replica_groups(n.op, n.attrs, &g);
  RLX_CHECK(e.empty(), "[dist] ", name, ": ", e);
  const std::vector<int64_t>* grp = nullptr;
  int64_t idx = 0;
  RLX_CHECK(g.find(c.rank(), &grp, &idx), "[dist] ", name, ": rank ", c.rank(), " of ", c.size(),
            " is in none of its replica groups");
  for (auto r : *grp)
    RLX_CHECK(r < c.size(), "[dist] ", name, ": replica group names rank ", r, " but the world has ", c.size(),
              " rank(s) (launch with more ranks, or shard for fewer)");
  const int64_t gn = g.size();
  const Tensor& x = in[0];
  Tensor& y = out[0];
  const DType dt = x.dtype();
  InFlight f(name, static_cast<int64_t>(x.nbytes()), peers_of(*grp, c.rank()));
  switch (n.op) {
    case OpKind::AllReduce: {
      ReduceOp op = parse_reduce(reduce_kind(n.op, n.attrs));
      int64_t root = iattr(n, "root");
      if (root < 0) {
        c.all_reduce(x.raw(), y.raw(), x.numel(), dt, op, g);
      } else {
        Tensor src = x.raw() == y.raw() ? x.clone() : x;  // out may share the input's buffer
        std::memset(y.raw(), 0, y.nbytes());
        c.reduce(src.raw(), y.raw(), x.numel(), dt, op, static_cast<int>(root), g);
      }
      return;
    }
    case OpKind::AllGather: {
      int64_t axis = norm_axis(iattr(n, "axis"), x.rank()), outer = 0, inner = 0;
      split_at(x, axis, &outer, &inner);
      if (outer == 1) return c.all_gather(x.raw(), y.raw(), static_cast<int64_t>(x.nbytes()), g);
      std::vector<char> tmp(y.nbytes());
      c.all_gather(x.raw(), tmp.data(), static_cast<int64_t>(x.nbytes()), g);
      regroup(tmp.data(), static_cast<char*>(y.raw()), outer, gn, inner, /*to_front=*/false);
      return;
    }
    case OpKind::ReduceScatter: {
      ReduceOp op = parse_reduce(reduce_kind(n.op, n.attrs));
      int64_t axis = norm_axis(iattr(n, "axis"), x.rank()), outer = 0, inner = 0;
      split_at(y, axis, &outer, &inner);  // y's inner = one member's chunk
      if (outer == 1) return c.reduce_scatter(x.raw(), y.raw(), y.numel(), dt, op, g);
      std::vector<char> tmp(x.nbytes());
      regroup(static_cast<const char*>(x.raw()), tmp.data(), outer, gn, inner, /*to_front=*/true);
      c.reduce_scatter(tmp.data(), y.raw(), y.numel(), dt, op, g);
      return;
    }
    case OpKind::AllToAll: {
      int64_t sa = norm_axis(iattr(n, "split_axis"), x.rank()), ca = norm_axis(iattr(n, "concat_axis"), x.rank());
      int64_t so = 0, si = 0;
      // Send: chunk j of split_axis, contiguous, at j * chunk.
      std::vector<int64_t> cs = x.shape();
      cs[sa] /= gn;
      Tensor chunk_t(dt, cs);  // the shape of one chunk
      split_at(chunk_t, sa, &so, &si);
      std::vector<char> sendb(x.nbytes()), recvb(x.nbytes());
      regroup(static_cast<const char*>(x.raw()), sendb.data(), so, gn, si, /*to_front=*/true);
      int64_t chunk = static_cast<int64_t>(chunk_t.nbytes());
      c.all_to_all(sendb.data(), recvb.data(), chunk, g);
      // Receive: member i's chunk at i * chunk; concatenate along concat_axis.
      int64_t co = 0, ci = 0;
      split_at(chunk_t, ca, &co, &ci);
      regroup(recvb.data(), static_cast<char*>(y.raw()), co, gn, ci, /*to_front=*/false);
      return;
    }
    case OpKind::CollectiveBroadcast:
      if (x.nbytes() && y.raw() != x.raw()) std::memcpy(y.raw(), x.raw(), x.nbytes());
      c.broadcast(y.raw(), static_cast<int64_t>(y.nbytes()), static_cast<int>(iattr(n, "root")), g);
      return;
    default: fail("[dist] ", name, " is not a collective op");
  }
}

}  // namespace rlx::dist
