// The portable integer block dots of qdot.h, the activation quantizer and the ISA dispatch.
#include "backends/cpu/qdot.h"

#include <cmath>

#include "backends/cpu/isa.h"
#include "rlx/dtype.h"

namespace rlx::cpu::qdot {

bool supported(quant::GgmlType t) {
  return t == quant::GgmlType::Q4_0 || t == quant::GgmlType::Q4_1 || t == quant::GgmlType::Q8_0;
}

bool preferred(quant::GgmlType t) { return t == quant::GgmlType::Q4_0 || t == quant::GgmlType::Q4_1; }

void quantize_row_scalar(const float* x, BlockX8* out, int64_t k) {
  for (int64_t b = 0; b < k / quant::kQK; ++b, x += quant::kQK) {
    BlockX8& o = out[b];
    float amax = 0;
    bool finite = true;
    for (int i = 0; i < quant::kQK; ++i) {
      finite &= std::isfinite(x[i]);
      amax = std::fmax(amax, std::fabs(x[i]));
    }
    if (!finite) {  // inf/NaN in the block: its products are NaN, as the f32 dot's would be (or inf)
      o.d = o.s = NAN;
      for (int i = 0; i < quant::kQK; ++i) o.qs[i] = 0;
      continue;
    }
    // 127/amax overflows for amax below ~3.7e-37: such a block quantizes to zeros (its products are
    // below f32 resolution of any real dot), keeping |q| <= 127 for the vpmaddubsw bound.
    float id = amax > 0 ? 127.f / amax : 0.f;
    if (!std::isfinite(id)) id = 0.f;
    // The block sum in the AVX2 form's order: eight lanes of strided sums, then a fixed tree.
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < quant::kQK; ++i) {
      o.qs[i] = static_cast<int8_t>(std::nearbyint(x[i] * id));  // |q| <= 127
      lane[i & 7] += x[i];
    }
    o.d = amax / 127.f;
    o.s = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
  }
}

void quantize_row(const float* x, BlockX8* out, int64_t k) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx2 = cpu_isa() >= CpuIsa::Avx2;
  if (avx2) return quantize_row_avx2(x, out, k);
#endif
  quantize_row_scalar(x, out, k);
}

float row_dot_scalar(quant::GgmlType t, const uint8_t* w, const BlockX8* x, int64_t nb) {
  float acc = 0;
  constexpr int kH = quant::kQK / 2;
  for (int64_t b = 0; b < nb; ++b) {
    const int8_t* xq = x[b].qs;
    int32_t s = 0;
    if (t == quant::GgmlType::Q8_0) {
      const auto* blk = reinterpret_cast<const quant::BlockQ8_0*>(w) + b;
      for (int i = 0; i < quant::kQK; ++i) s += blk->qs[i] * xq[i];
      acc += f16_to_f32(blk->d) * x[b].d * static_cast<float>(s);
    } else if (t == quant::GgmlType::Q4_0) {
      const auto* blk = reinterpret_cast<const quant::BlockQ4_0*>(w) + b;
      for (int i = 0; i < kH; ++i) s += ((blk->qs[i] & 15) - 8) * xq[i] + ((blk->qs[i] >> 4) - 8) * xq[i + kH];
      acc += f16_to_f32(blk->d) * x[b].d * static_cast<float>(s);
    } else {
      const auto* blk = reinterpret_cast<const quant::BlockQ4_1*>(w) + b;
      for (int i = 0; i < kH; ++i) s += (blk->qs[i] & 15) * xq[i] + (blk->qs[i] >> 4) * xq[i + kH];
      acc += f16_to_f32(blk->d) * x[b].d * static_cast<float>(s) + f16_to_f32(blk->m) * x[b].s;
    }
  }
  return acc;
}

float row_dot(quant::GgmlType t, const uint8_t* w, const BlockX8* x, int64_t nb) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx2 = cpu_isa() >= CpuIsa::Avx2;
  if (avx2) return row_dot_avx2(t, w, x, nb);
#endif
  return row_dot_scalar(t, w, x, nb);
}

}  // namespace rlx::cpu::qdot
