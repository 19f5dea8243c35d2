// CUDA C of the splat kernels (splat.h): f32, the formulas of src/splat/splat_math.h written out for
// the device (same order of operations, libm's expf/sqrtf/logf/ceilf), the op's attributes and sizes
// baked in as constants; run-time sizes (pair counts) come as long long parameters. Every kernel is
// its own translation unit with the entry point `rlx_kernel`.
#include <sstream>

#include "backends/cuda/splat.h"
#include "rlx/error.h"
#include "rlx/op.h"

namespace rlx::cuda {

namespace {

// A float constant as the cpu code rounds it: the double attribute converted to float.
std::string fl(double v) {
  std::ostringstream o;
  o.precision(17);
  o << "((float)(" << v << "))";
  return o.str();
}

const char* kCommon = R"(
#define ALPHA_T ((float)(1.0 / 255.0))
#define MAX_ALPHA ((float)0.999)
#define T_MIN ((float)1e-4)
typedef unsigned long long u64;
__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffffu, x, o);
  return x;
}
)";

// Projection of one Gaussian (project_one) and its VJP (project_one_vjp).
const char* kProject = R"(
struct Proj {
  bool visible, clip_x, clip_y;
  float qn[4], qnorm, s[3];
  float R[3][3], M[3][3], Sig[3][3], W[3][3], Sc[3][3];
  float p[3], J[2][3];
  float a, b, c, det, m2[2], con[3];
  int rad[2];
};
__device__ __forceinline__ void mul3(const float A[3][3], const float B[3][3], float C[3][3]) {
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) C[i][j] = A[i][0] * B[0][j] + A[i][1] * B[1][j] + A[i][2] * B[2][j];
}
__device__ __forceinline__ void mul3t(const float A[3][3], const float B[3][3], float C[3][3]) {  // A B^T
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) C[i][j] = A[i][0] * B[j][0] + A[i][1] * B[j][1] + A[i][2] * B[j][2];
}
__device__ bool project_one(const float* mean, const float* ls, const float* quat, float opacity, const float* view,
                            const float* K, Proj& g) {
  g.visible = false, g.clip_x = false, g.clip_y = false;
  g.rad[0] = 0, g.rad[1] = 0;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) g.W[i][j] = view[i * 4 + j];
    g.p[i] = view[i * 4 + 0] * mean[0] + view[i * 4 + 1] * mean[1] + view[i * 4 + 2] * mean[2] + view[i * 4 + 3];
  }
  if (!(g.p[2] >= NEAR && g.p[2] <= FAR)) return false;
  g.qnorm = sqrtf(quat[0] * quat[0] + quat[1] * quat[1] + quat[2] * quat[2] + quat[3] * quat[3]);
  if (!(g.qnorm > 0.f)) return false;
  for (int i = 0; i < 4; ++i) g.qn[i] = quat[i] / g.qnorm;
  const float w = g.qn[0], x = g.qn[1], y = g.qn[2], z = g.qn[3];
  g.R[0][0] = 1 - 2 * (y * y + z * z), g.R[0][1] = 2 * (x * y - w * z), g.R[0][2] = 2 * (x * z + w * y);
  g.R[1][0] = 2 * (x * y + w * z), g.R[1][1] = 1 - 2 * (x * x + z * z), g.R[1][2] = 2 * (y * z - w * x);
  g.R[2][0] = 2 * (x * z - w * y), g.R[2][1] = 2 * (y * z + w * x), g.R[2][2] = 1 - 2 * (x * x + y * y);
  for (int i = 0; i < 3; ++i) g.s[i] = expf(ls[i]);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) g.M[i][j] = g.R[i][j] * g.s[j];
  mul3t(g.M, g.M, g.Sig);
  float WS[3][3];
  mul3(g.W, g.Sig, WS);
  mul3t(WS, g.W, g.Sc);
  const float fx = K[0], cx = K[2], fy = K[4], cy = K[5];
  const float px = g.p[0], py = g.p[1], pz = g.p[2], rz = 1.f / pz, rz2 = rz * rz;
  const float tan_x = 0.5f * WIDTH_F / fx, tan_y = 0.5f * HEIGHT_F / fy;
  const float lim_xp = (WIDTH_F - cx) / fx + 0.3f * tan_x, lim_xn = cx / fx + 0.3f * tan_x;
  const float lim_yp = (HEIGHT_F - cy) / fy + 0.3f * tan_y, lim_yn = cy / fy + 0.3f * tan_y;
  const float ux = px * rz, uy = py * rz;
  g.clip_x = ux > lim_xp || ux < -lim_xn;
  g.clip_y = uy > lim_yp || uy < -lim_yn;
  const float tx = pz * fminf(lim_xp, fmaxf(-lim_xn, ux)), ty = pz * fminf(lim_yp, fmaxf(-lim_yn, uy));
  g.J[0][0] = fx * rz, g.J[0][1] = 0, g.J[0][2] = -fx * tx * rz2;
  g.J[1][0] = 0, g.J[1][1] = fy * rz, g.J[1][2] = -fy * ty * rz2;
  float cov[2][2];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      float acc = 0;
      for (int k = 0; k < 3; ++k)
        for (int l = 0; l < 3; ++l) acc += g.J[i][k] * g.Sc[k][l] * g.J[j][l];
      cov[i][j] = acc;
    }
  g.a = cov[0][0] + EPS2D;
  g.b = 0.5f * (cov[0][1] + cov[1][0]);
  g.c = cov[1][1] + EPS2D;
  g.det = g.a * g.c - g.b * g.b;
  if (!(g.det > 0.f)) return false;
  g.m2[0] = fx * px * rz + cx;
  g.m2[1] = fy * py * rz + cy;
  g.con[0] = g.c / g.det, g.con[1] = -g.b / g.det, g.con[2] = g.a / g.det;
  if (!(opacity >= ALPHA_T)) return false;
  const float extend = fminf((float)3.33, sqrtf(2.f * logf(opacity / ALPHA_T)));
  const float rx = ceilf(extend * sqrtf(g.a)), ry = ceilf(extend * sqrtf(g.c));
  if (rx <= RADIUS_CLIP && ry <= RADIUS_CLIP) return false;
  if (g.m2[0] + rx <= 0.f || g.m2[0] - rx >= WIDTH_F || g.m2[1] + ry <= 0.f || g.m2[1] - ry >= HEIGHT_F) return false;
  g.rad[0] = (int)rx, g.rad[1] = (int)ry;
  g.visible = true;
  return true;
}
__device__ void project_vjp(const Proj& g, const float* mean, const float* K, const float* v_m2, const float* v_con,
                            float v_depth, float* v_mean, float* v_ls, float* v_quat, float* v_view) {
  const float fx = K[0], fy = K[4];
  const float x = g.p[0], y = g.p[1], z = g.p[2], rz = 1.f / z, rz2 = rz * rz, rz3 = rz2 * rz;
  const float a = g.a, b = g.b, c = g.c, d2 = g.det * g.det, id = 1.f / g.det;
  const float va = v_con[0] * (-c * c / d2) + v_con[1] * (b * c / d2) + v_con[2] * (-b * b / d2);
  const float vb = v_con[0] * (2 * b * c / d2) + v_con[1] * (-id - 2 * b * b / d2) + v_con[2] * (2 * a * b / d2);
  const float vc = v_con[0] * (-b * b / d2) + v_con[1] * (a * b / d2) + v_con[2] * (-a * a / d2);
  float G[3][3];
  for (int k = 0; k < 3; ++k)
    for (int l = 0; l < 3; ++l)
      G[k][l] = va * g.J[0][k] * g.J[0][l] + vb * g.J[0][k] * g.J[1][l] + vc * g.J[1][k] * g.J[1][l];
  float SJ0[3], SJ1[3];
  for (int k = 0; k < 3; ++k) {
    SJ0[k] = g.Sc[k][0] * g.J[0][0] + g.Sc[k][1] * g.J[0][1] + g.Sc[k][2] * g.J[0][2];
    SJ1[k] = g.Sc[k][0] * g.J[1][0] + g.Sc[k][1] * g.J[1][1] + g.Sc[k][2] * g.J[1][2];
  }
  float vJ[2][3];
  for (int k = 0; k < 3; ++k) {
    vJ[0][k] = 2 * va * SJ0[k] + vb * SJ1[k];
    vJ[1][k] = vb * SJ0[k] + 2 * vc * SJ1[k];
  }
  float vp[3] = {0, 0, 0};
  vp[0] += v_m2[0] * fx * rz;
  vp[1] += v_m2[1] * fy * rz;
  vp[2] += -v_m2[0] * fx * x * rz2 - v_m2[1] * fy * y * rz2 + v_depth;
  vp[2] += -vJ[0][0] * fx * rz2 - vJ[1][1] * fy * rz2;
  if (!g.clip_x) {
    vp[0] += vJ[0][2] * (-fx * rz2);
    vp[2] += vJ[0][2] * (2 * fx * x * rz3);
  } else {
    const float tx = -g.J[0][2] * z * z / fx;
    vp[2] += vJ[0][2] * (fx * tx * rz3);
  }
  if (!g.clip_y) {
    vp[1] += vJ[1][2] * (-fy * rz2);
    vp[2] += vJ[1][2] * (2 * fy * y * rz3);
  } else {
    const float ty = -g.J[1][2] * z * z / fy;
    vp[2] += vJ[1][2] * (fy * ty * rz3);
  }
  for (int i = 0; i < 3; ++i) {
    v_mean[i] += g.W[0][i] * vp[0] + g.W[1][i] * vp[1] + g.W[2][i] * vp[2];
    for (int j = 0; j < 3; ++j) v_view[i * 4 + j] += vp[i] * mean[j];
    v_view[i * 4 + 3] += vp[i];
  }
  float Gs[3][3];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) Gs[i][j] = G[i][j] + G[j][i];
  float WS[3][3];
  mul3(g.W, g.Sig, WS);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      float acc = 0;
      for (int k = 0; k < 3; ++k) acc += Gs[i][k] * WS[k][j];
      v_view[i * 4 + j] += acc;
    }
  float G2[3][3];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      float acc = 0;
      for (int k = 0; k < 3; ++k)
        for (int l = 0; l < 3; ++l) acc += g.W[k][i] * Gs[k][l] * g.W[l][j];
      G2[i][j] = acc;
    }
  float vR[3][3], vs[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      const float vM = G2[i][0] * g.M[0][j] + G2[i][1] * g.M[1][j] + G2[i][2] * g.M[2][j];
      vR[i][j] = vM * g.s[j];
      vs[j] += vM * g.R[i][j];
    }
  for (int j = 0; j < 3; ++j) v_ls[j] += vs[j] * g.s[j];
  const float w = g.qn[0], qx = g.qn[1], qy = g.qn[2], qz = g.qn[3];
  float vq[4];
  vq[0] = 2 * (-qz * vR[0][1] + qy * vR[0][2] + qz * vR[1][0] - qx * vR[1][2] - qy * vR[2][0] + qx * vR[2][1]);
  vq[1] = 2 * (qy * vR[0][1] + qz * vR[0][2] + qy * vR[1][0] - 2 * qx * vR[1][1] - w * vR[1][2] + qz * vR[2][0] +
               w * vR[2][1] - 2 * qx * vR[2][2]);
  vq[2] = 2 * (-2 * qy * vR[0][0] + qx * vR[0][1] + w * vR[0][2] + qx * vR[1][0] + qz * vR[1][2] - w * vR[2][0] +
               qz * vR[2][1] - 2 * qy * vR[2][2]);
  vq[3] = 2 * (-2 * qz * vR[0][0] - w * vR[0][1] + qx * vR[0][2] + w * vR[1][0] - 2 * qz * vR[1][1] + qy * vR[1][2] +
               qx * vR[2][0] + qy * vR[2][1]);
  const float dot = vq[0] * g.qn[0] + vq[1] * g.qn[1] + vq[2] * g.qn[2] + vq[3] * g.qn[3];
  for (int i = 0; i < 4; ++i) v_quat[i] += (vq[i] - g.qn[i] * dot) / g.qnorm;
}
)";

const char* kProjectFwd = R"(
extern "C" __global__ void rlx_kernel(const float* means, const float* ls, const float* quats, const float* opac,
                                      const float* view, const float* K, float* m2, float* con, float* depth, int* radii) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= NG) return;
  Proj g;
  project_one(means + 3 * i, ls + 3 * i, quats + 4 * i, opac[i], view, K, g);
  m2[2 * i] = g.visible ? g.m2[0] : 0.f;
  m2[2 * i + 1] = g.visible ? g.m2[1] : 0.f;
  for (int k = 0; k < 3; ++k) con[3 * i + k] = g.visible ? g.con[k] : 0.f;
  depth[i] = g.visible ? g.p[2] : 0.f;
  radii[2 * i] = g.rad[0];
  radii[2 * i + 1] = g.rad[1];
}
)";

// v_view is zeroed by the step; per block, warp sums into shared memory, then one atomicAdd per entry.
const char* kProjectGrad = R"(
extern "C" __global__ void rlx_kernel(const float* means, const float* ls, const float* quats, const float* opac,
                                      const float* view, const float* K, const int* radii, const float* v_m2,
                                      const float* v_con, const float* v_depth, float* v_means, float* v_ls,
                                      float* v_quats, float* v_view) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  __shared__ float sv[12];
  if (threadIdx.x < 12) sv[threadIdx.x] = 0.f;
  float vm[3] = {0, 0, 0}, vl[3] = {0, 0, 0}, vq[4] = {0, 0, 0, 0}, vv[16];
  for (int k = 0; k < 16; ++k) vv[k] = 0.f;
  if (i < NG && radii[2 * i] > 0 && radii[2 * i + 1] > 0) {
    Proj g;
    if (project_one(means + 3 * i, ls + 3 * i, quats + 4 * i, opac[i], view, K, g))
      project_vjp(g, means + 3 * i, K, v_m2 + 2 * i, v_con + 3 * i, v_depth[i], vm, vl, vq, vv);
  }
  if (i < NG) {
    for (int k = 0; k < 3; ++k) v_means[3 * i + k] = vm[k], v_ls[3 * i + k] = vl[k];
    for (int k = 0; k < 4; ++k) v_quats[4 * i + k] = vq[k];
  }
  __syncthreads();
  for (int k = 0; k < 12; ++k) {
    const float s = warp_sum(vv[k]);
    if ((threadIdx.x & 31) == 0 && s != 0.f) atomicAdd(&sv[k], s);
  }
  __syncthreads();
  if (threadIdx.x < 12 && sv[threadIdx.x] != 0.f) atomicAdd(&v_view[threadIdx.x], sv[threadIdx.x]);
}
)";

// Block-wide exclusive scan (1024 threads) of SCAN_T values; *total gets the block's sum.
const char* kScanHelper = R"(
__device__ SCAN_T block_exclusive(SCAN_T v, SCAN_T* total) {
  __shared__ SCAN_T wt[32];
  __shared__ SCAN_T all;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  SCAN_T x = v;
  for (int o = 1; o < 32; o <<= 1) {
    const SCAN_T y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  if (lane == 31) wt[w] = x;
  __syncthreads();
  if (w == 0) {
    const SCAN_T t = wt[lane];
    SCAN_T s = t;
    for (int o = 1; o < 32; o <<= 1) {
      const SCAN_T y = __shfl_up_sync(0xffffffffu, s, o);
      if (lane >= o) s += y;
    }
    wt[lane] = s - t;
    if (lane == 31) all = s;
  }
  __syncthreads();
  const SCAN_T r = wt[w] + x - v;
  *total = all;
  __syncthreads();
  return r;
}
)";

// Three passes (4096 elements per block of 1024 threads): block sums, their scan in one block (with
// the grand total), then each block's elements; in place is safe (a thread reads its own elements
// before it writes them).
const char* kScanA = R"(
extern "C" __global__ void rlx_kernel(const SCAN_T* in, SCAN_T* bsum, long long n) {
  const long long base = blockIdx.x * 4096LL + threadIdx.x * 4LL;
  SCAN_T s = 0;
  for (int j = 0; j < 4; ++j)
    if (base + j < n) s += in[base + j];
  SCAN_T tot;
  block_exclusive(s, &tot);
  if (threadIdx.x == 0) bsum[blockIdx.x] = tot;
}
)";
const char* kScanB = R"(
extern "C" __global__ void rlx_kernel(SCAN_T* bsum, SCAN_T* total, long long nb) {
  SCAN_T carry = 0;
  for (long long c = 0; c < nb; c += 1024) {
    const long long i = c + threadIdx.x;
    const SCAN_T v = i < nb ? bsum[i] : (SCAN_T)0;
    SCAN_T tot;
    const SCAN_T ex = block_exclusive(v, &tot);
    if (i < nb) bsum[i] = carry + ex;
    carry += tot;
  }
  if (threadIdx.x == 0) total[0] = carry;
}
)";
const char* kScanC = R"(
extern "C" __global__ void rlx_kernel(SCAN_T* data, const SCAN_T* bsum, long long n) {
  const long long base = blockIdx.x * 4096LL + threadIdx.x * 4LL;
  SCAN_T v[4], s = 0;
  for (int j = 0; j < 4; ++j) {
    v[j] = base + j < n ? data[base + j] : (SCAN_T)0;
    s += v[j];
  }
  SCAN_T tot;
  SCAN_T ex = block_exclusive(s, &tot) + bsum[blockIdx.x];
  for (int j = 0; j < 4; ++j)
    if (base + j < n) {
      data[base + j] = ex;
      ex += v[j];
    }
}
)";

// The tile rectangle of Gaussian i as bin_tiles computes it (in double, clamped to the grid).
const char* kRect = R"(
__device__ __forceinline__ bool tile_rect(const float* m2, const int* rad, long long i, int* r) {
  if (!(rad[2 * i] > 0 && rad[2 * i + 1] > 0)) return false;
  const double mx = (double)m2[2 * i], my = (double)m2[2 * i + 1], rx = rad[2 * i], ry = rad[2 * i + 1];
  const double ts = (double)TILE;
  r[0] = (int)fmin(fmax(floor((mx - rx) / ts), 0.0), (double)TILES_X);
  r[1] = (int)fmin(fmax(ceil((mx + rx) / ts), 0.0), (double)TILES_X);
  r[2] = (int)fmin(fmax(floor((my - ry) / ts), 0.0), (double)TILES_Y);
  r[3] = (int)fmin(fmax(ceil((my + ry) / ts), 0.0), (double)TILES_Y);
  return true;
}
)";

const char* kTileCount = R"(
extern "C" __global__ void rlx_kernel(const float* m2, const int* rad, u64* counts) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= NG) return;
  int r[4];
  counts[i] = tile_rect(m2, rad, i, r) ? (u64)(r[1] - r[0]) * (u64)(r[3] - r[2]) : 0ull;
}
)";

// Keys (tile << 32) | depth as an order-preserving unsigned, written at the Gaussian's offset, so
// equal keys stay in Gaussian order through the stable sort (bin_tiles' stable depth order).
const char* kEmit = R"(
extern "C" __global__ void rlx_kernel(const float* m2, const int* rad, const float* depth, const u64* offs, u64* keys,
                                      unsigned* ids) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= NG) return;
  int r[4];
  if (!tile_rect(m2, rad, i, r)) return;
  unsigned d = __float_as_uint(depth[i]);
  d = (d & 0x80000000u) ? ~d : (d | 0x80000000u);
  u64 o = offs[i];
  for (int ty = r[2]; ty < r[3]; ++ty)
    for (int tx = r[0]; tx < r[1]; ++tx, ++o) {
      keys[o] = ((u64)(ty * TILES_X + tx) << 32) | (u64)d;
      ids[o] = (unsigned)i;
    }
}
)";

// One stable LSD pass over 8 bits at `shift`: per-block digit histograms (digit-major, so their
// exclusive scan is every block's first slot per digit), then a scatter that ranks equal digits
// in input order (a warp's lanes by __match_any_sync, warps in order, rounds in order).
const char* kRadixHist = R"(
extern "C" __global__ void rlx_kernel(const u64* keys, unsigned* hist, long long n, long long shift, long long nblocks) {
  __shared__ unsigned h[256];
  h[threadIdx.x] = 0;
  __syncthreads();
  const long long start = blockIdx.x * 4096LL;
  for (int r = 0; r < 16; ++r) {
    const long long k = start + r * 256 + threadIdx.x;
    if (k < n) atomicAdd(&h[(unsigned)(keys[k] >> shift) & 255u], 1u);
  }
  __syncthreads();
  hist[(long long)threadIdx.x * nblocks + blockIdx.x] = h[threadIdx.x];
}
)";
const char* kRadixScatter = R"(
extern "C" __global__ void rlx_kernel(const u64* kin, const unsigned* vin, u64* kout, unsigned* vout,
                                      const unsigned* hist, long long n, long long shift, long long nblocks) {
  __shared__ unsigned base[256];
  __shared__ unsigned wc[8][256];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  base[tid] = hist[(long long)tid * nblocks + blockIdx.x];
  for (int w = 0; w < 8; ++w) wc[w][tid] = 0;
  __syncthreads();
  const long long start = blockIdx.x * 4096LL;
  for (int r = 0; r < 16; ++r) {
    const long long k = start + r * 256 + tid;
    const bool valid = k < n;
    const u64 key = valid ? kin[k] : 0ull;
    const unsigned d = valid ? ((unsigned)(key >> shift) & 255u) : 256u;
    const unsigned same = __match_any_sync(0xffffffffu, d);
    const unsigned rank = __popc(same & ((1u << lane) - 1u));
    if (valid && rank == 0) wc[warp][d] = __popc(same);
    __syncthreads();
    if (valid) {
      unsigned o = base[d] + rank;
      for (int w = 0; w < warp; ++w) o += wc[w][d];
      kout[o] = key;
      vout[o] = vin[k];
    }
    __syncthreads();
    unsigned s = 0;
    for (int w = 0; w < 8; ++w) s += wc[w][tid], wc[w][tid] = 0;
    base[tid] += s;
    __syncthreads();
  }
}
)";

// ranges[2t], ranges[2t+1]: the sorted pairs of tile t (zeroed by the step first).
const char* kRanges = R"(
extern "C" __global__ void rlx_kernel(const u64* keys, unsigned* ranges, long long m) {
  const long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (k >= m) return;
  const unsigned t = (unsigned)(keys[k] >> 32);
  if (k == 0 || (unsigned)(keys[k - 1] >> 32) != t) ranges[2 * t] = (unsigned)k;
  if (k == m - 1 || (unsigned)(keys[k + 1] >> 32) != t) ranges[2 * t + 1] = (unsigned)(k + 1);
}
)";

// Shared-memory batch of a tile's list (BATCH = threads per block = TILE * TILE) and the per-pixel
// alpha of rasterize_tile (outside_box, then splat_alpha).
const char* kBatch = R"(
#define BATCH (TILE * TILE)
__device__ __forceinline__ float pixel_alpha(float2 m, int2 r, float3 c, float op, float px, float py, float* g_out) {
  if (fabsf(m.x - px) > (float)(r.x + 1) || fabsf(m.y - py) > (float)(r.y + 1)) return 0.f;
  const float dx = m.x - px, dy = m.y - py;
  const float sigma = 0.5f * (c.x * dx * dx + c.z * dy * dy) + c.y * dx * dy;
  if (sigma < 0.f) return 0.f;
  const float g = expf(-sigma);
  const float al = fminf(MAX_ALPHA, op * g);
  if (al < ALPHA_T) return 0.f;
  *g_out = g;
  return al;
}
#define LOAD_BATCH(k)                                                                             \
  {                                                                                               \
    const unsigned gi = ids[k];                                                                   \
    s_id[threadIdx.x] = gi;                                                                       \
    s_m2[threadIdx.x] = make_float2(m2[2 * gi], m2[2 * gi + 1]);                                  \
    s_con[threadIdx.x] = make_float3(con[3 * gi], con[3 * gi + 1], con[3 * gi + 2]);              \
    s_op[threadIdx.x] = opac[gi];                                                                 \
    s_rad[threadIdx.x] = make_int2(rad[2 * gi], rad[2 * gi + 1]);                                 \
  }
#define SHARED_BATCH                      \
  __shared__ unsigned s_id[BATCH];       \
  __shared__ float2 s_m2[BATCH];         \
  __shared__ float3 s_con[BATCH];        \
  __shared__ float s_op[BATCH];          \
  __shared__ int2 s_rad[BATCH];
)";

const char* kRaster = R"(
extern "C" __global__ void rlx_kernel(const float* m2, const float* con, const float* col, const float* opac,
                                      const float* depth, const int* rad, const float* bg, float* image,
                                      float* alpha_img, const unsigned* ids, const unsigned* ranges) {
  SHARED_BATCH
  const int t = blockIdx.y * TILES_X + blockIdx.x;
  const int x = blockIdx.x * TILE + (int)(threadIdx.x % TILE), y = blockIdx.y * TILE + (int)(threadIdx.x / TILE);
  const bool inside = x < WIDTH && y < HEIGHT;
  const float px = (float)x + 0.5f, py = (float)y + 0.5f;
  const unsigned s = ranges[2 * t], e = ranges[2 * t + 1];
  float Tr = 1.f, acc[CH];
  for (int ch = 0; ch < CH; ++ch) acc[ch] = 0.f;
  bool done = !inside;
  for (unsigned b0 = s; b0 < e; b0 += BATCH) {
    if (__syncthreads_count(done) == BATCH) break;
    if (b0 + threadIdx.x < e) LOAD_BATCH(b0 + threadIdx.x)
    __syncthreads();
    const int cnt = (int)min((unsigned)BATCH, e - b0);
    for (int j = 0; j < cnt && !done; ++j) {
      float g;
      const float al = pixel_alpha(s_m2[j], s_rad[j], s_con[j], s_op[j], px, py, &g);
      if (al == 0.f) continue;
      const float next = Tr * (1.f - al);
      if (next <= T_MIN) {
        done = true;
        break;
      }
      const float vis = al * Tr;
      const unsigned gi = s_id[j];
      for (int ch = 0; ch < CH; ++ch) acc[ch] += col[gi * CH + ch] * vis;
      Tr = next;
    }
  }
  if (!inside) return;
  float* o = image + ((long long)y * WIDTH + x) * CH;
  for (int ch = 0; ch < CH; ++ch) o[ch] = acc[ch] + Tr * bg[ch];
  alpha_img[(long long)y * WIDTH + x] = 1.f - Tr;
}
)";

// The VJP per tile (rasterize_tile_vjp): each pixel's forward again (final transmittance, end of
// its contributing run), then its list back to front; per Gaussian the warp's contributions are
// summed by shuffles and one lane adds them (float atomics) into the per-Gaussian gradients, which
// the step zeroes first. v_bg: the block's sum of T_final * v_image, one atomicAdd per channel.
const char* kRasterGrad = R"(
extern "C" __global__ void rlx_kernel(const float* m2, const float* con, const float* col, const float* opac,
                                      const float* depth, const int* rad, const float* bg, const float* v_img,
                                      const float* v_alpha, float* v_m2, float* v_con, float* v_col, float* v_op,
                                      float* v_bg, const unsigned* ids, const unsigned* ranges) {
  SHARED_BATCH
  __shared__ unsigned s_last;
  __shared__ float s_bg[CH];
  const int t = blockIdx.y * TILES_X + blockIdx.x;
  const int x = blockIdx.x * TILE + (int)(threadIdx.x % TILE), y = blockIdx.y * TILE + (int)(threadIdx.x / TILE);
  const bool inside = x < WIDTH && y < HEIGHT;
  const float px = (float)x + 0.5f, py = (float)y + 0.5f;
  const unsigned s = ranges[2 * t], e = ranges[2 * t + 1];
  if (threadIdx.x == 0) s_last = s;
  if (threadIdx.x < CH) s_bg[threadIdx.x] = 0.f;
  float Tr = 1.f;
  unsigned last = s;
  bool done = !inside;
  for (unsigned b0 = s; b0 < e; b0 += BATCH) {
    if (__syncthreads_count(done) == BATCH) break;
    if (b0 + threadIdx.x < e) LOAD_BATCH(b0 + threadIdx.x)
    __syncthreads();
    const int cnt = (int)min((unsigned)BATCH, e - b0);
    for (int j = 0; j < cnt && !done; ++j) {
      float g;
      const float al = pixel_alpha(s_m2[j], s_rad[j], s_con[j], s_op[j], px, py, &g);
      if (al == 0.f) continue;
      const float next = Tr * (1.f - al);
      if (next <= T_MIN) {
        done = true;
        break;
      }
      Tr = next;
      last = b0 + j + 1;
    }
  }
  const float T_final = Tr;
  const long long pix = (long long)y * WIDTH + x;
  float vo[CH], S[CH], bgdot = 0.f;
  const float va_px = inside ? v_alpha[pix] : 0.f;
  for (int ch = 0; ch < CH; ++ch) {
    vo[ch] = inside ? v_img[pix * CH + ch] : 0.f;
    S[ch] = 0.f;
    bgdot += bg[ch] * vo[ch];
  }
  __syncthreads();
  if (inside) atomicMax(&s_last, last);
  for (int ch = 0; ch < CH; ++ch) {
    const float sb = warp_sum(inside ? T_final * vo[ch] : 0.f);
    if ((threadIdx.x & 31) == 0) atomicAdd(&s_bg[ch], sb);
  }
  __syncthreads();
  const unsigned stop = s_last;
  float Tcur = T_final;
  for (long long b1 = stop; b1 > (long long)s; b1 -= BATCH) {
    const long long b0 = b1 - BATCH > (long long)s ? b1 - BATCH : (long long)s;
    __syncthreads();
    if (b0 + threadIdx.x < b1) LOAD_BATCH(b0 + threadIdx.x)
    __syncthreads();
    for (int j = (int)(b1 - b0) - 1; j >= 0; --j) {
      const unsigned k = (unsigned)(b0 + j);
      float g = 0.f, al = 0.f;
      if (inside && k < last) al = pixel_alpha(s_m2[j], s_rad[j], s_con[j], s_op[j], px, py, &g);
      const bool hit = al != 0.f;
      float vc[CH], vm0 = 0.f, vm1 = 0.f, vc0 = 0.f, vc1 = 0.f, vc2 = 0.f, vop = 0.f;
      for (int ch = 0; ch < CH; ++ch) vc[ch] = 0.f;
      if (hit) {
        const unsigned gi = s_id[j];
        const float ra = 1.f / (1.f - al);
        Tcur *= ra;
        const float vis = al * Tcur;
        float v_al = 0.f;
        for (int ch = 0; ch < CH; ++ch) {
          const float ci = col[gi * CH + ch];
          vc[ch] = vis * vo[ch];
          v_al += (ci * Tcur - S[ch] * ra) * vo[ch];
          S[ch] += ci * vis;
        }
        v_al += -T_final * ra * bgdot + va_px * T_final * ra;
        const float op = s_op[j];
        if (op * g <= MAX_ALPHA) {
          const float v_sigma = -op * g * v_al;
          const float3 c = s_con[j];
          const float dx = s_m2[j].x - px, dy = s_m2[j].y - py;
          vc0 = 0.5f * dx * dx * v_sigma;
          vc1 = dx * dy * v_sigma;
          vc2 = 0.5f * dy * dy * v_sigma;
          vm0 = (c.x * dx + c.y * dy) * v_sigma;
          vm1 = (c.y * dx + c.z * dy) * v_sigma;
          vop = g * v_al;
        }
      }
      if (!__any_sync(0xffffffffu, hit)) continue;
      vm0 = warp_sum(vm0), vm1 = warp_sum(vm1);
      vc0 = warp_sum(vc0), vc1 = warp_sum(vc1), vc2 = warp_sum(vc2);
      vop = warp_sum(vop);
      for (int ch = 0; ch < CH; ++ch) vc[ch] = warp_sum(vc[ch]);
      if ((threadIdx.x & 31) == 0) {
        const unsigned gi = s_id[j];
        atomicAdd(&v_m2[2 * gi], vm0), atomicAdd(&v_m2[2 * gi + 1], vm1);
        atomicAdd(&v_con[3 * gi], vc0), atomicAdd(&v_con[3 * gi + 1], vc1), atomicAdd(&v_con[3 * gi + 2], vc2);
        atomicAdd(&v_op[gi], vop);
        for (int ch = 0; ch < CH; ++ch) atomicAdd(&v_col[gi * CH + ch], vc[ch]);
      }
    }
  }
  if (threadIdx.x < CH) atomicAdd(&v_bg[threadIdx.x], s_bg[threadIdx.x]);
}
)";

KernelSource src(const std::string& code, unsigned block) {
  KernelSource ks;
  ks.code = code;
  ks.block = block;
  return ks;
}

}  // namespace

bool splat_has(OpKind op) {
  return op == OpKind::SplatProject || op == OpKind::SplatProjectGrad || op == OpKind::SplatRasterize ||
         op == OpKind::SplatRasterizeGrad;
}

bool splat_syncs(OpKind op) { return op == OpKind::SplatRasterize || op == OpKind::SplatRasterizeGrad; }

std::vector<std::pair<std::string, KernelSource>> splat_kernels(OpKind op, const Attrs& attrs,
                                                                const std::vector<ValueType>& in) {
  RLX_CHECK(splat_has(op), "[cuda] no splat kernels for ", op_name(op));
  for (auto& t : in)
    RLX_CHECK(t.dtype == DType::f32 || t.dtype == DType::i32, "[cuda] ", op_name(op), ": f32 only on cuda");
  const Node nd{op, {}, {}, attrs, ""};
  const int64_t n = static_dims(in[0].shape)[0];
  const int64_t width = attr_int(nd, "width"), height = attr_int(nd, "height");
  std::ostringstream d;
  d << kCommon << "#define NG " << n << "LL\n#define WIDTH " << width << "\n#define HEIGHT " << height << "\n"
    << "#define WIDTH_F " << fl(static_cast<double>(width)) << "\n#define HEIGHT_F " << fl(static_cast<double>(height))
    << "\n";
  std::vector<std::pair<std::string, KernelSource>> r;
  if (op == OpKind::SplatProject || op == OpKind::SplatProjectGrad) {
    d << "#define NEAR " << fl(attr_float(nd, "near")) << "\n#define FAR " << fl(attr_float(nd, "far")) << "\n#define EPS2D "
      << fl(attr_float(nd, "eps2d")) << "\n#define RADIUS_CLIP " << fl(attr_float(nd, "radius_clip")) << "\n"
      << kProject;
    if (op == OpKind::SplatProject)
      r.emplace_back("project", src(d.str() + kProjectFwd, 128));
    else
      r.emplace_back("project_grad", src(d.str() + kProjectGrad, 128));
    return r;
  }
  const int64_t tile = attr_int(nd, "tile"), channels = static_dims(in[2].shape)[1];
  RLX_CHECK(tile >= 2 && tile * tile <= 1024 && (tile * tile) % 32 == 0, "[cuda] ", op_name(op),
            ": tile must be a multiple of 32 threads and at most 32x32 on cuda (got ", tile, ")");
  RLX_CHECK(channels >= 1 && channels <= tile * tile, "[cuda] ", op_name(op), ": 1 to tile*tile channels on cuda (got ",
            channels, ")");
  const int64_t tiles_x = (width + tile - 1) / tile, tiles_y = (height + tile - 1) / tile;
  d << "#define TILE " << tile << "\n#define TILES_X " << tiles_x << "\n#define TILES_Y " << tiles_y << "\n#define CH "
    << channels << "\n";
  const std::string base = d.str();
  for (const char* t : {"u64", "u32"}) {
    std::string sc = std::string(kCommon) + "#define SCAN_T " + (t[1] == '6' ? "unsigned long long" : "unsigned") +
                     "\n" + kScanHelper;
    r.emplace_back(std::string("scan_") + t + ".a", src(sc + kScanA, 1024));
    r.emplace_back(std::string("scan_") + t + ".b", src(sc + kScanB, 1024));
    r.emplace_back(std::string("scan_") + t + ".c", src(sc + kScanC, 1024));
  }
  r.emplace_back("tile_count", src(base + kRect + kTileCount, 256));
  r.emplace_back("emit_keys", src(base + kRect + kEmit, 256));
  r.emplace_back("radix_hist", src(std::string(kCommon) + kRadixHist, 256));
  r.emplace_back("radix_scatter", src(std::string(kCommon) + kRadixScatter, 256));
  r.emplace_back("tile_ranges", src(std::string(kCommon) + kRanges, 256));
  const unsigned block = static_cast<unsigned>(tile * tile);
  if (op == OpKind::SplatRasterize)
    r.emplace_back("rasterize", src(base + kBatch + kRaster, block));
  else
    r.emplace_back("rasterize_grad", src(base + kBatch + kRasterGrad, block));
  return r;
}

}  // namespace rlx::cuda
