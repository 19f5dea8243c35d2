#include "runtime/reference/common.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace rlx::ref {

Dom dom_of(DType t) {
  switch (dtype_class(t)) {
    case DClass::kFloat: return Dom::F;
    case DClass::kComplex: return Dom::C;
    case DClass::kSigned:
    case DClass::kUnsigned: return Dom::I;
    case DClass::kBool: return Dom::B;
  }
  return Dom::F;
}

Dims strides_of(const Dims& d) {
  Dims s(d.size(), 1);
  for (int64_t i = static_cast<int64_t>(d.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * d[i + 1];
  return s;
}

int64_t count(const Dims& d) {
  int64_t n = 1;
  for (auto x : d) n *= x;
  return n;
}

void unravel(int64_t flat, const Dims& d, Dims& idx) {
  idx.resize(d.size());
  for (int64_t i = static_cast<int64_t>(d.size()) - 1; i >= 0; --i) {
    idx[i] = d[i] ? flat % d[i] : 0;
    flat = d[i] ? flat / d[i] : 0;
  }
}

std::vector<int64_t> broadcast_map(const Dims& in, const Dims& out) {
  RLX_CHECK(in.size() <= out.size(), "[reference] cannot broadcast rank ", in.size(), " to rank ", out.size());
  size_t off = out.size() - in.size();
  Dims ist = strides_of(in);
  Dims eff(out.size(), 0);  // stride of each output dim in the input; 0 where broadcast
  for (size_t i = 0; i < in.size(); ++i) {
    RLX_CHECK(in[i] == out[off + i] || in[i] == 1, "[reference] cannot broadcast dim ", in[i], " to ", out[off + i]);
    eff[off + i] = in[i] == 1 ? 0 : ist[i];
  }
  int64_t n = count(out);
  std::vector<int64_t> m(static_cast<size_t>(n));
  Dims idx;
  for (int64_t f = 0; f < n; ++f) {
    unravel(f, out, idx);
    int64_t s = 0;
    for (size_t i = 0; i < out.size(); ++i) s += idx[i] * eff[i];
    m[f] = s;
  }
  return m;
}

Tensor alloc(const ValueType& t) {
  RLX_CHECK(is_static(t.shape), "[reference] output shape ", shape_str(t.shape), " is not concrete");
  return Tensor(t.dtype, static_dims(t.shape));
}
Tensor alloc(DType dt, const Dims& d) { return Tensor(dt, d); }

int64_t axis_of(int64_t axis, int64_t rank, const char* what) { return norm_axis(axis, rank, what); }

int64_t ldi(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::i8: return t.data<int8_t>()[i];
    case DType::u8: return t.data<uint8_t>()[i];
    case DType::i16: return t.data<int16_t>()[i];
    case DType::i32: return t.data<int32_t>()[i];
    case DType::i64: return t.data<int64_t>()[i];
    case DType::boolean: return t.data<uint8_t>()[i] != 0;
    case DType::u16: return t.data<uint16_t>()[i];
    case DType::u32: return t.data<uint32_t>()[i];
    case DType::u64: return static_cast<int64_t>(t.data<uint64_t>()[i]);  // the 64 bits
    default: break;
  }
  fail("[reference] integer load of ", dtype_name(t.dtype()));
}

// Double -> float rounding to odd: keeps a sticky bit, so a second rounding to f16/bf16
// (fewer than 22 bits) equals a single correct rounding from double.
static float to_float_odd(double v) {
  float f = static_cast<float>(v);
  if (std::isnan(v) || std::isinf(v) || static_cast<double>(f) == v) return f;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (bits & 1u) return f;
  return std::nextafter(f, static_cast<float>(v > static_cast<double>(f) ? INFINITY : -INFINITY));
}

void st(Tensor& t, int64_t i, double v) {
  switch (t.dtype()) {
    case DType::f32: t.data<float>()[i] = static_cast<float>(v); return;
    case DType::f64: t.data<double>()[i] = v; return;
    case DType::f16: t.data<uint16_t>()[i] = f32_to_f16(to_float_odd(v)); return;
    case DType::bf16: t.data<uint16_t>()[i] = f32_to_bf16(to_float_odd(v)); return;
    default: t.set(i, v); return;  // ints saturate (NaN -> 0), bool x != 0, c64 imag 0
  }
}

void sti(Tensor& t, int64_t i, int64_t v) {
  switch (t.dtype()) {
    case DType::i8: t.data<int8_t>()[i] = static_cast<int8_t>(v); return;  // C++20: modular
    case DType::u8: t.data<uint8_t>()[i] = static_cast<uint8_t>(v); return;
    case DType::i16: t.data<int16_t>()[i] = static_cast<int16_t>(v); return;
    case DType::i32: t.data<int32_t>()[i] = static_cast<int32_t>(v); return;
    case DType::i64: t.data<int64_t>()[i] = v; return;
    case DType::u16: t.data<uint16_t>()[i] = static_cast<uint16_t>(v); return;
    case DType::u32: t.data<uint32_t>()[i] = static_cast<uint32_t>(v); return;
    case DType::u64: t.data<uint64_t>()[i] = static_cast<uint64_t>(v); return;
    case DType::boolean: t.data<uint8_t>()[i] = v != 0; return;
    case DType::f32: t.data<float>()[i] = static_cast<float>(v); return;  // one rounding
    case DType::c64: stc(t, i, cplx(static_cast<double>(static_cast<float>(v)), 0.0)); return;
    default: st(t, i, static_cast<double>(v)); return;
  }
}

void stc(Tensor& t, int64_t i, cplx v) {
  if (t.dtype() == DType::c64) t.setc(i, v);
  else st(t, i, v.real());
}

void copy_elem(Tensor& dst, int64_t di, const Tensor& src, int64_t si) {
  size_t sz = dtype_size(src.dtype());
  std::memcpy(static_cast<char*>(dst.raw()) + di * sz, static_cast<const char*>(src.raw()) + si * sz, sz);
}

int64_t int_min(DType t) {
  switch (t) {
    case DType::i8: return std::numeric_limits<int8_t>::min();
    case DType::i16: return std::numeric_limits<int16_t>::min();
    case DType::i32: return std::numeric_limits<int32_t>::min();
    case DType::i64: return std::numeric_limits<int64_t>::min();
    default: return 0;  // u8, bool
  }
}

int64_t int_max(DType t) {
  switch (t) {
    case DType::i8: return std::numeric_limits<int8_t>::max();
    case DType::u8: return std::numeric_limits<uint8_t>::max();
    case DType::i16: return std::numeric_limits<int16_t>::max();
    case DType::i32: return std::numeric_limits<int32_t>::max();
    case DType::i64: return std::numeric_limits<int64_t>::max();
    case DType::u16: return std::numeric_limits<uint16_t>::max();
    case DType::u32: return std::numeric_limits<uint32_t>::max();
    case DType::u64: return -1;  // all ones
    default: return 1;  // bool
  }
}

void for_each_window(const Dims& in, const Dims& out, const Dims& win, const Dims& stride, const Dims& pad_lo,
                     const Dims& dilation,
                     const std::function<void(int64_t out_flat, const std::vector<int64_t>& taps)>& fn) {
  size_t r = in.size();
  Dims ist = strides_of(in);
  int64_t ntaps = count(win);
  std::vector<int64_t> taps(static_cast<size_t>(ntaps));
  Dims oidx, kidx;
  for (int64_t o = 0; o < count(out); ++o) {
    unravel(o, out, oidx);
    for (int64_t k = 0; k < ntaps; ++k) {
      unravel(k, win, kidx);
      int64_t flat = 0;
      bool inside = true;
      for (size_t d = 0; d < r; ++d) {
        int64_t p = oidx[d] * stride[d] + kidx[d] * dilation[d] - pad_lo[d];
        if (p < 0 || p >= in[d]) inside = false;
        flat += p * ist[d];
      }
      taps[k] = inside ? flat : -1;
    }
    fn(o, taps);
  }
}

}  // namespace rlx::ref
