// Persistent launches (render_grid.h): one resident grid runs a whole schedule of
// small kernels as parts separated by grid barriers; f32 GEMM parts of our own, warp-per-output
// reductions, and every grid-stride kernel of the other renderers as a part.
#include "backends/cuda/render_grid.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/render_internal.h"

namespace rlx::cuda {

using namespace detail;

namespace {

constexpr int kTK = 64;  // K per shared-memory stage of a GEMM part

// Grid barrier over all blocks (all resident): thread 0 of each block reads the generation, arrives
// on the count (release), and the last arrival resets the count and bumps the generation; the
// others spin on the generation (volatile, through L2). The fences after make the other blocks'
// writes visible to the ordinary loads of the next part. A barrier that never opens (blocks not
// resident) traps instead of hanging.
const char* kGridSync = R"(__device__ __forceinline__ void grid_sync_(unsigned* bar) {
  __syncthreads();
  if (threadIdx.x == 0) {
    volatile unsigned* vb = bar;
    const unsigned gen = vb[1];
    __threadfence();
    if (atomicAdd(bar, 1u) == gridDim.x - 1) {
      atomicExch(bar, 0u);
      __threadfence();
      atomicAdd(bar + 1, 1u);
    } else {
      unsigned long long spins = 0;
      while (vb[1] == gen)
        if (++spins > (1ull << 24)) __trap();
    }
    __threadfence();
  }
  __syncthreads();
}
)";

std::string part_head(const std::string& name) {
  return "__device__ __forceinline__ void " + name +
         "(const int bid_, const int nblk_, unsigned long long* rsh_, const long long lo_, const long long hi_";
}

struct GemmTiling {
  int T = 16, S = 1;  // square tile, K splits
};
GemmTiling pick_tiling(const GemmShape& g, int64_t blocks) {
  GemmTiling best;
  double cost = 1e300;
  for (int t : {16, 32, 64})
    for (int sk : {1, 2, 4, 8, 16}) {
      if (sk > 1 && (g.K + kTK - 1) / kTK < sk) continue;
      double c = grid_gemm_cost(g, t, sk, blocks);
      if (c < cost * 0.98) cost = c, best = {t, sk};
    }
  return best;
}

// C[M,N] = op(A)·op(B) (+bias[N]) (relu), f32, FMA in k order per output. Square tiles of T over
// the grid; 256 threads as 16x16, each R x R outputs (rows ty + 16i, columns tx + 16j: conflict-free
// shared reads); K in stages of kTK through shared memory, the next stage prefetched into registers.
// Split-K (S > 1, few tiles and a long K): work item = (tile, K slice); each writes its partial tile
// to the workspace `ws_`, and the block that finishes a tile last (counter `cnt_`, re-armed to 0)
// sums the S partials in slice order (deterministic) and runs the epilogue.
std::string gemm_part(const GridPart& gp, const std::string& name, int64_t blocks, int64_t* smem_bytes,
                      int64_t* ws_floats, int64_t* tiles_out, int* splits) {
  const GemmShape& g = gp.g;
  const GemmTiling tl = pick_tiling(g, blocks);
  const int T = tl.T, S = tl.S, R = T / 16, LA = T * kTK / kGridThreads;
  const int64_t M = g.M, N = g.N, K = g.K, tn = (N + T - 1) / T, tiles = (M + T - 1) / T * tn;
  const int64_t KC = ((K + S - 1) / S + kTK - 1) / kTK * kTK;  // K per slice
  const int P = T + 1;  // padded row of a stage
  *smem_bytes = std::max<int64_t>(*smem_bytes, 2 * kTK * P * 4);
  *ws_floats = S > 1 ? tiles * S * T * T : 0;
  *tiles_out = tiles;
  *splits = S;
  std::ostringstream p;
  p << part_head(name) << ", float* ws_, unsigned* cnt_, const float* A, const float* B" << (g.bias ? ", const float* bias" : "")
    << ", float* C) {\n"
    << "  // " << gp.k->label() << ": " << M << "x" << N << "x" << K << (g.a_trans ? " A^T" : "") << (g.b_trans ? " B^T" : "")
    << ", tiles " << T << "x" << T << ", K split " << S << "\n"
    << "  float* As = reinterpret_cast<float*>(rsh_);\n  float* Bs = As + " << kTK * P << ";\n"
    << "  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;\n";
  if (S > 1) p << "  __shared__ int last_;\n";
  p << "  for (int t = bid_; t < " << tiles * S << "; t += nblk_) {\n"
    << "    const int tile = t / " << S << ", ks = t % " << S << ";\n"
    << "    const int m0 = (tile / " << tn << ") * " << T << ", n0 = (tile % " << tn << ") * " << T << ";\n"
    << "    const int kb = ks * " << KC << ", ke = kb + " << KC << " < " << K << " ? kb + " << KC << " : " << K << ";\n"
    << "    float acc[" << R << "][" << R << "];\n"
    << "    #pragma unroll\n    for (int i = 0; i < " << R << "; ++i)\n      #pragma unroll\n      for (int j = 0; j < " << R
    << "; ++j) acc[i][j] = 0.f;\n"
    << "    float ra[" << LA << "], rb[" << LA << "];\n";
  auto load = [&](const std::string& k0) {
    std::ostringstream l;
    l << "    #pragma unroll\n    for (int r = 0; r < " << LA << "; ++r) {\n"
      << "      const int idx = threadIdx.x + " << kGridThreads << " * r;\n";
    if (g.a_trans)  // A stored [K,M]: consecutive threads on consecutive m
      l << "      { const int mm = idx % " << T << ", kk = idx / " << T << "; const int gm = m0 + mm, gk = " << k0
        << " + kk;\n        ra[r] = (gm < " << M << " && gk < ke) ? A[(long long)gk * " << M << " + gm] : 0.f; }\n";
    else
      l << "      { const int kk = idx % " << kTK << ", mm = idx / " << kTK << "; const int gm = m0 + mm, gk = " << k0
        << " + kk;\n        ra[r] = (gm < " << M << " && gk < ke) ? A[(long long)gm * " << K << " + gk] : 0.f; }\n";
    if (g.b_trans)  // B stored [N,K]
      l << "      { const int kk = idx % " << kTK << ", nn = idx / " << kTK << "; const int gn = n0 + nn, gk = " << k0
        << " + kk;\n        rb[r] = (gn < " << N << " && gk < ke) ? B[(long long)gn * " << K << " + gk] : 0.f; }\n";
    else
      l << "      { const int nn = idx % " << T << ", kk = idx / " << T << "; const int gn = n0 + nn, gk = " << k0
        << " + kk;\n        rb[r] = (gn < " << N << " && gk < ke) ? B[(long long)gk * " << N << " + gn] : 0.f; }\n";
    l << "    }\n";
    return l.str();
  };
  p << load("kb");
  p << "    for (int k0 = kb; k0 < ke; k0 += " << kTK << ") {\n"
    << "      __syncthreads();\n"
    << "      #pragma unroll\n      for (int r = 0; r < " << LA << "; ++r) {\n"
    << "        const int idx = threadIdx.x + " << kGridThreads << " * r;\n";
  if (g.a_trans) p << "        As[(idx / " << T << ") * " << P << " + idx % " << T << "] = ra[r];\n";
  else p << "        As[(idx % " << kTK << ") * " << P << " + idx / " << kTK << "] = ra[r];\n";
  if (g.b_trans) p << "        Bs[(idx % " << kTK << ") * " << P << " + idx / " << kTK << "] = rb[r];\n";
  else p << "        Bs[(idx / " << T << ") * " << P << " + idx % " << T << "] = rb[r];\n";
  p << "      }\n      __syncthreads();\n"
    << "      if (k0 + " << kTK << " < ke) {\n" << load("k0 + " + std::to_string(kTK)) << "      }\n"
    << "      #pragma unroll 16\n      for (int kk = 0; kk < " << kTK << "; ++kk) {\n"
    << "        float a[" << R << "], b[" << R << "];\n"
    << "        #pragma unroll\n        for (int i = 0; i < " << R << "; ++i) a[i] = As[kk * " << P << " + ty + 16 * i];\n"
    << "        #pragma unroll\n        for (int j = 0; j < " << R << "; ++j) b[j] = Bs[kk * " << P << " + tx + 16 * j];\n"
    << "        #pragma unroll\n        for (int i = 0; i < " << R << "; ++i)\n"
    << "          #pragma unroll\n          for (int j = 0; j < " << R << "; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);\n"
    << "      }\n    }\n";
  std::ostringstream epi;  // v: the finished sum of output (m, n)
  epi << "        if (m < " << M << " && n < " << N << ") {\n";
  if (g.bias) epi << "          v = v + bias[n];\n";
  if (gp.relu) epi << "          v = fmaxr(v, 0.f);\n";
  epi << "          C[(long long)m * " << N << " + n] = v;\n        }\n";
  if (S == 1) {
    p << "    #pragma unroll\n    for (int i = 0; i < " << R << "; ++i)\n"
      << "      #pragma unroll\n      for (int j = 0; j < " << R << "; ++j) {\n"
      << "        const int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;\n"
      << "        float v = acc[i][j];\n" << epi.str() << "      }\n";
  } else {
    const int64_t TT = static_cast<int64_t>(T) * T;
    p << "    float* w = ws_ + ((long long)tile * " << S << " + ks) * " << TT << ";\n"
      << "    #pragma unroll\n    for (int i = 0; i < " << R << "; ++i)\n"
      << "      #pragma unroll\n      for (int j = 0; j < " << R << "; ++j) w[(ty + 16 * i) * " << T << " + tx + 16 * j] = acc[i][j];\n"
      << "    __threadfence();\n    __syncthreads();\n"
      << "    if (threadIdx.x == 0) last_ = atomicAdd(cnt_ + tile, 1u) == " << S - 1 << "u;\n"
      << "    __syncthreads();\n"
      << "    if (last_) {\n      __threadfence();\n"
      << "      const float* w0 = ws_ + (long long)tile * " << S * TT << ";\n"
      << "      #pragma unroll\n      for (int i = 0; i < " << R << "; ++i)\n"
      << "      #pragma unroll\n      for (int j = 0; j < " << R << "; ++j) {\n"
      << "        const int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j, e = (ty + 16 * i) * " << T << " + tx + 16 * j;\n"
      << "        float v = 0.f;\n"
      << "        for (int s = 0; s < " << S << "; ++s) v += __ldcg(w0 + s * " << TT << " + e);\n"
      << epi.str() << "      }\n"
      << "      if (threadIdx.x == 0) cnt_[tile] = 0u;\n    }\n    __syncthreads();\n";
  }
  p << "  }\n  __syncthreads();\n}\n";
  return p.str();
}

// A reduction: one warp per output, the lanes striding over the reduced elements, combined by
// shuffles (accumulator as the reference's: double for floats, long long for integers). Few
// outputs over many elements (a loss sum): one block per output, its warps' sums combined in order.
std::string reduce_part(const GridPart& gp, const std::string& name, int64_t blocks, int64_t* smem_bytes) {
  const ReduceCode rc = reduce_code(*gp.k, gp.in[0]);
  const int wpb = kGridThreads / 32;
  const int64_t n = std::max<int64_t>(rc.s.n, 1);
  const bool per_block = n < blocks * wpb && rc.s.m >= 4 * kGridThreads;
  std::ostringstream p;
  p << part_head(name) << ", const " << c_type(gp.in[0].dtype) << "* in0, " << c_type(gp.out[0].dtype) << "* out0) {\n"
    << "  // " << gp.k->label() << ": " << rc.s.n << " outputs of " << rc.s.m << (per_block ? ", a block each" : ", a warp each")
    << "\n  const int lane = threadIdx.x & 31;\n";
  if (per_block) {
    *smem_bytes = std::max<int64_t>(*smem_bytes, 8 * wpb);
    p << "  " << rc.acc << "* sh = reinterpret_cast<" << rc.acc << "*>(rsh_);\n"
      << "  for (long long i = bid_; i < " << n << "; i += nblk_) {\n";
  } else {
    p << "  for (long long i = (long long)bid_ * " << wpb << " + threadIdx.x / 32; i < " << n << "; i += (long long)nblk_ * "
      << wpb << ") {\n";
  }
  p << unravel(rc.s.kdims.empty() ? std::vector<int64_t>{1} : rc.s.kdims, "i", "long long");
  p << "    long long base = " << rc.base << ";\n    " << rc.acc << " a = " << rc.init << ";\n"
    << (per_block ? rc.loop("threadIdx.x", "j += " + std::to_string(kGridThreads)) : rc.loop("lane", "j += 32"))
    << "    for (int o = 16; o; o >>= 1) { " << rc.acc << " v = __shfl_xor_sync(0xffffffffu, a, o); " << rc.step << " }\n";
  const std::string st = store(gp.out[0].dtype, rc.d == Dm::F ? "(float)a" : "a");
  if (per_block)
    p << "    if (lane == 0) sh[threadIdx.x / 32] = a;\n    __syncthreads();\n"
      << "    if (threadIdx.x == 0) {\n      a = sh[0];\n      for (int w = 1; w < " << wpb << "; ++w) { " << rc.acc
      << " v = sh[w]; " << rc.step << " }\n      out0[i] = " << st << ";\n    }\n    __syncthreads();\n  }\n}\n";
  else
    p << "    if (lane == 0) out0[i] = " << st << ";\n  }\n}\n";
  return p.str();
}

}  // namespace

double grid_gemm_cost(const GemmShape& g, int tile, int splits, int64_t blocks) {
  const int64_t tiles = (g.M + tile - 1) / tile * ((g.N + tile - 1) / tile);
  const int64_t waves = (tiles * splits + blocks - 1) / std::max<int64_t>(blocks, 1);
  const double stages = static_cast<double>(((g.K + splits - 1) / splits + kTK - 1) / kTK);
  const double per_stage = 800.0 + (tile / 16) * (tile / 16) * kTK * 1.5;  // load latency + FMA/shared reads
  return static_cast<double>(waves) * stages * per_stage + (splits > 1 ? 1500.0 : 0.0);  // + the last block's sum
}

bool grid_part_ok(const LirKernel& k, const std::vector<ValueType>& in, const std::vector<ValueType>& out,
                  GridPart* part) {
  *part = GridPart{};
  part->k = &k, part->in = in, part->out = out;
  if (out.size() != 1 || k.out.size() != 1) return false;
  for (auto& t : in)
    if (t.dtype == DType::c64) return false;
  if (out[0].dtype == DType::c64) return false;
  if (k.kind == KernelKind::Library && (k.op == OpKind::Linear || k.op == OpKind::MatMul || k.op == OpKind::DotGeneral)) {
    if (k.attrs.count("cuda_siblings") || k.attrs.count("cuda_ln") || in.size() < 2) return false;
    std::string post;
    if (!plan_gemm(k, in, out[0], &part->g, &post)) return false;
    GemmShape& g = part->g;
    if (k.attrs.count("cuda_bias")) g.bias = true;
    part->relu = k.attrs.count("cuda_relu") > 0 || g.epilogue == "relu";
    if (post != "none" || (g.epilogue != "none" && g.epilogue != "relu") || g.batch != 1 || g.dtype != DType::f32) return false;
    if (in.size() != (g.bias ? 3u : 2u) || out[0].dtype != DType::f32) return false;
    for (auto& t : in)
      if (t.dtype != DType::f32) return false;
    if (g.M * g.N * g.K == 0) return false;
    part->gemm = true;
    return true;
  }
  if (k.kind == KernelKind::Library && is_reduce_op(k.op)) return in.size() == 1;
  return mergeable(k, in, out, false);
}

KernelSource render_grid(const std::vector<GridPart>& parts, int64_t blocks, bool timed) {
  std::ostringstream fns, call;
  std::vector<std::string> params;
  int np = 0;
  int64_t smem = 8;
  int stamps = 0, barriers = 0;
  for (auto& gp : parts) barriers += gp.barrier;
  int64_t scratch = 16 + (timed ? 8 * static_cast<int64_t>(barriers + 2) : 0);  // barrier words, phase clocks
  for (size_t i = 0; i < parts.size(); ++i) {
    const GridPart& gp = parts[i];
    const bool seg_start = gp.seg >= 0 && (i == 0 || parts[i - 1].seg != gp.seg);
    const bool seg_end = gp.seg >= 0 && (i + 1 == parts.size() || parts[i + 1].seg != gp.seg);
    // A row segment: row blocks of rpb rows over the grid (at most 256 output elements of a part per
    // block, and enough blocks to spread the rows).
    int64_t rpb = 0, inner = 0;
    if (gp.seg >= 0) {
      int64_t mx = 1;
      for (auto& q : parts)
        if (q.seg == gp.seg) mx = std::max<int64_t>(mx, numel(q.out[0].shape) / gp.rows);
      rpb = std::max<int64_t>(1, std::min<int64_t>(kGridThreads / mx, (gp.rows + blocks - 1) / blocks));
      inner = numel(gp.out[0].shape) / gp.rows;
    }
    const bool red = gp.k->kind == KernelKind::Library && is_reduce_op(gp.k->op);
    std::string name = "part" + std::to_string(i);
    std::string a;
    if (gp.gemm) {
      int64_t ws = 0, tiles = 0;
      int splits = 1;
      fns << gemm_part(gp, name, blocks, &smem, &ws, &tiles, &splits);
      if (splits > 1) {  // tile counters, then the partial tiles (16-byte aligned)
        int64_t cnt = (scratch + 15) / 16 * 16, w = (cnt + 4 * tiles + 15) / 16 * 16;
        scratch = w + 4 * ws;
        a = ", reinterpret_cast<float*>(scratch_ + " + std::to_string(w) + "), reinterpret_cast<unsigned*>(scratch_ + " +
            std::to_string(cnt) + ")";
      } else {
        a = ", (float*)0, (unsigned*)0";
      }
    } else if (red && gp.seg >= 0) {
      fns << block_reduce_part(*gp.k, gp.in[0], gp.out[0], name, kGridThreads, true, rpb);
      smem = std::max<int64_t>(smem, 8 * kGridThreads);
    } else if (red) {
      fns << reduce_part(gp, name, blocks, &smem);
    } else {
      KernelSource ks;
      if (gp.k->kind == KernelKind::Generated) ks = render_fused(gp.k->body, gp.out[0]);
      else RLX_CHECK(render_library(*gp.k, gp.in, gp.out, &ks), "[cuda] persistent: no kernel for ", gp.k->label());
      fns << as_part(ks.code, name, gp.seg >= 0 ? kGridThreads : 0, gp.seg >= 0, gp.out[0]);
    }
    for (size_t j = 0; j < gp.in.size(); ++j) {
      params.push_back("const " + c_type(gp.in[j].dtype) + "* p" + std::to_string(np));
      a += ", p" + std::to_string(np++);
    }
    params.push_back(c_type(gp.out[0].dtype) + "* p" + std::to_string(np));
    a += ", p" + std::to_string(np++);
    if (gp.barrier) {
      call << "  grid_sync_(bar_);\n";
      if (timed) call << "  if (bid_ == 0 && threadIdx.x == 0) stamp_[" << ++stamps << "] = clock64();\n";
    }
    if (seg_start)
      call << "  for (int rb_ = bid_; rb_ < " << (gp.rows + rpb - 1) / rpb << "; rb_ += nblk_) {  // rows of " << gp.rows
           << ", " << rpb << " per block\n"
           << "    const long long r0_ = (long long)rb_ * " << rpb << ", r1_ = r0_ + " << rpb << " < " << gp.rows << " ? r0_ + "
           << rpb << " : " << gp.rows << ";\n";
    if (gp.seg >= 0)
      call << "    " << name << "(0, 1, rsh_, r0_ * " << inner << ", r1_ * " << inner << a << ");  // " << gp.k->label()
           << "\n    __syncthreads();\n";
    else
      call << "  " << name << "(bid_, nblk_, rsh_, 0, 0" << a << ");  // " << gp.k->label() << "\n";
    if (seg_end) call << "  }\n";
  }
  params.push_back("unsigned char* scratch_");
  std::ostringstream c;
  // At most 128 registers a thread, so two blocks fit on a multiprocessor (RLX_CUDA_GRID_PER_SM=2).
  c << kPrelude << kGridSync << fns.str() << "extern \"C\" __global__ void __launch_bounds__(" << kGridThreads
    << ", 2) rlx_kernel(";
  for (size_t i = 0; i < params.size(); ++i) c << (i ? ", " : "") << params[i];
  c << ") {\n  __shared__ __align__(16) unsigned long long rsh_[" << (smem + 7) / 8 << "];\n"
    << "  unsigned* bar_ = reinterpret_cast<unsigned*>(scratch_);\n"
    << "  const int bid_ = blockIdx.x, nblk_ = gridDim.x;\n";
  if (timed)
    c << "  long long* stamp_ = reinterpret_cast<long long*>(scratch_ + 16);\n"
      << "  if (bid_ == 0 && threadIdx.x == 0) stamp_[0] = clock64();\n";
  c << call.str();
  if (timed) c << "  __syncthreads();\n  if (bid_ == 0 && threadIdx.x == 0) stamp_[" << stamps + 1 << "] = clock64();\n";
  c << "}\n";
  KernelSource ks;
  ks.code = c.str();
  ks.block = kGridThreads;
  ks.grid = static_cast<unsigned>(blocks);
  ks.num_params = np;
  ks.scratch_bytes = static_cast<size_t>(scratch);
  return ks;
}

}  // namespace rlx::cuda
