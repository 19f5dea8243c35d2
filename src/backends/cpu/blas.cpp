// sgemm: RLX's own packed GEMM (gemm_f32, gemm_avx2.h) or OpenBLAS, told to use one thread, with
// M (or N when M is small) split across our pool so the cpu device has a single thread pool.
// Debian's OpenBLAS picks its kernels by CPU model and falls back to SSE kernels on models it does
// not know (e.g. Intel family 6 model 207 runs "Prescott"): there every GEMM runs on ours. Where it
// has its AVX2/AVX-512 kernels it stays for fewer than 256 rows (64 on one thread): packing an
// unpacked B per call costs ours up to 2x there (bench/gemm_shapes.cpp "bmm", docs/cpu.md).
// RLX_GEMM=blas (or no AVX2/FMA) runs everything on OpenBLAS.
#include "backends/cpu/blas.h"

#include <algorithm>
#include <cctype>
#include <mutex>
#include <string>

#include "backends/cpu/gemm_avx2.h"
#include "backends/cpu/parallel.h"

#if defined(RLX_HAVE_OPENBLAS)
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename(void);
#endif

namespace rlx::cpu {

namespace {

#if !defined(RLX_HAVE_OPENBLAS)
// Portable fallback: i-k-j with a row accumulator (vectorizes); correct, not fast.
void gemm_loop(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
               int64_t ldb, float* C, int64_t ldc, bool acc) {
  for (int64_t i = 0; i < M; ++i) {
    float* c = C + i * ldc;
    if (!acc) std::fill(c, c + N, 0.f);
    for (int64_t k = 0; k < K; ++k) {
      float a = ta ? A[k * lda + i] : A[i * lda + k];
      if (!tb) {
        const float* b = B + k * ldb;
        for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
      } else {
        for (int64_t j = 0; j < N; ++j) c[j] += a * B[j * ldb + k];
      }
    }
  }
}
#endif

void gemm_block(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                int64_t ldb, float* C, int64_t ldc, bool acc) {
  if (M <= 0 || N <= 0) return;
  if (K == 0) {
    if (!acc)
      for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, 0.f);
    return;
  }
#if defined(RLX_HAVE_OPENBLAS)
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(M),
              static_cast<int>(N), static_cast<int>(K), 1.f, A, static_cast<int>(lda), B, static_cast<int>(ldb),
              acc ? 1.f : 0.f, C, static_cast<int>(ldc));
#else
  gemm_loop(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, acc);
#endif
}

}  // namespace

const char* gemm_library() {
  if (fast_gemm_available()) return blas_tuned() ? "rlx+openblas" : "rlx";
#if defined(RLX_HAVE_OPENBLAS)
  return "openblas";
#else
  return "builtin";
#endif
}

bool blas_tuned() {
#if defined(RLX_HAVE_OPENBLAS)
  static const bool tuned = [] {
    std::string core = openblas_get_corename() ? openblas_get_corename() : "";
    for (char& ch : core) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    for (const char* k : {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"})
      if (core == k) return true;
    return false;
  }();
  return tuned;
#else
  return false;
#endif
}

bool sgemm_on_rlx(int64_t M, bool serial) {
  return fast_gemm_available() && (!blas_tuned() || M >= (serial ? 64 : 256));
}

void sgemm_serial(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                  int64_t ldb, float* C, int64_t ldc, bool acc) {
  if (sgemm_on_rlx(M, true)) return gemm_f32(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, acc ? 1.f : 0.f, false);
  gemm_block(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, acc);
}

void sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
           int64_t ldb, float* C, int64_t ldc, bool acc, GemmEpilogue epi, void* ctx) {
  if (sgemm_on_rlx(M, num_threads() == 1)) {
    gemm_f32(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, acc ? 1.f : 0.f, true);
    if (epi && M > 0 && N > 0) epi(ctx, 0, M, 0, N);
    return;
  }
  int nt = num_threads();
  double flops = 2.0 * M * N * K;
  auto a_rows = [&](int64_t r) { return ta ? A + r : A + r * lda; };
  auto b_cols = [&](int64_t c) { return tb ? B + c * ldb : B + c; };
  if (nt == 1 || flops < 1e7) {  // below ~100 us on one core, waking a thread does not pay
    gemm_block(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, acc);
    if (epi) epi(ctx, 0, M, 0, N);
    return;
  }
  if (M >= 16 * nt) {  // split rows: each thread owns whole rows, so the epilogue sees full rows
    int64_t grain = std::max<int64_t>(16, (M + 4 * nt - 1) / (4 * nt));
    parallel_for(M, grain, [&](int64_t r0, int64_t r1) {
      gemm_block(ta, tb, r1 - r0, N, K, a_rows(r0), lda, B, ldb, C + r0 * ldc, ldc, acc);
      if (epi) epi(ctx, r0, r1, 0, N);
    });
  } else {  // few rows: split columns in multiples of 16
    int64_t grain = std::max<int64_t>(16, (N / nt + 15) / 16 * 16);
    parallel_for(N, grain, [&](int64_t c0, int64_t c1) {
      gemm_block(ta, tb, M, c1 - c0, K, A, lda, b_cols(c0), ldb, C + c0, ldc, acc);
      if (epi) epi(ctx, 0, M, c0, c1);
    });
  }
}

}  // namespace rlx::cpu
