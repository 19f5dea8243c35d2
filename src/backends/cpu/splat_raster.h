// Vectorized f32 compositing of one tile (splat_raster.cpp) for the cpu splat kernels.
#pragma once
#include <cstdint>

#include "splat/splat_math.h"

namespace rlx::cpu {

// Composites tile `t` for 3 channels; returns false (writing nothing) for other channel counts or
// tiles over 64x64, which then take the generic template.
bool rasterize_tile_f32_rgb(const splat::RasterIn& r, const splat::TileBins& bins, int64_t t, const float* means2d,
                            const float* conics, const float* colors, const float* opac, const int32_t* radii,
                            const float* bg, float* image, float* alpha);

}  // namespace rlx::cpu

namespace rlx::cpu {

// The VJP of tile `t` for 3 channels (splat_raster_grad.cpp), writing per-entry gradients as
// splat::rasterize_tile_vjp does; false (nothing written) where that template must run instead.
bool rasterize_tile_vjp_f32_rgb(const splat::RasterIn& r, const splat::TileBins& bins, int64_t t,
                                const float* means2d, const float* conics, const float* colors, const float* opac,
                                const int32_t* radii, const float* bg, const float* v_image, const float* v_alpha,
                                float* v_m2, float* v_con, float* v_col, float* v_op, float* v_bg_tile);

}  // namespace rlx::cpu
