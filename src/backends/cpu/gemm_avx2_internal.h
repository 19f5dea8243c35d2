// What the cpu GEMM's files share: gemm_avx2.cpp (the loop nest, the 6x16 AVX2 and portable tiles,
// gemm_f32's dispatch), gemm_avx512.cpp (the AVX-512 tiles) and gemm_narrow.cpp (the N <= 12 path).
// Not a public surface: the backend's other files use gemm_avx2.h.
#pragma once
#include <cstdint>

#include "backends/cpu/gemm_avx2.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/vmath.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define RLX_GEMM_X86 1
#endif

namespace rlx::cpu::gemm_detail {

// Below this, a GEMM runs on one thread (fork/join costs more than it saves).
constexpr double kParMinFlops = 2e6;

// colsum[j] = B[0][j] + B[1][j] + ... (rows in order) for j in [0, N), B [K, N].
void column_sums(const float* B, int64_t ldb, int64_t K, int64_t N, float* colsum);
// y[0, n) = act(y[0, n)) in place (Relu keeps NaN).
RLX_SIMD void apply_act(float* y, int64_t n, GemmAct act);

// A micro-kernel: C[mr, nr] (row stride ldc) = (C if acc) + A[mr, kc] · B[kc, 16 per panel], then the
// epilogue `epi` (null: none) at column `col` of the GEMM; res and msk point at the tile's residual and
// mask (or null). A element (r, k) is A[k * lda + r] in the k-major variant (a packed micro-panel:
// lda = mr), else A[r * lda + k]. B is one packed panel (16 floats per k); `Ukernel2` takes two
// adjacent ones (32 columns), the second at B + bstride.
using Ukernel = void (*)(int64_t kc, const float* A, int64_t lda, const float* B, float* C, int64_t ldc, int nr,
                         bool acc, const GemmEpi* epi, int64_t col, const float* res, int64_t ldr, const float* msk);
using Ukernel2 = void (*)(int64_t kc, const float* A, int64_t lda, const float* B, int64_t bstride, float* C,
                          int64_t ldc, int nr, bool acc, const GemmEpi* epi, int64_t col, const float* res,
                          int64_t ldr, const float* msk);
constexpr int kMaxMr = 16;

// One kernel family and the blocking the loop nest (gemm_avx2.cpp) runs it with: the portable tiles,
// the AVX2 6x16 ones, or the AVX-512 ones (gemm_avx512.cpp).
struct GemmKernels {
  CpuIsa isa = CpuIsa::Generic;
  int mr = 0;               // rows of a full tile = height of a packed A micro-panel
  int64_t kc = 0, mc = 0;   // K block and rows per packed A block (mc a multiple of mr)
  Ukernel k1[2][kMaxMr + 1] = {};   // [k-major A][rows]: 16 columns
  Ukernel2 k2[2][kMaxMr + 1] = {};  // 32 columns (two panels), or all null
  // Copies mr full rows x kc of a row-major A into a k-major micro-panel (null: a scalar loop).
  void (*pack_a_rows)(const float* A, int64_t lda, int64_t kc, float* d) = nullptr;
  bool avx2 = false;  // the AVX2 helpers for packing B (8x8 transposes, column sums) may run
};
// The family of a level (Generic: portable; Avx2; Avx512 where the host has it); built once.
const GemmKernels& gemm_kernels(CpuIsa isa);

#if defined(RLX_GEMM_X86)
// Fills `t` with the AVX-512 tiles and their blocking (gemm_avx512.cpp).
void fill_avx512_kernels(GemmKernels& t);

// The narrow path (gemm_narrow.cpp) takes op(B) with at most this many columns.
constexpr int64_t kNarrowN = 12;
// False when RLX_GEMM_NARROW=0 (N <= 12 then runs on the 6x16 path too, for A/B timing).
bool narrow_enabled();
// The narrow path of gemm_f32 (AVX2 only; N <= kNarrowN, K > 0): gemm_f32's arguments, acc = beta != 0
// (C already scaled by beta), bbuf = per-thread scratch of at least packed_b_size(K, N) floats.
void gemm_narrow(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float* C, int64_t ldc, bool acc, bool parallel, const GemmEpi* epi,
                 float alpha, float* bbuf);
#endif

}  // namespace rlx::cpu::gemm_detail
