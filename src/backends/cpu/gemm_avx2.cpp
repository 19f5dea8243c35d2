// Packed f32 GEMM with a 6x16 AVX2+FMA micro-kernel (gemm_avx2.h). Loop nest per thread:
//   rows in blocks of kMc > K in blocks of <= kKc (the mc x kc block of A is copied into 6-row
//   micro-panels, k-major, in per-thread scratch: it stays in L2) > 16-column panels of packed B (the
//   kc x 16 micro-panel is reused by every 6-row tile of the block) > 6-row micro tiles (12 ymm
//   accumulators). The epilogue runs on the last K block of each tile, before it leaves registers.
// With few rows or few 16-column panels (little reuse), A is read in place instead.
// CPUs without AVX2/FMA run the same loop nest with a portable micro-kernel, AVX-512 hosts with the
// 12x32 tiles of gemm_avx512.cpp (GemmKernels: the family and its blocking, chosen by cpu_isa()).
// gemm_f32 with N <= 12 (a classifier layer) takes the narrow kernels instead
// (gemm_narrow.cpp); the ReLU-backward mask is an in-register epilogue (GemmEpi::mask).
#include "backends/cpu/gemm_avx2.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "backends/cpu/gemm_avx2_internal.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/simd_avx2.h"
#include "backends/cpu/vmath.h"
#include "rlx/error.h"

namespace rlx::cpu {

using namespace gemm_detail;

namespace {

constexpr int64_t kMr = 6, kNr = kGemmNr;
// K block: one block up to 768 (MiniLM's K=384 in one pass, K=1536 in two): fewer passes over C and
// fewer micro-kernel calls; the kc x 16 B micro-panel (<= 48 KiB) streams from L2 at 2 loads per 12 FMAs.
constexpr int64_t kKc = 768;
constexpr int64_t kMc = 72;  // rows per packed A block: 72 x 768 floats = 216 KiB (L2 is 512 KiB)
// Rows are split over threads when there are at least this many 6-row micro rows per thread; the
// self-scheduled row blocks are then at least half of it.
constexpr int64_t kRowChunkMin = 8;

#if defined(RLX_GEMM_X86)
// column_sums for 0 < N <= 16 (the classifier's dlogits): two (masked) ymm lanes
// per row, each lane still adds its column's rows in order.
__attribute__((target("avx2,fma"))) void column_sums_narrow_avx2(const float* B, int64_t ldb, int64_t K, int64_t N,
                                                                  float* colsum) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(N, 8))), lane);
  const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::max<int64_t>(N - 8, 0))), lane);
  __m256 s0 = _mm256_maskload_ps(B, m0), s1 = _mm256_maskload_ps(B + 8, m1);
  for (int64_t k = 1; k < K; ++k) {
    s0 = _mm256_add_ps(s0, _mm256_maskload_ps(B + k * ldb, m0));
    s1 = _mm256_add_ps(s1, _mm256_maskload_ps(B + k * ldb + 8, m1));
  }
  _mm256_maskstore_ps(colsum, m0, s0);
  _mm256_maskstore_ps(colsum + 8, m1, s1);
}
#endif

}  // namespace

namespace gemm_detail {

// colsum[j] = B[0][j] + B[1][j] + ... (rows in order) for j in [0, N), B [K, N].
void column_sums(const float* B, int64_t ldb, int64_t K, int64_t N, float* colsum) {
  if (K <= 0) {
    std::fill(colsum, colsum + N, 0.f);
    return;
  }
#if defined(RLX_GEMM_X86)
  if (N <= 16 && simd::cpu_has_avx2()) return column_sums_narrow_avx2(B, ldb, K, N, colsum);
#endif
  std::memcpy(colsum, B, static_cast<size_t>(N) * sizeof(float));
  for (int64_t k = 1; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) colsum[j] += B[k * ldb + j];
}

RLX_SIMD void apply_act(float* y, int64_t n, GemmAct act) {
  switch (act) {
    case GemmAct::None: break;
    case GemmAct::Relu:  // max(y, 0) with NaN kept, as the reference interpreter's max
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] < 0.f ? 0.f : y[i];
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

}  // namespace gemm_detail

namespace {

// Finishes a tile held in tmp[MR][16]: C (+= when acc) tmp + bias + residual, activation. Used by
// the portable kernel and for partial tiles (nr < 16).
template <int MR>
void store_tile(const float (*tmp)[kNr], float* C, int64_t ldc, int nr, bool acc, const GemmEpi* epi, int64_t col,
                const float* res, int64_t ldr, const float* msk) {
  for (int r = 0; r < MR; ++r) {
    float* c = C + r * ldc;
    for (int j = 0; j < nr; ++j) {
      float v = tmp[r][j] + (acc ? c[j] : 0.f);
      if (epi && epi->bias) v += epi->bias[col + j];
      if (res) v += res[r * ldr + j];
      c[j] = v;
    }
    if (epi && epi->act != GemmAct::None) apply_act(c, nr, epi->act);
    if (msk)
      for (int j = 0; j < nr; ++j) c[j] = msk[r * epi->ldm + j] > 0.f ? c[j] : 0.f;
  }
}

// The A micro-panel: with PA ("k-major") element (r, k) is at A[k * lda + r] (a packed panel has
// lda = 6; a transposed A read in place has its own row stride); without PA at A[r * lda + k].
template <int MR, bool PA>
void ukernel_portable(int64_t kc, const float* A, int64_t lda, const float* B, float* C, int64_t ldc, int nr, bool acc,
                      const GemmEpi* epi, int64_t col, const float* res, int64_t ldr, const float* msk) {
  float t[MR][kNr] = {};
  for (int64_t k = 0; k < kc; ++k)
    for (int r = 0; r < MR; ++r) {
      float a = PA ? A[k * lda + r] : A[r * lda + k];
      for (int j = 0; j < kNr; ++j) t[r][j] += a * B[k * kNr + j];
    }
  store_tile<MR>(t, C, ldc, nr, acc, epi, col, res, ldr, msk);
}

#if defined(RLX_GEMM_X86)
// erf-GELU on 8 lanes, the same formula as vm::erf (vmath.h), with the shared 8-lane exp
// (simd_avx2.h), so the GELU epilogue runs on the tile in registers.
using simd::exp8;

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

// The epilogue of one 16-wide row of a finished tile, in registers: + C (acc), bias,
// residual, GELU or ReLU (NaN kept), mask (mask > 0 ? v : 0, a NaN mask gives 0). Without `e`, a
// plain store.
struct RowEpi {
  bool acc;
  __m256 bb0, bb1;
  bool bias, gelu, relu;
  const float* res;
  int64_t ldr;
  const float* msk;
  int64_t ldm;
};
__attribute__((target("avx2,fma"), always_inline)) inline void finish_row(float* c, __m256 v0, __m256 v1,
                                                                          const RowEpi* e = nullptr, int r = 0) {
  if (e) {
    const __m256 zero = _mm256_setzero_ps();
    if (e->acc) {
      v0 = _mm256_add_ps(v0, _mm256_loadu_ps(c));
      v1 = _mm256_add_ps(v1, _mm256_loadu_ps(c + 8));
    }
    if (e->bias) {
      v0 = _mm256_add_ps(v0, e->bb0);
      v1 = _mm256_add_ps(v1, e->bb1);
    }
    if (e->res) {
      v0 = _mm256_add_ps(v0, _mm256_loadu_ps(e->res + r * e->ldr));
      v1 = _mm256_add_ps(v1, _mm256_loadu_ps(e->res + r * e->ldr + 8));
    }
    if (e->gelu) {
      v0 = gelu8(v0);
      v1 = gelu8(v1);
    }
    if (e->relu) {  // max(v, 0) keeping NaN: v < 0 ? 0 : v
      v0 = _mm256_andnot_ps(_mm256_cmp_ps(v0, zero, _CMP_LT_OQ), v0);
      v1 = _mm256_andnot_ps(_mm256_cmp_ps(v1, zero, _CMP_LT_OQ), v1);
    }
    if (e->msk) {
      v0 = _mm256_and_ps(v0, _mm256_cmp_ps(_mm256_loadu_ps(e->msk + r * e->ldm), zero, _CMP_GT_OQ));
      v1 = _mm256_and_ps(v1, _mm256_cmp_ps(_mm256_loadu_ps(e->msk + r * e->ldm + 8), zero, _CMP_GT_OQ));
    }
  }
  _mm256_storeu_ps(c, v0);
  _mm256_storeu_ps(c + 8, v1);
}

// Accumulators are named variables (not arrays) so GCC keeps all 12 in ymm registers.
#define RLX_ROW(r)                                                                      \
  if constexpr (MR > r) {                                                               \
    __m256 av = _mm256_broadcast_ss(PA ? A + k * lda + r : A + r * lda + k);            \
    c##r##0 = _mm256_fmadd_ps(av, b0, c##r##0);                                         \
    c##r##1 = _mm256_fmadd_ps(av, b1, c##r##1);                                         \
  }
template <int MR, bool PA>
__attribute__((target("avx2,fma"))) void ukernel_avx2(int64_t kc, const float* A, int64_t lda, const float* B,
                                                      float* C, int64_t ldc, int nr, bool acc, const GemmEpi* epi,
                                                      int64_t col, const float* res, int64_t ldr, const float* msk) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int r = 0; r < MR; ++r) {  // the tile's C lines arrive while the k loop runs
    _mm_prefetch(reinterpret_cast<const char*>(C + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(C + r * ldc + kNr - 1), _MM_HINT_T0);
  }
  for (int64_t k = 0; k < kc; ++k) {
    __m256 b0 = _mm256_loadu_ps(B + k * kNr), b1 = _mm256_loadu_ps(B + k * kNr + 8);
    RLX_ROW(0) RLX_ROW(1) RLX_ROW(2) RLX_ROW(3) RLX_ROW(4) RLX_ROW(5)
  }
  if (nr < kNr) {
    __m256 c0[6] = {c00, c10, c20, c30, c40, c50}, c1[6] = {c01, c11, c21, c31, c41, c51};
    alignas(32) float t[MR][kNr];
    for (int r = 0; r < MR; ++r) {
      _mm256_store_ps(t[r], c0[r]);
      _mm256_store_ps(t[r] + 8, c1[r]);
    }
    return store_tile<MR>(t, C, ldc, nr, acc, epi, col, res, ldr, msk);
  }
  const float* bias = epi && epi->bias ? epi->bias + col : nullptr;
  const bool gelu = epi && epi->act == GemmAct::Gelu;
  const bool relu = epi && epi->act == GemmAct::Relu;  // in registers
  // Each row leaves straight from its named accumulators (no array, which made GCC
  // spill all 12 to the stack first: 10% of a K = 10 tile's time); with no epilogue a plain store.
  if (!acc && !epi) {
    finish_row(C, c00, c01);
    if constexpr (MR > 1) finish_row(C + ldc, c10, c11);
    if constexpr (MR > 2) finish_row(C + 2 * ldc, c20, c21);
    if constexpr (MR > 3) finish_row(C + 3 * ldc, c30, c31);
    if constexpr (MR > 4) finish_row(C + 4 * ldc, c40, c41);
    if constexpr (MR > 5) finish_row(C + 5 * ldc, c50, c51);
    return;
  }
  RowEpi re{acc, bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps(), bias ? _mm256_loadu_ps(bias + 8) : _mm256_setzero_ps(),
            bias != nullptr, gelu, relu, res, ldr, msk, epi ? epi->ldm : 0};
  finish_row(C, c00, c01, &re, 0);
  if constexpr (MR > 1) finish_row(C + ldc, c10, c11, &re, 1);
  if constexpr (MR > 2) finish_row(C + 2 * ldc, c20, c21, &re, 2);
  if constexpr (MR > 3) finish_row(C + 3 * ldc, c30, c31, &re, 3);
  if constexpr (MR > 4) finish_row(C + 4 * ldc, c40, c41, &re, 4);
  if constexpr (MR > 5) finish_row(C + 5 * ldc, c50, c51, &re, 5);
  if (epi && epi->act != GemmAct::None && !gelu && !relu)
    for (int r = 0; r < MR; ++r) apply_act(C + r * ldc, kNr, epi->act);
}
#undef RLX_ROW

// Copies rows [0, 6) x k [0, kc) of a row-major A (row stride lda) into a k-major micro-panel
// d[k * 6 + r]: 4 k at a time, 2-row interleaves (unpack) then 64-bit pair shuffles.
__attribute__((target("avx2,fma"))) void pack_a_panel6_avx(const float* A, int64_t lda, int64_t kc, float* d) {
  const float *a0 = A, *a1 = A + lda, *a2 = A + 2 * lda, *a3 = A + 3 * lda, *a4 = A + 4 * lda, *a5 = A + 5 * lda;
  int64_t k = 0;
  for (; k + 4 <= kc; k += 4, d += 24) {
    __m128 r0 = _mm_loadu_ps(a0 + k), r1 = _mm_loadu_ps(a1 + k), r2 = _mm_loadu_ps(a2 + k);
    __m128 r3 = _mm_loadu_ps(a3 + k), r4 = _mm_loadu_ps(a4 + k), r5 = _mm_loadu_ps(a5 + k);
    __m128 t0 = _mm_unpacklo_ps(r0, r1), t1 = _mm_unpackhi_ps(r0, r1);  // (r0 r1) pairs of k0 k1 | k2 k3
    __m128 u0 = _mm_unpacklo_ps(r2, r3), u1 = _mm_unpackhi_ps(r2, r3);
    __m128 v0 = _mm_unpacklo_ps(r4, r5), v1 = _mm_unpackhi_ps(r4, r5);
    _mm_storeu_ps(d, _mm_movelh_ps(t0, u0));        // k0: r0 r1 r2 r3
    _mm_storeu_ps(d + 4, _mm_blend_ps(v0, t0, 12));  // k0: r4 r5, k1: r0 r1
    _mm_storeu_ps(d + 8, _mm_movehl_ps(v0, u0));     // k1: r2 r3 r4 r5
    _mm_storeu_ps(d + 12, _mm_movelh_ps(t1, u1));
    _mm_storeu_ps(d + 16, _mm_blend_ps(v1, t1, 12));
    _mm_storeu_ps(d + 20, _mm_movehl_ps(v1, u1));
  }
  for (; k < kc; ++k, d += 6) {
    d[0] = a0[k], d[1] = a1[k], d[2] = a2[k], d[3] = a3[k], d[4] = a4[k], d[5] = a5[k];
  }
}

// 8 x 8 transpose: rows s[i * ls], 8 floats each, to d[j * ld] (used to pack a transposed B).
// One full 16-column panel of B [K, 16] (row stride ldb) copied to d (stride 16) while
// its column sums are kept in two registers: cs[j] = B[0][j] + B[1][j] + ... (rows in order).
__attribute__((target("avx2,fma"))) void pack_panel_colsum_avx2(const float* B, int64_t ldb, int64_t K, float* d,
                                                                 float* cs) {
  __m256 s0 = _mm256_loadu_ps(B), s1 = _mm256_loadu_ps(B + 8);
  _mm256_storeu_ps(d, s0);
  _mm256_storeu_ps(d + 8, s1);
  for (int64_t k = 1; k < K; ++k) {
    const __m256 b0 = _mm256_loadu_ps(B + k * ldb), b1 = _mm256_loadu_ps(B + k * ldb + 8);
    _mm256_storeu_ps(d + k * kNr, b0);
    _mm256_storeu_ps(d + k * kNr + 8, b1);
    s0 = _mm256_add_ps(s0, b0);
    s1 = _mm256_add_ps(s1, b1);
  }
  _mm256_storeu_ps(cs, s0);
  _mm256_storeu_ps(cs + 8, s1);
}

#endif

template <bool PA>
void fill(GemmKernels& t) {
#if defined(RLX_GEMM_X86)
  if (t.avx2) {
    t.k1[PA][1] = ukernel_avx2<1, PA>, t.k1[PA][2] = ukernel_avx2<2, PA>, t.k1[PA][3] = ukernel_avx2<3, PA>;
    t.k1[PA][4] = ukernel_avx2<4, PA>, t.k1[PA][5] = ukernel_avx2<5, PA>, t.k1[PA][6] = ukernel_avx2<6, PA>;
    return;
  }
#endif
  t.k1[PA][1] = ukernel_portable<1, PA>, t.k1[PA][2] = ukernel_portable<2, PA>, t.k1[PA][3] = ukernel_portable<3, PA>;
  t.k1[PA][4] = ukernel_portable<4, PA>, t.k1[PA][5] = ukernel_portable<5, PA>, t.k1[PA][6] = ukernel_portable<6, PA>;
}

GemmKernels make_kernels(CpuIsa isa) {
  GemmKernels t;
  t.isa = isa;
  t.mr = kMr;
  t.kc = kKc;
  t.mc = kMc;
#if defined(RLX_GEMM_X86)
  if (isa >= CpuIsa::Avx512) {
    fill_avx512_kernels(t);
    return t;
  }
  t.avx2 = isa >= CpuIsa::Avx2;
  if (t.avx2) t.pack_a_rows = pack_a_panel6_avx;
#endif
  fill<false>(t);
  fill<true>(t);
  return t;
}

// The family gemm_f32/gemm_packed use: cpu_isa()'s, or the portable one under RLX_GEMM=blas.
const GemmKernels& kernels() {
  static const GemmKernels& k = gemm_kernels(fast_gemm_available() ? cpu_isa() : CpuIsa::Generic);
  return k;
}

// Per-thread scratch, 64-byte aligned, grown on first use and then reused (no steady-state allocation).
struct Scratch {
  float* p = nullptr;
  size_t n = 0;
  ~Scratch() { std::free(p); }
  float* get(size_t need) {
    if (need > n) {
      std::free(p);
      size_t bytes = (need * sizeof(float) + 63) / 64 * 64;
      p = static_cast<float*>(std::aligned_alloc(64, bytes));
      n = 0;
      if (!p) throw std::bad_alloc();
      n = bytes / sizeof(float);
    }
    return p;
  }
};
thread_local Scratch t_apack, t_bpack;

template <int PM>
void pack_ta_rows(const float* s, int64_t lda, int64_t kb, float* d) {
  for (int64_t k = 0; k < kb; ++k) std::memcpy(d + k * PM, s + k * lda, PM * sizeof(float));
}

// Copies op(A) rows [0, mb) x k [0, kb) into mr-row k-major micro-panels: panel p at d + p * mr * kb.
// `A` points at element (row 0, k 0) of op(A); trans_a means it is stored [K, M] with row stride lda.
void pack_a(const GemmKernels& ks, bool trans_a, const float* A, int64_t lda, int64_t mb, int64_t kb, float* d) {
  const int64_t pm = ks.mr;
  for (int64_t i = 0; i < mb; i += pm, d += pm * kb) {
    const int64_t mr = std::min(pm, mb - i);
    if (trans_a) {  // op(A) rows are contiguous columns of the stored A: mr floats per k
      const float* s = A + i;
      if (mr == 6 && pm == 6) pack_ta_rows<6>(s, lda, kb, d);
      else if (mr == 12 && pm == 12) pack_ta_rows<12>(s, lda, kb, d);
      else
        for (int64_t k = 0; k < kb; ++k)
          for (int64_t r = 0; r < mr; ++r) d[k * pm + r] = s[k * lda + r];
      continue;
    }
    const float* s = A + i * lda;
    if (ks.pack_a_rows && mr == pm) {
      ks.pack_a_rows(s, lda, kb, d);
      continue;
    }
    for (int64_t r = 0; r < mr; ++r)
      for (int64_t k = 0; k < kb; ++k) d[k * pm + r] = s[r * lda + k];
  }
}

// The single-thread loop nest over rows [0, M) of op(A) (A points at its row 0) and packed B.
void gemm_serial(const GemmKernels& ks, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, bool trans_a,
                 const float* Bp, float* C, int64_t ldc, const GemmEpi* epi, bool accumulate) {
  if (M <= 0 || N <= 0) return;
  if (K == 0) {
    alignas(32) float zero[kNr] = {};
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; j += kNr) {
        const float* res = epi && epi->residual ? epi->residual + i * epi->ldr + j : nullptr;
        const float* msk = epi && epi->mask ? epi->mask + i * epi->ldm + j : nullptr;
        store_tile<1>(&zero, C + i * ldc + j, ldc, static_cast<int>(std::min(kNr, N - j)), accumulate, epi, j, res,
                      epi ? epi->ldr : 0, msk);
      }
    if (epi && epi->rows_done) epi->rows_done(epi->ctx, epi->row_base, epi->row_base + M);
    return;
  }
  // Packing A pays when many 16-column panels reuse it; a transposed A (strided by lda per k) sooner.
  const bool pack = M > 4 * kMr && (trans_a ? N > kNr : N >= 16 * kNr);
  const int64_t pm = ks.mr, nk = (K + ks.kc - 1) / ks.kc, kc = (K + nk - 1) / nk;
  const int64_t mc = std::min(M, ks.mc);
  const bool wide = ks.k2[0][1] != nullptr;  // the family has 32-column tiles
  float* abuf = pack ? t_apack.get(static_cast<size_t>((mc + pm - 1) / pm * pm * kc)) : nullptr;
  for (int64_t ic = 0; ic < M; ic += mc) {
    const int64_t mb = std::min(mc, M - ic);
    for (int64_t pc = 0; pc < K; pc += kc) {
      const int64_t kb = std::min(kc, K - pc);
      const bool last = pc + kb == K, acc = accumulate || pc > 0;
      const GemmEpi* e = last ? epi : nullptr;
      if (pack) pack_a(ks, trans_a, trans_a ? A + pc * lda + ic : A + ic * lda + pc, lda, mb, kb, abuf);
      for (int64_t j = 0; j < N;) {
        const bool two = wide && N - j > kNr;  // two adjacent panels per tile
        const int nr = static_cast<int>(std::min(two ? 2 * kNr : kNr, N - j));
        const float* bp = Bp + j * K + pc * kNr;
        for (int64_t i = 0; i < mb; i += pm) {
          const int64_t row = ic + i;
          const int mr = static_cast<int>(std::min(pm, mb - i));
          const float* res = e && e->residual ? e->residual + row * e->ldr + j : nullptr;
          const float* msk = e && e->mask ? e->mask + row * e->ldm + j : nullptr;
          const float* ap = pack ? abuf + i * kb : trans_a ? A + pc * lda + row : A + row * lda + pc;
          float* c = C + row * ldc + j;
          if (two)
            ks.k2[pack || trans_a][mr](kb, ap, pack ? pm : lda, bp, kNr * K, c, ldc, nr, acc, e, j, res,
                                       e ? e->ldr : 0, msk);
          else
            ks.k1[pack || trans_a][mr](kb, ap, pack ? pm : lda, bp, c, ldc, nr, acc, e, j, res, e ? e->ldr : 0, msk);
        }
        j += nr;
      }
    }
    if (epi && epi->rows_done) epi->rows_done(epi->ctx, epi->row_base + ic, epi->row_base + ic + mb);
  }
}


// Packs panels [p0, p1) of op(B) (16 columns each), times alpha, into dst (the whole packed buffer),
// with the AVX2 transposes when `avx2`.
// colsum (only with !trans_b): the panels' column sums of B, rows in order.
void pack_b_panels(bool avx2, bool trans_b, const float* B, int64_t ldb, int64_t K, int64_t N, int64_t p0, int64_t p1,
                   float* dst, float alpha = 1.f, float* colsum = nullptr);


// Splits the GEMM over the pool. Bp is packed B, or null: then B/ldb/trans_b are packed into bbuf,
// either once up front (row split) or panel range by panel range inside each column chunk.
void gemm_parallel(const GemmKernels& ks, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, bool trans_a,
                   const float* Bp, const float* B, int64_t ldb, bool trans_b, float* bbuf, float* C, int64_t ldc,
                   const GemmEpi* epi, bool accumulate, bool parallel, float alpha = 1.f) {
  const int nt = parallel ? num_threads() : 1;
  const int64_t panels = (N + kNr - 1) / kNr;
  const double flops = 2.0 * M * N * K;
  const int64_t pm = ks.mr, micro_rows = (M + pm - 1) / pm;
  float* colsum = epi && !trans_b ? epi->colsum : nullptr;
  auto pack_all = [&](bool par) {
    if (Bp) return;
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(K * kNr, 1));
    if (par && K * N >= (int64_t(1) << 16))  // a small B is packed faster than a fork/join
      parallel_for(panels, grain, [&](int64_t p0, int64_t p1) {
        pack_b_panels(ks.avx2, trans_b, B, ldb, K, N, p0, p1, bbuf, alpha, colsum);
      });
    else
      pack_b_panels(ks.avx2, trans_b, B, ldb, K, N, 0, panels, bbuf, alpha, colsum);
    Bp = bbuf;
  };
  if (nt == 1 || flops < kParMinFlops) {
    pack_all(false);
    return gemm_serial(ks, M, N, K, A, lda, trans_a, Bp, C, ldc, epi, accumulate);
  }
  // Row blocks in micro rows of the family's tile height: at least kRowChunkMin 6-row micro rows' worth.
  const int64_t min_rows = (kRowChunkMin * kMr + pm - 1) / pm, mc_micro = ks.mc / pm;
  // B packed per call, A not transposed, and < 256 columns per thread or op(B) the bigger operand
  // (N >= M: a layer at batch <= its width): a column split needs one fork/join instead of two (each
  // thread packs only its own B panels, reads them once) and shares A.
  // [smallseq] B packed ahead (a constant weight) and at most two A blocks (M <= 2 mc) with N >= M:
  // a row split makes every row block stream all of B again (MiniLM b8 x s16: ~6 passes over each
  // weight), a column split only mc blocks' worth of half of B per thread (2 passes); b8 x s16 p50
  // 21.6 -> 19.2 ms, 2 threads.
  const bool cols_packed = Bp && M <= 2 * kMc && N >= M;
  const bool cols_free = !trans_a && (cols_packed || (!Bp && ((panels + nt - 1) / nt * kNr < 16 * kNr || N >= M)));
  if ((micro_rows >= int64_t(nt) * min_rows && !(cols_free && panels >= 2 * nt)) || panels < 2 * nt) {
    // Rows, in blocks that threads claim from a shared counter (guided self-scheduling): a block is
    // about 1/(2 x threads) of the rows still left, between min_rows/2 and 12 micro rows (one mc
    // block), so the blocks shrink towards the end and a thread that started late or was
    // descheduled leaves at most a small block for the other to wait on.
    pack_all(true);
    const int64_t lo = std::max<int64_t>(1, min_rows / 2), hi = std::max(lo, mc_micro);
    std::atomic<int64_t> next{0};
    parallel_for(nt, 1, [&](int64_t, int64_t) {
      for (int64_t cur = next.load(std::memory_order_relaxed), take;;) {
        do {
          if (cur >= micro_rows) return;
          take = std::min(micro_rows - cur, std::clamp((micro_rows - cur) / (2 * int64_t(nt)), lo, hi));
        } while (!next.compare_exchange_weak(cur, cur + take, std::memory_order_relaxed));
        const int64_t r0 = cur * pm, r1 = std::min(M, (cur + take) * pm);
        cur = next.load(std::memory_order_relaxed);
        GemmEpi e;
        if (epi) {
          e = *epi;
          if (e.residual) e.residual += r0 * e.ldr;
          if (e.mask) e.mask += r0 * e.ldm;
          e.row_base += r0;
        }
        gemm_serial(ks, r1 - r0, N, K, trans_a ? A + r0 : A + r0 * lda, lda, trans_a, Bp, C + r0 * ldc, ldc,
                    epi ? &e : nullptr, accumulate);
      }
    });
    return;
  }
  // Few rows (or B packed per call and A read in place): one contiguous range of 16-column panels per
  // thread; each packs its own B panels (and, if A is packed, its own copy of A's blocks).
  // [smallseq] With A read in place (M <= 4 micro rows: never packed), chunks cost nothing extra, so
  // cut ~4 per thread, claimed dynamically: a thread that wakes late or is descheduled leaves little
  // for the other to wait on. Each element's sum is unchanged (same panels, same K blocking).
  int64_t per = M <= 4 * kMr ? std::max<int64_t>(1, (panels + 4 * nt - 1) / (4 * nt)) : (panels + nt - 1) / nt;
  if (ks.k2[0][1] && per % 2 && per < panels) ++per;  // whole 32-column tiles per chunk
  const int64_t chunks = (panels + per - 1) / per;
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      int64_t p0 = c * per, p1 = std::min(panels, p0 + per);
      int64_t j0 = p0 * kNr, j1 = std::min(N, p1 * kNr);
      const float* bp = Bp;
      if (!bp) {
        pack_b_panels(ks.avx2, trans_b, B, ldb, K, N, p0, p1, bbuf, alpha, colsum);
        bp = bbuf;
      }
      GemmEpi e;
      if (epi) {
        e = *epi;
        if (e.bias) e.bias += j0;
        if (e.residual) e.residual += j0;
        if (e.mask) e.mask += j0;
        e.rows_done = nullptr;  // rows are split across threads here: run it once below
      }
      gemm_serial(ks, M, j1 - j0, K, A, lda, trans_a, bp + j0 * K, C + j0, ldc, epi ? &e : nullptr, accumulate);
    }
  });
  if (epi && epi->rows_done) epi->rows_done(epi->ctx, epi->row_base, epi->row_base + M);
}

void pack_b_panels(bool avx2, bool trans_b, const float* B, int64_t ldb, int64_t K, int64_t N, int64_t p0, int64_t p1,
                   float* dst, float alpha, float* colsum) {
  (void)avx2;
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t j0 = p * kNr, nr = std::min(kNr, N - j0);
    float* d = dst + j0 * K;  // panel p starts at p * K * 16 floats
#if defined(RLX_GEMM_X86)
    if (!trans_b && colsum && nr == kNr && K > 0 && avx2) {  // copy + column sums, 2 ymm
      pack_panel_colsum_avx2(B + j0, ldb, K, d, colsum + j0);
      continue;
    }
#endif
    if (!trans_b && colsum && nr == kNr && K > 0) {  // copy + column sums in one read
      float acc[kNr];
      const float* b0 = B + j0;
      for (int64_t j = 0; j < kNr; ++j) d[j] = acc[j] = b0[j];
      for (int64_t k = 1; k < K; ++k) {
        const float* bk = B + k * ldb + j0;
        float* dk = d + k * kNr;
        for (int64_t j = 0; j < kNr; ++j) {
          dk[j] = bk[j];
          acc[j] += bk[j];
        }
      }
      std::memcpy(colsum + j0, acc, sizeof(acc));
      continue;
    }
    if (!trans_b && colsum) column_sums(B + j0, ldb, K, nr, colsum + j0);  // a last partial panel
    if (!trans_b) {
      for (int64_t k = 0; k < K; ++k) {
        std::memcpy(d + k * kNr, B + k * ldb + j0, static_cast<size_t>(nr) * sizeof(float));
        if (nr < kNr) std::fill(d + k * kNr + nr, d + (k + 1) * kNr, 0.f);
      }
      continue;
    }
    int64_t k = 0;
#if defined(RLX_GEMM_X86)
    if (avx2 && nr == kNr)  // 8 x 8 blocks: B rows j (stride ldb) become panel rows k (stride 16)
      for (; k + 8 <= K; k += 8) {
        simd::transpose8x8(B + j0 * ldb + k, ldb, d + k * kNr, kNr);
        simd::transpose8x8(B + (j0 + 8) * ldb + k, ldb, d + k * kNr + 8, kNr);
      }
#endif
    for (; k < K; ++k) {
      float* dk = d + k * kNr;
      for (int64_t j = 0; j < nr; ++j) dk[j] = B[(j0 + j) * ldb + k];
      for (int64_t j = nr; j < kNr; ++j) dk[j] = 0.f;
    }
  }
  if (alpha != 1.f)  // scaled while the panels are still in cache (the SGD update's -lr)
    for (float *d = dst + p0 * kNr * K, *e = dst + std::min(p1 * kNr, (N + kNr - 1) / kNr * kNr) * K; d < e; ++d)
      *d *= alpha;
}

}  // namespace

bool fast_gemm_available() {
  static const bool ok = [] {
    const char* e = std::getenv("RLX_GEMM");
    if (e && std::string(e) == "blas") return false;
#if defined(RLX_GEMM_X86)
    return simd::cpu_has_avx2_fma();
#else
    return false;
#endif
  }();
  return ok;
}

namespace gemm_detail {
const GemmKernels& gemm_kernels(CpuIsa isa) {
  RLX_CHECK(static_cast<int>(isa) <= static_cast<int>(cpu_isa_host()), "[cpu] GEMM kernels for ", cpu_isa_name(isa),
            ": this CPU supports only up to ", cpu_isa_name(cpu_isa_host()));
  static const GemmKernels generic = make_kernels(CpuIsa::Generic);
  if (isa == CpuIsa::Generic) return generic;
  static const GemmKernels avx2 = make_kernels(CpuIsa::Avx2);
  if (isa == CpuIsa::Avx2) return avx2;
  static const GemmKernels avx512 = make_kernels(CpuIsa::Avx512);
  return avx512;
}
}  // namespace gemm_detail

int64_t packed_b_size(int64_t K, int64_t N) { return (N + kNr - 1) / kNr * kNr * K; }

void pack_b(bool trans_b, const float* B, int64_t ldb, int64_t K, int64_t N, float* dst) {
  pack_b_panels(kernels().avx2, trans_b, B, ldb, K, N, 0, (N + kNr - 1) / kNr, dst);
}

void gemm_packed_serial(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* Bp, float* C,
                        int64_t ldc, const GemmEpi* epi, bool accumulate, bool trans_a) {
  gemm_serial(kernels(), M, N, K, A, lda, trans_a, Bp, C, ldc, epi, accumulate);
}

void gemm_packed_with(CpuIsa isa, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* Bp,
                      float* C, int64_t ldc, const GemmEpi* epi, bool parallel) {
  if (M <= 0 || N <= 0) return;
  gemm_parallel(gemm_kernels(isa), M, N, K, A, lda, false, Bp, nullptr, 0, false, nullptr, C, ldc, epi, false,
                parallel);
}

void gemm_packed(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* Bp, float* C, int64_t ldc,
                 const GemmEpi* epi) {
  if (M <= 0 || N <= 0) return;
  gemm_parallel(kernels(), M, N, K, A, lda, false, Bp, nullptr, 0, false, nullptr, C, ldc, epi, false, true);
}

namespace {
void gemm_f32_on(const GemmKernels& ks, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A,
                 int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, float beta, bool parallel,
                 const GemmEpi* epi, float alpha) {
  if (M <= 0 || N <= 0) {
    if (N > 0 && epi && epi->colsum && !trans_b) column_sums(B, ldb, K, N, epi->colsum);
    return;
  }
  if (beta != 0.f && beta != 1.f)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] *= beta;
  float* bbuf = t_bpack.get(static_cast<size_t>(std::max<int64_t>(packed_b_size(K, N), 1)));
#if defined(RLX_GEMM_X86)
  // Narrow: always with trans_a; the dot kernel's horizontal sums pay for themselves from K = 256.
  if (N <= kNarrowN && (trans_a ? K > 0 : K >= 256) && ks.avx2 && narrow_enabled())
    return gemm_narrow(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, beta != 0.f, parallel, epi, alpha, bbuf);
#endif
  gemm_parallel(ks, M, N, K, A, lda, trans_a, nullptr, B, ldb, trans_b, bbuf, C, ldc, epi, beta != 0.f, parallel,
                alpha);
}
}  // namespace

void gemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
              const float* B, int64_t ldb, float* C, int64_t ldc, float beta, bool parallel, const GemmEpi* epi,
              float alpha) {
  gemm_f32_on(kernels(), trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, beta, parallel, epi, alpha);
}

void gemm_f32_with(CpuIsa isa, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A,
                   int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, float beta, bool parallel,
                   const GemmEpi* epi, float alpha) {
  gemm_f32_on(gemm_kernels(isa), trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, beta, parallel, epi, alpha);
}

}  // namespace rlx::cpu
