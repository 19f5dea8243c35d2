// Our tensor-core GEMM for f16/bf16 (mma.sync m16n8k16, ldmatrix, cp.async
// multi-stage pipeline) with fused epilogues cuBLASLt cannot do exactly:
//   C[M,N] = epi(A[M,K] · W[N,K]ᵀ + bias[N])   (the Linear layout; batched with strides)
//   epi: none | relu | gelu (erf form) | silu | layernorm (the row plus a residual, rounded as the
//   separate add would store it, normalized over the whole row of N with gamma/beta; the row is
//   split across a thread-block cluster whose blocks exchange row sums through distributed shared
//   memory, in a fixed order, so the result is deterministic).
// GemmPlan (gemm.cpp) offers these kernels as autotuning candidates beside cuBLASLt's.
#pragma once
#include <string>
#include <vector>

#include "backends/cuda/gemm.h"
#include "backends/cuda/render.h"

namespace rlx::cuda {

struct OwnGemmConfig {
  int bm = 64, bn = 64, bk = 32, warps_m = 2, warps_n = 2, stages = 3, cluster = 1;  // cluster > 1: layernorm
  std::string name() const;
};

// Whether our kernel computes this GEMM (f16/bf16, A [M,K] and W [N,K] row-major, K and N multiples
// of 8, an epilogue it knows). RLX_CUDA_OWN_GEMM=0 turns our kernels off (cuBLASLt only).
bool own_gemm_supported(const GemmShape& s);
// The tile configurations worth timing for this shape (large tiles first; smaller ones only while
// the larger leave the GPU short of blocks). Empty when none fits (layernorm: N must split evenly).
std::vector<OwnGemmConfig> own_gemm_configs(const GemmShape& s, int64_t sm_count = 132);
// Kernel parameters: (const T* A, const T* W, const T* bias, const T* res, const T* gamma,
// const T* beta, T* C, int M); unused pointers may be 0. grid/grid_y/block/smem are set for s.M;
// the batch is the third grid dimension (KernelSource has none: grid_z = s.batch).
KernelSource render_own_gemm(const GemmShape& s, const OwnGemmConfig& c);

}  // namespace rlx::cuda
