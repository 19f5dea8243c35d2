// Integer block dot products of packed GGML weight rows (Q4_0, Q4_1, Q8_0) with an activation row
// quantized to 8-bit blocks once per matmul, the way llama.cpp computes decode GEMVs: per 32-element
// block the integer codes are multiplied and summed exactly in int32, and the two block scales
// (plus Q4_1's min times the activation block's f32 sum) applied once. The AVX2 form (qdot_avx2.cpp:
// vpmaddubsw / vpmaddwd) and the scalar form produce the same int32 block sums; they differ only in
// the order the f32 block results are added. Chosen at run time by cpu_isa() (isa.h).
#pragma once
#include <cstdint>

#include "quant/blocks.h"

namespace rlx::cpu::qdot {

// One activation block: x[i] ~= d * qs[i], |qs[i]| <= 127, d = max|x| / 127 (0 for an all-zero
// block); s = sum(x[i]) in f32, what a Q4_1 weight block's min multiplies (exact, where llama.cpp
// uses d * sum(qs)). f32 scales, unlike llama.cpp's f16 ones: the activations are never stored, so
// nothing fixes their layout.
struct BlockX8 {
  float d, s;
  int8_t qs[quant::kQK];
};
static_assert(sizeof(BlockX8) == 40);

// Whether `t` has an integer block dot here.
bool supported(quant::GgmlType t);
// Whether the one-row kernel takes the integer dot for `t`: Q4_0 and Q4_1. Q8_0 weights keep f32
// activations: 8-bit activations would give up the precision 8-bit weights are chosen for (on
// SmolLM2's tied Q8_0 head they move logits by ~0.1, enough to flip a greedy answer).
bool preferred(quant::GgmlType t);

// x[0, k) (k a multiple of 32) -> k / 32 blocks; round to nearest, ties to even (same bits at every
// ISA level).
void quantize_row(const float* x, BlockX8* out, int64_t k);

// Weight row `w` (nb blocks of type t, GGUF layout) dotted with nb activation blocks.
float row_dot(quant::GgmlType t, const uint8_t* w, const BlockX8* x, int64_t nb);

// The portable forms, kept callable so tests compare them with the AVX2 ones at one ISA level.
float row_dot_scalar(quant::GgmlType t, const uint8_t* w, const BlockX8* x, int64_t nb);
void quantize_row_scalar(const float* x, BlockX8* out, int64_t k);
#if defined(__x86_64__) && defined(__GNUC__)
float row_dot_avx2(quant::GgmlType t, const uint8_t* w, const BlockX8* x, int64_t nb);
void quantize_row_avx2(const float* x, BlockX8* out, int64_t k);
// Not an integer dot: a Q8_0 row against f32 x (what the one-row kernel runs for Q8_0 weights).
float row_dot_f32_q8_0_avx2(const uint8_t* w, const float* x, int64_t nb);
#endif

}  // namespace rlx::cpu::qdot
