// Row kernels of the int8 GEMM's epilogue (qlinear.cpp): the zero-point correction of the raw s32
// products, the f32 scale (+ ReLU), and the fixed-point requantize of quant/fixed_point.h. Each has
// a scalar form and an AVX2 form with the same bits; the AVX2 requantize is the same exact rational
// rounding on 4 int64 lanes (the product acc * m is exact in 64 bits; +2^62 makes it non-negative
// so a logical variable shift floors it; the remainder against half decides the one rounding step).
#pragma once
#include <cstdint>
#include <vector>

#include "quant/fixed_point.h"

namespace rlx::cpu::qepi {

// Per-column fixed-point constants, with the derived shift masks the AVX2 form reads.
struct Requant {
  std::vector<int32_t> mul, shift;               // per column (quantize_multiplier)
  std::vector<int64_t> m64, s64, mask, half, off;  // m, 31 + shift, 2^s - 1, 2^(s-1), 2^(62-s)
  int32_t zp = 0, lo = 0, hi = 0;
  quant::Rounding mode = quant::Rounding::HalfEven;
  void prepare();  // fills the derived vectors from mul / shift
};

// c[n] = c[n] - wz[n] * rs + ct[n], mod 2^32.
void correct_scalar(int32_t* c, int64_t N, const uint32_t* wz, uint32_t rs, const uint32_t* ct);
void correct_avx2(int32_t* c, int64_t N, const uint32_t* wz, uint32_t rs, const uint32_t* ct);
// y[n] = f32(c[n]) * sc[n], then max(., 0) with relu.
void scale_scalar(const int32_t* c, int64_t N, const float* sc, bool relu, float* y);
void scale_avx2(const int32_t* c, int64_t N, const float* sc, bool relu, float* y);
// y[n] = requantize(c[n]) per column, in [lo, hi].
void requant_scalar(const int32_t* c, int64_t N, const Requant& q, int32_t* y);
void requant_avx2(const int32_t* c, int64_t N, const Requant& q, int32_t* y);

}  // namespace rlx::cpu::qepi
