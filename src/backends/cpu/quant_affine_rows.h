// Row kernels of quantize_affine / dequantize_affine over one contiguous run with one (scale, zp):
// the scalar form (quant/fixed_point.h element functions) and an AVX2 form that gives the same
// bits. The AVX2 quotient is the same IEEE f32 division, rounded half to even by vroundps, clamped
// in f32 (|r| < 2^24 is exact there, anything larger saturates either way), NaN mapped to the
// saturated zero point, then packed to bytes.
#pragma once

#include <cstdint>

namespace rlx::cpu::qrows {

void quantize_u8_scalar(const float* x, int64_t n, float scale, int32_t zp, uint8_t* y);
void quantize_s8_scalar(const float* x, int64_t n, float scale, int32_t zp, int8_t* y);
void dequantize_u8_scalar(const uint8_t* q, int64_t n, float scale, int32_t zp, float* y);
void dequantize_s8_scalar(const int8_t* q, int64_t n, float scale, int32_t zp, float* y);

// AVX2 forms; callable only where the host has AVX2 (simd::cpu_has_avx2()).
void quantize_u8_avx2(const float* x, int64_t n, float scale, int32_t zp, uint8_t* y);
void quantize_s8_avx2(const float* x, int64_t n, float scale, int32_t zp, int8_t* y);
void dequantize_u8_avx2(const uint8_t* q, int64_t n, float scale, int32_t zp, float* y);
void dequantize_s8_avx2(const int8_t* q, int64_t n, float scale, int32_t zp, float* y);

}  // namespace rlx::cpu::qrows
