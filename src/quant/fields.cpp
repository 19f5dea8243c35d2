// Per-element bit fields of the GGML block layouts; each case mirrors the loop of its reference
// dequantizer in dequant.cpp (tests/unit/test_quant.cpp checks the two agree on random blocks).
#include "quant/fields.h"

#include <cstring>

#include "rlx/dtype.h"

namespace rlx::quant {

namespace {

BitField field(int byte, int shift, int width, int offset = 0) { return BitField{{byte, shift, width}, {}, false, offset}; }
BitField field2(BitPart lo, BitPart hi, int offset = 0) { return BitField{lo, hi, false, offset}; }
BitField signed8(int byte) { return BitField{{byte, 0, 8}, {}, true, 0}; }

// Q4_K / Q5_K: the 6-bit scale (or min, `is_min`) j of 8, packed in 12 bytes at `base`.
BitField scale_k4(int base, int j, bool is_min) {
  if (j < 4) return field(base + j + (is_min ? 4 : 0), 0, 6);
  return field2({base + j + 4, is_min ? 4 : 0, 4}, {base + (is_min ? j : j - 4), 6, 2});
}

void q4_0_like(BlockFields& f, int qs, int offset) {
  for (int e = 0; e < kQK; ++e) f.q.push_back(field(qs + e % 16, e / 16 * 4, 4, offset));
}
// Q5_0 / Q5_1: the low nibble from qs, bit 4 from the 32-bit qh (bit j, or j + 16 for the high half).
void q5_like(BlockFields& f, int qh, int qs, int offset) {
  for (int e = 0; e < kQK; ++e) {
    int bit = e % 16 + (e < 16 ? 0 : 16);
    f.q.push_back(field2({qs + e % 16, e / 16 * 4, 4}, {qh + bit / 8, bit % 8, 1}, offset));
  }
}

}  // namespace

bool block_fields(GgmlType t, BlockFields* out) {
  BlockFields f;
  const TypeTraits* tr = type_traits(static_cast<uint32_t>(t));
  if (!tr || !tr->quantized) return false;
  f.block_bytes = tr->block_bytes;
  f.elems = tr->block_elems;
  using M = BlockFields::Min;
  switch (t) {
    case GgmlType::Q4_0: q4_0_like(f, 2, 8); break;
    case GgmlType::Q4_1:
      f.min_byte = 2, f.min_mode = M::Add;
      q4_0_like(f, 4, 0);
      break;
    case GgmlType::Q5_0: q5_like(f, 2, 6, 16); break;
    case GgmlType::Q5_1:
      f.min_byte = 2, f.min_mode = M::Add;
      q5_like(f, 4, 8, 0);
      break;
    case GgmlType::Q8_0:
    case GgmlType::Q8_1: {
      int qs = t == GgmlType::Q8_0 ? 2 : 4;
      for (int e = 0; e < kQK; ++e) f.q.push_back(signed8(qs + e));
      break;
    }
    case GgmlType::Q2_K:  // scales[16] @0 (low nibble scale, high nibble min), qs[64] @16, d @80, dmin @82
      f.d_byte = 80, f.min_byte = 82, f.min_mode = M::SubScaled;
      for (int e = 0; e < kQKK; ++e) {
        int n = e / 128, sh = e % 128 / 32, half = e % 32 / 16, l = e % 16, is = n * 8 + sh * 2 + half;
        f.q.push_back(field(16 + n * 32 + l + 16 * half, 2 * sh, 2));
        f.scale.push_back(field(is, 0, 4));
        f.min.push_back(field(is, 4, 4));
      }
      break;
    case GgmlType::Q3_K:  // hmask[32] @0, qs[64] @32, scales[12] @96, d @108
      f.d_byte = 108;
      for (int e = 0; e < kQKK; ++e) {
        int n = e / 128, sh = e % 128 / 32, half = e % 32 / 16, l = e % 16, is = n * 8 + sh * 2 + half;
        int k = l + 16 * half;
        // 2 low bits from qs, bit 2 from hmask (set: +0, clear: -4), i.e. (lo | h << 2) - 4.
        f.q.push_back(field2({32 + n * 32 + k, 2 * sh, 2}, {k, n * 4 + sh, 1}, 4));
        // 6-bit scale `is` = 4a + b: a nibble of bytes 0..7 and 2 bits of byte 8 + b; minus 32.
        int a = is / 4, bb = is % 4;
        f.scale.push_back(field2({96 + a % 2 * 4 + bb, a / 2 * 4, 4}, {96 + 8 + bb, 2 * a, 2}, 32));
      }
      break;
    case GgmlType::Q4_K:  // d @0, dmin @2, scales[12] @4, qs[128] @16
    case GgmlType::Q5_K: {  // d @0, dmin @2, scales[12] @4, qh[32] @16, qs[128] @48
      bool q5 = t == GgmlType::Q5_K;
      int qs = q5 ? 48 : 16;
      f.min_byte = 2, f.min_mode = M::SubScaled;
      for (int e = 0; e < kQKK; ++e) {
        int c = e / 64, hi = e % 64 / 32, l = e % 32, j = 2 * c + hi;
        BitPart lo{qs + 32 * c + l, 4 * hi, 4};
        f.q.push_back(q5 ? field2(lo, {16 + l, 2 * c + hi, 1}) : BitField{lo, {}, false, 0});
        f.scale.push_back(scale_k4(4, j, false));
        f.min.push_back(scale_k4(4, j, true));
      }
      break;
    }
    case GgmlType::Q6_K:  // ql[128] @0, qh[64] @128, scales[16] (i8) @192, d @208
      f.d_byte = 208;
      for (int e = 0; e < kQKK; ++e) {
        int c = e / 128, t4 = e % 128 / 32, l = e % 32, is = l / 16;
        f.q.push_back(field2({64 * c + l + 32 * (t4 % 2), 4 * (t4 / 2), 4}, {128 + 32 * c + l, 2 * t4, 2}, 32));
        f.scale.push_back(signed8(192 + 8 * c + is + 2 * t4));
      }
      break;
    default: return false;  // Q8_K: f32 scale
  }
  *out = std::move(f);
  return true;
}

namespace {
int part_value(const BitPart& p, const uint8_t* b) { return p.width ? (b[p.byte] >> p.shift) & ((1 << p.width) - 1) : 0; }
int field_value(const BitField& f, const uint8_t* b) {
  int v = part_value(f.lo, b) | part_value(f.hi, b) << f.lo.width;
  int bits = f.lo.width + f.hi.width;
  if (f.sign && v >= 1 << (bits - 1)) v -= 1 << bits;
  return v - f.offset;
}
float f16_at(const uint8_t* b, int byte) {
  uint16_t h;
  std::memcpy(&h, b + byte, 2);
  return f16_to_f32(h);
}
}  // namespace

void dequantize_by_fields(const BlockFields& f, const uint8_t* src, float* y, int64_t nblocks) {
  for (int64_t i = 0; i < nblocks; ++i, src += f.block_bytes, y += f.elems) {
    float d = f16_at(src, f.d_byte), m = f.min_byte >= 0 ? f16_at(src, f.min_byte) : 0.f;
    for (int e = 0; e < f.elems; ++e) {
      float ds = f.scale.empty() ? d : d * static_cast<float>(field_value(f.scale[e], src));
      float v = ds * static_cast<float>(field_value(f.q[e], src));
      if (f.min_mode == BlockFields::Min::Add) v += m;
      if (f.min_mode == BlockFields::Min::SubScaled) v -= m * static_cast<float>(field_value(f.min[e], src));
      y[e] = v;
    }
  }
}

}  // namespace rlx::quant
