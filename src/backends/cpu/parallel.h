// The cpu device's one thread pool. Kernels split work with parallel_for; BLAS runs single-threaded
// inside it (we split GEMMs ourselves), so two pools never fight over the cores.
#pragma once
#include <cstdint>
#include <functional>
#include <type_traits>
#include <utility>

namespace rlx::cpu {

// A non-owning reference to a callable fn(int64_t, int64_t): unlike std::function it never
// allocates, so a run after warm-up stays allocation-free.
class RangeFn {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, RangeFn>>>
  RangeFn(F&& f)  // NOLINT: implicit, so lambdas pass straight in
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, int64_t a, int64_t b) { (*static_cast<std::remove_reference_t<F>*>(o))(a, b); }) {}
  void operator()(int64_t a, int64_t b) const { call_(obj_, a, b); }

 private:
  void* obj_;
  void (*call_)(void*, int64_t, int64_t);
};

// How long an idle worker spins for the next job before it sleeps on a condition variable, in
// microseconds: RLX_SPIN_US (0: never spin), default 150. Fixed at first use.
int64_t spin_budget_us();
// Spins (x86 `pause` between checks) until ready() is true or budget_us microseconds of wall time
// have passed; returns whether ready() became true. Time-based, so the wait is the same on CPUs
// whose `pause` costs ~36 ns (AMD Zen 2) and ~10x that (Intel since Skylake).
bool spin_wait(const std::function<bool()>& ready, int64_t budget_us);

// Worker count: RLX_NUM_THREADS when set, else the number of cores. Fixed at first use.
int num_threads();
// Calls fn(begin, end) over [0, n) split into contiguous ranges of at least `grain` items, in
// parallel on the pool (the caller takes part). Nested calls run inline.
void parallel_for(int64_t n, int64_t grain, RangeFn fn);

}  // namespace rlx::cpu
