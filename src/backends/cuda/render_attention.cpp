// CUDA C rendering of attention: a tensor-core (mma.sync) flash-attention kernel for f16/bf16 and
// the fp32-math kernels (thread-per-row for head dims <= 64, warp-per-4-rows above).
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "backends/cuda/render_internal.h"
#include "runtime/env.h"

namespace rlx::cuda::detail {

namespace {

// Attention geometry, with the layout each tensor is stored in: [B,H,S,D] by default, [B,S,H,D]
// when the backend folded the neighbouring transpose into the kernel (attr cuda_<t>_bshd).
struct AttnGeom {
  int64_t B, H, S, D, Hkv, T, Dv;
  bool q_bshd, k_bshd, v_bshd, o_bshd;
  // Offset (in elements) of row (b, h, s) of a tensor with `heads` heads, `rows` rows, `dim` width.
  static std::string row(bool bshd, const std::string& b, const std::string& h, const std::string& s, int64_t heads,
                         int64_t rows, int64_t dim) {
    if (bshd) return "((" + b + " * " + std::to_string(rows) + " + " + s + ") * " + std::to_string(heads) + " + " + h +
                     ") * " + std::to_string(dim);
    return "((" + b + " * " + std::to_string(heads) + " + " + h + ") * " + std::to_string(rows) + " + " + s + ") * " +
           std::to_string(dim);
  }
};

AttnGeom attn_geom(const LirKernel& k, const std::vector<ValueType>& in) {
  auto flag = [&](const char* n) { return k.attrs.count(n) > 0; };
  AttnGeom g{};
  g.q_bshd = flag("cuda_q_bshd"), g.k_bshd = flag("cuda_k_bshd"), g.v_bshd = flag("cuda_v_bshd");
  g.o_bshd = flag("cuda_out_bshd");
  auto qd = static_dims(in[0].shape), kd = static_dims(in[1].shape), vd = static_dims(in[2].shape);
  g.B = qd[0], g.D = qd[3], g.H = g.q_bshd ? qd[2] : qd[1], g.S = g.q_bshd ? qd[1] : qd[2];
  g.Hkv = g.k_bshd ? kd[2] : kd[1], g.T = g.k_bshd ? kd[1] : kd[2], g.Dv = vd[3];
  return g;
}

// Mask/bias code shared by both attention kernels: sets `ok` for key `j` of query row `srow`
// and adds the bias (times `bias_scale`) to `sc`.
std::string attn_mask_code(const LirKernel& k, const std::vector<ValueType>& in, const AttnGeom& g,
                           const std::string& bias_scale) {
  Node nd{k.op, {}, {}, k.attrs, ""};
  const std::string& kind = attr_str(nd, "mask");
  bool causal = kind == "causal" || kind == "causal_padding", padding = kind == "padding" || kind == "causal_padding",
       bias = kind == "bias";
  RLX_CHECK(causal || padding || bias || kind == "none", "[cuda] attention: unknown mask kind '", kind, "'");
  std::ostringstream b;
  if (causal) b << "      ok = ok && j <= srow + (" << g.T - g.S << ");\n";
  if (padding) b << "      ok = ok && (j < " << g.T << " ? " << load(in[3].dtype, "in3[bb * " + std::to_string(g.T) + " + j]") << " != 0 : false);\n";
  if (bias) {
    auto bd = static_dims(in[3].shape);
    auto bst = strides(bd);
    std::vector<std::string> terms;
    const char* cv[] = {"bb", "hh", "(long long)srow", "(long long)j"};
    int64_t off = 4 - static_cast<int64_t>(bd.size());
    for (int64_t q = 0; q < 4; ++q) {
      int64_t bq = q - off;
      if (bq < 0 || bd[bq] == 1) continue;
      terms.push_back(std::string(cv[q]) + " * " + std::to_string(bst[bq]));
    }
    b << "      if (ok && srow < " << g.S << ") sc += " << bias_scale << " * "
      << load(in[3].dtype, "in3[" + join_terms(terms) + "]") << ";\n";
  }
  b << "      if (sc == -1.0f/0.0f) ok = false;\n";
  return b.str();
}

// Thread-per-query-row attention (head dims <= 64): each thread keeps its query row and output
// accumulators in registers and streams K/V through shared memory 64 keys at a time with an online
// (exp2-based) softmax over blocks of 8 keys; no cross-lane reductions on the critical path.
KernelSource attention_rows_kernel(const LirKernel& k, const std::vector<ValueType>& in, const ValueType& out,
                                   const AttnGeom& g, double scale, int64_t sm_count) {
  // RLX_CUDA_ATTN_VEC=1: float4 shared-memory reads (broadcast LDS.128, a quarter of the loads) and
  // 32-row blocks when 64-row ones leave most multiprocessors idle. Compile-checked, not yet run on
  // the H200, so it is opt-in; the default is the variant that passed conformance there.
  const bool tuned = env_is_1("RLX_CUDA_ATTN_VEC");
  const int kRows = tuned && g.B * g.H * ((g.S + 63) / 64) < 2 * sm_count ? 32 : 64, kChunk = 64;
  const bool vec = tuned && g.D % 4 == 0 && g.Dv % 4 == 0;
  DType t = in[0].dtype;
  const double log2e = 1.4426950408889634;
  std::ostringstream b;
  b << header(in, {out});
  b << "  const int D = " << g.D << ", DV = " << g.Dv << ", T = " << g.T << ", S = " << g.S << ";\n"
    << "  __shared__ __align__(16) float ks[" << kChunk << "][D];\n  __shared__ __align__(16) float vs[" << kChunk << "][DV];\n"
    << "  long long bh = blockIdx.y, bb = bh / " << g.H << ", hh = bh % " << g.H << ", hk = hh / " << g.H / g.Hkv << ";\n"
    << "  int srow = blockIdx.x * " << kRows << " + threadIdx.x;\n"
    << "  float q[D], acc[DV];\n"
    << "  long long qo = " << AttnGeom::row(g.q_bshd, "bb", "hh", "(long long)srow", g.H, g.S, g.D) << ";\n"
    << "  #pragma unroll\n  for (int d = 0; d < D; ++d) q[d] = srow < S ? " << load(t, "in0[qo + d]") << " * "
    << num(scale * log2e) << "f : 0.0f;\n"
    << "  #pragma unroll\n  for (int d = 0; d < DV; ++d) acc[d] = 0.0f;\n"
    << "  float m = -1.0f/0.0f, l = 0.0f;\n"
    << "  for (int t0 = 0; t0 < T; t0 += " << kChunk << ") {\n"
    << "    __syncthreads();\n"
    << "    for (int e = threadIdx.x; e < " << kChunk << " * D; e += blockDim.x) { int jj = e / D, dd = e % D;"
    << " ks[jj][dd] = t0 + jj < T ? " << load(t, "in1[" + AttnGeom::row(g.k_bshd, "bb", "hk", "(long long)(t0 + jj)", g.Hkv, g.T, g.D) + " + dd]")
    << " : 0.0f; }\n"
    << "    for (int e = threadIdx.x; e < " << kChunk << " * DV; e += blockDim.x) { int jj = e / DV, dd = e % DV;"
    << " vs[jj][dd] = t0 + jj < T ? " << load(t, "in2[" + AttnGeom::row(g.v_bshd, "bb", "hk", "(long long)(t0 + jj)", g.Hkv, g.T, g.Dv) + " + dd]")
    << " : 0.0f; }\n"
    << "    __syncthreads();\n"
    << "    for (int j0 = 0; j0 < " << kChunk << " && t0 + j0 < T; j0 += 8) {\n"
    << "      float s8[8];\n"
    << "      #pragma unroll\n      for (int u = 0; u < 8; ++u) {\n"
    << "        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;\n";
  if (vec)
    b << "        const float4* kr = reinterpret_cast<const float4*>(&ks[j0 + u][0]);\n"
      << "        #pragma unroll\n        for (int d4 = 0; d4 < D / 4; ++d4) { float4 kk = kr[d4]; a0 += q[4 * d4] * kk.x;"
      << " a1 += q[4 * d4 + 1] * kk.y; a2 += q[4 * d4 + 2] * kk.z; a3 += q[4 * d4 + 3] * kk.w; }\n";
  else
    b << "        #pragma unroll\n        for (int d = 0; d + 3 < D; d += 4) { a0 += q[d] * ks[j0 + u][d]; a1 += q[d + 1] * ks[j0 + u][d + 1];"
      << " a2 += q[d + 2] * ks[j0 + u][d + 2]; a3 += q[d + 3] * ks[j0 + u][d + 3]; }\n"
      << "        #pragma unroll\n        for (int d = D & ~3; d < D; ++d) a0 += q[d] * ks[j0 + u][d];\n";
  b << "        float sc = (a0 + a1) + (a2 + a3);\n"
    << "        int j = t0 + j0 + u;\n        bool ok = j < T;\n"
    << attn_mask_code(k, in, g, num(log2e) + "f")
    << "        s8[u] = ok ? sc : -1.0f/0.0f;\n      }\n"
    << "      float mx = s8[0];\n      #pragma unroll\n      for (int u = 1; u < 8; ++u) mx = fmaxf(mx, s8[u]);\n"
    << "      float mn = fmaxf(m, mx);\n      if (mn == -1.0f/0.0f) continue;\n"
    << "      float corr = exp2f(m - mn), ps = 0.0f;\n"
    << "      #pragma unroll\n      for (int u = 0; u < 8; ++u) { s8[u] = exp2f(s8[u] - mn); ps += s8[u]; }\n"
    << "      l = l * corr + ps;\n      m = mn;\n";
  if (vec)
    b << "      #pragma unroll\n      for (int d = 0; d < DV; ++d) acc[d] *= corr;\n"
      << "      #pragma unroll\n      for (int u = 0; u < 8; ++u) {\n"
      << "        const float4* vr = reinterpret_cast<const float4*>(&vs[j0 + u][0]);\n"
      << "        #pragma unroll\n        for (int d4 = 0; d4 < DV / 4; ++d4) { float4 vv = vr[d4]; acc[4 * d4] += s8[u] * vv.x;"
      << " acc[4 * d4 + 1] += s8[u] * vv.y; acc[4 * d4 + 2] += s8[u] * vv.z; acc[4 * d4 + 3] += s8[u] * vv.w; }\n      }\n";
  else
    b << "      #pragma unroll\n      for (int d = 0; d < DV; ++d) {\n"
      << "        float a = acc[d] * corr;\n"
      << "        #pragma unroll\n        for (int u = 0; u < 8; ++u) a += s8[u] * vs[j0 + u][d];\n"
      << "        acc[d] = a;\n      }\n";
  b << "    }\n  }\n"
    << "  if (srow >= S) return;\n"
    << "  float inv = l > 0.0f ? 1.0f / l : 0.0f;\n"
    << "  long long oo = " << AttnGeom::row(g.o_bshd, "bb", "hh", "(long long)srow", g.H, g.S, g.Dv) << ";\n"
    << "  #pragma unroll\n  for (int d = 0; d < DV; ++d) out0[oo + d] = " << store(out.dtype, "acc[d] * inv") << ";\n}\n";
  KernelSource ks;
  ks.code = b.str();
  ks.block = kRows;
  ks.grid = static_cast<unsigned>((g.S + kRows - 1) / kRows);
  ks.grid_y = static_cast<unsigned>(g.B * g.H);
  ks.num_params = static_cast<int>(in.size()) + 1;
  return ks;
}

// Tensor-core flash attention for f16/bf16 (head dims multiples of 16 up to 128): each warp owns 16
// query rows; S = Q K^T and O += P V run on mma.sync m16n8k16 with fp32 accumulators; K/V tiles of
// 64 keys go through shared memory (rows padded by 16 bytes; ldmatrix, V through ldmatrix.trans);
// online softmax in exp2 form on the accumulator fragments; P is rounded to the input dtype as the
// A operand of the second product (as FlashAttention does). RLX_CUDA_ATTN_MMA=0 turns it off.
bool attention_mma_ok(const std::vector<ValueType>& in, const AttnGeom& g) {
  if (!env_on("RLX_CUDA_ATTN_MMA", true)) return false;
  DType t = in[0].dtype;
  if (t != DType::f16 && t != DType::bf16) return false;
  if (in[1].dtype != t || in[2].dtype != t) return false;
  return g.D % 16 == 0 && g.Dv % 16 == 0 && g.D <= 128 && g.Dv <= 128 && g.D >= 16 && g.Dv >= 16;
}

KernelSource attention_mma_kernel(const LirKernel& k, const std::vector<ValueType>& in, const ValueType& out,
                                  const AttnGeom& g, double scale, int64_t sm_count) {
  Node nd{k.op, {}, {}, k.attrs, ""};
  const std::string ty = in[0].dtype == DType::f16 ? "f16" : "bf16";
  const int kBc = 64;
  // 8 warps (128 query rows share each K/V tile) when that still gives several blocks per
  // multiprocessor, 4 for mid-size work, 2 when the work is small (latency: more, smaller blocks).
  int64_t tiles4 = g.B * g.H * ((g.S + 63) / 64), tiles8 = g.B * g.H * ((g.S + 127) / 128);
  const int nw = tiles8 >= 4 * sm_count ? 8 : (tiles4 >= sm_count ? 4 : 2), rows = 16 * nw;
  // K/V tiles double-buffered through cp.async (global -> shared without registers), dynamic smem.
  const int64_t stage_elems = kBc * (g.D + 8) + kBc * (g.Dv + 8);
  bool causal = attr_str(nd, "mask") == "causal" || attr_str(nd, "mask") == "causal_padding";
  const double log2e = 1.4426950408889634;
  auto qrow = [&](const std::string& s) { return AttnGeom::row(g.q_bshd, "bb", "hh", "(long long)(" + s + ")", g.H, g.S, g.D); };
  std::ostringstream b;
  b << kPrelude
    << "__device__ __forceinline__ unsigned smem_u32(const void* p) {\n"
    << "  unsigned a; asm(\"{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }\" : \"=r\"(a) : \"l\"(p)); return a;\n}\n"
    << "__device__ __forceinline__ void ldsm4(unsigned* r, const void* p) {\n"
    << "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\" : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(smem_u32(p)));\n}\n"
    << "__device__ __forceinline__ void ldsm4t(unsigned* r, const void* p) {\n"
    << "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\" : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(smem_u32(p)));\n}\n"
    << "__device__ __forceinline__ void mma16816(float* c, const unsigned* a, unsigned b0, unsigned b1) {\n"
    << "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32." << ty << "." << ty << ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"\n"
    << "    : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3]) : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b0), \"r\"(b1));\n}\n"
    << "__device__ __forceinline__ void cp16(void* dst, const void* src, bool ok) {\n"
    << "  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\" :: \"r\"(smem_u32(dst)), \"l\"(src), \"r\"(ok ? 16 : 0));\n}\n"
    << "__device__ __forceinline__ unsigned pack2(float lo, float hi) {\n"
    << "  unsigned r; asm(\"cvt.rn." << ty << "x2.f32 %0, %1, %2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo)); return r;\n}\n";
  // header() without its prelude (already emitted)
  std::string hdr = header(in, {out});
  b << hdr.substr(std::string(kPrelude).size());
  b << "  const int D = " << g.D << ", DV = " << g.Dv << ", T = " << g.T << ", S = " << g.S << ";\n"
    << "  const int BC = " << kBc << ", KP = D + 8, VP = DV + 8;\n"
    << "  extern __shared__ __align__(16) unsigned short smem[];\n"
    << "  const int STAGE = " << stage_elems << ";\n"
    << "  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;\n"
    << "  long long bh = blockIdx.y, bb = bh / " << g.H << ", hh = bh % " << g.H << ", hk = hh / " << g.H / g.Hkv << ";\n"
    << "  const int r0 = blockIdx.x * " << rows << " + warp * 16 + (lane >> 2), r1 = r0 + 8;\n"
    << "  const unsigned short* qp = reinterpret_cast<const unsigned short*>(in0);\n"
    << "  const unsigned short* kp = reinterpret_cast<const unsigned short*>(in1);\n"
    << "  const unsigned short* vp = reinterpret_cast<const unsigned short*>(in2);\n"
    << "  const long long q0 = " << qrow("r0") << ", q1 = " << qrow("r1") << ";\n"
    << "  unsigned qa[D / 16][4];\n"
    << "  #pragma unroll\n  for (int kk = 0; kk < D / 16; ++kk) {\n"
    << "    int c = kk * 16 + (lane & 3) * 2;\n"
    << "    qa[kk][0] = r0 < S ? *reinterpret_cast<const unsigned*>(qp + q0 + c) : 0u;\n"
    << "    qa[kk][1] = r1 < S ? *reinterpret_cast<const unsigned*>(qp + q1 + c) : 0u;\n"
    << "    qa[kk][2] = r0 < S ? *reinterpret_cast<const unsigned*>(qp + q0 + c + 8) : 0u;\n"
    << "    qa[kk][3] = r1 < S ? *reinterpret_cast<const unsigned*>(qp + q1 + c + 8) : 0u;\n  }\n"
    << "  float o[DV / 8][4];\n"
    << "  #pragma unroll\n  for (int n = 0; n < DV / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;\n"
    << "  float m0 = -1.0f/0.0f, m1 = -1.0f/0.0f, l0 = 0.0f, l1 = 0.0f;\n"
    << "  const float sl = " << num(scale * log2e) << "f;\n";
  if (causal)
    b << "  int tend = min(T, (int)(blockIdx.x * " << rows << " + " << rows << " + (" << g.T - g.S << ")));\n";
  else
    b << "  const int tend = T;\n";
  b << "  auto load_tile = [&](int st, int t0) {\n"
    << "    unsigned short* ks = smem + st * STAGE; unsigned short* vs = ks + BC * KP;\n"
    << "    for (int e = threadIdx.x; e < BC * (D / 8); e += blockDim.x) {\n"
    << "      int jj = e / (D / 8), c = (e % (D / 8)) * 8; bool ok = t0 + jj < T;\n"
    << "      cp16(&ks[jj * KP + c], kp + (ok ? " << AttnGeom::row(g.k_bshd, "bb", "hk", "(long long)(t0 + jj)", g.Hkv, g.T, g.D)
    << " + c : 0), ok);\n    }\n"
    << "    for (int e = threadIdx.x; e < BC * (DV / 8); e += blockDim.x) {\n"
    << "      int jj = e / (DV / 8), c = (e % (DV / 8)) * 8; bool ok = t0 + jj < T;\n"
    << "      cp16(&vs[jj * VP + c], vp + (ok ? " << AttnGeom::row(g.v_bshd, "bb", "hk", "(long long)(t0 + jj)", g.Hkv, g.T, g.Dv)
    << " + c : 0), ok);\n    }\n"
    << "  };\n"
    << "  if (tend > 0) load_tile(0, 0);\n"
    << "  asm volatile(\"cp.async.commit_group;\");\n"
    << "  for (int t0 = 0, it = 0; t0 < tend; t0 += BC, ++it) {\n"
    << "    if (t0 + BC < tend) load_tile((it + 1) & 1, t0 + BC);\n"
    << "    asm volatile(\"cp.async.commit_group;\");\n"
    << "    asm volatile(\"cp.async.wait_group 1;\");\n"
    << "    __syncthreads();\n"
    << "    const unsigned short* ks = smem + (it & 1) * STAGE; const unsigned short* vs = ks + BC * KP;\n"
    << "    float s[BC / 8][4];\n"
    << "    #pragma unroll\n    for (int n = 0; n < BC / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;\n"
    << "    #pragma unroll\n    for (int kk = 0; kk < D / 16; ++kk) {\n"
    << "      #pragma unroll\n      for (int np = 0; np < BC / 16; ++np) {\n"
    << "        unsigned r[4];\n"
    << "        ldsm4(r, &ks[(np * 16 + (lane & 7) + ((lane >> 4) << 3)) * KP + kk * 16 + ((lane >> 3) & 1) * 8]);\n"
    << "        mma16816(s[2 * np], qa[kk], r[0], r[1]);\n"
    << "        mma16816(s[2 * np + 1], qa[kk], r[2], r[3]);\n      }\n    }\n"
    << "    float mx0 = -1.0f/0.0f, mx1 = -1.0f/0.0f;\n"
    << "    #pragma unroll\n    for (int n = 0; n < BC / 8; ++n) {\n"
    << "      #pragma unroll\n      for (int e4 = 0; e4 < 4; ++e4) {\n"
    << "        int srow = e4 < 2 ? r0 : r1;\n"
    << "        int j = t0 + n * 8 + (lane & 3) * 2 + (e4 & 1);\n"
    << "        float sc = s[n][e4] * sl;\n"
    << "        bool ok = j < T;\n"
    << attn_mask_code(k, in, g, num(log2e) + "f")
    << "        sc = ok ? sc : -1.0f/0.0f;\n"
    << "        s[n][e4] = sc;\n"
    << "        if (e4 < 2) mx0 = fmaxf(mx0, sc); else mx1 = fmaxf(mx1, sc);\n      }\n    }\n"
    << "    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1)); mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));\n"
    << "    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1)); mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));\n"
    << "    float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);\n"
    << "    float mu0 = mn0 == -1.0f/0.0f ? 0.0f : mn0, mu1 = mn1 == -1.0f/0.0f ? 0.0f : mn1;\n"
    << "    float c0 = exp2f(m0 - mu0), c1 = exp2f(m1 - mu1);\n"
    << "    m0 = mn0; m1 = mn1;\n"
    << "    float ps0 = 0.0f, ps1 = 0.0f;\n"
    << "    unsigned pa[BC / 16][4];\n"
    << "    #pragma unroll\n    for (int n = 0; n < BC / 8; ++n) {\n"
    << "      float p0 = exp2f(s[n][0] - mu0), p1 = exp2f(s[n][1] - mu0), p2 = exp2f(s[n][2] - mu1), p3 = exp2f(s[n][3] - mu1);\n"
    << "      ps0 += p0 + p1; ps1 += p2 + p3;\n"
    << "      pa[n >> 1][(n & 1) * 2] = pack2(p0, p1);\n"
    << "      pa[n >> 1][(n & 1) * 2 + 1] = pack2(p2, p3);\n    }\n"
    << "    l0 = l0 * c0 + ps0; l1 = l1 * c1 + ps1;\n"
    << "    #pragma unroll\n    for (int n = 0; n < DV / 8; ++n) { o[n][0] *= c0; o[n][1] *= c0; o[n][2] *= c1; o[n][3] *= c1; }\n"
    << "    #pragma unroll\n    for (int kk = 0; kk < BC / 16; ++kk) {\n"
    << "      #pragma unroll\n      for (int dp = 0; dp < DV / 16; ++dp) {\n"
    << "        unsigned r[4];\n"
    << "        ldsm4t(r, &vs[(kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * VP + dp * 16 + (lane >> 4) * 8]);\n"
    << "        mma16816(o[2 * dp], pa[kk], r[0], r[1]);\n"
    << "        mma16816(o[2 * dp + 1], pa[kk], r[2], r[3]);\n      }\n    }\n"
    << "    __syncthreads();\n"
    << "  }\n"
    << "  l0 += __shfl_xor_sync(0xffffffffu, l0, 1); l0 += __shfl_xor_sync(0xffffffffu, l0, 2);\n"
    << "  l1 += __shfl_xor_sync(0xffffffffu, l1, 1); l1 += __shfl_xor_sync(0xffffffffu, l1, 2);\n"
    << "  float i0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, i1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;\n"
    << "  unsigned* op = reinterpret_cast<unsigned*>(out0);\n"
    << "  const long long o0 = " << AttnGeom::row(g.o_bshd, "bb", "hh", "(long long)r0", g.H, g.S, g.Dv) << ", o1 = "
    << AttnGeom::row(g.o_bshd, "bb", "hh", "(long long)r1", g.H, g.S, g.Dv) << ";\n"
    << "  #pragma unroll\n  for (int n = 0; n < DV / 8; ++n) {\n"
    << "    int c = n * 8 + (lane & 3) * 2;\n"
    << "    if (r0 < S) op[(o0 + c) >> 1] = pack2(o[n][0] * i0, o[n][1] * i0);\n"
    << "    if (r1 < S) op[(o1 + c) >> 1] = pack2(o[n][2] * i1, o[n][3] * i1);\n  }\n}\n";
  KernelSource ks;
  ks.code = b.str();
  ks.block = 32 * nw;
  ks.smem = static_cast<unsigned>(2 * stage_elems * 2);
  ks.grid = static_cast<unsigned>((g.S + rows - 1) / rows);
  ks.grid_y = static_cast<unsigned>(g.B * g.H);
  ks.num_params = static_cast<int>(in.size()) + 1;
  return ks;
}

}  // namespace

// Flash-style attention for wide heads: K/V stream through shared memory 32 keys at a time; each
// warp owns four query rows (one key per lane) and keeps an online softmax in registers.
KernelSource attention_kernel(const LirKernel& k, const std::vector<ValueType>& in, const ValueType& out,
                              int64_t sm_count) {
  Node nd{k.op, {}, {}, k.attrs, ""};
  AttnGeom g = attn_geom(k, in);
  int64_t S = g.S, D = g.D, T = g.T, Dv = g.Dv;
  RLX_CHECK(Dv <= 256 && D <= 256, "[cuda] attention: head dim above 256 is not supported");
  double scale = attr_float(nd, "scale");
  if (scale == 0) scale = 1.0 / std::sqrt(static_cast<double>(D));
  if (attention_mma_ok(in, g) && in.size() >= 3 && out.dtype == in[0].dtype) return attention_mma_kernel(k, in, out, g, scale, sm_count);
  if (D <= 64 && Dv <= 64 && !env_is_1("RLX_CUDA_ATTN_WARP")) return attention_rows_kernel(k, in, out, g, scale, sm_count);
  const int kWarps = 8, kRows = 4, kRowsPerBlock = kWarps * kRows;
  int64_t dv_slots = (Dv + 31) / 32;
  DType t = in[0].dtype;
  std::ostringstream b;
  b << header(in, {out});
  b << "  const int D = " << D << ", DV = " << Dv << ", T = " << T << ", S = " << S << ", DVS = " << dv_slots << ";\n"
    << "  __shared__ float qs[" << kRowsPerBlock << "][D];\n  __shared__ float ks[32][D + 1];\n  __shared__ float vs[32][DV + 1];\n"
    << "  int warp = threadIdx.x / 32, lane = threadIdx.x & 31;\n"
    << "  long long bh = blockIdx.y; long long bb = bh / " << g.H << ", hh = bh % " << g.H << ", hk = hh / " << g.H / g.Hkv << ";\n"
    << "  int s0 = blockIdx.x * " << kRowsPerBlock << ";\n"
    << "  for (int e = threadIdx.x; e < " << kRowsPerBlock << " * D; e += blockDim.x) { int rr = e / D, dd = e % D;"
    << " qs[rr][dd] = s0 + rr < S ? " << load(t, "in0[" + AttnGeom::row(g.q_bshd, "bb", "hh", "(long long)(s0 + rr)", g.H, g.S, g.D) + " + dd]") << " : 0.0f; }\n"
    << "  float m[" << kRows << "], l[" << kRows << "], acc[" << kRows << "][DVS];\n"
    << "  #pragma unroll\n  for (int r = 0; r < " << kRows << "; ++r) { m[r] = -1.0f/0.0f; l[r] = 0.0f;"
    << " for (int q = 0; q < DVS; ++q) acc[r][q] = 0.0f; }\n"
    << "  for (int t0 = 0; t0 < T; t0 += 32) {\n"
    << "    __syncthreads();\n"
    << "    for (int e = threadIdx.x; e < 32 * D; e += blockDim.x) { int jj = e / D, dd = e % D;"
    << " ks[jj][dd] = t0 + jj < T ? " << load(t, "in1[" + AttnGeom::row(g.k_bshd, "bb", "hk", "(long long)(t0 + jj)", g.Hkv, g.T, g.D) + " + dd]") << " : 0.0f; }\n"
    << "    for (int e = threadIdx.x; e < 32 * DV; e += blockDim.x) { int jj = e / DV, dd = e % DV;"
    << " vs[jj][dd] = t0 + jj < T ? " << load(t, "in2[" + AttnGeom::row(g.v_bshd, "bb", "hk", "(long long)(t0 + jj)", g.Hkv, g.T, g.Dv) + " + dd]") << " : 0.0f; }\n"
    << "    __syncthreads();\n"
    << "    int j = t0 + lane;\n"
    << "    #pragma unroll\n    for (int r = 0; r < " << kRows << "; ++r) {\n"
    << "      int srow = s0 + warp * " << kRows << " + r;\n"
    << "      bool ok = j < T;\n"
    << "      float sc = 0.0f;\n      #pragma unroll 8\n      for (int dd = 0; dd < D; ++dd) sc += qs[warp * " << kRows
    << " + r][dd] * ks[lane][dd];\n      sc *= " << num(scale) << "f;\n"
    << attn_mask_code(k, in, g, "1.0f")
    << "      float mc = warp_max(ok ? sc : -1.0f/0.0f);\n"
    << "      float mn = fmaxf(m[r], mc);\n"
    << "      if (mn == -1.0f/0.0f) continue;\n"
    << "      float p = ok ? __expf(sc - mn) : 0.0f;\n"
    << "      float corr = __expf(m[r] - mn);\n"
    << "      l[r] = l[r] * corr + warp_sum(p);\n      m[r] = mn;\n"
    << "      #pragma unroll\n      for (int q = 0; q < DVS; ++q) acc[r][q] *= corr;\n"
    << "      #pragma unroll 8\n      for (int jj = 0; jj < 32; ++jj) {\n"
    << "        float pj = __shfl_sync(0xffffffffu, p, jj);\n"
    << "        #pragma unroll\n        for (int q = 0; q < DVS; ++q) { int dd = lane + 32 * q; if (dd < DV) acc[r][q] += pj * vs[jj][dd]; }\n"
    << "      }\n    }\n  }\n"
    << "  #pragma unroll\n  for (int r = 0; r < " << kRows << "; ++r) {\n"
    << "    int srow = s0 + warp * " << kRows << " + r;\n    if (srow >= S) continue;\n"
    << "    float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;\n"
    << "    long long oo = " << AttnGeom::row(g.o_bshd, "bb", "hh", "(long long)srow", g.H, g.S, g.Dv) << ";\n"
    << "    for (int q = 0; q < DVS; ++q) { int dd = lane + 32 * q; if (dd < DV) out0[oo + dd] = "
    << store(out.dtype, "acc[r][q] * inv") << "; }\n  }\n}\n";
  KernelSource ks;
  ks.code = b.str();
  ks.block = 32 * kWarps;
  ks.grid = static_cast<unsigned>((S + kRowsPerBlock - 1) / kRowsPerBlock);
  ks.grid_y = static_cast<unsigned>(g.B * g.H);
  ks.num_params = static_cast<int>(in.size()) + 1;
  return ks;
}


}  // namespace rlx::cuda::detail
