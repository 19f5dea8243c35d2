// GGML block formats as plain structs (layouts fixed by the GGUF format) and their reference
// dequantizers. Sizes are checked at compile time; every struct is byte-packed by construction.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rlx::quant {

// ggml type ids as stored in GGUF tensor infos.
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9, Q2_K = 10, Q3_K = 11,
  Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, BF16 = 30,
};

constexpr int kQK = 32;     // elements per block of the *_0/*_1 formats
constexpr int kQKK = 256;   // elements per super-block of the K formats
constexpr int kKScale = 12; // packed 6-bit scales/mins of Q4_K/Q5_K

struct BlockQ4_0 { uint16_t d; uint8_t qs[kQK / 2]; };
struct BlockQ4_1 { uint16_t d, m; uint8_t qs[kQK / 2]; };
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[kQK / 2]; };
struct BlockQ5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[kQK / 2]; };
struct BlockQ8_0 { uint16_t d; int8_t qs[kQK]; };
struct BlockQ8_1 { uint16_t d, s; int8_t qs[kQK]; };
struct BlockQ2_K { uint8_t scales[kQKK / 16]; uint8_t qs[kQKK / 4]; uint16_t d, dmin; };
struct BlockQ3_K { uint8_t hmask[kQKK / 8]; uint8_t qs[kQKK / 4]; uint8_t scales[12]; uint16_t d; };
struct BlockQ4_K { uint16_t d, dmin; uint8_t scales[kKScale]; uint8_t qs[kQKK / 2]; };
struct BlockQ5_K { uint16_t d, dmin; uint8_t scales[kKScale]; uint8_t qh[kQKK / 8]; uint8_t qs[kQKK / 2]; };
struct BlockQ6_K { uint8_t ql[kQKK / 2]; uint8_t qh[kQKK / 4]; int8_t scales[kQKK / 16]; uint16_t d; };
struct BlockQ8_K { float d; int8_t qs[kQKK]; int16_t bsums[kQKK / 16]; };

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

struct TypeTraits {
  GgmlType type;
  const char* name;   // "Q4_K"
  int block_elems;    // elements per block (1 for plain types)
  int block_bytes;    // bytes per block
  bool quantized;
};

// Traits of a known type; nullptr for an unknown id.
const TypeTraits* type_traits(uint32_t id);
const TypeTraits* type_traits_by_name(std::string_view name);  // case-insensitive "q4_k"
std::string type_name(uint32_t id);                              // "Q4_K" or "type#99"
// Bytes for a row of `n` elements; throws when n is not a multiple of the block size.
size_t row_bytes(GgmlType t, int64_t n);

// Reference dequantization of `n` elements (a multiple of the block size) from `src` into `dst`.
// Handles every type above except the integer ones.
void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n);
// Reference quantizers used by tests and the GGUF writer path (Q8_0, Q4_0 only; K types come from
// the gguf package).
void quantize_row_q8_0(const float* src, BlockQ8_0* dst, int64_t n);
void quantize_row_q4_0(const float* src, BlockQ4_0* dst, int64_t n);

}  // namespace rlx::quant
