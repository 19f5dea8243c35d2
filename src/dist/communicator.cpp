// The current communicator, the start-up hash check, and the watchdog that ends a rank whose
// collective cannot complete (a peer killed, stopped or cut off) with a message naming both.
#include "dist/communicator.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>

#include "rlx/error.h"

namespace rlx::dist {

ReduceOp parse_reduce(const std::string& s) {
  if (s == "sum") return ReduceOp::Sum;
  if (s == "max") return ReduceOp::Max;
  if (s == "min") return ReduceOp::Min;
  if (s == "prod") return ReduceOp::Prod;
  fail("[dist] unknown reduction '", s, "' (sum, max, min, prod)");
}

namespace {

thread_local Communicator* t_comm = nullptr;
std::mutex g_mu;
std::shared_ptr<Communicator> g_process;

Communicator& world_of_one() {
  static std::shared_ptr<Communicator> c = make_local_world(1)[0];
  return *c;
}

// ---- watchdog state: plain globals, read by the watchdog thread and the SIGTERM handler -----------
std::atomic<int64_t> g_seq{0};            // collectives entered
std::atomic<int64_t> g_open_seq{-1};      // the one in flight (-1: none)
std::atomic<int64_t> g_open_since_ns{0};  // when it started (steady clock)
char g_open_what[512] = "";               // "all_reduce #7 (4096 B, with ranks 1)"
std::vector<int64_t> g_pids;
std::vector<std::string> g_hosts;
std::vector<int64_t> g_open_peers;
std::mutex g_open_mu;
int g_rank = -1;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// True when /proc says the process is stopped (state T) or traced (t): alive but never answering.
bool process_stopped(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (!f) return false;
  char buf[512] = "";
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* close = std::strrchr(buf, ')');  // "pid (comm) S ...": comm may hold spaces
  return close && close[1] == ' ' && (close[2] == 'T' || close[2] == 't');
}

// Names the peers of the open collective that are gone or stopped (same host, pid no longer exists).
std::string dead_peers() {
  std::string r;
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  for (int64_t p : g_open_peers) {
    if (p < 0 || p >= static_cast<int64_t>(g_pids.size())) continue;
    if (g_hosts[p] != host) continue;
    const std::string who = std::string("rank ") + std::to_string(p) + " (pid " + std::to_string(g_pids[p]) + ")";
    if (kill(static_cast<pid_t>(g_pids[p]), 0) != 0 && errno == ESRCH) {
      r += (r.empty() ? "" : ", ") + who + " is gone";
    } else if (process_stopped(static_cast<pid_t>(g_pids[p]))) {
      r += (r.empty() ? "" : ", ") + who + " is stopped (SIGSTOP or a debugger)";
    }
  }
  return r;
}

std::string open_peers_str() {
  std::string r;
  for (int64_t p : g_open_peers) r += (r.empty() ? "" : ",") + std::to_string(p);
  return r;
}

[[noreturn]] void die(const char* why) {
  std::string dead = dead_peers();
  std::string msg = "[dist] rank " + std::to_string(g_rank) + ": " + g_open_what + " " + why +
                    (dead.empty() ? "; waiting on rank(s) " + open_peers_str() : "; " + dead) + "\n";
  if (write(2, msg.data(), msg.size()) < 0) {}
  _exit(3);
}

}  // namespace

void fail_rank(const std::string& why) {
  std::lock_guard<std::mutex> l(g_open_mu);
  die(why.c_str());
}

namespace {

void on_sigterm(int) {
  if (g_open_seq.load() >= 0) die("was interrupted by the launcher (a peer failed)");
  const char m[] = "[dist] terminated by the launcher between collectives (a peer failed)\n";
  if (write(2, m, sizeof m - 1) < 0) {}
  _exit(3);
}

}  // namespace

Communicator& current() {
  if (t_comm) return *t_comm;
  {
    std::lock_guard<std::mutex> l(g_mu);
    if (g_process) return *g_process;
  }
  return world_of_one();
}
void set_thread(Communicator* c) { t_comm = c; }
void set_process(std::shared_ptr<Communicator> c) {
  std::lock_guard<std::mutex> l(g_mu);
  g_process = std::move(c);
}
bool distributed() { return current().size() > 1; }

double timeout_seconds() {
  const char* e = std::getenv("RLX_DIST_TIMEOUT_S");
  double t = e ? std::atof(e) : 60.0;
  return t > 0 ? t : 60.0;
}

InFlight::InFlight(const char* op, int64_t bytes, const std::vector<int64_t>& peers) {
  int64_t seq = g_seq.fetch_add(1);
  {
    std::lock_guard<std::mutex> l(g_open_mu);
    g_open_peers = peers;
    std::snprintf(g_open_what, sizeof g_open_what, "%s #%lld (%lld B)", op, static_cast<long long>(seq),
                  static_cast<long long>(bytes));
  }
  g_open_since_ns.store(now_ns());
  g_open_seq.store(seq);
  // Fault injection for the tests (docs/env.md): RLX_DIST_KILL_AT / RLX_DIST_STOP_AT=<rank>:<collective
  // number>: that rank SIGKILLs (dead rank) or SIGSTOPs (hung rank) itself entering that collective.
  static const char* kill_at = std::getenv("RLX_DIST_KILL_AT");
  static const char* stop_at = std::getenv("RLX_DIST_STOP_AT");
  for (auto [spec, sig] : {std::pair<const char*, int>{kill_at, SIGKILL}, {stop_at, SIGSTOP}}) {
    if (!spec || g_rank < 0) continue;
    int r = -1;
    long long s = -1;
    if (std::sscanf(spec, "%d:%lld", &r, &s) == 2 && r == g_rank && s == seq) raise(sig);
  }
}
InFlight::~InFlight() { g_open_seq.store(-1); }
int64_t collectives_started() { return g_seq.load(); }

void set_peer_processes(std::vector<int64_t> pids, std::vector<std::string> hosts) {
  std::lock_guard<std::mutex> l(g_open_mu);
  g_pids = std::move(pids);
  g_hosts = std::move(hosts);
}

void start_watchdog(int rank) {
  static std::once_flag once;
  std::call_once(once, [rank] {
    g_rank = rank;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigterm;
    sigaction(SIGTERM, &sa, nullptr);
    const int64_t limit = static_cast<int64_t>(timeout_seconds() * 1e9);
    std::thread([limit] {
      for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (g_open_seq.load() < 0) continue;
        if (now_ns() - g_open_since_ns.load() > limit) {
          std::lock_guard<std::mutex> l(g_open_mu);
          if (g_open_seq.load() < 0) continue;
          char why[96];
          std::snprintf(why, sizeof why, "did not complete within RLX_DIST_TIMEOUT_S=%g s", limit / 1e9);
          die(why);
        }
      }
    }).detach();
  });
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

void check_same_on_all_ranks(const std::string& what, uint64_t hash) {
  Communicator& c = current();
  if (c.size() <= 1) return;
  ReplicaGroups all;
  all.groups.emplace_back();
  for (int r = 0; r < c.size(); ++r) all.groups[0].push_back(r);
  std::vector<uint64_t> got(c.size());
  {
    std::vector<int64_t> peers;
    for (int r = 0; r < c.size(); ++r)
      if (r != c.rank()) peers.push_back(r);
    InFlight f("start-up hash check", 8, peers);
    c.all_gather(&hash, got.data(), sizeof hash, all);
  }
  for (int r = 1; r < c.size(); ++r)
    if (got[r] != got[0]) {
      std::string list;
      for (int q = 0; q < c.size(); ++q) {
        char b[40];
        std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(got[q]));
        list += (q ? ", rank " : "rank ") + std::to_string(q) + " " + b;
      }
      fail("[dist] ranks disagree on ", what, ": ", list, " (every rank must run the same program on the same shapes)");
    }
}

}  // namespace rlx::dist
