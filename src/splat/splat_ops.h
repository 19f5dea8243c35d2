// The splat ops of ops.def evaluated on host tensors whose float inputs and outputs all have the
// scalar type T (radii: i32). The reference (reference.cpp, T = double, serial) and the cpu kernels
// (src/backends/cpu/splat.cpp, T = float or double, on the thread pool) both run this.
#pragma once
#include <vector>

#include "rlx/graph.h"
#include "rlx/op.h"
#include "rlx/tensor.h"
#include "splat/splat_math.h"

namespace rlx::splat {

inline ProjectParams project_params(const Node& n) {
  ProjectParams p;
  p.width = attr_int(n, "width");
  p.height = attr_int(n, "height");
  p.near_plane = attr_float(n, "near");
  p.far_plane = attr_float(n, "far");
  p.eps2d = attr_float(n, "eps2d");
  p.radius_clip = attr_float(n, "radius_clip");
  return p;
}

inline RasterIn raster_params(const Node& n, const std::vector<Tensor>& in) {
  RasterIn r;
  r.n = in[0].shape()[0];
  r.channels = in[2].shape()[1];
  r.width = attr_int(n, "width");
  r.height = attr_int(n, "height");
  r.tile = attr_int(n, "tile");
  return r;
}

template <class T>
const T* cp(const Tensor& t) {
  return t.data<T>();
}
template <class T>
T* mp(Tensor& t) {
  return t.data<T>();
}

// Evaluates splat op `n`; returns false for an op that is not a splat op.
template <class T, class Par>
bool eval_splat_op(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out, Par&& par) {
  switch (n.op) {
    case OpKind::SplatProject: {
      project_forward<T>(in[0].shape()[0], cp<T>(in[0]), cp<T>(in[1]), cp<T>(in[2]), cp<T>(in[3]), cp<T>(in[4]),
                         cp<T>(in[5]), project_params(n), mp<T>(out[0]), mp<T>(out[1]), mp<T>(out[2]),
                         mp<int32_t>(out[3]), par);
      return true;
    }
    case OpKind::SplatProjectGrad: {
      project_backward<T>(in[0].shape()[0], cp<T>(in[0]), cp<T>(in[1]), cp<T>(in[2]), cp<T>(in[3]), cp<T>(in[4]),
                          cp<T>(in[5]), project_params(n), cp<int32_t>(in[6]), cp<T>(in[7]), cp<T>(in[8]),
                          cp<T>(in[9]), mp<T>(out[0]), mp<T>(out[1]), mp<T>(out[2]), mp<T>(out[3]), par);
      return true;
    }
    case OpKind::SplatRasterize: {
      rasterize_forward<T>(raster_params(n, in), cp<T>(in[0]), cp<T>(in[1]), cp<T>(in[2]), cp<T>(in[3]), cp<T>(in[4]),
                           cp<int32_t>(in[5]), cp<T>(in[6]), mp<T>(out[0]), mp<T>(out[1]), par);
      return true;
    }
    case OpKind::SplatRasterizeGrad: {
      rasterize_backward<T>(raster_params(n, in), cp<T>(in[0]), cp<T>(in[1]), cp<T>(in[2]), cp<T>(in[3]),
                            cp<T>(in[4]), cp<int32_t>(in[5]), cp<T>(in[6]), cp<T>(in[7]), cp<T>(in[8]), mp<T>(out[0]),
                            mp<T>(out[1]), mp<T>(out[2]), mp<T>(out[3]), mp<T>(out[4]), par);
      return true;
    }
    case OpKind::SplatSh: {
      const int deg = static_cast<int>(attr_int(n, "degree"));
      const int64_t N = in[0].shape()[0], K = in[1].shape()[1], C = in[1].shape()[2];
      const T* d = cp<T>(in[0]);
      const T* co = cp<T>(in[1]);
      T* o = mp<T>(out[0]);
      par(N, [&](int64_t b, int64_t e) {
        T basis[kShMax];
        for (int64_t i = b; i < e; ++i) {
          const T x = d[3 * i], y = d[3 * i + 1], z = d[3 * i + 2];
          const T inv = T(1) / std::sqrt(x * x + y * y + z * z);
          const int nb = sh_basis(deg, x * inv, y * inv, z * inv, basis);
          for (int64_t c = 0; c < C; ++c) {
            T acc = 0;
            for (int k = 0; k < nb; ++k) acc += basis[k] * co[(i * K + k) * C + c];
            o[i * C + c] = acc;
          }
        }
      });
      return true;
    }
    default:
      return false;
  }
}

bool is_splat_op(OpKind k);

}  // namespace rlx::splat
