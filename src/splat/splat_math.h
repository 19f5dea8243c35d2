// The gaussian-splatting math, written once over the scalar type: the f64 reference (reference.cpp)
// and the threaded f32 cpu kernels (src/backends/cpu/splat.cpp) instantiate the same code, so the two
// differ only in rounding. Conventions are gsplat's (docs/splatting.md): quaternions (w,x,y,z),
// row-major world->camera view matrix, pixel centers at +0.5, 0.3 px low-pass, alpha <= 0.999,
// alpha >= 1/255, transmittance cutoff 1e-4.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

namespace rlx::splat {

constexpr double kAlphaThreshold = 1.0 / 255.0;
constexpr double kMaxAlpha = 0.999;
constexpr double kTransmittanceMin = 1e-4;
constexpr double kExtend = 3.33;  // bounding-box half-extent in standard deviations

struct ProjectParams {
  int64_t width = 0, height = 0;
  double near_plane = 0.01, far_plane = 1e10, eps2d = 0.3, radius_clip = 0;
};

template <class T>
struct Mat3 {
  T m[3][3];
};

template <class T>
inline Mat3<T> mul(const Mat3<T>& a, const Mat3<T>& b) {
  Mat3<T> r;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) r.m[i][j] = a.m[i][0] * b.m[0][j] + a.m[i][1] * b.m[1][j] + a.m[i][2] * b.m[2][j];
  return r;
}
template <class T>
inline Mat3<T> transpose(const Mat3<T>& a) {
  Mat3<T> r;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) r.m[i][j] = a.m[j][i];
  return r;
}

// Rotation of the normalized quaternion q = (w,x,y,z).
template <class T>
inline Mat3<T> quat_to_rot(T w, T x, T y, T z) {
  Mat3<T> r;
  r.m[0][0] = 1 - 2 * (y * y + z * z), r.m[0][1] = 2 * (x * y - w * z), r.m[0][2] = 2 * (x * z + w * y);
  r.m[1][0] = 2 * (x * y + w * z), r.m[1][1] = 1 - 2 * (x * x + z * z), r.m[1][2] = 2 * (y * z - w * x);
  r.m[2][0] = 2 * (x * z - w * y), r.m[2][1] = 2 * (y * z + w * x), r.m[2][2] = 1 - 2 * (x * x + y * y);
  return r;
}

// Everything the projection of one Gaussian computes; the backward pass recomputes it.
template <class T>
struct Projected {
  bool visible = false;
  T qn[4], qnorm, s[3];
  Mat3<T> R, M, Sigma, W, Sigma_c;  // M = R diag(s), Sigma = M M^T, Sigma_c = W Sigma W^T
  T p[3];                           // camera-space mean
  T J[2][3];
  bool clip_x = false, clip_y = false;
  T a, b, c, det;  // the dilated 2-D covariance [[a,b],[b,c]]
  T mean2d[2], conic[3];
  int32_t radius[2] = {0, 0};
};

template <class T>
inline Projected<T> project_one(const T* mean, const T* log_scale, const T* quat, T opacity, const T* view, const T* K,
                                const ProjectParams& pp) {
  Projected<T> g;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) g.W.m[i][j] = view[i * 4 + j];
    g.p[i] = view[i * 4 + 0] * mean[0] + view[i * 4 + 1] * mean[1] + view[i * 4 + 2] * mean[2] + view[i * 4 + 3];
  }
  if (!(g.p[2] >= T(pp.near_plane) && g.p[2] <= T(pp.far_plane))) return g;
  g.qnorm = std::sqrt(quat[0] * quat[0] + quat[1] * quat[1] + quat[2] * quat[2] + quat[3] * quat[3]);
  if (!(g.qnorm > T(0))) return g;
  for (int i = 0; i < 4; ++i) g.qn[i] = quat[i] / g.qnorm;
  g.R = quat_to_rot(g.qn[0], g.qn[1], g.qn[2], g.qn[3]);
  for (int i = 0; i < 3; ++i) g.s[i] = std::exp(log_scale[i]);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) g.M.m[i][j] = g.R.m[i][j] * g.s[j];
  g.Sigma = mul(g.M, transpose(g.M));
  g.Sigma_c = mul(mul(g.W, g.Sigma), transpose(g.W));
  const T fx = K[0], cx = K[2], fy = K[4], cy = K[5];
  const T x = g.p[0], y = g.p[1], z = g.p[2], rz = T(1) / z, rz2 = rz * rz;
  const T tan_x = T(0.5) * T(pp.width) / fx, tan_y = T(0.5) * T(pp.height) / fy;
  const T lim_xp = (T(pp.width) - cx) / fx + T(0.3) * tan_x, lim_xn = cx / fx + T(0.3) * tan_x;
  const T lim_yp = (T(pp.height) - cy) / fy + T(0.3) * tan_y, lim_yn = cy / fy + T(0.3) * tan_y;
  const T ux = x * rz, uy = y * rz;
  g.clip_x = ux > lim_xp || ux < -lim_xn;
  g.clip_y = uy > lim_yp || uy < -lim_yn;
  const T tx = z * std::min(lim_xp, std::max(-lim_xn, ux)), ty = z * std::min(lim_yp, std::max(-lim_yn, uy));
  g.J[0][0] = fx * rz, g.J[0][1] = 0, g.J[0][2] = -fx * tx * rz2;
  g.J[1][0] = 0, g.J[1][1] = fy * rz, g.J[1][2] = -fy * ty * rz2;
  T cov[2][2];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      T acc = 0;
      for (int k = 0; k < 3; ++k)
        for (int l = 0; l < 3; ++l) acc += g.J[i][k] * g.Sigma_c.m[k][l] * g.J[j][l];
      cov[i][j] = acc;
    }
  g.a = cov[0][0] + T(pp.eps2d);
  g.b = T(0.5) * (cov[0][1] + cov[1][0]);
  g.c = cov[1][1] + T(pp.eps2d);
  g.det = g.a * g.c - g.b * g.b;
  if (!(g.det > T(0))) return g;
  g.mean2d[0] = fx * x * rz + cx;
  g.mean2d[1] = fy * y * rz + cy;
  g.conic[0] = g.c / g.det, g.conic[1] = -g.b / g.det, g.conic[2] = g.a / g.det;
  if (!(opacity >= T(kAlphaThreshold))) return g;
  // Opacity-aware box: beyond it alpha < 1/255 along each axis.
  const T extend = std::min(T(kExtend), std::sqrt(T(2) * std::log(opacity / T(kAlphaThreshold))));
  const T rx = std::ceil(extend * std::sqrt(g.a)), ry = std::ceil(extend * std::sqrt(g.c));
  if (rx <= T(pp.radius_clip) && ry <= T(pp.radius_clip)) return g;
  if (g.mean2d[0] + rx <= 0 || g.mean2d[0] - rx >= T(pp.width) || g.mean2d[1] + ry <= 0 ||
      g.mean2d[1] - ry >= T(pp.height))
    return g;
  g.radius[0] = static_cast<int32_t>(rx);
  g.radius[1] = static_cast<int32_t>(ry);
  g.visible = true;
  return g;
}

// VJP of one visible Gaussian's projection. Adds into v_mean[3], v_log_scale[3], v_quat[4],
// v_view[16] (the world->camera matrix; its last row gets nothing).
template <class T>
inline void project_one_vjp(const Projected<T>& g, const T* mean, const T* K, const T* v_mean2d, const T* v_conic,
                            T v_depth, T* v_mean, T* v_log_scale, T* v_quat, T* v_view) {
  const T fx = K[0], fy = K[4];
  const T x = g.p[0], y = g.p[1], z = g.p[2], rz = T(1) / z, rz2 = rz * rz, rz3 = rz2 * rz;
  // conic = inverse of [[a,b],[b,c]] as (c, -b, a)/det; gradients w.r.t. a, b (once), c.
  const T a = g.a, b = g.b, c = g.c, d2 = g.det * g.det, id = T(1) / g.det;
  const T va = v_conic[0] * (-c * c / d2) + v_conic[1] * (b * c / d2) + v_conic[2] * (-b * b / d2);
  const T vb = v_conic[0] * (2 * b * c / d2) + v_conic[1] * (-id - 2 * b * b / d2) + v_conic[2] * (2 * a * b / d2);
  const T vc = v_conic[0] * (-b * b / d2) + v_conic[1] * (a * b / d2) + v_conic[2] * (-a * a / d2);
  // a = J0 S J0^T, b = J0 S J1^T, c = J1 S J1^T (S = Sigma_c, symmetric).
  T G[3][3];  // dL/dSigma_c entries
  for (int k = 0; k < 3; ++k)
    for (int l = 0; l < 3; ++l)
      G[k][l] = va * g.J[0][k] * g.J[0][l] + vb * g.J[0][k] * g.J[1][l] + vc * g.J[1][k] * g.J[1][l];
  T SJ0[3], SJ1[3];
  for (int k = 0; k < 3; ++k) {
    SJ0[k] = g.Sigma_c.m[k][0] * g.J[0][0] + g.Sigma_c.m[k][1] * g.J[0][1] + g.Sigma_c.m[k][2] * g.J[0][2];
    SJ1[k] = g.Sigma_c.m[k][0] * g.J[1][0] + g.Sigma_c.m[k][1] * g.J[1][1] + g.Sigma_c.m[k][2] * g.J[1][2];
  }
  T vJ[2][3];
  for (int k = 0; k < 3; ++k) {
    vJ[0][k] = 2 * va * SJ0[k] + vb * SJ1[k];
    vJ[1][k] = vb * SJ0[k] + 2 * vc * SJ1[k];
  }
  // J's dependence on the camera-space mean, and the 2-D mean's.
  T vp[3] = {0, 0, 0};
  vp[0] += v_mean2d[0] * fx * rz;
  vp[1] += v_mean2d[1] * fy * rz;
  vp[2] += -v_mean2d[0] * fx * x * rz2 - v_mean2d[1] * fy * y * rz2 + v_depth;
  vp[2] += -vJ[0][0] * fx * rz2 - vJ[1][1] * fy * rz2;
  // J02 = -fx x / z^2 unclipped (x free), -fx lim / z clipped (x at the limit).
  if (!g.clip_x) {
    vp[0] += vJ[0][2] * (-fx * rz2);
    vp[2] += vJ[0][2] * (2 * fx * x * rz3);
  } else {
    const T tx = -g.J[0][2] * z * z / fx;
    vp[2] += vJ[0][2] * (fx * tx * rz3);
  }
  if (!g.clip_y) {
    vp[1] += vJ[1][2] * (-fy * rz2);
    vp[2] += vJ[1][2] * (2 * fy * y * rz3);
  } else {
    const T ty = -g.J[1][2] * z * z / fy;
    vp[2] += vJ[1][2] * (fy * ty * rz3);
  }
  // p = W mean + t
  for (int i = 0; i < 3; ++i) {
    v_mean[i] += g.W.m[0][i] * vp[0] + g.W.m[1][i] * vp[1] + g.W.m[2][i] * vp[2];
    for (int j = 0; j < 3; ++j) v_view[i * 4 + j] += vp[i] * mean[j];
    v_view[i * 4 + 3] += vp[i];
  }
  // Sigma_c = W Sigma W^T: dW = (G + G^T) W Sigma; dSigma = W^T G W.
  T Gs[3][3];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) Gs[i][j] = G[i][j] + G[j][i];
  Mat3<T> WS = mul(g.W, g.Sigma);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      T acc = 0;
      for (int k = 0; k < 3; ++k) acc += Gs[i][k] * WS.m[k][j];
      v_view[i * 4 + j] += acc;
    }
  T G2[3][3];  // W^T Gs W (already symmetric, = dSigma + dSigma^T)
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      T acc = 0;
      for (int k = 0; k < 3; ++k)
        for (int l = 0; l < 3; ++l) acc += g.W.m[k][i] * Gs[k][l] * g.W.m[l][j];
      G2[i][j] = acc;
    }
  // Sigma = M M^T: dM = (dSigma + dSigma^T) M; M = R diag(s).
  T vR[3][3], vs[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      T vM = G2[i][0] * g.M.m[0][j] + G2[i][1] * g.M.m[1][j] + G2[i][2] * g.M.m[2][j];
      vR[i][j] = vM * g.s[j];
      vs[j] += vM * g.R.m[i][j];
    }
  for (int j = 0; j < 3; ++j) v_log_scale[j] += vs[j] * g.s[j];
  const T w = g.qn[0], qx = g.qn[1], qy = g.qn[2], qz = g.qn[3];
  T vq[4];
  vq[0] = 2 * (-qz * vR[0][1] + qy * vR[0][2] + qz * vR[1][0] - qx * vR[1][2] - qy * vR[2][0] + qx * vR[2][1]);
  vq[1] = 2 * (qy * vR[0][1] + qz * vR[0][2] + qy * vR[1][0] - 2 * qx * vR[1][1] - w * vR[1][2] + qz * vR[2][0] +
               w * vR[2][1] - 2 * qx * vR[2][2]);
  vq[2] = 2 * (-2 * qy * vR[0][0] + qx * vR[0][1] + w * vR[0][2] + qx * vR[1][0] + qz * vR[1][2] - w * vR[2][0] +
               qz * vR[2][1] - 2 * qy * vR[2][2]);
  vq[3] = 2 * (-2 * qz * vR[0][0] - w * vR[0][1] + qx * vR[0][2] + w * vR[1][0] - 2 * qz * vR[1][1] + qy * vR[1][2] +
               qx * vR[2][0] + qy * vR[2][1]);
  const T dot = vq[0] * g.qn[0] + vq[1] * g.qn[1] + vq[2] * g.qn[2] + vq[3] * g.qn[3];
  for (int i = 0; i < 4; ++i) v_quat[i] += (vq[i] - g.qn[i] * dot) / g.qnorm;
}

// ---- spherical harmonics (real, degree 0-3; gsplat's basis and signs) -----------------------------
constexpr int kShMax = 16;
// basis[k] for the unit direction (x,y,z); returns the count (deg+1)^2.
template <class T>
inline int sh_basis(int deg, T x, T y, T z, T* basis) {
  basis[0] = T(0.2820947917738781);
  if (deg < 1) return 1;
  basis[1] = T(-0.48860251190292) * y;
  basis[2] = T(0.48860251190292) * z;
  basis[3] = T(-0.48860251190292) * x;
  if (deg < 2) return 4;
  const T z2 = z * z, fTmp0B = T(-1.092548430592079) * z, fC1 = x * x - y * y, fS1 = 2 * x * y;
  basis[4] = T(0.5462742152960395) * fS1;
  basis[5] = fTmp0B * y;
  basis[6] = T(0.9461746957575601) * z2 - T(0.3153915652525201);
  basis[7] = fTmp0B * x;
  basis[8] = T(0.5462742152960395) * fC1;
  if (deg < 3) return 9;
  const T fTmp0C = T(-2.285228997322329) * z2 + T(0.4570457994644658), fTmp1B = T(1.445305721320277) * z;
  const T fC2 = x * fC1 - y * fS1, fS2 = x * fS1 + y * fC1;
  basis[9] = T(-0.5900435899266435) * fS2;
  basis[10] = fTmp1B * fS1;
  basis[11] = fTmp0C * y;
  basis[12] = z * (T(1.865881662950577) * z2 - T(1.119528997770346));
  basis[13] = fTmp0C * x;
  basis[14] = fTmp1B * fC1;
  basis[15] = T(-0.5900435899266435) * fC2;
  return 16;
}

// ---- tile binning: per tile, the visible Gaussians that touch it, nearest first ---------------------
struct TileBins {
  int64_t tiles_x = 0, tiles_y = 0;
  std::vector<int64_t> offsets;  // [tiles + 1] into ids
  std::vector<int32_t> ids;      // gaussian index per (tile, depth-rank) entry
};

// Ties in depth keep the Gaussian order (the stable order of gsplat's radix sort on tile|depth keys).
template <class T>
inline TileBins bin_tiles(int64_t n, const T* means2d, const int32_t* radii, const T* depths, int64_t width,
                          int64_t height, int64_t tile) {
  TileBins b;
  b.tiles_x = (width + tile - 1) / tile;
  b.tiles_y = (height + tile - 1) / tile;
  const int64_t nt = b.tiles_x * b.tiles_y;
  std::vector<int32_t> order;
  order.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    if (radii[2 * i] > 0 && radii[2 * i + 1] > 0) order.push_back(static_cast<int32_t>(i));
  std::stable_sort(order.begin(), order.end(), [&](int32_t p, int32_t q) { return depths[p] < depths[q]; });
  auto rect = [&](int32_t i, int64_t* r) {
    const double mx = static_cast<double>(means2d[2 * i]), my = static_cast<double>(means2d[2 * i + 1]);
    const double rx = radii[2 * i], ry = radii[2 * i + 1], ts = static_cast<double>(tile);
    r[0] = std::clamp<int64_t>(static_cast<int64_t>(std::floor((mx - rx) / ts)), 0, b.tiles_x);
    r[1] = std::clamp<int64_t>(static_cast<int64_t>(std::ceil((mx + rx) / ts)), 0, b.tiles_x);
    r[2] = std::clamp<int64_t>(static_cast<int64_t>(std::floor((my - ry) / ts)), 0, b.tiles_y);
    r[3] = std::clamp<int64_t>(static_cast<int64_t>(std::ceil((my + ry) / ts)), 0, b.tiles_y);
  };
  std::vector<int64_t> count(static_cast<size_t>(nt) + 1, 0);
  int64_t r[4];
  for (int32_t i : order) {
    rect(i, r);
    for (int64_t ty = r[2]; ty < r[3]; ++ty)
      for (int64_t tx = r[0]; tx < r[1]; ++tx) ++count[static_cast<size_t>(ty * b.tiles_x + tx) + 1];
  }
  std::partial_sum(count.begin(), count.end(), count.begin());
  b.offsets = count;
  b.ids.resize(static_cast<size_t>(count.back()));
  std::vector<int64_t> fill(count.begin(), count.end() - 1);
  for (int32_t i : order) {
    rect(i, r);
    for (int64_t ty = r[2]; ty < r[3]; ++ty)
      for (int64_t tx = r[0]; tx < r[1]; ++tx) b.ids[static_cast<size_t>(fill[static_cast<size_t>(ty * b.tiles_x + tx)]++)] = i;
  }
  return b;
}

// ---- compositing ---------------------------------------------------------------------------------
struct RasterIn {
  int64_t n = 0, channels = 0, width = 0, height = 0, tile = 16;
};

// The alpha of Gaussian i at pixel center (px, py), or 0 where it does not contribute.
template <class T>
inline T splat_alpha(const T* m2, const T* con, T opac, T px, T py, T* sigma_out, T* g_out) {
  const T dx = m2[0] - px, dy = m2[1] - py;
  const T sigma = T(0.5) * (con[0] * dx * dx + con[2] * dy * dy) + con[1] * dx * dy;
  if (sigma < T(0)) return T(0);
  const T g = std::exp(-sigma);
  const T alpha = std::min(T(kMaxAlpha), opac * g);
  if (alpha < T(kAlphaThreshold)) return T(0);
  *sigma_out = sigma;
  *g_out = g;
  return alpha;
}

// True when pixel center (px, py) lies beyond Gaussian i's box (plus a pixel): there alpha < 1/255
// (the radii are the opacity-aware extents of the x and y marginals), so it is skipped before exp.
template <class T>
inline bool outside_box(const T* m2, const int32_t* rad, T px, T py) {
  return std::abs(m2[0] - px) > T(rad[0] + 1) || std::abs(m2[1] - py) > T(rad[1] + 1);
}

// Composites tile `t` front to back into image [H,W,C] and alpha [H,W].
template <class T>
inline void rasterize_tile(const RasterIn& r, const TileBins& b, int64_t t, const T* means2d, const T* conics,
                           const T* colors, const T* opac, const int32_t* radii, const T* bg, T* image, T* alpha_img) {
  const int64_t tx = t % b.tiles_x, ty = t / b.tiles_x, C = r.channels;
  const int64_t x0 = tx * r.tile, y0 = ty * r.tile, x1 = std::min(r.width, x0 + r.tile),
                y1 = std::min(r.height, y0 + r.tile);
  const int64_t s = b.offsets[static_cast<size_t>(t)], e = b.offsets[static_cast<size_t>(t) + 1];
  std::vector<T> acc(static_cast<size_t>(C));
  for (int64_t y = y0; y < y1; ++y)
    for (int64_t x = x0; x < x1; ++x) {
      const T px = T(x) + T(0.5), py = T(y) + T(0.5);
      T Tr = 1;
      std::fill(acc.begin(), acc.end(), T(0));
      for (int64_t k = s; k < e; ++k) {
        const int32_t i = b.ids[static_cast<size_t>(k)];
        if (outside_box(means2d + 2 * i, radii + 2 * i, px, py)) continue;
        T sigma, g;
        const T al = splat_alpha(means2d + 2 * i, conics + 3 * i, opac[i], px, py, &sigma, &g);
        if (al == T(0)) continue;
        const T next = Tr * (T(1) - al);
        if (next <= T(kTransmittanceMin)) break;
        const T vis = al * Tr;
        for (int64_t ch = 0; ch < C; ++ch) acc[static_cast<size_t>(ch)] += colors[i * C + ch] * vis;
        Tr = next;
      }
      T* o = image + (y * r.width + x) * C;
      for (int64_t ch = 0; ch < C; ++ch) o[ch] = acc[static_cast<size_t>(ch)] + Tr * bg[ch];
      alpha_img[y * r.width + x] = T(1) - Tr;
    }
}

// Backward of tile `t`: per entry k of the tile's list, gradients go to slot k of the per-entry
// buffers (v_m2 [M,2], v_con [M,3], v_col [M,C], v_op [M]), so tiles never write the same memory;
// v_bg_tile [C] gets this tile's background gradient. A reduction by gaussian id follows.
template <class T>
inline void rasterize_tile_vjp(const RasterIn& r, const TileBins& b, int64_t t, const T* means2d, const T* conics,
                               const T* colors, const T* opac, const int32_t* radii, const T* bg, const T* v_image,
                               const T* v_alpha,
                               T* v_m2, T* v_con, T* v_col, T* v_op, T* v_bg_tile) {
  const int64_t tx = t % b.tiles_x, ty = t / b.tiles_x, C = r.channels;
  const int64_t x0 = tx * r.tile, y0 = ty * r.tile, x1 = std::min(r.width, x0 + r.tile),
                y1 = std::min(r.height, y0 + r.tile);
  const int64_t s = b.offsets[static_cast<size_t>(t)], e = b.offsets[static_cast<size_t>(t) + 1];
  std::vector<T> S(static_cast<size_t>(C));
  for (int64_t y = y0; y < y1; ++y)
    for (int64_t x = x0; x < x1; ++x) {
      const T px = T(x) + T(0.5), py = T(y) + T(0.5);
      // Forward again: the final transmittance and the end of the contributing run.
      T Tr = 1;
      int64_t last = s;
      for (int64_t k = s; k < e; ++k) {
        const int32_t i = b.ids[static_cast<size_t>(k)];
        if (outside_box(means2d + 2 * i, radii + 2 * i, px, py)) continue;
        T sigma, g;
        const T al = splat_alpha(means2d + 2 * i, conics + 3 * i, opac[i], px, py, &sigma, &g);
        if (al == T(0)) continue;
        const T next = Tr * (T(1) - al);
        if (next <= T(kTransmittanceMin)) break;
        Tr = next;
        last = k + 1;
      }
      const T T_final = Tr;
      const T* vo = v_image + (y * r.width + x) * C;
      const T va_px = v_alpha[y * r.width + x];
      T bgdot = 0;
      for (int64_t ch = 0; ch < C; ++ch) {
        v_bg_tile[ch] += T_final * vo[ch];
        bgdot += bg[ch] * vo[ch];
      }
      std::fill(S.begin(), S.end(), T(0));
      T Tcur = T_final;
      for (int64_t k = last - 1; k >= s; --k) {
        const int32_t i = b.ids[static_cast<size_t>(k)];
        if (outside_box(means2d + 2 * i, radii + 2 * i, px, py)) continue;
        T sigma, g;
        const T al = splat_alpha(means2d + 2 * i, conics + 3 * i, opac[i], px, py, &sigma, &g);
        if (al == T(0)) continue;
        const T ra = T(1) / (T(1) - al);
        Tcur *= ra;  // transmittance in front of i
        const T vis = al * Tcur;
        T v_al = 0;
        const T* ci = colors + i * C;
        for (int64_t ch = 0; ch < C; ++ch) {
          v_col[k * C + ch] += vis * vo[ch];
          v_al += (ci[ch] * Tcur - S[static_cast<size_t>(ch)] * ra) * vo[ch];
          S[static_cast<size_t>(ch)] += ci[ch] * vis;
        }
        v_al += -T_final * ra * bgdot + va_px * T_final * ra;
        if (opac[i] * g <= T(kMaxAlpha)) {
          const T v_sigma = -opac[i] * g * v_al;
          const T* con = conics + 3 * i;
          const T dx = means2d[2 * i] - px, dy = means2d[2 * i + 1] - py;
          v_con[k * 3 + 0] += T(0.5) * dx * dx * v_sigma;
          v_con[k * 3 + 1] += dx * dy * v_sigma;
          v_con[k * 3 + 2] += T(0.5) * dy * dy * v_sigma;
          v_m2[k * 2 + 0] += (con[0] * dx + con[1] * dy) * v_sigma;
          v_m2[k * 2 + 1] += (con[1] * dx + con[2] * dy) * v_sigma;
          v_op[k] += g * v_al;
        }
      }
    }
}

// ---- whole-op drivers over a scalar type and a parallel-for (par(n, fn(begin, end))) ----------------

// Projection of N Gaussians: outputs are zero for culled ones (radii 0).
template <class T, class Par>
void project_forward(int64_t n, const T* means, const T* log_scales, const T* quats, const T* opac, const T* view,
                     const T* K, const ProjectParams& pp, T* means2d, T* conics, T* depths, int32_t* radii, Par&& par) {
  par(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      Projected<T> g = project_one(means + 3 * i, log_scales + 3 * i, quats + 4 * i, opac[i], view, K, pp);
      means2d[2 * i] = g.visible ? g.mean2d[0] : T(0);
      means2d[2 * i + 1] = g.visible ? g.mean2d[1] : T(0);
      for (int k = 0; k < 3; ++k) conics[3 * i + k] = g.visible ? g.conic[k] : T(0);
      depths[i] = g.visible ? g.p[2] : T(0);
      radii[2 * i] = g.radius[0];
      radii[2 * i + 1] = g.radius[1];
    }
  });
}

// Its VJP; v_view [16] is summed over Gaussians in chunks of `chunk` (deterministic order).
template <class T, class Par>
void project_backward(int64_t n, const T* means, const T* log_scales, const T* quats, const T* opac, const T* view,
                      const T* K, const ProjectParams& pp, const int32_t* radii, const T* v_means2d, const T* v_conics,
                      const T* v_depths, T* v_means, T* v_log_scales, T* v_quats, T* v_view, Par&& par) {
  constexpr int64_t kChunk = 1024;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<T> vv(static_cast<size_t>(std::max<int64_t>(chunks, 1)) * 16, T(0));
  std::fill(v_means, v_means + 3 * n, T(0));
  std::fill(v_log_scales, v_log_scales + 3 * n, T(0));
  std::fill(v_quats, v_quats + 4 * n, T(0));
  par(chunks, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c)
      for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) {
        if (radii[2 * i] <= 0 || radii[2 * i + 1] <= 0) continue;
        Projected<T> g = project_one(means + 3 * i, log_scales + 3 * i, quats + 4 * i, opac[i], view, K, pp);
        if (!g.visible) continue;
        project_one_vjp(g, means + 3 * i, K, v_means2d + 2 * i, v_conics + 3 * i, v_depths[i], v_means + 3 * i,
                        v_log_scales + 3 * i, v_quats + 4 * i, vv.data() + c * 16);
      }
  });
  std::fill(v_view, v_view + 16, T(0));
  for (int64_t c = 0; c < chunks; ++c)
    for (int k = 0; k < 16; ++k) v_view[k] += vv[static_cast<size_t>(c * 16 + k)];
}

template <class T, class Par>
void rasterize_forward(const RasterIn& r, const T* means2d, const T* conics, const T* colors, const T* opac,
                       const T* depths, const int32_t* radii, const T* bg, T* image, T* alpha, Par&& par) {
  TileBins b = bin_tiles(r.n, means2d, radii, depths, r.width, r.height, r.tile);
  par(b.tiles_x * b.tiles_y, [&](int64_t tb, int64_t te) {
    for (int64_t t = tb; t < te; ++t) rasterize_tile(r, b, t, means2d, conics, colors, opac, radii, bg, image, alpha);
  });
}

// tile_vjp(t, em2, econ, ecol, eop, ebg_tile) may take a tile (returning true) instead of the template.
template <class T, class Par, class TileVjp>
void rasterize_backward_with(const RasterIn& r, const T* means2d, const T* conics, const T* colors, const T* opac,
                             const T* depths, const int32_t* radii, const T* bg, const T* v_image, const T* v_alpha,
                             T* v_means2d, T* v_conics, T* v_colors, T* v_opac, T* v_bg, Par&& par,
                             TileVjp&& tile_vjp) {
  TileBins b = bin_tiles(r.n, means2d, radii, depths, r.width, r.height, r.tile);
  const int64_t M = static_cast<int64_t>(b.ids.size()), C = r.channels, nt = b.tiles_x * b.tiles_y;
  std::vector<T> em2(static_cast<size_t>(M) * 2, T(0)), econ(static_cast<size_t>(M) * 3, T(0)),
      ecol(static_cast<size_t>(M * C), T(0)), eop(static_cast<size_t>(M), T(0)),
      ebg(static_cast<size_t>(nt * C), T(0));
  par(nt, [&](int64_t tb, int64_t te) {
    for (int64_t t = tb; t < te; ++t)
      if (!tile_vjp(b, t, em2.data(), econ.data(), ecol.data(), eop.data(), ebg.data() + t * C))
        rasterize_tile_vjp(r, b, t, means2d, conics, colors, opac, radii, bg, v_image, v_alpha, em2.data(),
                           econ.data(), ecol.data(), eop.data(), ebg.data() + t * C);
  });
  std::fill(v_means2d, v_means2d + 2 * r.n, T(0));
  std::fill(v_conics, v_conics + 3 * r.n, T(0));
  std::fill(v_colors, v_colors + C * r.n, T(0));
  std::fill(v_opac, v_opac + r.n, T(0));
  std::fill(v_bg, v_bg + C, T(0));
  for (int64_t k = 0; k < M; ++k) {
    const int64_t i = b.ids[static_cast<size_t>(k)];
    for (int j = 0; j < 2; ++j) v_means2d[2 * i + j] += em2[static_cast<size_t>(2 * k + j)];
    for (int j = 0; j < 3; ++j) v_conics[3 * i + j] += econ[static_cast<size_t>(3 * k + j)];
    for (int64_t j = 0; j < C; ++j) v_colors[C * i + j] += ecol[static_cast<size_t>(C * k + j)];
    v_opac[i] += eop[static_cast<size_t>(k)];
  }
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t j = 0; j < C; ++j) v_bg[j] += ebg[static_cast<size_t>(t * C + j)];
}

template <class T, class Par>
void rasterize_backward(const RasterIn& r, const T* means2d, const T* conics, const T* colors, const T* opac,
                        const T* depths, const int32_t* radii, const T* bg, const T* v_image, const T* v_alpha,
                        T* v_means2d, T* v_conics, T* v_colors, T* v_opac, T* v_bg, Par&& par) {
  rasterize_backward_with(r, means2d, conics, colors, opac, depths, radii, bg, v_image, v_alpha, v_means2d, v_conics,
                          v_colors, v_opac, v_bg, par, [](const TileBins&, int64_t, T*, T*, T*, T*, T*) { return false; });
}

}  // namespace rlx::splat
