// Fitting a scene to posed images: value_and_grad of the splat loss graph compiled once per scene
// size, Adam on the host with 3DGS's per-parameter learning rates, and densification (clone /
// split / prune from the accumulated screen-space mean gradients, densify.h).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "splat/densify.h"
#include "splat/pipeline.h"

namespace rlx::splat {

struct View {
  Camera cam;
  Tensor image;  // [H,W,3] in [0,1]
};

struct FitOptions {
  int64_t steps = 300;
  std::string device = "cpu";
  int sh_degree = 3;
  double background[3] = {0, 0, 0};
  // Adam learning rates per parameter group (means scaled by the scene extent).
  double lr_means = 1.6e-3, lr_log_scales = 5e-3, lr_quats = 1e-3, lr_opacity = 5e-2, lr_sh_dc = 2.5e-3,
         lr_sh_rest = 2.5e-3 / 20;
  double lr_means_final = 0.1;  // means lr decays exponentially to this fraction
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-15;
  DensifyOptions densify;
  bool densify_enabled = true;
  uint64_t seed = 0;
};

struct StepStats {
  int64_t step = 0;
  double loss = 0, psnr = 0;
  int64_t gaussians = 0;
};

// Trains `scene` in place on `views`; calls `on_step` after every step.
void fit(Scene& scene, const std::vector<View>& views, const FitOptions& opt,
         const std::function<void(const StepStats&)>& on_step = {});

}  // namespace rlx::splat
