#include "rlx/dtype.h"

#include <cmath>
#include <cstring>

namespace rlx {

size_t dtype_size(DType t) {
  switch (t) {
#define X(name, size, cls) \
  case DType::name:        \
    return size;
    RLX_DTYPES(X)
#undef X
  }
  return 0;
}

DClass dtype_class(DType t) {
  switch (t) {
#define X(name, size, cls) \
  case DType::name:        \
    return DClass::cls;
    RLX_DTYPES(X)
#undef X
  }
  return DClass::kFloat;
}

std::string_view dtype_name(DType t) {
  if (t == DType::boolean) return "bool";
  switch (t) {
#define X(name, size, cls) \
  case DType::name:        \
    return #name;
    RLX_DTYPES(X)
#undef X
  }
  return "?";
}

bool parse_dtype(std::string_view s, DType* out) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (dtype_name(static_cast<DType>(i)) == s) {
      *out = static_cast<DType>(i);
      return true;
    }
  }
  return false;
}

std::string DTypeSet::str() const {
  std::string s = "{";
  for (int i = 0; i < kNumDTypes; ++i) {
    if (has(static_cast<DType>(i))) {
      if (s.size() > 1) s += ",";
      s += dtype_name(static_cast<DType>(i));
    }
  }
  return s + "}";
}

DTypeSet DTypeSet::floats() { return of({DType::f32, DType::f16, DType::bf16, DType::f64}); }
DTypeSet DTypeSet::ints() {
  return of({DType::i8, DType::u8, DType::i16, DType::i32, DType::i64, DType::u16, DType::u32, DType::u64});
}
DTypeSet DTypeSet::real() { return floats() | ints(); }
DTypeSet DTypeSet::numeric() { return real() | of({DType::c64}); }

// IEEE binary16 with round-to-nearest-even, including subnormals, inf and NaN.
uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mant = x & 0x7fffffu;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff);
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  int32_t e = exp - 127 + 15;
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;  // may carry into exponent: correct
  return static_cast<uint16_t>(half);
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {
      float v = std::ldexp(static_cast<float>(mant), -24);
      return sign ? -v : v;
    }
  } else if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  uint32_t lsb = (x >> 16) & 1;
  x += 0x7fffu + lsb;
  return static_cast<uint16_t>(x >> 16);
}

float bf16_to_f32(uint16_t h) {
  uint32_t x = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace rlx
