// What the cpu GEMM's two files share: gemm_avx2.cpp (the packed 6x16 path, gemm_f32's dispatch) and
// gemm_narrow.cpp (the N <= 12 path). Not a public surface: the backend's other files use gemm_avx2.h.
#pragma once
#include <cstdint>

#include "backends/cpu/gemm_avx2.h"
#include "backends/cpu/vmath.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define RLX_GEMM_X86 1
#endif

namespace rlx::cpu::gemm_detail {

// Below this, a GEMM runs on one thread (fork/join costs more than it saves).
constexpr double kParMinFlops = 2e6;

// [issue 6 biasgrad] colsum[j] = B[0][j] + B[1][j] + ... (rows in order) for j in [0, N), B [K, N].
void column_sums(const float* B, int64_t ldb, int64_t K, int64_t N, float* colsum);
// y[0, n) = act(y[0, n)) in place (Relu keeps NaN).
RLX_SIMD void apply_act(float* y, int64_t n, GemmAct act);

#if defined(RLX_GEMM_X86)
// [issue 6 cpugemm] The narrow path (gemm_narrow.cpp) takes op(B) with at most this many columns.
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
