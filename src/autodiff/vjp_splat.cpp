// VJP rules of the gaussian-splatting ops: each emits the op's analytic gradient op
// (splat_project_grad, splat_rasterize_grad; math in src/splat/splat_math.h). The gradient ops
// themselves are not differentiated again (no second order).
#include "autodiff/autodiff.h"

namespace rlx::ad {

// x: means, log_scales, quats, opacities, viewmat, K; y: means2d, conics, depths, radii.
std::vector<ValueId> vjp_splat_project(Builder& b, const Node& n, const std::vector<ValueId>& x,
                                       const std::vector<ValueId>& y, const std::vector<ValueId>& g) {
  auto r = b.op(OpKind::SplatProjectGrad, {x[0], x[1], x[2], x[3], x[4], x[5], y[3], g[0], g[1], g[2]}, n.attrs);
  return {r[0], r[1], r[2], -1, r[3], -1};  // opacities only pick the box; K is not differentiated
}

// x: means2d, conics, colors, opacities, depths, radii, background; y: image, alpha.
std::vector<ValueId> vjp_splat_rasterize(Builder& b, const Node& n, const std::vector<ValueId>& x,
                                         const std::vector<ValueId>& y, const std::vector<ValueId>& g) {
  auto r = b.op(OpKind::SplatRasterizeGrad, {x[0], x[1], x[2], x[3], x[4], x[5], x[6], g[0], g[1]}, n.attrs);
  return {r[0], r[1], r[2], r[3], -1, -1, r[4]};  // depths only order the lists
}

}  // namespace rlx::ad
