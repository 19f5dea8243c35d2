// The cpu device's one thread pool. Kernels split work with parallel_for; BLAS runs single-threaded
// inside it (we split GEMMs ourselves), so two pools never fight over the cores.
#pragma once
#include <cstdint>
#include <functional>

namespace rlx::cpu {

// Worker count: RLX_NUM_THREADS when set, else the number of cores. Fixed at first use.
int num_threads();
// Calls fn(begin, end) over [0, n) split into contiguous ranges of at least `grain` items, in
// parallel on the pool (the caller takes part). Nested calls run inline.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace rlx::cpu
