// AVX-512 helpers for the cpu kernels compiled per function for AVX-512 (target attributes; the rest
// of the file stays baseline x86-64): 16-lane versions of simd_avx2.h's exp and of the GEMM's erf-GELU,
// with the same operations in the same order, so each lane's result is bitwise the 8-lane one.
// Include only from x86-64 GCC/Clang code (RLX_SIMD_AVX512 says whether it is available).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "backends/cpu/isa.h"
#define RLX_SIMD_AVX512 1
#define RLX_AVX512_FN __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))

namespace rlx::cpu::simd {

// GCC 12 flags the self-initialised "undefined" source of avx512fintrin.h's max/min/slli when they
// inline here (a false positive, gone in GCC 13).
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// e^x on 16 lanes: exp8 (simd_avx2.h) lane for lane, the whole float range (NaN kept, +inf above
// 88.72283, +0 below -86.98).
RLX_AVX512_FN inline __m512 exp16(__m512 x) {
  const __m512 in = x, lo = _mm512_set1_ps(-86.98f), hi = _mm512_set1_ps(88.72283f);
  x = _mm512_max_ps(lo, x);  // operand order keeps a NaN x (vmaxps returns the second operand on NaN)
  x = _mm512_min_ps(hi, x);
  const __m512 shifter = _mm512_set1_ps(12582912.f + 126.f);
  const __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), shifter);
  const __m512 n = _mm512_sub_ps(t, shifter);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(2.f * 1.3829427771270275e-3f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(2.f * 8.374777622520924e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(2.f * 4.16683591902256e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(2.f * 1.666642129421234e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(2.f * 4.9999991059303284e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(2.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(2.f));
  const __m512 e = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(t), 23));
  __m512 res = _mm512_mul_ps(p, e);
  res = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(in, hi, _CMP_GT_OQ), res, _mm512_set1_ps(__builtin_inff()));
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(in, lo, _CMP_NLT_UQ), res);  // below lo: +0
}

// erf-GELU on 16 lanes: 0.5 v (1 + erf(v / sqrt 2)) with vm::erf's formula (vmath.h), the GEMM's
// 8-lane gelu8 lane for lane.
RLX_AVX512_FN inline __m512 gelu16(__m512 v) {
  const __m512 x = _mm512_mul_ps(v, _mm512_set1_ps(0.70710678118654752f));  // erf argument
  const __m512 sign = _mm512_and_ps(x, _mm512_set1_ps(-0.f));
  const __m512 a = _mm512_andnot_ps(_mm512_set1_ps(-0.f), x);
  const __m512 z2 = _mm512_mul_ps(x, x);
  __m512 s = _mm512_set1_ps(-0.0008548327023f);
  s = _mm512_fmadd_ps(s, z2, _mm512_set1_ps(0.005223977625f));
  s = _mm512_fmadd_ps(s, z2, _mm512_set1_ps(-0.02686617064f));
  s = _mm512_fmadd_ps(s, z2, _mm512_set1_ps(0.1128379167f));
  s = _mm512_fmadd_ps(s, z2, _mm512_set1_ps(-0.3761263890f));
  s = _mm512_fmadd_ps(s, z2, _mm512_set1_ps(1.128379167f));
  s = _mm512_mul_ps(s, x);
  const __m512 t =
      _mm512_div_ps(_mm512_set1_ps(1.f), _mm512_fmadd_ps(_mm512_set1_ps(0.5f), a, _mm512_set1_ps(1.f)));
  __m512 y = _mm512_set1_ps(0.17087277f);
  for (float c : {-0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f, -0.18628806f, 0.09678418f,
                  0.37409196f, 1.00002368f})
    y = _mm512_fmadd_ps(y, t, _mm512_set1_ps(c));
  y = _mm512_fmadd_ps(y, t, _mm512_set1_ps(-1.26551223f));
  y = _mm512_fnmadd_ps(a, a, y);
  const __m512 erfc = _mm512_mul_ps(t, exp16(y));
  const __m512 big = _mm512_or_ps(_mm512_sub_ps(_mm512_set1_ps(1.f), erfc), sign);
  const __m512 erf = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, _mm512_set1_ps(0.5f), _CMP_LT_OQ), big, s);
  return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), v), _mm512_add_ps(_mm512_set1_ps(1.f), erf));
}

#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Lanes [0, n) set, n clamped to [0, 16]: the mask of a row's tail for masked loads and stores.
RLX_AVX512_FN inline __mmask16 tail_mask16(long n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// Whether the AVX-512 paths run: the level in use (isa.h: the host's, or RLX_CPU_ISA) is AVX-512.
inline bool cpu_has_avx512() {
  static const bool a = cpu_isa() >= CpuIsa::Avx512;
  return a;
}

}  // namespace rlx::cpu::simd

#endif
