// AVX2+FMA helpers shared by the cpu kernels that are compiled per function for
// AVX2 (target attributes; the rest of the file stays baseline x86-64): the 8-lane exp used by the
// GEMM's GELU epilogue (gemm_avx2.cpp) and by attention's softmax (nn.cpp), and horizontal
// reductions. Include only from x86-64 GCC/Clang code (RLX_SIMD_AVX2 says whether it is available).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "backends/cpu/isa.h"
#define RLX_SIMD_AVX2 1
#define RLX_AVX2_FN __attribute__((target("avx2,fma")))

namespace rlx::cpu::simd {

// e^x on 8 lanes. Range reduction as vm::exp (x = n ln2 + r with a two-part ln2); n is rounded by the
// 1.5*2^23 shifter, which leaves n + bias in the low mantissa bits, and those bits shifted left by 23
// are the exponent field of 2^(n + bias - 127). e^r on [-ln2/2, ln2/2] is a degree-6 fit
// (relative-error weighted least squares at Chebyshev nodes, 9.7e-8 relative error in float).
// At most 1 ulp from the correctly rounded value where the result is a normal float: the sweep in
// tests/unit/test_simd_avx2.cpp (4.2M points over [-86.98, 88.72] and 16k near 0) measures a worst
// case of 1 ulp (about 9% of points off by 1, none by 2) for exp8 and exp8<true>, and asserts <= 1.
//  - exp8(x), the whole float range: NaN stays NaN, x > 88.72283 gives +inf, x < -86.98 gives +0 (true
//    value < 1.8e-38, about FLT_MIN), -inf gives 0. Bias 126 (2^(n-1), n in [-125, 128], so
//    2^128 * e^r, r < 0, stays finite up to FLT_MAX) with the polynomial's coefficients doubled, which
//    makes up the factor 2 exactly.
//  - exp8<true>(x), only for x <= 0 (a softmax score minus its row max): bias 127 with x clamped at
//    -88, where n = -127 makes 2^n's exponent field 0, so -inf (a masked key) and anything below about
//    -87.7 give exactly 0 without a blend; NaN stays NaN. Throughput, 1 core: 0.25 ns per element
//    against 0.33 for exp8(x).
template <bool kNonPositive = false>
RLX_AVX2_FN inline __m256 exp8(__m256 x) {
  constexpr float c = kNonPositive ? 1.f : 2.f;  // scale of the polynomial: 2^n * e^r or 2^(n-1) * 2e^r
  const __m256 in = x, lo = _mm256_set1_ps(kNonPositive ? -88.f : -86.98f), hi = _mm256_set1_ps(88.72283f);
  x = _mm256_max_ps(lo, x);  // operand order keeps a NaN x
  if constexpr (!kNonPositive) x = _mm256_min_ps(hi, x);
  const __m256 shifter = _mm256_set1_ps(12582912.f + (kNonPositive ? 127.f : 126.f));
  const __m256 t = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), shifter);
  const __m256 n = _mm256_sub_ps(t, shifter);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(c * 1.3829427771270275e-3f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c * 8.374777622520924e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c * 4.16683591902256e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c * 1.666642129421234e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c * 4.9999991059303284e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
  const __m256 e = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(t), 23));
  __m256 res = _mm256_mul_ps(p, e);
  if constexpr (kNonPositive) return res;
  res = _mm256_blendv_ps(res, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(in, hi, _CMP_GT_OQ));
  return _mm256_andnot_ps(_mm256_cmp_ps(in, lo, _CMP_LT_OQ), res);
}

RLX_AVX2_FN inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

RLX_AVX2_FN inline float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

// Lanes [0, n) set (0 <= n <= 8), for maskload/maskstore of a row's tail.
RLX_AVX2_FN inline __m256i tail_mask(long n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// 8 x 8 transpose: rows s[i * ls] (8 floats each) to rows d[j * ld]. Shared by the GEMM packers.
RLX_AVX2_FN inline void transpose8x8(const float* s, int64_t ls, float* d, int64_t ld) {
  __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + ls), r2 = _mm256_loadu_ps(s + 2 * ls);
  __m256 r3 = _mm256_loadu_ps(s + 3 * ls), r4 = _mm256_loadu_ps(s + 4 * ls), r5 = _mm256_loadu_ps(s + 5 * ls);
  __m256 r6 = _mm256_loadu_ps(s + 6 * ls), r7 = _mm256_loadu_ps(s + 7 * ls);
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3);
  __m256 t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(d + ld, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(d + 2 * ld, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(d + 3 * ld, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(d + 4 * ld, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(d + 5 * ld, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(d + 6 * ld, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(d + 7 * ld, _mm256_permute2f128_ps(u3, u7, 0x31));
}

// Whether the AVX2 paths run: the level in use (isa.h: the host's, or RLX_CPU_ISA) is AVX2 or above.
// The one check every AVX2 kernel's dispatch uses.
inline bool cpu_has_avx2() {
  static const bool a = cpu_isa() >= CpuIsa::Avx2;
  return a;
}
inline bool cpu_has_avx2_fma() { return cpu_has_avx2(); }  // the Avx2 level includes FMA and F16C

}  // namespace rlx::cpu::simd

#endif
