// Gaussian splatting on the cpu: the math of src/splat/splat_math.h in the op's own dtype, split over
// the thread pool (projection by Gaussian chunks, compositing and its VJP by 16x16 tiles).
#include <type_traits>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/splat_raster.h"
#include "splat/splat_ops.h"

namespace rlx::cpu {

namespace {

struct Pool {
  int64_t grain;
  template <class F>
  void operator()(int64_t n, F&& fn) const {
    parallel_for(n, grain, [&](int64_t b, int64_t e) { fn(b, e); });
  }
};

// f32 RGB forward compositing: the vectorized tile kernel (splat_raster.cpp).
bool rasterize_f32_rgb(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  splat::RasterIn r = splat::raster_params(n, in);
  if (r.channels != 3 || r.tile * r.tile > 64 * 64) return false;
  splat::TileBins b = splat::bin_tiles(r.n, in[0].data<float>(), in[5].data<int32_t>(), in[4].data<float>(), r.width,
                                       r.height, r.tile);
  parallel_for(b.tiles_x * b.tiles_y, 1, [&](int64_t tb, int64_t te) {
    for (int64_t t = tb; t < te; ++t)
      rasterize_tile_f32_rgb(r, b, t, in[0].data<float>(), in[1].data<float>(), in[2].data<float>(),
                             in[3].data<float>(), in[5].data<int32_t>(), in[6].data<float>(), out[0].data<float>(), out[1].data<float>());
  });
  return true;
}

// f32 RGB backward compositing: the vectorized tile VJP (splat_raster_grad.cpp) in the shared driver.
bool rasterize_grad_f32_rgb(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  splat::RasterIn r = splat::raster_params(n, in);
  if (r.channels != 3 || r.tile * r.tile > 64 * 64) return false;
  const float *m2 = in[0].data<float>(), *con = in[1].data<float>(), *col = in[2].data<float>(),
              *op = in[3].data<float>(), *bg = in[6].data<float>(), *vi = in[7].data<float>(),
              *va = in[8].data<float>();
  const int32_t* rad = in[5].data<int32_t>();
  Pool pool{1};
  splat::rasterize_backward_with<float>(
      r, m2, con, col, op, in[4].data<float>(), rad, bg, vi, va, out[0].data<float>(), out[1].data<float>(),
      out[2].data<float>(), out[3].data<float>(), out[4].data<float>(), pool,
      [&](const splat::TileBins& b, int64_t t, float* em2, float* econ, float* ecol, float* eop, float* ebg) {
        return rasterize_tile_vjp_f32_rgb(r, b, t, m2, con, col, op, rad, bg, vi, va, em2, econ, ecol, eop, ebg);
      });
  return true;
}

template <class T>
void splat_kernel(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  if constexpr (std::is_same_v<T, float>)
    if ((n.op == OpKind::SplatRasterize && rasterize_f32_rgb(n, in, out)) ||
        (n.op == OpKind::SplatRasterizeGrad && rasterize_grad_f32_rgb(n, in, out)))
      return;
  // Tiles are coarse work items (up to 256 pixels x their lists): one per claim; Gaussians by 256.
  const bool tiles = n.op == OpKind::SplatRasterize || n.op == OpKind::SplatRasterizeGrad;
  Pool pool{tiles ? 1 : (n.op == OpKind::SplatProjectGrad ? 1 : 256)};
  RLX_CHECK(splat::eval_splat_op<T>(n, in, out, pool), "[cpu] ", op_name(n.op), ": not a splat op");
}

}  // namespace

KernelFn splat_kernel_for(DType dt) {
  if (dt == DType::f32) return &splat_kernel<float>;
  if (dt == DType::f64) return &splat_kernel<double>;
  return nullptr;
}

}  // namespace rlx::cpu
