// f32 GEMM for the cpu device's general contractions (matmul, batched dot_general, Linear without a
// packed weight): RLX's packed GEMM (gemm_f32) on AVX2+FMA hosts (see sgemm_on_rlx); else, or with
// RLX_GEMM=blas, OpenBLAS (single-threaded per call) split across our pool, or a portable loop when
// RLX was built without OpenBLAS. Row-major throughout.
#pragma once
#include <cstdint>

namespace rlx::cpu {

// C[M,N] = op(A)[M,K] · op(B)[K,N] (+ C when accumulate). op(X) = Xᵀ when trans_X; lda/ldb/ldc are
// the row strides of A, B and C as stored. `epilogue(row0, row1)` (may be null) runs on each
// finished block of rows [row0, row1) while it is hot in cache (bias, activation, residual).
using GemmEpilogue = void (*)(void* ctx, int64_t row0, int64_t row1, int64_t col0, int64_t col1);
void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
           int64_t ldb, float* C, int64_t ldc, bool accumulate = false, GemmEpilogue epi = nullptr,
           void* epi_ctx = nullptr);
// The same, run on the calling thread only (for kernels that parallelize at a higher level).
void sgemm_serial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                  const float* B, int64_t ldb, float* C, int64_t ldc, bool accumulate = false);
// "rlx" (the packed GEMM), "rlx+openblas" (OpenBLAS for few rows, see sgemm_on_rlx), "openblas" or
// "builtin".
const char* gemm_library();
// Whether OpenBLAS runs its own AVX2/AVX-512 kernels on this CPU (its core name), not an SSE fallback.
bool blas_tuned();
// Whether sgemm (serial: sgemm_serial) of M rows runs on RLX's packed GEMM: AVX2+FMA, not
// RLX_GEMM=blas, and OpenBLAS untuned for this CPU or M >= 256 (64 serial).
bool sgemm_on_rlx(int64_t M, bool serial);

}  // namespace rlx::cpu
