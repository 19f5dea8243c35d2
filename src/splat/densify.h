// Densification for 3DGS training (the adaptive density control of Kerbl et al., with gsplat's
// defaults): Gaussians whose mean screen-space gradient exceeds a threshold are cloned (small) or
// split in two (large); nearly transparent or huge ones are pruned; opacities are reset now and then.
#pragma once
#include <cstdint>
#include <vector>

#include "splat/pipeline.h"

namespace rlx::splat {

struct DensifyOptions {
  int64_t start = 100, stop = 2000, every = 100;  // steps
  int64_t reset_every = 3000;                     // opacity reset period (0 = never)
  double grad_threshold = 2e-4;                   // mean |d loss / d means2d| in NDC-like units
  double small_scale = 0.01;                      // x scene extent: clone below, split above
  double prune_opacity = 0.005;
  double huge_scale = 0.1;                        // x scene extent: pruned after the first reset
  int64_t max_gaussians = 1 << 20;
};

// Per-Gaussian running statistics of the screen-space gradient.
struct GradStats {
  std::vector<double> sum;
  std::vector<int64_t> count;
  void reset(int64_t n) {
    sum.assign(static_cast<size_t>(n), 0);
    count.assign(static_cast<size_t>(n), 0);
  }
  // Adds ||v_means2d_i * (W/2, H/2)|| for each Gaussian with a nonzero gradient (visible).
  void add(const Tensor& v_means2d, int64_t width, int64_t height);
};

struct DensifyResult {
  int64_t cloned = 0, split = 0, pruned = 0;
  // For each Gaussian of the new scene, the old index it came from (optimizer state follows it);
  // fresh[i] is true where its state must restart.
  std::vector<int64_t> source;
  std::vector<bool> fresh;
};

// Applies clone/split/prune to `s` (f32 or f64 tensors) with scene extent `extent`.
DensifyResult densify(Scene& s, const GradStats& st, const DensifyOptions& o, double extent, bool prune_huge,
                      uint64_t seed);
// Sets every opacity logit to at most logit(0.01), as 3DGS's periodic reset.
void reset_opacity(Scene& s, double max_opacity = 0.01);

}  // namespace rlx::splat
