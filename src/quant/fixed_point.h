// Affine int8 arithmetic shared bit for bit by the reference interpreter, the decompositions' host
// constants, the cpu kernels and the code generators (Cortex-M C, FPGA datapath): one definition.
//
// requantize(acc, m, shift): the exact rational acc * m / 2^(31 + shift), rounded ONCE (half to
// even, or half away from zero), then + zero_point, then saturated to the output type's range.
//   * m is a non-negative Q31 multiplier (quantize_multiplier gives m in [2^30, 2^31) for scale > 0);
//   * shift is a right shift, -30 <= shift <= 31, so 1 <= 31 + shift <= 62: scales from 2^-32 to 2^30.
//   * |acc * m| < 2^62, so the product and the rounding fit int64 with no intermediate rounding —
//     unlike gemmlowp/TFLite's two-step SaturatingRoundingDoublingHighMul + RoundingDivideByPOT.
// quantize(x, scale, zp): saturate(round_half_even(x / scale) + zp), the quotient in f32 (ONNX).
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

namespace rlx::quant {

enum class Rounding : uint8_t { HalfEven, HalfAway };

inline bool parse_rounding(const std::string& s, Rounding* r) {
  if (s == "half_even") *r = Rounding::HalfEven;
  else if (s == "half_away") *r = Rounding::HalfAway;
  else return false;
  return true;
}

constexpr int kMinShift = -30, kMaxShift = 31;

// round(p / 2^s) for 1 <= s <= 62, by the exact integer remainder.
inline int64_t rounding_shift(int64_t p, int s, Rounding mode) {
  int64_t q = p >> s;                 // floor (arithmetic shift)
  int64_t r = p - (q << s);           // 0 <= r < 2^s
  int64_t half = int64_t{1} << (s - 1);
  bool up;
  if (r != half) up = r > half;
  else if (mode == Rounding::HalfEven) up = (q & 1) != 0;
  else up = p >= 0;                   // a tie goes away from zero: up for positive, down for negative
  return q + (up ? 1 : 0);
}

inline int32_t saturate(int64_t v, int32_t lo, int32_t hi) {
  return static_cast<int32_t>(v < lo ? lo : (v > hi ? hi : v));
}

// One output element: acc (i32) -> [lo, hi].
inline int32_t requantize(int32_t acc, int32_t m, int32_t shift, int32_t zp, int32_t lo, int32_t hi,
                          Rounding mode) {
  int64_t p = static_cast<int64_t>(acc) * m;
  return saturate(rounding_shift(p, 31 + shift, mode) + zp, lo, hi);
}

// Encodes a positive real scale as (m, shift) with scale ≈ m / 2^(31 + shift), m in [2^30, 2^31);
// false when the scale is out of the representable range (or not finite and positive).
inline bool quantize_multiplier(double scale, int32_t* m, int32_t* shift) {
  if (!(scale > 0) || !std::isfinite(scale)) return false;
  int e = 0;
  double f = std::frexp(scale, &e);  // scale = f * 2^e, f in [0.5, 1)
  int64_t q = std::llround(f * 2147483648.0);  // f * 2^31 in [2^30, 2^31]
  if (q == (int64_t{1} << 31)) {
    q >>= 1;
    ++e;
  }
  int s = -e;  // scale = q / 2^31 * 2^e = q / 2^(31 - e)
  if (s < kMinShift || s > kMaxShift) return false;
  *m = static_cast<int32_t>(q);
  *shift = s;
  return true;
}

inline double multiplier_value(int32_t m, int32_t shift) { return std::ldexp(static_cast<double>(m), -(31 + shift)); }

// ONNX QuantizeLinear on one element: the f32 quotient, round half to even, + zp, saturate.
inline int32_t quantize(float x, float scale, int32_t zp, int32_t lo, int32_t hi) {
  float v = x / scale;
  if (std::isnan(v)) return saturate(zp, lo, hi);
  float r = std::nearbyint(v);  // the default rounding mode: half to even
  double t = static_cast<double>(r) + zp;
  if (t < lo) return lo;
  if (t > hi) return hi;
  return static_cast<int32_t>(t);
}

inline float dequantize(int32_t q, int32_t zp, float scale) {
  return static_cast<float>(static_cast<int64_t>(q) - zp) * scale;
}

// Range of i8 / u8.
inline void int8_range(bool is_unsigned, int32_t* lo, int32_t* hi) {
  *lo = is_unsigned ? 0 : -128;
  *hi = is_unsigned ? 255 : 127;
}

}  // namespace rlx::quant
