// Element types. The list is fixed by the IR: every level, device and format speaks these names.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rlx {

#define RLX_DTYPES(X)       \
  X(f32, 4, kFloat)         \
  X(f16, 2, kFloat)         \
  X(bf16, 2, kFloat)        \
  X(f64, 8, kFloat)         \
  X(c64, 8, kComplex)       \
  X(i8, 1, kSigned)         \
  X(u8, 1, kUnsigned)       \
  X(i16, 2, kSigned)        \
  X(i32, 4, kSigned)        \
  X(i64, 8, kSigned)        \
  X(boolean, 1, kBool)      \
  X(u16, 2, kUnsigned)      \
  X(u32, 4, kUnsigned)      \
  X(u64, 8, kUnsigned)

enum class DType : uint8_t {
#define X(name, size, cls) name,
  RLX_DTYPES(X)
#undef X
};
constexpr int kNumDTypes = 14;  // u16/u32/u64 have the last ids, so the others keep theirs

enum class DClass : uint8_t { kFloat, kComplex, kSigned, kUnsigned, kBool };

size_t dtype_size(DType t);
DClass dtype_class(DType t);
std::string_view dtype_name(DType t);  // "f32", ..., "bool"
bool parse_dtype(std::string_view s, DType* out);
inline bool is_float(DType t) { return dtype_class(t) == DClass::kFloat; }
inline bool is_int(DType t) {
  auto c = dtype_class(t);
  return c == DClass::kSigned || c == DClass::kUnsigned;
}
inline bool is_complex(DType t) { return t == DType::c64; }

// Half-precision conversions (round to nearest even), shared by every device.
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);
float bf16_to_f32(uint16_t h);

// Bit set over dtypes, used by capability sets and op dtype rules.
struct DTypeSet {
  uint32_t bits = 0;
  constexpr DTypeSet() = default;
  constexpr explicit DTypeSet(uint32_t b) : bits(b) {}
  bool has(DType t) const { return bits & (1u << static_cast<int>(t)); }
  DTypeSet& add(DType t) {
    bits |= 1u << static_cast<int>(t);
    return *this;
  }
  DTypeSet operator|(DTypeSet o) const { return DTypeSet(bits | o.bits); }
  DTypeSet operator&(DTypeSet o) const { return DTypeSet(bits & o.bits); }
  DTypeSet minus(DTypeSet o) const { return DTypeSet(bits & ~o.bits); }
  bool empty() const { return bits == 0; }
  std::string str() const;  // "{f32,f16}"
  static DTypeSet all() { return DTypeSet((1u << kNumDTypes) - 1); }
  static DTypeSet floats();    // f32 f16 bf16 f64
  static DTypeSet ints();      // i8 u8 i16 i32 i64 u16 u32 u64
  static DTypeSet numeric();   // floats + ints + c64
  static DTypeSet real();      // floats + ints
  static DTypeSet of(std::initializer_list<DType> l) {
    DTypeSet s;
    for (auto t : l) s.add(t);
    return s;
  }
};

}  // namespace rlx
