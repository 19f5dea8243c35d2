// Graph builders for the splatting pipeline (project -> SH color -> rasterize) and a scene's
// parameters as tensors. Used by `rlx splat`, the Python module and the tests.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "rlx/graph.h"
#include "rlx/tensor.h"

namespace rlx::splat {

// A pinhole camera: world -> camera row-major 4x4, intrinsics fx, fy, cx, cy, image size.
struct Camera {
  double view[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  double fx = 1, fy = 1, cx = 0, cy = 0;
  int64_t width = 0, height = 0;
  std::string name;                         // image file name, when read from a camera file
  Tensor viewmat(DType dt) const;           // [4,4]
  Tensor intrinsics(DType dt) const;        // K [3,3]
  Tensor center(DType dt) const;            // camera position in world space [3]
};

// The trainable parameters of a scene, in 3DGS's parameterization (all [N,...], one dtype):
// means, log-scales, quaternions (w,x,y,z, unnormalized), opacity logits, SH coefficients [N,K,3].
struct Scene {
  Tensor means, log_scales, quats, opacity_logits, sh;
  int64_t size() const { return means.defined() && means.rank() == 2 ? means.shape()[0] : 0; }
  int sh_degree() const;  // the largest degree K coefficients allow
  std::vector<Tensor> params() const { return {means, log_scales, quats, opacity_logits, sh}; }
  static Scene from_params(const std::vector<Tensor>& p);
};

struct RenderOptions {
  int64_t width = 0, height = 0;
  int sh_degree = 3;
  double near_plane = 0.01, far_plane = 1e10, eps2d = 0.3;
  int64_t tile = 16;
  DType dtype = DType::f32;
};

// Render graph. Inputs: means [N,3], log_scales [N,3], quats [N,4], opacity_logits [N], sh [N,K,3],
// viewmat [4,4], K [3,3], campos [3], background [3], and with `offset2d` a zero [N,2] added to the
// 2-D means (its gradient is the screen-space mean gradient densification needs).
// Outputs: image [H,W,3], alpha [H,W].
Graph render_graph(int64_t n, int64_t k, const RenderOptions& o, bool offset2d = false);

// Loss graph for training: the render graph's inputs (offset2d included) then target [H,W,3];
// output 0 the scalar loss (mean absolute error), output 1 the image.
Graph loss_graph(int64_t n, int64_t k, const RenderOptions& o);

// Renders one view on `device` (compiles the graph).
Tensor render(const Scene& s, const Camera& cam, const double bg[3], const RenderOptions& o,
              const std::string& device = "cpu", Tensor* alpha = nullptr);

// Peak signal-to-noise ratio of two [H,W,C] images in [0,1] (clamped), dB.
double psnr(const Tensor& a, const Tensor& b);

}  // namespace rlx::splat
