// Where each element of a GGML block comes from, as bit fields of the block's bytes: the layout
// the reference dequantizers (dequant.cpp) walk in loops, written out per element so that a graph
// of integer primitives (gather, div, rem) can rebuild the same values on any device
// (src/passes/decompose/dequantize.cpp).
#pragma once
#include <cstdint>
#include <vector>

#include "quant/blocks.h"

namespace rlx::quant {

// (block[byte] >> shift) & ((1 << width) - 1); width 0 is the constant 0.
struct BitPart {
  int byte = 0, shift = 0, width = 0;
};
// lo | hi << lo.width, read as a two's-complement number of lo.width + hi.width bits when `sign`,
// minus `offset`.
struct BitField {
  BitPart lo, hi;
  bool sign = false;
  int offset = 0;
  bool present() const { return lo.width + hi.width > 0; }
};

// One block of `elems` values: y[e] = (d * scale[e]) * q[e] + m (min_mode Add: m = the f16 at
// min_byte) or - dmin * min[e] (min_mode SubScaled: dmin = the f16 at min_byte). scale[e] is 1 when
// absent. d and the min are little-endian f16 at fixed byte offsets.
struct BlockFields {
  enum class Min { None, Add, SubScaled };
  int block_bytes = 0, elems = 0;
  int d_byte = 0, min_byte = -1;
  Min min_mode = Min::None;
  std::vector<BitField> q, scale, min;  // per element; scale/min empty when absent
};

// The fields of `t`, or false for a type whose block has no f16-scaled layout (plain floats, Q8_K's
// f32 scale).
bool block_fields(GgmlType t, BlockFields* out);

// Evaluates the fields on the host (the description checked against dequantize_row in tests).
void dequantize_by_fields(const BlockFields& f, const uint8_t* src, float* y, int64_t nblocks);

}  // namespace rlx::quant
