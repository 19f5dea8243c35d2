// The epilogue row kernels of qepilogue.h, scalar and AVX2 (per-function target attributes).
#include "backends/cpu/qepilogue.h"

#include <immintrin.h>

namespace rlx::cpu::qepi {

void Requant::prepare() {
  size_t n = mul.size();
  m64.resize(n), s64.resize(n), mask.resize(n), half.resize(n), off.resize(n);
  for (size_t j = 0; j < n; ++j) {
    int64_t s = 31 + shift[j];
    m64[j] = mul[j], s64[j] = s;
    mask[j] = (int64_t{1} << s) - 1, half[j] = int64_t{1} << (s - 1), off[j] = int64_t{1} << (62 - s);
  }
}

void correct_scalar(int32_t* c, int64_t N, const uint32_t* wz, uint32_t rs, const uint32_t* ct) {
  for (int64_t n = 0; n < N; ++n) c[n] = static_cast<int32_t>(static_cast<uint32_t>(c[n]) - wz[n] * rs + ct[n]);
}

void scale_scalar(const int32_t* c, int64_t N, const float* sc, bool relu, float* y) {
  for (int64_t n = 0; n < N; ++n) y[n] = static_cast<float>(c[n]) * sc[n];
  if (relu)
    for (int64_t n = 0; n < N; ++n) y[n] = y[n] > 0 ? y[n] : 0.0f;  // as maxps(y, 0): -0 and NaN give +0
}

void requant_scalar(const int32_t* c, int64_t N, const Requant& q, int32_t* y) {
  for (int64_t n = 0; n < N; ++n)
    y[n] = quant::requantize(c[n], q.mul[static_cast<size_t>(n)], q.shift[static_cast<size_t>(n)], q.zp, q.lo, q.hi, q.mode);
}

#if defined(__x86_64__)

#define QEPI_AVX2 __attribute__((target("avx2")))

QEPI_AVX2 void correct_avx2(int32_t* c, int64_t N, const uint32_t* wz, uint32_t rs, const uint32_t* ct) {
  const __m256i r = _mm256_set1_epi32(static_cast<int32_t>(rs));
  int64_t n = 0;
  for (; n + 8 <= N; n += 8) {
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + n));
    __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wz + n));
    __m256i t = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ct + n));
    v = _mm256_add_epi32(_mm256_sub_epi32(v, _mm256_mullo_epi32(w, r)), t);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + n), v);
  }
  correct_scalar(c + n, N - n, wz + n, rs, ct + n);
}

QEPI_AVX2 void scale_avx2(const int32_t* c, int64_t N, const float* sc, bool relu, float* y) {
  const __m256 z = _mm256_setzero_ps();
  int64_t n = 0;
  for (; n + 8 <= N; n += 8) {
    __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + n))),
                             _mm256_loadu_ps(sc + n));
    if (relu) v = _mm256_max_ps(v, z);
    _mm256_storeu_ps(y + n, v);
  }
  scale_scalar(c + n, N - n, sc + n, relu, y + n);
}

namespace {

QEPI_AVX2 inline __m256i ld(const std::vector<int64_t>& v, int64_t n) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v.data() + n));
}

// Four columns starting at n: requantized values as the low 32 bits of four int64 lanes.
QEPI_AVX2 inline __m256i requant4(__m128i acc, const Requant& q, int64_t n, __m256i zp, __m256i lo, __m256i hi) {
  const __m256i one = _mm256_set1_epi64x(1), bias = _mm256_set1_epi64x(int64_t{1} << 62);
  __m256i p = _mm256_mul_epi32(_mm256_cvtepi32_epi64(acc), ld(q.m64, n));  // exact: |acc * m| < 2^62
  __m256i u = _mm256_add_epi64(p, bias);                                 // >= 0
  __m256i s = ld(q.s64, n);
  __m256i fl = _mm256_sub_epi64(_mm256_srlv_epi64(u, s), ld(q.off, n));     // floor(p / 2^s)
  __m256i r = _mm256_and_si256(u, ld(q.mask, n));                           // p - floor * 2^s
  __m256i h = ld(q.half, n);
  __m256i tie = _mm256_cmpeq_epi64(r, h);
  __m256i brk = q.mode == quant::Rounding::HalfEven
                    ? _mm256_cmpeq_epi64(_mm256_and_si256(fl, one), one)           // odd floor goes up
                    : _mm256_xor_si256(_mm256_cmpgt_epi64(_mm256_setzero_si256(), p),  // p >= 0 goes up
                                       _mm256_set1_epi64x(-1));
  __m256i up = _mm256_or_si256(_mm256_cmpgt_epi64(r, h), _mm256_and_si256(tie, brk));
  __m256i v = _mm256_add_epi64(_mm256_sub_epi64(fl, up), zp);  // up is -1 where set
  v = _mm256_blendv_epi8(v, lo, _mm256_cmpgt_epi64(lo, v));
  return _mm256_blendv_epi8(v, hi, _mm256_cmpgt_epi64(v, hi));
}

}  // namespace

QEPI_AVX2 void requant_avx2(const int32_t* c, int64_t N, const Requant& q, int32_t* y) {
  const __m256i zp = _mm256_set1_epi64x(q.zp), lo = _mm256_set1_epi64x(q.lo), hi = _mm256_set1_epi64x(q.hi);
  const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  int64_t n = 0;
  for (; n + 4 <= N; n += 4) {
    __m256i v = requant4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + n)), q, n, zp, lo, hi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + n), _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(v, even)));
  }
  for (; n < N; ++n)
    y[n] = quant::requantize(c[n], q.mul[static_cast<size_t>(n)], q.shift[static_cast<size_t>(n)], q.zp, q.lo, q.hi, q.mode);
}

#else

void correct_avx2(int32_t* c, int64_t N, const uint32_t* wz, uint32_t rs, const uint32_t* ct) { correct_scalar(c, N, wz, rs, ct); }
void scale_avx2(const int32_t* c, int64_t N, const float* sc, bool relu, float* y) { scale_scalar(c, N, sc, relu, y); }
void requant_avx2(const int32_t* c, int64_t N, const Requant& q, int32_t* y) { requant_scalar(c, N, q, y); }

#endif

}  // namespace rlx::cpu::qepi
