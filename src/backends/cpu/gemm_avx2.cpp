// Packed-B f32 GEMM with a 6x16 AVX2+FMA micro-kernel (gemm_avx2.h). Loop nest per thread:
//   rows in blocks of kMc (the A block stays in L2) > K in blocks of <= kKc > 16-column panels (the
//   kc x 16 B micro-panel stays in L1) > 6-row micro tiles (12 ymm accumulators).
// The epilogue runs on the last K block of each tile, before the tile leaves registers.
// CPUs without AVX2/FMA run the same loop nest with a portable micro-kernel.
#include "backends/cpu/gemm_avx2.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/cpu/parallel.h"
#include "backends/cpu/vmath.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define RLX_GEMM_X86 1
#endif

namespace rlx::cpu {

namespace {

constexpr int64_t kMr = 6, kNr = kGemmNr;
constexpr int64_t kKc = 384;  // K block: a 384 x 16 B micro-panel is 24 KiB (L1 is 32 KiB)
constexpr int64_t kMc = 72;   // rows per A block: 72 x 384 floats = 108 KiB (L2)

RLX_SIMD void apply_act(float* y, int64_t n, GemmAct act) {
  switch (act) {
    case GemmAct::None: break;
    case GemmAct::Relu:
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] > 0.f ? y[i] : 0.f;
      break;
    case GemmAct::Gelu:
      for (int64_t i = 0; i < n; ++i) y[i] = vm::gelu(y[i]);
      break;
    case GemmAct::GeluTanh:
      for (int64_t i = 0; i < n; ++i) y[i] = vm::gelu_tanh(y[i]);
      break;
    case GemmAct::Silu:
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] * vm::logistic(y[i]);
      break;
  }
}

// Finishes a tile held in tmp[MR][16]: C (+= when acc) tmp + bias + residual, activation. Used by
// the portable kernel and for partial tiles (nr < 16).
template <int MR>
void store_tile(const float (*tmp)[kNr], float* C, int64_t ldc, int nr, bool acc, const GemmEpi* epi, int64_t col,
                const float* res, int64_t ldr) {
  for (int r = 0; r < MR; ++r) {
    float* c = C + r * ldc;
    for (int j = 0; j < nr; ++j) {
      float v = tmp[r][j] + (acc ? c[j] : 0.f);
      if (epi && epi->bias) v += epi->bias[col + j];
      if (res) v += res[r * ldr + j];
      c[j] = v;
    }
    if (epi && epi->act != GemmAct::None) apply_act(c, nr, epi->act);
  }
}

template <int MR>
void ukernel_portable(int64_t kc, const float* A, int64_t lda, const float* B, float* C, int64_t ldc, int nr, bool acc,
                      const GemmEpi* epi, int64_t col, const float* res, int64_t ldr) {
  float t[MR][kNr] = {};
  for (int64_t k = 0; k < kc; ++k)
    for (int r = 0; r < MR; ++r) {
      float a = A[r * lda + k];
      for (int j = 0; j < kNr; ++j) t[r][j] += a * B[k * kNr + j];
    }
  store_tile<MR>(t, C, ldc, nr, acc, epi, col, res, ldr);
}

#if defined(RLX_GEMM_X86)
// exp and erf-GELU on 8 lanes, the same formulas as vm::exp / vm::erf (vmath.h), so the GELU
// epilogue runs on the tile in registers.
__attribute__((target("avx2,fma"))) inline __m256 exp8(__m256 x) {
  const __m256 in = x;
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.33654f)), _mm256_set1_ps(88.72283f));
  __m256 n = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), _mm256_set1_ps(1.f));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(126)), 23);
  __m256 res = _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), _mm256_set1_ps(2.f));
  res = _mm256_blendv_ps(res, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(in, _mm256_set1_ps(88.72283f), _CMP_GT_OQ));
  return _mm256_blendv_ps(res, _mm256_setzero_ps(), _mm256_cmp_ps(in, _mm256_set1_ps(-103.97208f), _CMP_LT_OQ));
}

__attribute__((target("avx2,fma"))) inline __m256 gelu8(__m256 v) {
  const __m256 x = _mm256_mul_ps(v, _mm256_set1_ps(0.70710678118654752f));  // erf argument
  const __m256 sign = _mm256_and_ps(x, _mm256_set1_ps(-0.f));
  const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.f), x);
  const __m256 z2 = _mm256_mul_ps(x, x);
  __m256 s = _mm256_set1_ps(-0.0008548327023f);
  s = _mm256_fmadd_ps(s, z2, _mm256_set1_ps(0.005223977625f));
  s = _mm256_fmadd_ps(s, z2, _mm256_set1_ps(-0.02686617064f));
  s = _mm256_fmadd_ps(s, z2, _mm256_set1_ps(0.1128379167f));
  s = _mm256_fmadd_ps(s, z2, _mm256_set1_ps(-0.3761263890f));
  s = _mm256_fmadd_ps(s, z2, _mm256_set1_ps(1.128379167f));
  s = _mm256_mul_ps(s, x);
  const __m256 t = _mm256_div_ps(_mm256_set1_ps(1.f), _mm256_fmadd_ps(_mm256_set1_ps(0.5f), a, _mm256_set1_ps(1.f)));
  __m256 y = _mm256_set1_ps(0.17087277f);
  for (float c : {-0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f, -0.18628806f, 0.09678418f, 0.37409196f,
                  1.00002368f})
    y = _mm256_fmadd_ps(y, t, _mm256_set1_ps(c));
  y = _mm256_fmadd_ps(y, t, _mm256_set1_ps(-1.26551223f));
  y = _mm256_fnmadd_ps(a, a, y);
  const __m256 erfc = _mm256_mul_ps(t, exp8(y));
  const __m256 big = _mm256_or_ps(_mm256_sub_ps(_mm256_set1_ps(1.f), erfc), sign);
  const __m256 erf = _mm256_blendv_ps(big, s, _mm256_cmp_ps(a, _mm256_set1_ps(0.5f), _CMP_LT_OQ));
  return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v), _mm256_add_ps(_mm256_set1_ps(1.f), erf));
}

// Accumulators are named variables (not arrays) so GCC keeps all 12 in ymm registers.
#define RLX_ROW(r)                                                   \
  if constexpr (MR > r) {                                            \
    __m256 av = _mm256_broadcast_ss(A + r * lda + k);                \
    c##r##0 = _mm256_fmadd_ps(av, b0, c##r##0);                      \
    c##r##1 = _mm256_fmadd_ps(av, b1, c##r##1);                      \
  }
template <int MR>
__attribute__((target("avx2,fma"))) void ukernel_avx2(int64_t kc, const float* A, int64_t lda, const float* B,
                                                      float* C, int64_t ldc, int nr, bool acc, const GemmEpi* epi,
                                                      int64_t col, const float* res, int64_t ldr) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t k = 0; k < kc; ++k) {
    __m256 b0 = _mm256_loadu_ps(B + k * kNr), b1 = _mm256_loadu_ps(B + k * kNr + 8);
    RLX_ROW(0) RLX_ROW(1) RLX_ROW(2) RLX_ROW(3) RLX_ROW(4) RLX_ROW(5)
  }
  __m256 c0[6] = {c00, c10, c20, c30, c40, c50}, c1[6] = {c01, c11, c21, c31, c41, c51};
  if (nr < kNr) {
    alignas(32) float t[MR][kNr];
    for (int r = 0; r < MR; ++r) {
      _mm256_store_ps(t[r], c0[r]);
      _mm256_store_ps(t[r] + 8, c1[r]);
    }
    return store_tile<MR>(t, C, ldc, nr, acc, epi, col, res, ldr);
  }
  const float* bias = epi && epi->bias ? epi->bias + col : nullptr;
  const bool gelu = epi && epi->act == GemmAct::Gelu;
  __m256 bb0 = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
  __m256 bb1 = bias ? _mm256_loadu_ps(bias + 8) : _mm256_setzero_ps();
  for (int r = 0; r < MR; ++r) {
    float* c = C + r * ldc;
    __m256 v0 = c0[r], v1 = c1[r];
    if (acc) {
      v0 = _mm256_add_ps(v0, _mm256_loadu_ps(c));
      v1 = _mm256_add_ps(v1, _mm256_loadu_ps(c + 8));
    }
    if (bias) {
      v0 = _mm256_add_ps(v0, bb0);
      v1 = _mm256_add_ps(v1, bb1);
    }
    if (res) {
      v0 = _mm256_add_ps(v0, _mm256_loadu_ps(res + r * ldr));
      v1 = _mm256_add_ps(v1, _mm256_loadu_ps(res + r * ldr + 8));
    }
    if (gelu) {
      v0 = gelu8(v0);
      v1 = gelu8(v1);
    }
    _mm256_storeu_ps(c, v0);
    _mm256_storeu_ps(c + 8, v1);
  }
  if (epi && epi->act != GemmAct::None && !gelu)
    for (int r = 0; r < MR; ++r) apply_act(C + r * ldc, kNr, epi->act);
}
#undef RLX_ROW
#endif

using Ukernel = void (*)(int64_t, const float*, int64_t, const float*, float*, int64_t, int, bool, const GemmEpi*,
                         int64_t, const float*, int64_t);

struct Kernels {
  Ukernel k[kMr + 1] = {};
};

Kernels pick_kernels() {
  Kernels t;
#if defined(RLX_GEMM_X86)
  if (fast_gemm_available()) {
    t.k[1] = ukernel_avx2<1>;
    t.k[2] = ukernel_avx2<2>;
    t.k[3] = ukernel_avx2<3>;
    t.k[4] = ukernel_avx2<4>;
    t.k[5] = ukernel_avx2<5>;
    t.k[6] = ukernel_avx2<6>;
    return t;
  }
#endif
  t.k[1] = ukernel_portable<1>;
  t.k[2] = ukernel_portable<2>;
  t.k[3] = ukernel_portable<3>;
  t.k[4] = ukernel_portable<4>;
  t.k[5] = ukernel_portable<5>;
  t.k[6] = ukernel_portable<6>;
  return t;
}

const Kernels& kernels() {
  static const Kernels k = pick_kernels();
  return k;
}

}  // namespace

bool fast_gemm_available() {
  static const bool ok = [] {
    const char* e = std::getenv("RLX_GEMM");
    if (e && std::string(e) == "blas") return false;
#if defined(RLX_GEMM_X86)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
  }();
  return ok;
}

int64_t packed_b_size(int64_t K, int64_t N) { return (N + kNr - 1) / kNr * kNr * K; }

void pack_b(bool trans_b, const float* B, int64_t ldb, int64_t K, int64_t N, float* dst) {
  for (int64_t j0 = 0; j0 < N; j0 += kNr) {
    int64_t nr = std::min(kNr, N - j0);
    float* d = dst + j0 * K;  // panel j0/16 starts at (j0/16) * K * 16 floats
    if (trans_b) {
      if (nr < kNr)
        for (int64_t k = 0; k < K; ++k) std::fill(d + k * kNr + nr, d + (k + 1) * kNr, 0.f);
      for (int64_t j = 0; j < nr; ++j) {
        const float* s = B + (j0 + j) * ldb;
        for (int64_t k = 0; k < K; ++k) d[k * kNr + j] = s[k];
      }
    } else {
      for (int64_t k = 0; k < K; ++k) {
        std::memcpy(d + k * kNr, B + k * ldb + j0, static_cast<size_t>(nr) * sizeof(float));
        if (nr < kNr) std::fill(d + k * kNr + nr, d + (k + 1) * kNr, 0.f);
      }
    }
  }
}

void gemm_packed_serial(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* Bp, float* C,
                        int64_t ldc, const GemmEpi* epi, bool accumulate) {
  if (M <= 0 || N <= 0) return;
  if (K == 0) {
    alignas(32) float zero[kNr] = {};
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; j += kNr) {
        const float* res = epi && epi->residual ? epi->residual + i * epi->ldr + j : nullptr;
        store_tile<1>(&zero, C + i * ldc + j, ldc, static_cast<int>(std::min(kNr, N - j)), accumulate, epi, j, res,
                      epi ? epi->ldr : 0);
      }
    if (epi && epi->rows_done) epi->rows_done(epi->ctx, epi->row_base, epi->row_base + M);
    return;
  }
  const Kernels& ks = kernels();
  const int64_t nk = (K + kKc - 1) / kKc, kc = (K + nk - 1) / nk;
  for (int64_t ic = 0; ic < M; ic += kMc) {
    const int64_t mb = std::min(kMc, M - ic);
    for (int64_t pc = 0; pc < K; pc += kc) {
      const int64_t kb = std::min(kc, K - pc);
      const bool last = pc + kb == K, acc = accumulate || pc > 0;
      const GemmEpi* e = last ? epi : nullptr;
      for (int64_t j = 0; j < N; j += kNr) {
        const int nr = static_cast<int>(std::min(kNr, N - j));
        const float* bp = Bp + j * K + pc * kNr;
        for (int64_t i = 0; i < mb; i += kMr) {
          const int64_t row = ic + i;
          const int mr = static_cast<int>(std::min(kMr, mb - i));
          const float* res = e && e->residual ? e->residual + row * e->ldr + j : nullptr;
          ks.k[mr](kb, A + row * lda + pc, lda, bp, C + row * ldc + j, ldc, nr, acc, e, j, res, e ? e->ldr : 0);
        }
      }
    }
    if (epi && epi->rows_done) epi->rows_done(epi->ctx, epi->row_base + ic, epi->row_base + ic + mb);
  }
}

void gemm_packed(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* Bp, float* C, int64_t ldc,
                 const GemmEpi* epi) {
  const int nt = num_threads();
  const double flops = 2.0 * M * N * K;
  if (nt == 1 || flops < 2e6) return gemm_packed_serial(M, N, K, A, lda, Bp, C, ldc, epi);
  // Rows when each thread gets a few 6-row tiles, else 16-column panels (tiny M, e.g. batch 1).
  const int64_t micro_rows = (M + kMr - 1) / kMr, panels = (N + kNr - 1) / kNr;
  if (micro_rows >= 4 * nt || micro_rows >= panels) {
    parallel_for(micro_rows, 2, [&](int64_t m0, int64_t m1) {
      int64_t r0 = m0 * kMr, r1 = std::min(M, m1 * kMr);
      GemmEpi e;
      if (epi) {
        e = *epi;
        if (e.residual) e.residual += r0 * e.ldr;
        e.row_base += r0;
      }
      gemm_packed_serial(r1 - r0, N, K, A + r0 * lda, lda, Bp, C + r0 * ldc, ldc, epi ? &e : nullptr);
    });
    return;
  }
  parallel_for(panels, 1, [&](int64_t p0, int64_t p1) {
    int64_t c0 = p0 * kNr, c1 = std::min(N, p1 * kNr);
    GemmEpi e;
    if (epi) {
      e = *epi;
      if (e.bias) e.bias += c0;
      if (e.residual) e.residual += c0;
      e.rows_done = nullptr;  // rows are split across threads here: run it once below
    }
    gemm_packed_serial(M, c1 - c0, K, A, lda, Bp + c0 * K, C + c0, ldc, epi ? &e : nullptr);
  });
  if (epi && epi->rows_done) epi->rows_done(epi->ctx, epi->row_base, epi->row_base + M);
}

}  // namespace rlx::cpu
