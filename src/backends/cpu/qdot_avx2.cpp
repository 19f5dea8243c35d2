// The AVX2 integer block dots of qdot.h. Per block the 32 weight codes are widened to bytes in
// element order (Q4: low nibbles are elements 0..15, high nibbles 16..31), then
//  - signed codes (Q8_0, Q4_0 minus 8): vpmaddubsw needs an unsigned left operand, so it gets |w| and
//    the activations take w's sign (vpsignb); |w| <= 128 and |x| <= 127 keep each s16 pair sum
//    <= 32512, so nothing saturates;
//  - unsigned codes (Q4_1): vpmaddubsw(w, x) directly (pairs <= 2 * 15 * 127);
// vpmaddwd with ones folds the s16 pairs into eight s32 lanes (exact), converted to f32 and
// multiplied by the product of the two block scales into an f32 accumulator.
#include "backends/cpu/qdot.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <cmath>
#include <cstring>

namespace rlx::cpu::qdot {

namespace {

#define RLX_QDOT_FN __attribute__((target("avx2,fma,f16c")))

RLX_QDOT_FN inline __m256i widen_nibbles(const uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);
  return _mm256_and_si256(both, _mm256_set1_epi8(15));
}

// Eight s32 lanes whose sum is the block's integer dot of signed codes w with x.
RLX_QDOT_FN inline __m256i dot_signed(__m256i w, __m256i x) {
  const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

RLX_QDOT_FN inline __m256i dot_unsigned(__m256i w, __m256i x) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1));
}

RLX_QDOT_FN inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

RLX_QDOT_FN inline __m256i load_x(const BlockX8& x) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs));
}

RLX_QDOT_FN float dot_q8_0(const quant::BlockQ8_0* w, const BlockX8* x, int64_t nb) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b + 1].qs));
    const __m256 s0 = _mm256_set1_ps(_cvtsh_ss(w[b].d) * x[b].d), s1 = _mm256_set1_ps(_cvtsh_ss(w[b + 1].d) * x[b + 1].d);
    acc0 = _mm256_fmadd_ps(s0, _mm256_cvtepi32_ps(dot_signed(w0, load_x(x[b]))), acc0);
    acc1 = _mm256_fmadd_ps(s1, _mm256_cvtepi32_ps(dot_signed(w1, load_x(x[b + 1]))), acc1);
  }
  for (; b < nb; ++b) {
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(w[b].d) * x[b].d), _mm256_cvtepi32_ps(dot_signed(w0, load_x(x[b]))), acc0);
  }
  return hsum(_mm256_add_ps(acc0, acc1));
}

RLX_QDOT_FN float dot_q4_0(const quant::BlockQ4_0* w, const BlockX8* x, int64_t nb) {
  const __m256i eight = _mm256_set1_epi8(8);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    const __m256i w0 = _mm256_sub_epi8(widen_nibbles(w[b].qs), eight);
    const __m256i w1 = _mm256_sub_epi8(widen_nibbles(w[b + 1].qs), eight);
    const __m256 s0 = _mm256_set1_ps(_cvtsh_ss(w[b].d) * x[b].d), s1 = _mm256_set1_ps(_cvtsh_ss(w[b + 1].d) * x[b + 1].d);
    acc0 = _mm256_fmadd_ps(s0, _mm256_cvtepi32_ps(dot_signed(w0, load_x(x[b]))), acc0);
    acc1 = _mm256_fmadd_ps(s1, _mm256_cvtepi32_ps(dot_signed(w1, load_x(x[b + 1]))), acc1);
  }
  for (; b < nb; ++b) {
    const __m256i w0 = _mm256_sub_epi8(widen_nibbles(w[b].qs), eight);
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(w[b].d) * x[b].d), _mm256_cvtepi32_ps(dot_signed(w0, load_x(x[b]))), acc0);
  }
  return hsum(_mm256_add_ps(acc0, acc1));
}

RLX_QDOT_FN float dot_q4_1(const quant::BlockQ4_1* w, const BlockX8* x, int64_t nb) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  float mins = 0;
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    const __m256 s0 = _mm256_set1_ps(_cvtsh_ss(w[b].d) * x[b].d), s1 = _mm256_set1_ps(_cvtsh_ss(w[b + 1].d) * x[b + 1].d);
    acc0 = _mm256_fmadd_ps(s0, _mm256_cvtepi32_ps(dot_unsigned(widen_nibbles(w[b].qs), load_x(x[b]))), acc0);
    acc1 = _mm256_fmadd_ps(s1, _mm256_cvtepi32_ps(dot_unsigned(widen_nibbles(w[b + 1].qs), load_x(x[b + 1]))), acc1);
    mins += _cvtsh_ss(w[b].m) * x[b].s + _cvtsh_ss(w[b + 1].m) * x[b + 1].s;
  }
  for (; b < nb; ++b) {
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(w[b].d) * x[b].d),
                           _mm256_cvtepi32_ps(dot_unsigned(widen_nibbles(w[b].qs), load_x(x[b]))), acc0);
    mins += _cvtsh_ss(w[b].m) * x[b].s;
  }
  return hsum(_mm256_add_ps(acc0, acc1)) + mins;
}

}  // namespace

// Q8_0 rows against f32 x: per block the 32 codes widened to f32 and multiplied into x (four FMAs),
// the block scale applied once.
RLX_QDOT_FN float row_dot_f32_q8_0_avx2(const uint8_t* wr, const float* x, int64_t nb) {
  const auto* w = reinterpret_cast<const quant::BlockQ8_0*>(wr);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, x += quant::kQK) {
    __m256 s = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(w[b].qs + 8 * i));
      s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), _mm256_loadu_ps(x + 8 * i), s);
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(w[b].d)), s, acc);
  }
  return hsum(acc);
}

// Same bits as quantize_row_scalar: the same max, the same scale, round-half-even, and the block
// sum added in the same order (eight lanes, then the tree of hsum).
RLX_QDOT_FN void quantize_row_avx2(const float* x, BlockX8* out, int64_t k) {
  const __m256 sign = _mm256_set1_ps(-0.0f), inf = _mm256_set1_ps(INFINITY);
  for (int64_t b = 0; b < k / quant::kQK; ++b, x += quant::kQK) {
    BlockX8& o = out[b];
    __m256 v[4], amax = _mm256_setzero_ps(), bad = _mm256_setzero_ps(), sum = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + 8 * i);
      const __m256 a = _mm256_andnot_ps(sign, v[i]);
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, inf, _CMP_NLT_UQ));  // inf or NaN
      amax = _mm256_max_ps(amax, a);
      sum = _mm256_add_ps(sum, v[i]);
    }
    if (_mm256_movemask_ps(bad)) {
      o.d = o.s = NAN;
      std::memset(o.qs, 0, sizeof(o.qs));
      continue;
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float am = _mm_cvtss_f32(m4);
    float id = am > 0 ? 127.f / am : 0.f;
    if (!std::isfinite(id)) id = 0.f;
    const __m256 idv = _mm256_set1_ps(id);
    __m256i q[4];
    for (int i = 0; i < 4; ++i)
      q[i] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[i], idv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    // s32 -> s8 with the lanes back in element order (packs work within 128-bit halves).
    const __m256i p01 = _mm256_packs_epi32(q[0], q[1]), p23 = _mm256_packs_epi32(q[2], q[3]);
    const __m256i p = _mm256_packs_epi16(p01, p23);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.qs), _mm256_permutevar8x32_epi32(p, perm));
    o.d = am / 127.f;
    o.s = hsum(sum);
  }
}

#undef RLX_QDOT_FN

float row_dot_avx2(quant::GgmlType t, const uint8_t* w, const BlockX8* x, int64_t nb) {
  switch (t) {
    case quant::GgmlType::Q8_0: return dot_q8_0(reinterpret_cast<const quant::BlockQ8_0*>(w), x, nb);
    case quant::GgmlType::Q4_0: return dot_q4_0(reinterpret_cast<const quant::BlockQ4_0*>(w), x, nb);
    default: return dot_q4_1(reinterpret_cast<const quant::BlockQ4_1*>(w), x, nb);
  }
}

}  // namespace rlx::cpu::qdot

#endif
