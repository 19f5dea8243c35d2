// The cpu device's own f32 GEMM: a packed-B AVX2+FMA 6x16 micro-kernel (register tile of 12 ymm
// accumulators) with the epilogue (bias, residual add, activation) applied to each finished tile
// while it is in registers/L1. B (the weight) is packed once into 16-column panels; A may be any
// row-major view (any row stride: a head inside a fused QKV buffer); when many columns reuse it, it is
// copied block by block into contiguous 6-row micro-panels in per-thread scratch, else read in place.
// Work is split over the cpu thread pool. On AVX-512 hosts the same loop nest runs 12x32 AVX-512 tiles
// (gemm_avx512.cpp) on the same packed panels; the family follows cpu_isa() (isa.h).
// gemm_f32 is the general entry (both operands packed per call, transposes for free). See README.md.
#pragma once
#include <cstdint>

#include "backends/cpu/isa.h"

namespace rlx::cpu {

enum class GemmAct : uint8_t { None, Relu, Gelu, GeluTanh, Silu };  // Relu keeps NaN (max(x, 0))

struct GemmEpi {
  const float* bias = nullptr;      // [N], added to every row
  const float* residual = nullptr;  // [M,N] with row stride ldr, added after the bias
  int64_t ldr = 0;
  GemmAct act = GemmAct::None;      // applied after bias and residual
  // ReLU's backward: C = mask > 0 ? C : 0 (mask [M,N], row stride ldm), applied
  // last, on the tile in registers (a NaN in C is kept where mask > 0; a NaN mask gives 0).
  const float* mask = nullptr;
  int64_t ldm = 0;
  // Called once a block of whole rows [r0, r1) of C is final (absolute rows: row_base is added),
  // while it is still in L2: a fused LayerNorm runs here. Only when every column is computed by the
  // same thread (the row-split path); otherwise gemm_packed calls it once for all rows at the end.
  void (*rows_done)(void* ctx, int64_t r0, int64_t r1) = nullptr;
  void* ctx = nullptr;
  int64_t row_base = 0;
  // gemm_f32 only, op(B) not transposed (B stored [K,N]): colsum[j] = sum over k of
  // B[k][j] (unscaled by alpha), rows added in order (B[0][j] + B[1][j] + ...: the bits of the reduce_sum
  // kernel's column fold). Taken while B is packed, so the bias gradient costs no extra pass over dH.
  float* colsum = nullptr;
};

constexpr int64_t kGemmNr = 16;  // packed panel width (columns)

// True when this CPU has AVX2 and FMA (the micro-kernel's requirement); RLX_GEMM=blas forces false.
bool fast_gemm_available();
// Floats needed for op(B)[K,N] packed: ceil(N/16) panels of K x 16.
int64_t packed_b_size(int64_t K, int64_t N);
// Packs op(B)[K,N] into panels: trans_b means B is stored [N,K] (a Linear weight), else [K,N].
void pack_b(bool trans_b, const float* B, int64_t ldb, int64_t K, int64_t N, float* dst);
// C[M,N] (row stride ldc) = A[M,K] (row stride lda) · Bp, then the epilogue (may be null).
// `accumulate` adds to C instead of overwriting. Serial: runs on the calling thread. With trans_a, A
// is stored [K,M] (row stride lda), e.g. an im2col buffer of a convolution with few output pixels.
void gemm_packed_serial(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* Bp, float* C,
                        int64_t ldc, const GemmEpi* epi, bool accumulate = false, bool trans_a = false);
// The same, split over the pool (rows when there are enough, else 16-column panels).
void gemm_packed(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* Bp, float* C,
                 int64_t ldc, const GemmEpi* epi);

// General f32 GEMM for any shape, the one entry for f32 contractions whose B is not packed ahead
// (training's dot_generals, a Linear with a non-constant weight):
// C[M,N] = alpha·op(A)[M,K]·op(B)[K,N] + beta·C (alpha scales B while it is packed; the SGD update
// W - lr·Xᵀ·dH is alpha = -lr with epi->residual = W),
// then the optional epilogue (same contract as gemm_packed). Row-major; op(A) is A stored [M,K] (row
// stride lda), or with trans_a A stored [K,M]; op(B) is B stored [K,N] (ldb), or with trans_b B stored
// [N,K]. beta 0 overwrites C (C need not be initialised), 1 accumulates, other values scale C first.
// B is packed per call (and A, when enough columns reuse it) into per-thread scratch (grown once,
// then reused), so a transposed operand costs only its packing. parallel=false stays on the calling thread (for use
// inside a parallel_for); otherwise the work is split over the pool when it is big enough.
void gemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
              const float* B, int64_t ldb, float* C, int64_t ldc, float beta = 0.f, bool parallel = true,
              const GemmEpi* epi = nullptr, float alpha = 1.f);

// gemm_f32 and gemm_packed with the kernel family of an explicit level instead of cpu_isa()'s, so tests
// and benchmarks compare the portable, AVX2 and AVX-512 tiles in one process (cpu_isa() is fixed per
// process). A level above the host's throws. gemm_packed_with's `parallel` = false stays on the caller.
void gemm_f32_with(CpuIsa isa, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A,
                   int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, float beta = 0.f,
                   bool parallel = true, const GemmEpi* epi = nullptr, float alpha = 1.f);
void gemm_packed_with(CpuIsa isa, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* Bp,
                      float* C, int64_t ldc, const GemmEpi* epi, bool parallel = true);

}  // namespace rlx::cpu
