// The cpu kernels of quantize_affine (f32 -> i8/u8) and dequantize_affine (i8/u8/i32 -> f32): the
// row kernels of quant_affine_rows.h (AVX2 where the host has it, else the scalar element functions)
// over contiguous rows, per tensor or per channel.
#include <algorithm>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/quant_affine_rows.h"
#include "backends/cpu/simd_avx2.h"
#include "quant/fixed_point.h"

namespace rlx::cpu {

namespace {

// (outer, channels, inner) of a shape split at `axis` (per tensor: one channel).
void split_at(const std::vector<int64_t>& d, int64_t axis, int64_t* outer, int64_t* ch, int64_t* inner) {
  *outer = 1, *ch = 1, *inner = 1;
  if (axis < 0) {
    for (int64_t v : d) *inner *= v;
    return;
  }
  for (int64_t i = 0; i < axis; ++i) *outer *= d[static_cast<size_t>(i)];
  *ch = d[static_cast<size_t>(axis)];
  for (size_t i = static_cast<size_t>(axis) + 1; i < d.size(); ++i) *inner *= d[i];
}

// One run of `n` elements with one (scale, zp): the AVX2 kernel where the host has it.
inline void quantize_run(const float* x, int64_t n, float s, int32_t zp, uint8_t* y) {
  simd::cpu_has_avx2() ? qrows::quantize_u8_avx2(x, n, s, zp, y) : qrows::quantize_u8_scalar(x, n, s, zp, y);
}
inline void quantize_run(const float* x, int64_t n, float s, int32_t zp, int8_t* y) {
  simd::cpu_has_avx2() ? qrows::quantize_s8_avx2(x, n, s, zp, y) : qrows::quantize_s8_scalar(x, n, s, zp, y);
}
inline void dequantize_run(const uint8_t* q, int64_t n, float s, int32_t zp, float* y) {
  simd::cpu_has_avx2() ? qrows::dequantize_u8_avx2(q, n, s, zp, y) : qrows::dequantize_u8_scalar(q, n, s, zp, y);
}
inline void dequantize_run(const int8_t* q, int64_t n, float s, int32_t zp, float* y) {
  simd::cpu_has_avx2() ? qrows::dequantize_s8_avx2(q, n, s, zp, y) : qrows::dequantize_s8_scalar(q, n, s, zp, y);
}
inline void dequantize_run(const int32_t* q, int64_t n, float s, int32_t zp, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = quant::dequantize(q[i], zp, s);
}

template <class Q>
void quantize_rows(const float* x, const float* s, const Q* z, Q* y, int64_t outer, int64_t ch, int64_t inner) {
  parallel_for(outer * ch, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t c = r % ch;
      quantize_run(x + r * inner, inner, s[c], static_cast<int32_t>(z[c]), y + r * inner);
    }
  });
}

template <class Q>
void dequantize_rows(const Q* q, const float* s, const Q* z, float* y, int64_t outer, int64_t ch, int64_t inner) {
  parallel_for(outer * ch, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t c = r % ch;
      dequantize_run(q + r * inner, inner, s[c], static_cast<int32_t>(z[c]), y + r * inner);
    }
  });
}

}  // namespace

void quantize_affine(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  int64_t o, c, i;
  split_at(in[0].shape(), attr_int(n, "axis"), &o, &c, &i);
  if (out[0].dtype() == DType::u8)
    quantize_rows(in[0].data<float>(), in[1].data<float>(), in[2].data<uint8_t>(), out[0].data<uint8_t>(), o, c, i);
  else
    quantize_rows(in[0].data<float>(), in[1].data<float>(), in[2].data<int8_t>(), out[0].data<int8_t>(), o, c, i);
}

void dequantize_affine(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  int64_t o, c, i;
  split_at(in[0].shape(), attr_int(n, "axis"), &o, &c, &i);
  const float* s = in[1].data<float>();
  float* y = out[0].data<float>();
  switch (in[0].dtype()) {
    case DType::u8: return dequantize_rows(in[0].data<uint8_t>(), s, in[2].data<uint8_t>(), y, o, c, i);
    case DType::i8: return dequantize_rows(in[0].data<int8_t>(), s, in[2].data<int8_t>(), y, o, c, i);
    default: return dequantize_rows(in[0].data<int32_t>(), s, in[2].data<int32_t>(), y, o, c, i);
  }
}

}  // namespace rlx::cpu
