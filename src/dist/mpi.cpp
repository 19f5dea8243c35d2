// The Open MPI transport: MPI_COMM_WORLD split once per replica-group partition, collectives mapped
// one to one onto MPI's, errors returned (MPI_ERRORS_RETURN) and reported with the rank and the op.
// Compiled when CMake found MPI (RLX_HAVE_MPI); otherwise make_mpi() says how to get it.
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>

#include "dist/communicator.h"
#include "rlx/error.h"

#ifdef RLX_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only (no MPI C++ bindings to link)
#include <mpi.h>
#endif

namespace rlx::dist {

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

#ifndef RLX_HAVE_MPI
bool mpi_compiled_in() { return false; }
std::shared_ptr<Communicator> make_mpi() {
  fail("[dist] this build has no MPI transport: install Open MPI (apt install openmpi-bin libopenmpi-dev; "
       "scripts/bootstrap.sh does) and re-run cmake");
}
#else
bool mpi_compiled_in() { return true; }

namespace {

// An MPI error inside a collective means a peer or link failed: end the rank with the message.
void check(int rc, const char* what, int rank) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  (void)rank;
  fail_rank(std::string("failed in MPI_") + what + " (" + std::string(msg, len) + ")");
}

MPI_Datatype mpi_type(DType dt) {
  switch (dt) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i8: return MPI_INT8_T;
    case DType::u8: return MPI_UINT8_T;
    case DType::i16: return MPI_INT16_T;
    case DType::u16: return MPI_UINT16_T;
    case DType::i32: return MPI_INT32_T;
    case DType::u32: return MPI_UINT32_T;
    case DType::i64: return MPI_INT64_T;
    case DType::u64: return MPI_UINT64_T;
    case DType::c64: return MPI_C_FLOAT_COMPLEX;
    default: fail("[dist] mpi: no MPI datatype for ", dtype_name(dt), " (convert to f32 first)");
  }
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return MPI_SUM;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
    case ReduceOp::Prod: return MPI_PROD;
  }
  return MPI_SUM;
}

int as_int(int64_t v, const char* what) {
  RLX_CHECK(v <= INT_MAX, "[dist] mpi: ", what, " of ", v, " exceeds MPI's int count");
  return static_cast<int>(v);
}

// Sends in flight (MpiCommunicator::send), with the bytes they own. Held past the communicator's
// lifetime (never freed), so the atexit handler can complete them before MPI_Finalize.
struct PendingSend {
  MPI_Request req;
  std::vector<char> bytes;
};
std::deque<PendingSend>& pending_sends() {
  static auto* q = new std::deque<PendingSend>;
  return *q;
}
void reap_sends(bool all, int rank) {
  auto& q = pending_sends();
  while (!q.empty()) {
    int done = 1;
    if (all)
      check(MPI_Wait(&q.front().req, MPI_STATUS_IGNORE), "send", rank);
    else
      check(MPI_Test(&q.front().req, &done, MPI_STATUS_IGNORE), "send", rank);
    if (!done) return;
    q.pop_front();
  }
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      std::atexit([] {
        int fin = 0;
        MPI_Finalized(&fin);
        if (fin) return;
        for (auto& p : pending_sends()) MPI_Wait(&p.req, MPI_STATUS_IGNORE);  // a peer still receiving
        MPI_Finalize();
      });
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    // Every rank's pid and host, so a failure can name the rank that died.
    long long pid = getpid();
    std::vector<long long> pids(size_);
    MPI_Allgather(&pid, 1, MPI_LONG_LONG, pids.data(), 1, MPI_LONG_LONG, MPI_COMM_WORLD);
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    std::vector<char> hosts(64 * static_cast<size_t>(size_));
    MPI_Allgather(host, 64, MPI_CHAR, hosts.data(), 64, MPI_CHAR, MPI_COMM_WORLD);
    std::vector<int64_t> p(pids.begin(), pids.end());
    std::vector<std::string> h;
    for (int r = 0; r < size_; ++r) h.emplace_back(hosts.data() + 64 * r);
    set_peer_processes(std::move(p), std::move(h));
    start_watchdog(rank_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string transport() const override { return "mpi"; }

  void all_reduce(const void* in, void* out, int64_t count, DType dt, ReduceOp op, const ReplicaGroups& g) override {
    const void* src = in == out ? MPI_IN_PLACE : in;
    check(MPI_Allreduce(src, out, as_int(count, "count"), mpi_type(dt), mpi_op(op), comm(g)), "all_reduce", rank_);
  }
  void reduce(const void* in, void* out, int64_t count, DType dt, ReduceOp op, int root, const ReplicaGroups& g) override {
    check(MPI_Reduce(in, out, as_int(count, "count"), mpi_type(dt), mpi_op(op), root, comm(g)), "reduce", rank_);
  }
  void all_gather(const void* in, void* out, int64_t chunk, const ReplicaGroups& g) override {
    int n = as_int(chunk, "chunk");
    check(MPI_Allgather(in, n, MPI_BYTE, out, n, MPI_BYTE, comm(g)), "all_gather", rank_);
  }
  void reduce_scatter(const void* in, void* out, int64_t chunk_count, DType dt, ReduceOp op, const ReplicaGroups& g) override {
    check(MPI_Reduce_scatter_block(in, out, as_int(chunk_count, "count"), mpi_type(dt), mpi_op(op), comm(g)),
          "reduce_scatter", rank_);
  }
  void all_to_all(const void* in, void* out, int64_t chunk, const ReplicaGroups& g) override {
    int n = as_int(chunk, "chunk");
    check(MPI_Alltoall(in, n, MPI_BYTE, out, n, MPI_BYTE, comm(g)), "all_to_all", rank_);
  }
  void broadcast(void* buf, int64_t bytes, int root, const ReplicaGroups& g) override {
    check(MPI_Bcast(buf, as_int(bytes, "size"), MPI_BYTE, root, comm(g)), "broadcast", rank_);
  }
  // Buffered, as the in-process transport's: the bytes are copied and sent with MPI_Isend, so a
  // send never waits for its recv (a pipeline's stages send forward and backward at the same time).
  // Finished sends are reaped on every later send/recv; barrier() waits for all of them.
  void send(const void* buf, int64_t bytes, int peer, int tag) override {
    reap(false);
    auto p = static_cast<const char*>(buf);
    pending_sends().push_back({MPI_REQUEST_NULL, std::vector<char>(p, p + bytes)});
    auto& s = pending_sends().back();
    check(MPI_Isend(s.bytes.data(), as_int(bytes, "size"), MPI_BYTE, peer, tag, MPI_COMM_WORLD, &s.req), "send", rank_);
  }
  void recv(void* buf, int64_t bytes, int peer, int tag) override {
    reap(false);
    MPI_Status st;
    check(MPI_Recv(buf, as_int(bytes, "size"), MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st), "recv", rank_);
    int got = 0;
    MPI_Get_count(&st, MPI_BYTE, &got);
    RLX_CHECK(got == bytes, "[dist] rank ", rank_, ": recv of ", bytes, " B from rank ", peer, " got ", got, " B");
  }
  void barrier() override {
    reap(true);
    check(MPI_Barrier(MPI_COMM_WORLD), "barrier", rank_);
  }

 private:
  void reap(bool all) { reap_sends(all, rank_); }
  // One communicator per partition of the world into groups (MPI_Comm_split is collective: every
  // rank meets the same partitions in the same order, as every rank runs the same graph).
  MPI_Comm comm(const ReplicaGroups& g) {
    std::lock_guard<std::mutex> l(mu_);
    if (g.groups.size() == 1 && static_cast<int>(g.groups[0].size()) == size_) {
      bool identity = true;
      for (int r = 0; r < size_; ++r) identity = identity && g.groups[0][r] == r;
      if (identity) return MPI_COMM_WORLD;
    }
    auto it = comms_.find(g.groups);
    if (it != comms_.end()) return it->second;
    const std::vector<int64_t>* grp = nullptr;
    int64_t idx = 0;
    int color = MPI_UNDEFINED;
    if (g.find(rank_, &grp, &idx))
      for (size_t i = 0; i < g.groups.size(); ++i)
        if (&g.groups[i] == grp) color = static_cast<int>(i);
    MPI_Comm c;
    check(MPI_Comm_split(MPI_COMM_WORLD, color, static_cast<int>(idx), &c), "comm_split", rank_);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    comms_[g.groups] = c;
    return c;
  }
  int rank_ = 0, size_ = 1;
  std::mutex mu_;
  std::map<std::vector<std::vector<int64_t>>, MPI_Comm> comms_;
};

}  // namespace

std::shared_ptr<Communicator> make_mpi() { return std::make_shared<MpiCommunicator>(); }
#endif

}  // namespace rlx::dist
