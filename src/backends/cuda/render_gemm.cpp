// Our f16/bf16 tensor-core GEMM with fused epilogues (see render_gemm.h).
// One CUDA C body specialized by #defines: block tile BM x BN, K step BK, a STAGES-deep cp.async
// ring in dynamic shared memory (rows padded by 16 bytes: ldmatrix is conflict-free), warps
// WARPS_M x WARPS_N each owning a (BM/WARPS_M) x (BN/WARPS_N) tile of fp32 accumulators.
// M is a kernel argument (one compiled kernel serves every batch size); N and K are constants.
#include "backends/cuda/render_gemm.h"

#include <cstdlib>
#include <sstream>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/render_internal.h"
#include "codegen/renderer.h"

namespace rlx::cuda {

namespace {

const char* kGemmBody = R"(typedef unsigned short u16;
__device__ __forceinline__ float h2f(u16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16 f2h(float f) { u16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float bf2f(u16 h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ u16 f2bf(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (u16)(u >> 16);
}
#if BF16
#define LDF(x) bf2f(x)
#define STF(x) f2bf(x)
#define MMA_T "bf16"
#else
#define LDF(x) h2f(x)
#define STF(x) f2h(x)
#define MMA_T "f16"
#endif
#define WM (BM / WARPS_M)
#define WN (BN / WARPS_N)
#define MT (WM / 16)
#define NT (WN / 8)
#define KP (BK + 8)
#define NTHR (32 * WARPS_M * WARPS_N)
#define STAGE_ELEMS ((BM + BN) * KP)
__device__ __forceinline__ float rnd(float x) { return LDF(STF(x)); }
__device__ __forceinline__ unsigned smem_u32(const void* p) {
  unsigned a; asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p)); return a;
}
__device__ __forceinline__ void ldsm4(unsigned* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)));
}
__device__ __forceinline__ void mma16816(float* c, const unsigned* a, unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." MMA_T "." MMA_T ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void cp16(void* dst, const void* src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(smem_u32(dst)), "l"(src), "r"(ok ? 16 : 0));
}
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  unsigned r; asm("cvt.rn." MMA_T "x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r;
}
__device__ __forceinline__ float act(float x) {
#if EPI == 1
  return x != x ? x : (x > 0.0f ? x : 0.0f);
#elif EPI == 2
  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
#elif EPI == 3
  return x / (1.0f + expf(-x));
#else
  return x;
#endif
}
#if CLUSTER > 1
__device__ __forceinline__ void cluster_sync_all() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ float ld_rank(const float* p, unsigned rank) {
  unsigned r; float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(smem_u32(p)), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(r) : "memory");
  return v;
}
#endif
#if EPI == 4
// The LayerNorm epilogue's row sums (mean pass, then variance pass): part[i][h] is this lane's
// partial of row wm * WM + i * 16 + h * 8 + lane / 4, summed over the quad's lanes, then over the
// block's warps (red), then over the cluster's blocks (cs: this block's sums, which the others
// read). Thread tid < BM gets row tid's total.
__device__ __forceinline__ float ln_row_total(const float (&part)[MT][2], float (*red)[BM], float* cs, int tid, int lane,
                                              int wm, int wn) {
  #pragma unroll
  for (int i = 0; i < MT; ++i)
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
      float s = part[i][h];
      s += __shfl_xor_sync(0xffffffffu, s, 1);
      s += __shfl_xor_sync(0xffffffffu, s, 2);
      if ((lane & 3) == 0) red[wn][wm * WM + i * 16 + h * 8 + (lane >> 2)] = s;
    }
  __syncthreads();
  if (tid < BM) {
    float s = 0.0f;
    #pragma unroll
    for (int w = 0; w < WARPS_N; ++w) s += red[w][tid];
    cs[tid] = s;
  }
#if CLUSTER > 1
  cluster_sync_all();
  float t = 0.0f;
  if (tid < BM) {
    #pragma unroll
    for (int r = 0; r < CLUSTER; ++r) t += ld_rank(&cs[tid], r);
  }
  return t;
#else
  __syncthreads();
  return tid < BM ? cs[tid] : 0.0f;
#endif
}
#endif
extern "C" __global__ void __launch_bounds__(NTHR)
#if CLUSTER > 1
__cluster_dims__(CLUSTER, 1, 1)
#endif
rlx_kernel(const u16* __restrict__ A, const u16* __restrict__ W, const u16* __restrict__ bias,
           const u16* __restrict__ res, const u16* __restrict__ gam, const u16* __restrict__ bet,
           u16* __restrict__ C, int M) {
  extern __shared__ __align__(16) u16 smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const long long m0 = (long long)blockIdx.y * BM;
  const int n0 = blockIdx.x * BN;
  const long long z = blockIdx.z;
  A += z * SA; W += z * SB; C += z * SC;
#if HAS_BIAS
  bias += z * SBIAS;
#endif
  float acc[MT][NT][4];
  #pragma unroll
  for (int i = 0; i < MT; ++i)
    #pragma unroll
    for (int j = 0; j < NT; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;
  const int KT = (KK + BK - 1) / BK;
  auto load_tile = [&](int st, int k0) {
    u16* as = smem + st * STAGE_ELEMS; u16* bs = as + BM * KP;
    #pragma unroll
    for (int q = 0; q < (BM * (BK / 8) + NTHR - 1) / NTHR; ++q) {
      int e = tid + q * NTHR;
      if (e < BM * (BK / 8)) {
        int r = e / (BK / 8), c = (e % (BK / 8)) * 8;
        long long gr = m0 + r; bool ok = gr < M && k0 + c < KK;
        cp16(&as[r * KP + c], A + (ok ? gr * KK + k0 + c : 0), ok);
      }
    }
    #pragma unroll
    for (int q = 0; q < (BN * (BK / 8) + NTHR - 1) / NTHR; ++q) {
      int e = tid + q * NTHR;
      if (e < BN * (BK / 8)) {
        int r = e / (BK / 8), c = (e % (BK / 8)) * 8;
        int gn = n0 + r; bool ok = gn < NN && k0 + c < KK;
        cp16(&bs[r * KP + c], W + (ok ? (long long)gn * KK + k0 + c : 0), ok);
      }
    }
  };
  #pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) load_tile(s, s * BK);
    asm volatile("cp.async.commit_group;");
  }
  for (int kt = 0; kt < KT; ++kt) {
    asm volatile("cp.async.wait_group " WAIT_N ";");
    __syncthreads();
    {
      int nk = kt + STAGES - 1;
      if (nk < KT) load_tile(nk % STAGES, nk * BK);
      asm volatile("cp.async.commit_group;");
    }
    const u16* as = smem + (kt % STAGES) * STAGE_ELEMS;
    const u16* bs = as + BM * KP;
    #pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      unsigned af[MT][4];
      #pragma unroll
      for (int i = 0; i < MT; ++i) ldsm4(af[i], &as[(wm * WM + i * 16 + (lane & 15)) * KP + kk * 16 + (lane >> 4) * 8]);
      #pragma unroll
      for (int j = 0; j < NT / 2; ++j) {
        unsigned r[4];
        ldsm4(r, &bs[(wn * WN + j * 16 + (lane & 7) + ((lane >> 4) << 3)) * KP + kk * 16 + ((lane >> 3) & 1) * 8]);
        #pragma unroll
        for (int i = 0; i < MT; ++i) {
          mma16816(acc[i][2 * j], af[i], r[0], r[1]);
          mma16816(acc[i][2 * j + 1], af[i], r[2], r[3]);
        }
      }
    }
  }
  asm volatile("cp.async.wait_group 0;");
#if EPI != 4
  // The tile goes through shared memory (rows padded by 16 bytes) so that global stores are 16-byte
  // and row-contiguous.
  __syncthreads();  // every warp is done reading the pipeline's buffers
  #define CP (BN + 8)
  #pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int cl = wn * WN + j * 8 + (lane & 3) * 2;
    float b0 = 0.0f, b1 = 0.0f;
#if HAS_BIAS
    if (n0 + cl < NN) { b0 = LDF(bias[n0 + cl]); b1 = LDF(bias[n0 + cl + 1]); }
#endif
    #pragma unroll
    for (int i = 0; i < MT; ++i)
      #pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int rl = wm * WM + i * 16 + (lane >> 2) + h * 8;
        *reinterpret_cast<unsigned*>(&smem[rl * CP + cl]) = pack2(act(acc[i][j][2 * h] + b0), act(acc[i][j][2 * h + 1] + b1));
      }
  }
  __syncthreads();
  #pragma unroll
  for (int q = 0; q < (BM * (BN / 8) + NTHR - 1) / NTHR; ++q) {
    int e = tid + q * NTHR;
    if (e < BM * (BN / 8)) {
      int r = e / (BN / 8), c = (e % (BN / 8)) * 8;
      long long row = m0 + r;
      if (row < M && n0 + c < NN)
        *reinterpret_cast<uint4*>(C + row * NN + n0 + c) = *reinterpret_cast<const uint4*>(&smem[r * CP + c]);
    }
  }
#else
  // LayerNorm over the row (N = BN * CLUSTER): x = round(round(acc + bias) + res) as the separate
  // linear and add would have stored it; mean, then the mean of squared deviations (two passes,
  // as the norm kernel), each summed per row: quad lanes, warps of the block, blocks of the cluster.
  __shared__ float red[WARPS_N][BM];
  __shared__ float csum[BM], csq[BM], mstat[BM], rstat[BM];
  #pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int col = n0 + wn * WN + j * 8 + (lane & 3) * 2;
    float b0 = 0.0f, b1 = 0.0f;
#if HAS_BIAS
    b0 = LDF(bias[col]); b1 = LDF(bias[col + 1]);
#endif
    #pragma unroll
    for (int i = 0; i < MT; ++i)
      #pragma unroll
      for (int h = 0; h < 2; ++h) {
        long long row = m0 + wm * WM + i * 16 + (lane >> 2) + h * 8;
        float r0 = 0.0f, r1 = 0.0f;
        if (row < M) {
          unsigned rr = *reinterpret_cast<const unsigned*>(res + row * NN + col);
          r0 = LDF((u16)(rr & 0xffffu)); r1 = LDF((u16)(rr >> 16));
        }
        acc[i][j][2 * h] = rnd(rnd(acc[i][j][2 * h] + b0) + r0);
        acc[i][j][2 * h + 1] = rnd(rnd(acc[i][j][2 * h + 1] + b1) + r1);
      }
  }
  float part[MT][2];
  #pragma unroll
  for (int i = 0; i < MT; ++i)
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
      float s = 0.0f;
      #pragma unroll
      for (int j = 0; j < NT; ++j) s += acc[i][j][2 * h] + acc[i][j][2 * h + 1];
      part[i][h] = s;
    }
  float tot = ln_row_total(part, red, csum, tid, lane, wm, wn);
  if (tid < BM) mstat[tid] = tot / (float)NN;
  __syncthreads();
  #pragma unroll
  for (int i = 0; i < MT; ++i)
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float mu = mstat[wm * WM + i * 16 + h * 8 + (lane >> 2)];
      float s = 0.0f;
      #pragma unroll
      for (int j = 0; j < NT; ++j) {
        float d0 = acc[i][j][2 * h] - mu, d1 = acc[i][j][2 * h + 1] - mu;
        s += d0 * d0 + d1 * d1;
      }
      part[i][h] = s;
    }
  tot = ln_row_total(part, red, csq, tid, lane, wm, wn);
  if (tid < BM) rstat[tid] = 1.0f / sqrtf(tot / (float)NN + EPS);
#if CLUSTER > 1
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");  // done reading the others' csq
#endif
  __syncthreads();
  #pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int col = n0 + wn * WN + j * 8 + (lane & 3) * 2;
    const float g0 = LDF(gam[col]), g1 = LDF(gam[col + 1]);
    const float e0 = LDF(bet[col]), e1 = LDF(bet[col + 1]);
    #pragma unroll
    for (int i = 0; i < MT; ++i)
      #pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int rl = wm * WM + i * 16 + h * 8 + (lane >> 2);
        long long row = m0 + rl;
        const float mu = mstat[rl], rs = rstat[rl];
        if (row < M)
          *reinterpret_cast<unsigned*>(C + row * NN + col) =
              pack2((acc[i][j][2 * h] - mu) * rs * g0 + e0, (acc[i][j][2 * h + 1] - mu) * rs * g1 + e1);
      }
  }
#if CLUSTER > 1
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");  // no block leaves while others read its csq
#endif
#endif
}
)";

int epi_code(const std::string& e) {
  if (e == "none") return 0;
  if (e == "relu") return 1;
  if (e == "gelu") return 2;
  if (e == "silu") return 3;
  if (e == "layernorm") return 4;
  return -1;
}

using codegen::ceil_div;  // codegen/renderer.h

size_t smem_bytes(const OwnGemmConfig& c) {
  return static_cast<size_t>(c.stages) * static_cast<size_t>(c.bm + c.bn) * static_cast<size_t>(c.bk + 8) * 2;
}

}  // namespace

std::string OwnGemmConfig::name() const {
  std::ostringstream o;
  o << bm << "x" << bn << "x" << bk << " w" << warps_m << "x" << warps_n << " s" << stages;
  if (cluster > 1) o << " c" << cluster;
  return o.str();
}

bool own_gemm_supported(const GemmShape& s) {
  if (!env_on("RLX_CUDA_OWN_GEMM", true)) return false;
  if (s.dtype != DType::f16 && s.dtype != DType::bf16) return false;
  if (s.a_trans || !s.b_trans || s.K % 8 || s.N % 8 || s.K <= 0 || s.N <= 0 || s.M <= 0) return false;
  if (s.M > (int64_t{1} << 30) || s.N > (int64_t{1} << 20)) return false;
  if (s.epilogue == "layernorm" && (s.batch != 1 || !s.bias)) return false;
  // A batch must not broadcast W or C (the sibling layout has A shared: stride_a 0 is fine).
  if (s.batch > 1 && (s.stride_b != s.N * s.K || s.stride_c != s.M * s.N)) return false;
  return epi_code(s.epilogue) >= 0;
}

std::vector<OwnGemmConfig> own_gemm_configs(const GemmShape& s, int64_t sm_count) {
  std::vector<OwnGemmConfig> r;
  if (!own_gemm_supported(s)) return r;
  const int64_t enough = 4 * sm_count;  // blocks: about four waves of blocks saturate the GPU
  if (s.epilogue == "layernorm") {
    // {bm, warps_m, warps_n, bk, stages, preferred clusters...}
    struct Base { int bm, wm, wn, bk, st; std::vector<int> cl; };
    // Small M (latency-bound): deep pipelines (every K tile of a short K in flight at once) and
    // rows split over up to 8 blocks, so more multiprocessors stream the weight.
    const Base bases[] = {{128, 2, 4, 32, 4, {2, 4, 1, 8}}, {64, 2, 4, 32, 4, {2, 4, 1, 8}},
                          {64, 2, 2, 64, 4, {4, 2, 8, 1}},  {32, 2, 2, 64, 6, {4, 8, 2, 1}},
                          {32, 2, 1, 64, 8, {8, 4, 2, 1}}};
    for (const Base& b : bases) {
      for (int c : b.cl) {
        if (s.N % c) continue;
        int64_t bn = s.N / c;
        if (bn % (16 * b.wn) || bn / b.wn > 64) continue;
        OwnGemmConfig g{b.bm, static_cast<int>(bn), b.bk, b.wm, b.wn, b.st, c};
        if (smem_bytes(g) + (b.wn + 4) * b.bm * 4 > 200 * 1024) continue;
        r.push_back(g);
        break;
      }
      if (r.size() >= 2 && ceil_div(s.M, r.back().bm) * r.back().cluster >= enough) break;
    }
    return r;
  }
  const OwnGemmConfig all[] = {{128, 256, 32, 2, 4, 3, 1}, {128, 128, 32, 2, 4, 4, 1}, {64, 128, 32, 2, 2, 4, 1},
                               {64, 64, 64, 2, 2, 4, 1},   {32, 64, 64, 2, 2, 6, 1}};
  for (const OwnGemmConfig& c : all) {
    if (c.bn > 128 && s.N < 1024) continue;  // wide tiles only for wide outputs
    r.push_back(c);
    if (r.size() >= 2 && ceil_div(s.M, c.bm) * ceil_div(s.N, c.bn) * s.batch >= enough) break;
  }
  return r;
}

KernelSource render_own_gemm(const GemmShape& s, const OwnGemmConfig& c) {
  RLX_CHECK(own_gemm_supported(s), "[cuda] own GEMM: unsupported shape");
  RLX_CHECK(static_cast<size_t>(c.bm) * (c.bn + 8) * 2 <= smem_bytes(c), "[cuda] own GEMM: output tile exceeds the pipeline's shared memory");
  std::ostringstream o;
  o << "// rlx own GEMM " << c.name() << " " << s.epilogue << "\n"
    << "#define BM " << c.bm << "\n#define BN " << c.bn << "\n#define BK " << c.bk << "\n#define WARPS_M " << c.warps_m
    << "\n#define WARPS_N " << c.warps_n << "\n#define STAGES " << c.stages << "\n#define WAIT_N \"" << c.stages - 2
    << "\"\n#define CLUSTER " << c.cluster << "\n#define NN " << s.N << "\n#define KK " << s.K << "\n#define EPI "
    << epi_code(s.epilogue) << "\n#define HAS_BIAS " << (s.bias ? 1 : 0) << "\n#define BF16 "
    << (s.dtype == DType::bf16 ? 1 : 0) << "\n#define SA " << (s.batch > 1 ? s.stride_a : 0) << "LL\n#define SB "
    << (s.batch > 1 ? s.stride_b : 0) << "LL\n#define SC " << (s.batch > 1 ? s.stride_c : 0) << "LL\n#define SBIAS "
    << (s.batch > 1 ? s.bias_stride : 0) << "LL\n#define EPS ((float)(" << detail::num(s.eps) << "))\n"
    << kGemmBody;
  KernelSource ks;
  ks.code = o.str();
  ks.block = static_cast<unsigned>(32 * c.warps_m * c.warps_n);
  ks.grid = static_cast<unsigned>(c.cluster > 1 ? c.cluster : ceil_div(s.N, c.bn));
  ks.grid_y = static_cast<unsigned>(ceil_div(s.M, c.bm));
  ks.smem = static_cast<unsigned>(smem_bytes(c));
  ks.num_params = 8;
  return ks;
}

}  // namespace rlx::cuda
