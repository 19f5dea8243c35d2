#include "rlx/tensor.h"

#include <cstdint>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

namespace rlx {

static int64_t prod(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (auto d : s) {
    RLX_CHECK(d >= 0, "[tensor] negative dimension ", d);
    n *= d;
  }
  return n;
}

Tensor::Tensor(DType dt, std::vector<int64_t> shape) : dtype_(dt), shape_(std::move(shape)) {
  size_t bytes = static_cast<size_t>(prod(shape_)) * dtype_size(dt);
  // 64-byte alignment so SIMD kernels can assume it.
  void* p = std::aligned_alloc(64, ((bytes + 63) / 64) * 64 + 64);
  RLX_CHECK(p != nullptr, "[tensor] out of memory allocating ", bytes, " bytes");
  std::memset(p, 0, bytes);
  owner_ = std::shared_ptr<void>(p, std::free);
  data_ = p;
}

Tensor Tensor::wrap(DType dt, std::vector<int64_t> shape, std::shared_ptr<void> owner, void* data) {
  Tensor t;
  t.dtype_ = dt;
  t.shape_ = std::move(shape);
  t.owner_ = std::move(owner);
  t.data_ = data;
  return t;
}

int64_t Tensor::numel() const { return prod(shape_); }

double Tensor::get(int64_t i) const {
  const char* p = static_cast<const char*>(data_);
  switch (dtype_) {
    case DType::f32: return reinterpret_cast<const float*>(p)[i];
    case DType::f16: return f16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
    case DType::bf16: return bf16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
    case DType::f64: return reinterpret_cast<const double*>(p)[i];
    case DType::c64: return reinterpret_cast<const float*>(p)[2 * i];
    case DType::i8: return reinterpret_cast<const int8_t*>(p)[i];
    case DType::u8: return reinterpret_cast<const uint8_t*>(p)[i];
    case DType::i16: return reinterpret_cast<const int16_t*>(p)[i];
    case DType::i32: return reinterpret_cast<const int32_t*>(p)[i];
    case DType::i64: return static_cast<double>(reinterpret_cast<const int64_t*>(p)[i]);
    case DType::boolean: return reinterpret_cast<const uint8_t*>(p)[i] ? 1.0 : 0.0;
    case DType::u16: return reinterpret_cast<const uint16_t*>(p)[i];
    case DType::u32: return reinterpret_cast<const uint32_t*>(p)[i];
    case DType::u64: return static_cast<double>(reinterpret_cast<const uint64_t*>(p)[i]);
  }
  return 0;
}

// Float to integer stores saturate and map NaN to 0, so no conversion is undefined behaviour.
template <class I>
static I sat(double v) {
  if (std::isnan(v)) return 0;
  double lo = static_cast<double>(std::numeric_limits<I>::min());
  double hi = static_cast<double>(std::numeric_limits<I>::max());
  if (v <= lo) return std::numeric_limits<I>::min();
  if (v >= hi) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

void Tensor::set(int64_t i, double v) {
  char* p = static_cast<char*>(data_);
  switch (dtype_) {
    case DType::f32: reinterpret_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::f16: reinterpret_cast<uint16_t*>(p)[i] = f32_to_f16(static_cast<float>(v)); break;
    case DType::bf16: reinterpret_cast<uint16_t*>(p)[i] = f32_to_bf16(static_cast<float>(v)); break;
    case DType::f64: reinterpret_cast<double*>(p)[i] = v; break;
    case DType::c64:
      reinterpret_cast<float*>(p)[2 * i] = static_cast<float>(v);
      reinterpret_cast<float*>(p)[2 * i + 1] = 0;
      break;
    case DType::i8: reinterpret_cast<int8_t*>(p)[i] = sat<int8_t>(v); break;
    case DType::u8: reinterpret_cast<uint8_t*>(p)[i] = sat<uint8_t>(v); break;
    case DType::i16: reinterpret_cast<int16_t*>(p)[i] = sat<int16_t>(v); break;
    case DType::i32: reinterpret_cast<int32_t*>(p)[i] = sat<int32_t>(v); break;
    case DType::i64: reinterpret_cast<int64_t*>(p)[i] = sat<int64_t>(v); break;
    case DType::boolean: reinterpret_cast<uint8_t*>(p)[i] = v != 0.0; break;
    case DType::u16: reinterpret_cast<uint16_t*>(p)[i] = sat<uint16_t>(v); break;
    case DType::u32: reinterpret_cast<uint32_t*>(p)[i] = sat<uint32_t>(v); break;
    case DType::u64: reinterpret_cast<uint64_t*>(p)[i] = sat<uint64_t>(v); break;
  }
}

std::complex<double> Tensor::getc(int64_t i) const {
  if (dtype_ != DType::c64) return {get(i), 0.0};
  const float* p = static_cast<const float*>(data_);
  return {p[2 * i], p[2 * i + 1]};
}

void Tensor::setc(int64_t i, std::complex<double> v) {
  if (dtype_ != DType::c64) return set(i, v.real());
  float* p = static_cast<float*>(data_);
  p[2 * i] = static_cast<float>(v.real());
  p[2 * i + 1] = static_cast<float>(v.imag());
}

int64_t Tensor::get_int(int64_t i) const {
  if (dtype_ == DType::i64) return static_cast<const int64_t*>(data_)[i];
  if (dtype_ == DType::u64) return static_cast<int64_t>(static_cast<const uint64_t*>(data_)[i]);  // same bits
  if (dtype_ == DType::u32) return static_cast<const uint32_t*>(data_)[i];
  // A float outside int64 (or NaN) has no integer value: saturate (NaN gives 0) instead of the
  // undefined conversion.
  double v = get(i);
  if (!(v == v)) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return static_cast<int64_t>(v);
}

uint64_t Tensor::get_uint(int64_t i) const {
  if (dtype_ == DType::u64) return static_cast<const uint64_t*>(data_)[i];
  return static_cast<uint64_t>(get_int(i));
}

void Tensor::set_int(int64_t i, int64_t v) {
  if (dtype_ == DType::i64 || dtype_ == DType::u64) {  // u64: the same 64 bits (two's complement)
    static_cast<int64_t*>(data_)[i] = v;
    return;
  }
  if (dtype_ == DType::u32) {
    static_cast<uint32_t*>(data_)[i] = static_cast<uint32_t>(v < 0 ? 0 : v > UINT32_MAX ? UINT32_MAX : v);
    return;
  }
  set(i, static_cast<double>(v));
}

Tensor Tensor::reshaped(std::vector<int64_t> shape) const {
  RLX_CHECK(prod(shape) == numel(), "[tensor] reshape of ", numel(), " elements to ", prod(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::clone() const {
  // The copy overwrites every byte: the constructor's layout (64-byte aligned) without its zero fill.
  size_t bytes = nbytes();
  void* p = std::aligned_alloc(64, ((bytes + 63) / 64) * 64 + 64);
  RLX_CHECK(p != nullptr, "[tensor] out of memory allocating ", bytes, " bytes");
  if (bytes) std::memcpy(p, data_, bytes);
  return wrap(dtype_, shape_, std::shared_ptr<void>(p, std::free), p);
}

std::string Tensor::str(int64_t max_elems) const {
  std::ostringstream os;
  os << dtype_name(dtype_) << "[";
  for (size_t i = 0; i < shape_.size(); ++i) os << (i ? "," : "") << shape_[i];
  os << "] {";
  int64_t n = numel();
  for (int64_t i = 0; i < n && i < max_elems; ++i) {
    if (i) os << ", ";
    if (dtype_ == DType::c64) {
      auto c = getc(i);
      os << c.real() << (c.imag() < 0 ? "" : "+") << c.imag() << "i";
    } else if (dtype_ == DType::i64) {
      os << get_int(i);
    } else if (dtype_ == DType::u64) {
      os << get_uint(i);
    } else {
      os << get(i);
    }
  }
  if (n > max_elems) os << ", ...";
  os << "}";
  return os.str();
}

}  // namespace rlx
