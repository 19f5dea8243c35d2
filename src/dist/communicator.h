// The one interface every transport implements (in-process simulated ranks, Open MPI, NCCL), the
// process's current communicator, and the watchdog that turns a dead or stuck peer into an error.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/replica_groups.h"
#include "rlx/dtype.h"

namespace rlx::dist {

enum class ReduceOp { Sum, Max, Min, Prod };
ReduceOp parse_reduce(const std::string& s);  // "sum" | "max" | "min" | "prod"

// Collectives run over the caller's replica group (`groups` is the whole partition of the world, the
// same on every rank; see ops.def). Buffers are contiguous host memory; counts are elements of
// `dt`, sizes are bytes; for all_gather / all_to_all / reduce_scatter the chunk of member i sits at
// offset i * chunk in the gathered (or scattered) buffer.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string transport() const = 0;  // "local", "mpi", "nccl"
  virtual void all_reduce(const void* in, void* out, int64_t count, DType dt, ReduceOp op, const ReplicaGroups& g) = 0;
  // Reduce to member `root` only (the others' `out` is left untouched).
  virtual void reduce(const void* in, void* out, int64_t count, DType dt, ReduceOp op, int root, const ReplicaGroups& g) = 0;
  virtual void all_gather(const void* in, void* out, int64_t chunk_bytes, const ReplicaGroups& g) = 0;
  virtual void reduce_scatter(const void* in, void* out, int64_t chunk_count, DType dt, ReduceOp op, const ReplicaGroups& g) = 0;
  virtual void all_to_all(const void* in, void* out, int64_t chunk_bytes, const ReplicaGroups& g) = 0;
  virtual void broadcast(void* buf, int64_t bytes, int root, const ReplicaGroups& g) = 0;
  virtual void send(const void* buf, int64_t bytes, int peer, int tag) = 0;
  virtual void recv(void* buf, int64_t bytes, int peer, int tag) = 0;
  virtual void barrier() = 0;
};

// The communicator collectives on this thread use: a thread's own (simulated ranks, set_thread),
// else the process's (set_process: rlx under mpirun), else a world of one rank.
Communicator& current();
void set_thread(Communicator* c);
void set_process(std::shared_ptr<Communicator> c);
bool distributed();  // current().size() > 1

// RLX_DIST_TIMEOUT_S (default 60): how long one collective may wait for its peers.
double timeout_seconds();

// Marks the collective this rank is in, for the watchdog and the launcher's SIGTERM: a collective
// still open after the timeout ends the process with "[dist] rank R: <op> #N (...) did not complete
// ...; rank(s) ... ". `peers_pids` (optional) lets the message name dead peers on this host.
class InFlight {
 public:
  InFlight(const char* op, int64_t bytes, const std::vector<int64_t>& peers);
  ~InFlight();
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
};
// Peers' pids and host names (gathered by a transport at start-up), so a failure names who died.
void set_peer_processes(std::vector<int64_t> pids, std::vector<std::string> hosts);
// Ends this process (exit status 3) with "[dist] rank R: <open collective> <why>; <dead peers, or
// the ranks it waited on>": a transport whose peer failed cannot continue.
[[noreturn]] void fail_rank(const std::string& why);
// Starts the watchdog thread and the SIGTERM handler of a multi-rank process (idempotent).
void start_watchdog(int rank);
int64_t collectives_started();  // how many collectives this process has entered

// In-process simulated ranks: `make_local_world(n)` returns n communicators sharing one world; run
// each on its own thread (set_thread). The plain semantics the MPI transport is tested against.
std::vector<std::shared_ptr<Communicator>> make_local_world(int n);

// Open MPI: true when this process was started by mpirun (OMPI_COMM_WORLD_SIZE, PMIX_RANK, ...).
bool launched_by_mpi();
bool mpi_compiled_in();
// MPI_Init and the world communicator; throws when the build has no MPI.
std::shared_ptr<Communicator> make_mpi();
// NCCL on cuda device buffers (libnccl loaded at run time); why it cannot run when it cannot.
std::string nccl_status();

// Start-up check of a multi-rank program: every rank's `hash` of the graph (text form, shapes)
// must agree; a mismatch throws "[dist] ranks disagree on <what>: rank 0 ..., rank 1 ...".
void check_same_on_all_ranks(const std::string& what, uint64_t hash);
uint64_t fnv1a(const std::string& s);

}  // namespace rlx::dist
