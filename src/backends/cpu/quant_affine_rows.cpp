// The row kernels of quant_affine_rows.h: scalar and AVX2 quantize / dequantize of one run.
#include "backends/cpu/quant_affine_rows.h"

#include <type_traits>

#include "quant/fixed_point.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace rlx::cpu::qrows {

namespace {

template <class Q>
void quantize_scalar(const float* x, int64_t n, float scale, int32_t zp, Q* y) {
  int32_t lo, hi;
  quant::int8_range(std::is_unsigned_v<Q>, &lo, &hi);
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<Q>(quant::quantize(x[i], scale, zp, lo, hi));
}

template <class Q>
void dequantize_scalar(const Q* q, int64_t n, float scale, int32_t zp, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = quant::dequantize(static_cast<int32_t>(q[i]), zp, scale);
}

#if defined(__x86_64__)
// 8 lanes: round_half_even(x / s) + zp clamped to [lo, hi], NaN -> clamp(zp), as int32.
__attribute__((target("avx2"))) inline __m256i quant8(const float* x, __m256 s, __m256 z, __m256 lo, __m256 hi,
                                                      __m256 znan) {
  __m256 v = _mm256_div_ps(_mm256_loadu_ps(x), s);
  __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  __m256 r = _mm256_add_ps(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), z);
  r = _mm256_min_ps(_mm256_max_ps(r, lo), hi);
  r = _mm256_blendv_ps(r, znan, nan);
  return _mm256_cvtps_epi32(r);
}

template <bool U>
__attribute__((target("avx2"))) void quantize_avx2(const float* x, int64_t n, float scale, int32_t zp, void* yv) {
  auto* y = static_cast<uint8_t*>(yv);
  int32_t lo, hi;
  quant::int8_range(U, &lo, &hi);
  const __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps(static_cast<float>(zp));
  const __m256 vlo = _mm256_set1_ps(static_cast<float>(lo)), vhi = _mm256_set1_ps(static_cast<float>(hi));
  const __m256 znan = _mm256_set1_ps(static_cast<float>(quant::saturate(zp, lo, hi)));
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i a = quant8(x + i, s, z, vlo, vhi, znan), b = quant8(x + i + 8, s, z, vlo, vhi, znan);
    __m256i c = quant8(x + i + 16, s, z, vlo, vhi, znan), d = quant8(x + i + 24, s, z, vlo, vhi, znan);
    __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);  // values already in range
    __m256i p = U ? _mm256_packus_epi16(ab, cd) : _mm256_packs_epi16(ab, cd);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm256_permutevar8x32_epi32(p, perm));
  }
  if (U)
    quantize_scalar(x + i, n - i, scale, zp, y + i);
  else
    quantize_scalar(x + i, n - i, scale, zp, reinterpret_cast<int8_t*>(y) + i);
}

template <bool U>
__attribute__((target("avx2"))) void dequantize_avx2(const void* qv, int64_t n, float scale, int32_t zp, float* y) {
  const auto* q = static_cast<const uint8_t*>(qv);
  const __m256 s = _mm256_set1_ps(scale);
  const __m256i z = _mm256_set1_epi32(zp);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i));
    __m256i w = U ? _mm256_cvtepu8_epi32(b) : _mm256_cvtepi8_epi32(b);
    // (q - zp) is exact in int32 and in f32 (|q - zp| <= 510); one f32 product, as the scalar form.
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(w, z)), s));
  }
  if (U)
    dequantize_scalar(q + i, n - i, scale, zp, y + i);
  else
    dequantize_scalar(reinterpret_cast<const int8_t*>(q) + i, n - i, scale, zp, y + i);
}
#endif

}  // namespace

void quantize_u8_scalar(const float* x, int64_t n, float s, int32_t zp, uint8_t* y) { quantize_scalar(x, n, s, zp, y); }
void quantize_s8_scalar(const float* x, int64_t n, float s, int32_t zp, int8_t* y) { quantize_scalar(x, n, s, zp, y); }
void dequantize_u8_scalar(const uint8_t* q, int64_t n, float s, int32_t zp, float* y) { dequantize_scalar(q, n, s, zp, y); }
void dequantize_s8_scalar(const int8_t* q, int64_t n, float s, int32_t zp, float* y) { dequantize_scalar(q, n, s, zp, y); }

#if defined(__x86_64__)
void quantize_u8_avx2(const float* x, int64_t n, float s, int32_t zp, uint8_t* y) { quantize_avx2<true>(x, n, s, zp, y); }
void quantize_s8_avx2(const float* x, int64_t n, float s, int32_t zp, int8_t* y) { quantize_avx2<false>(x, n, s, zp, y); }
void dequantize_u8_avx2(const uint8_t* q, int64_t n, float s, int32_t zp, float* y) { dequantize_avx2<true>(q, n, s, zp, y); }
void dequantize_s8_avx2(const int8_t* q, int64_t n, float s, int32_t zp, float* y) { dequantize_avx2<false>(q, n, s, zp, y); }
#else
void quantize_u8_avx2(const float* x, int64_t n, float s, int32_t zp, uint8_t* y) { quantize_scalar(x, n, s, zp, y); }
void quantize_s8_avx2(const float* x, int64_t n, float s, int32_t zp, int8_t* y) { quantize_scalar(x, n, s, zp, y); }
void dequantize_u8_avx2(const uint8_t* q, int64_t n, float s, int32_t zp, float* y) { dequantize_scalar(q, n, s, zp, y); }
void dequantize_s8_avx2(const int8_t* q, int64_t n, float s, int32_t zp, float* y) { dequantize_scalar(q, n, s, zp, y); }
#endif

}  // namespace rlx::cpu::qrows
