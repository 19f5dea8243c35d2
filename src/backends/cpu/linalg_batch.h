// The batch loop the cpu linear-algebra kernels share (linalg.cpp real, linalg_complex.cpp c64):
// matrix counts and sizes of a [..., m, n] tensor, and fn(b) for every matrix b of the batch.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backends/cpu/linalg_small.h"
#include "backends/cpu/parallel.h"
#include "rlx/tensor.h"

#if defined(RLX_HAVE_LAPACKE)
extern "C" void openblas_set_num_threads(int);
#endif

namespace rlx::cpu::linalg_batch {

inline int64_t batch_of(const Tensor& t) {
  int64_t b = 1;
  for (int64_t i = 0; i + 2 < t.rank(); ++i) b *= t.shape()[i];
  return b;
}
inline int64_t rows(const Tensor& t) { return t.shape()[t.rank() - 2]; }
inline int64_t cols(const Tensor& t) { return t.shape().back(); }

// Runs fn(b) for every matrix b of the batch: over the pool for many matrices; for one large matrix
// on this thread with OpenBLAS allowed every core (the pool is idle meanwhile), then back to one.
template <class F>
void for_batch(int64_t nb, int64_t n, F&& fn) {
#if defined(RLX_HAVE_LAPACKE)
  if (nb == 1 && n > small::kSmallN) {
    openblas_set_num_threads(num_threads());
    fn(0);
    openblas_set_num_threads(1);
    return;
  }
  // One LAPACK call per matrix inside the pool: OpenBLAS must not thread them again (its dsyevd
  // threads each tiny call, which oversubscribes the cores).
  openblas_set_num_threads(1);
#endif
  int64_t work = n * n * n + 64;  // per matrix, roughly
  int64_t grain = std::max<int64_t>(1, 20000 / work);
  parallel_for(nb, grain, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) fn(b);
  });
}

}  // namespace rlx::cpu::linalg_batch
