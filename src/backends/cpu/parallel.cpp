// A small fork-join pool: workers wait on a generation counter (a spin bounded by time, then a
// condition variable), take ranges from an atomic cursor, and the caller joins when all ranges are done.
#include "backends/cpu/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace rlx::cpu {

namespace {

void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

thread_local bool t_in_pool = false;

// The worker's idle spin in microseconds: RLX_SPIN_US, else 150 (what the 4000 `pause`
// instructions of the earlier count-based spin took on the AMD EPYC (Zen 2) machines, ~36 ns
// each; on Intel cores since Skylake one `pause` is ~10x longer, so a count is not a time).
int64_t spin_budget_us_env() {
  if (const char* e = std::getenv("RLX_SPIN_US")) {
    char* end = nullptr;
    const long long v = std::strtoll(e, &end, 10);
    if (end != e && *end == 0 && v >= 0) return v;
  }
  return 150;
}

class Pool {
 public:
  explicit Pool(int n) : n_(n) {
    for (int i = 1; i < n_; ++i) workers_.emplace_back([this] { loop(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> l(m_);
      stop_ = true;
      gen_.fetch_add(1);
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  int size() const { return n_; }

  void run(int64_t chunks, RangeFn body) {  // body(c, c + 1) per chunk c
    {
      std::lock_guard<std::mutex> l(m_);
      body_ = &body;  // lives on the caller's stack until run() returns
      chunks_ = chunks;
      next_.store(0);
      closed_ = false;
      gen_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    work();
    // Close the job: workers that have not joined yet (asleep, descheduled) skip it, so we only
    // wait for those already inside.
    {
      std::lock_guard<std::mutex> l(m_);
      closed_ = true;
    }
    while (active_.load(std::memory_order_acquire) > 0) cpu_relax();
  }

 private:
  void work() {
    t_in_pool = true;
    for (int64_t c; (c = next_.fetch_add(1)) < chunks_;) (*body_)(c, c + 1);
    t_in_pool = false;
  }
  void loop() {
    uint64_t seen = 0;
    for (;;) {
      // Spin briefly: kernels arrive back to back within one run.
      spin_wait([&] { return gen_.load(std::memory_order_acquire) != seen; }, spin_budget_us());
      bool join = false;
      {
        std::unique_lock<std::mutex> l(m_);
        cv_.wait(l, [&] { return gen_.load() != seen; });
        seen = gen_.load();
        if (stop_) return;
        join = !closed_;
        if (join) active_.fetch_add(1);
      }
      if (join) {
        work();
        active_.fetch_sub(1, std::memory_order_release);
      }
    }
  }

  int n_;
  std::vector<std::thread> workers_;
  std::mutex m_;
  std::condition_variable cv_;
  std::atomic<uint64_t> gen_{0};
  std::atomic<int64_t> next_{0};
  std::atomic<int> active_{0};
  int64_t chunks_ = 0;
  bool closed_ = true;
  const RangeFn* body_ = nullptr;
  bool stop_ = false;
};

Pool& pool() {
  static Pool p(num_threads());
  return p;
}

std::mutex g_run_mutex;  // one parallel region at a time (sessions may run from several threads)

}  // namespace

int64_t spin_budget_us() {
  static const int64_t us = spin_budget_us_env();
  return us;
}

bool spin_wait(const std::function<bool()>& ready, int64_t budget_us) {
  if (ready()) return true;
  if (budget_us <= 0) return false;
  using clock = std::chrono::steady_clock;
  const auto end = clock::now() + std::chrono::microseconds(budget_us);
  // The clock (~30 ns here) is read once per 16 checks, so the spin is mostly `pause` + load.
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      cpu_relax();
      if (ready()) return true;
    }
    if (clock::now() >= end) return false;
  }
}

int num_threads() {
  static int n = [] {
    if (const char* e = std::getenv("RLX_NUM_THREADS")) {
      int v = std::atoi(e);
      if (v > 0) return v;
    }
    unsigned hc = std::thread::hardware_concurrency();
    return hc ? static_cast<int>(hc) : 1;
  }();
  return n;
}

void parallel_for(int64_t n, int64_t grain, RangeFn fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int nt = num_threads();
  if (nt == 1 || t_in_pool || n <= grain) return fn(0, n);
  // A few chunks per thread balance uneven rows without much overhead.
  int64_t chunks = std::min<int64_t>((n + grain - 1) / grain, static_cast<int64_t>(nt) * 4);
  int64_t per = (n + chunks - 1) / chunks;
  chunks = (n + per - 1) / per;
  std::unique_lock<std::mutex> l(g_run_mutex, std::try_to_lock);
  if (!l.owns_lock()) return fn(0, n);  // another thread holds the pool: run inline
  auto body = [&](int64_t c, int64_t) { fn(c * per, std::min(n, (c + 1) * per)); };
  pool().run(chunks, RangeFn(body));
}

}  // namespace rlx::cpu
