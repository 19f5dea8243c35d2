// Branch-free float math that the compiler vectorizes inside RLX_SIMD loops (exp, erf, tanh,
// logistic, gelu). Accuracy: a few ulp for exp; ~2e-7 absolute for erf/tanh.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

// Hot loops are compiled for the x86-64-v4 (AVX-512), x86-64-v3 (AVX2+FMA) and baseline ISA levels;
// the loader picks one at run time by CPU *features* (GCC function multi-versioning on ELF).
// Note: clones named by CPU model ("arch=haswell", "arch=icelake-server") are chosen by model
// number, so an AMD EPYC with AVX2 got the scalar baseline clone; measured on this machine,
// gelu 21 -> 1.9 ns and exp 3.3 -> 0.57 ns per element after switching to ISA levels.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(RLX_NO_CLONES)
#define RLX_SIMD __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define RLX_SIMD
#endif

// The cpu sources build with -fno-trapping-math (CMakeLists.txt) so the selects below vectorize.
#define RLX_INLINE inline __attribute__((always_inline))

namespace rlx::cpu::vm {

RLX_INLINE float exp(float x) {
  const float in = x;
  x = x < -87.33654f ? -87.33654f : x;
  x = x > 88.72283f ? 88.72283f : x;
  float n = __builtin_floorf(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  int32_t e = (static_cast<int32_t>(n == n ? n : 0.f) + 126) << 23;  // 2^(n-1), times 2 below: n may be 128; NaN stays NaN through p
  float res = p * std::bit_cast<float>(e) * 2.f;
  res = in > 88.72283f ? __builtin_inff() : res;  // overflow to inf, underflow to 0 like std::exp
  return in < -103.97208f ? 0.f : res;
}

RLX_INLINE float erf(float x) {
  float a = __builtin_fabsf(x);
  // Small |x|: Taylor series (relative accuracy where erf is small).
  float z2 = x * x;
  float s = x * (1.128379167f + z2 * (-0.3761263890f + z2 * (0.1128379167f + z2 * (-0.02686617064f +
                                                                                   z2 * (0.005223977625f + z2 * -0.0008548327023f)))));
  // Otherwise erfc via the Chebyshev fit of Numerical Recipes (fractional error < 1.2e-7).
  float t = 1.f / (1.f + 0.5f * a);
  float y = -a * a - 1.26551223f +
            t * (1.00002368f +
                 t * (0.37409196f +
                      t * (0.09678418f +
                           t * (-0.18628806f +
                                t * (0.27886807f + t * (-1.13520398f + t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f))))))));
  float erfc = t * vm::exp(y);
  float big = __builtin_copysignf(1.f - erfc, x);
  return a < 0.5f ? s : big;
}

RLX_INLINE float tanh(float x) {
  float a = __builtin_fabsf(x);
  float z2 = x * x;
  float s = x * (1.f + z2 * (-0.3333333333f + z2 * (0.1333333333f + z2 * (-0.05396825397f +
                                                                         z2 * (0.02186948854f + z2 * -0.008863235530f)))));
  float e = vm::exp(2.f * a);
  float big = __builtin_copysignf(1.f - 2.f / (e + 1.f), x);
  return a < 0.4f ? s : big;
}

RLX_INLINE float logistic(float x) { return 1.f / (1.f + vm::exp(-x)); }
RLX_INLINE float gelu(float x) { return 0.5f * x * (1.f + vm::erf(x * 0.70710678118654752f)); }
RLX_INLINE float gelu_tanh(float x) {
  return 0.5f * x * (1.f + vm::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

}  // namespace rlx::cpu::vm
