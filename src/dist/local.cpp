// In-process simulated ranks: n communicators over one shared world, each used by its own thread.
// Every collective is "post my buffer, meet, read the others', meet": plain and obviously right, the
// semantics the MPI transport is tested against. A meeting that waits past RLX_DIST_TIMEOUT_S throws.
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <tuple>

#include "dist/communicator.h"
#include "dist/reduce.h"
#include "rlx/error.h"

namespace rlx::dist {

namespace {

struct World {
  int n;
  std::mutex mu;
  std::condition_variable cv;
  int64_t generation = 0;
  std::vector<bool> arrived;
  std::vector<const void*> slots;
  std::map<std::tuple<int, int, int>, std::deque<std::vector<char>>> mail;  // (from, to, tag)
  explicit World(int size) : n(size), arrived(size, false), slots(size, nullptr) {}
};

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<World> w, int rank) : w_(std::move(w)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return w_->n; }
  std::string transport() const override { return "local"; }

  void all_reduce(const void* in, void* out, int64_t count, DType dt, ReduceOp op, const ReplicaGroups& g) override {
    reduce_impl(in, out, count, dt, op, -1, g, "all_reduce");
  }
  void reduce(const void* in, void* out, int64_t count, DType dt, ReduceOp op, int root, const ReplicaGroups& g) override {
    reduce_impl(in, out, count, dt, op, root, g, "reduce");
  }
  void all_gather(const void* in, void* out, int64_t chunk, const ReplicaGroups& g) override {
    auto mine = group_of(g);
    meet(in, "all_gather");
    for (size_t i = 0; i < mine.size(); ++i)
      std::memcpy(static_cast<char*>(out) + i * chunk, w_->slots[mine[i]], static_cast<size_t>(chunk));
    meet(nullptr, "all_gather");
  }
  void reduce_scatter(const void* in, void* out, int64_t chunk_count, DType dt, ReduceOp op, const ReplicaGroups& g) override {
    auto mine = group_of(g);
    int64_t idx = index_in(mine), es = static_cast<int64_t>(dtype_size(dt)), bytes = chunk_count * es;
    meet(in, "reduce_scatter");
    std::memcpy(out, static_cast<const char*>(w_->slots[mine[0]]) + idx * bytes, static_cast<size_t>(bytes));
    for (size_t i = 1; i < mine.size(); ++i)
      reduce_into(out, static_cast<const char*>(w_->slots[mine[i]]) + idx * bytes, chunk_count, dt, op);
    meet(nullptr, "reduce_scatter");
  }
  void all_to_all(const void* in, void* out, int64_t chunk, const ReplicaGroups& g) override {
    auto mine = group_of(g);
    int64_t idx = index_in(mine);
    meet(in, "all_to_all");
    for (size_t i = 0; i < mine.size(); ++i)
      std::memcpy(static_cast<char*>(out) + i * chunk, static_cast<const char*>(w_->slots[mine[i]]) + idx * chunk,
                  static_cast<size_t>(chunk));
    meet(nullptr, "all_to_all");
  }
  void broadcast(void* buf, int64_t bytes, int root, const ReplicaGroups& g) override {
    auto mine = group_of(g);
    meet(buf, "broadcast");
    if (mine[root] != rank_) std::memcpy(buf, w_->slots[mine[root]], static_cast<size_t>(bytes));
    meet(nullptr, "broadcast");
  }
  void send(const void* buf, int64_t bytes, int peer, int tag) override {
    RLX_CHECK(peer >= 0 && peer < w_->n, "[dist] send to rank ", peer, " of a world of ", w_->n);
    std::lock_guard<std::mutex> l(w_->mu);
    const char* p = static_cast<const char*>(buf);
    w_->mail[{rank_, peer, tag}].emplace_back(p, p + bytes);
    w_->cv.notify_all();
  }
  void recv(void* buf, int64_t bytes, int peer, int tag) override {
    RLX_CHECK(peer >= 0 && peer < w_->n, "[dist] recv from rank ", peer, " of a world of ", w_->n);
    std::unique_lock<std::mutex> l(w_->mu);
    auto key = std::make_tuple(peer, rank_, tag);
    bool ok = w_->cv.wait_for(l, deadline(), [&] { return !w_->mail[key].empty(); });
    RLX_CHECK(ok, "[dist] rank ", rank_, ": recv from rank ", peer, " (tag ", tag, ") did not complete within ",
              timeout_seconds(), " s");
    auto& m = w_->mail[key].front();
    RLX_CHECK(static_cast<int64_t>(m.size()) == bytes, "[dist] rank ", rank_, ": recv of ", bytes, " B from rank ", peer,
              " got a ", m.size(), "-byte message");
    std::memcpy(buf, m.data(), m.size());
    w_->mail[key].pop_front();
  }
  void barrier() override {
    meet(nullptr, "barrier");
    meet(nullptr, "barrier");
  }

 private:
  static std::chrono::duration<double> deadline() { return std::chrono::duration<double>(timeout_seconds()); }

  std::vector<int64_t> group_of(const ReplicaGroups& g) const {
    const std::vector<int64_t>* grp = nullptr;
    int64_t idx = 0;
    RLX_CHECK(g.find(rank_, &grp, &idx), "[dist] rank ", rank_, " is in none of the collective's replica groups");
    for (auto r : *grp) RLX_CHECK(r < w_->n, "[dist] replica group names rank ", r, " of a world of ", w_->n);
    return *grp;
  }
  int64_t index_in(const std::vector<int64_t>& grp) const {
    for (size_t i = 0; i < grp.size(); ++i)
      if (grp[i] == rank_) return static_cast<int64_t>(i);
    return -1;
  }

  // Every rank of the world posts `slot` and waits for the others (a world barrier: every rank runs
  // the same collective, each within its own group).
  void meet(const void* slot, const char* what) {
    std::unique_lock<std::mutex> l(w_->mu);
    int64_t gen = w_->generation;
    if (slot) w_->slots[rank_] = slot;
    w_->arrived[rank_] = true;
    bool all = true;
    for (bool a : w_->arrived) all = all && a;
    if (all) {
      std::fill(w_->arrived.begin(), w_->arrived.end(), false);
      ++w_->generation;
      w_->cv.notify_all();
      return;
    }
    bool ok = w_->cv.wait_for(l, deadline(), [&] { return w_->generation != gen; });
    if (!ok) {
      std::string missing;
      for (int r = 0; r < w_->n; ++r)
        if (!w_->arrived[r]) missing += (missing.empty() ? "" : ",") + std::to_string(r);
      w_->arrived[rank_] = false;
      fail("[dist] rank ", rank_, ": ", what, " did not complete within ", timeout_seconds(), " s; rank(s) ", missing,
           " never arrived");
    }
  }

  void reduce_impl(const void* in, void* out, int64_t count, DType dt, ReduceOp op, int root, const ReplicaGroups& g,
                   const char* what) {
    auto mine = group_of(g);
    size_t bytes = static_cast<size_t>(count) * dtype_size(dt);
    meet(in, what);
    if (root < 0 || mine[root] == rank_) {
      std::vector<char> acc(static_cast<const char*>(w_->slots[mine[0]]), static_cast<const char*>(w_->slots[mine[0]]) + bytes);
      for (size_t i = 1; i < mine.size(); ++i) reduce_into(acc.data(), w_->slots[mine[i]], count, dt, op);
      meet(nullptr, what);  // out may alias in: write only after every rank has read
      std::memcpy(out, acc.data(), bytes);
      return;
    }
    meet(nullptr, what);
  }

  std::shared_ptr<World> w_;
  int rank_;
};

}  // namespace

std::vector<std::shared_ptr<Communicator>> make_local_world(int n) {
  RLX_CHECK(n >= 1, "[dist] a world needs at least one rank");
  auto w = std::make_shared<World>(n);
  std::vector<std::shared_ptr<Communicator>> r;
  for (int i = 0; i < n; ++i) r.push_back(std::make_shared<LocalCommunicator>(w, i));
  return r;
}

}  // namespace rlx::dist
