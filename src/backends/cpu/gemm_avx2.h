// The cpu device's own f32 GEMM: a packed-B AVX2+FMA 6x16 micro-kernel (register tile of 12 ymm
// accumulators) with the epilogue (bias, residual add, activation) applied to each finished tile
// while it is in registers/L1. B (the weight) is packed once into 16-column panels; A is read in
// place (row-major, any row stride) so strided views (a head inside a fused QKV buffer) need no
// copies. Rows are split over the cpu thread pool. See README.md for why this beats OpenBLAS and
// oneDNN on MiniLM's shapes here.
#pragma once
#include <cstdint>

namespace rlx::cpu {

enum class GemmAct : uint8_t { None, Relu, Gelu, GeluTanh, Silu };

struct GemmEpi {
  const float* bias = nullptr;      // [N], added to every row
  const float* residual = nullptr;  // [M,N] with row stride ldr, added after the bias
  int64_t ldr = 0;
  GemmAct act = GemmAct::None;      // applied last
  // Called once a block of whole rows [r0, r1) of C is final (absolute rows: row_base is added),
  // while it is still in L2: a fused LayerNorm runs here. Only when every column is computed by the
  // same thread (the row-split path); otherwise gemm_packed calls it once for all rows at the end.
  void (*rows_done)(void* ctx, int64_t r0, int64_t r1) = nullptr;
  void* ctx = nullptr;
  int64_t row_base = 0;
};

constexpr int64_t kGemmNr = 16;  // packed panel width (columns)

// True when this CPU has AVX2 and FMA (the micro-kernel's requirement); RLX_GEMM=blas forces false.
bool fast_gemm_available();
// Floats needed for op(B)[K,N] packed: ceil(N/16) panels of K x 16.
int64_t packed_b_size(int64_t K, int64_t N);
// Packs op(B)[K,N] into panels: trans_b means B is stored [N,K] (a Linear weight), else [K,N].
void pack_b(bool trans_b, const float* B, int64_t ldb, int64_t K, int64_t N, float* dst);
// C[M,N] (row stride ldc) = A[M,K] (row stride lda) · Bp, then the epilogue (may be null).
// `accumulate` adds to C instead of overwriting. Serial: runs on the calling thread.
void gemm_packed_serial(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* Bp, float* C,
                        int64_t ldc, const GemmEpi* epi, bool accumulate = false);
// The same, split over the pool (rows when there are enough, else 16-column panels).
void gemm_packed(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* Bp, float* C,
                 int64_t ldc, const GemmEpi* epi);

}  // namespace rlx::cpu
