// Elementwise reductions of host buffers (the in-process transport's arithmetic).
#include "dist/reduce.h"

#include <algorithm>
#include <complex>
#include <type_traits>

#include "rlx/error.h"
#include "rlx/tensor.h"

namespace rlx::dist {

namespace {

// Integers wrap modulo 2^bits, as on every device (signed overflow would be undefined in C++).
template <class T>
T add(T a, T b) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else return static_cast<T>(a + b);
}
template <class T>
T mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else return static_cast<T>(a * b);
}

template <class T>
void loop(T* a, const T* x, int64_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: for (int64_t i = 0; i < n; ++i) a[i] = add(a[i], x[i]); break;
    case ReduceOp::Prod: for (int64_t i = 0; i < n; ++i) a[i] = mul(a[i], x[i]); break;
    case ReduceOp::Max: for (int64_t i = 0; i < n; ++i) a[i] = std::max(a[i], x[i]); break;
    case ReduceOp::Min: for (int64_t i = 0; i < n; ++i) a[i] = std::min(a[i], x[i]); break;
  }
}

// Half types: through Tensor's double access (one rounding per step, as a device would).
void loop_half(void* acc, const void* x, int64_t n, DType dt, ReduceOp op) {
  Tensor a = Tensor::wrap(dt, {n}, nullptr, acc);
  Tensor b = Tensor::wrap(dt, {n}, nullptr, const_cast<void*>(x));
  for (int64_t i = 0; i < n; ++i) {
    double u = a.get(i), v = b.get(i);
    a.set(i, op == ReduceOp::Sum ? u + v : op == ReduceOp::Prod ? u * v : op == ReduceOp::Max ? std::max(u, v) : std::min(u, v));
  }
}

}  // namespace

void reduce_into(void* acc, const void* x, int64_t n, DType dt, ReduceOp op) {
  switch (dt) {
    case DType::f32: return loop(static_cast<float*>(acc), static_cast<const float*>(x), n, op);
    case DType::f64: return loop(static_cast<double*>(acc), static_cast<const double*>(x), n, op);
    case DType::i8: return loop(static_cast<int8_t*>(acc), static_cast<const int8_t*>(x), n, op);
    case DType::u8: return loop(static_cast<uint8_t*>(acc), static_cast<const uint8_t*>(x), n, op);
    case DType::i16: return loop(static_cast<int16_t*>(acc), static_cast<const int16_t*>(x), n, op);
    case DType::u16: return loop(static_cast<uint16_t*>(acc), static_cast<const uint16_t*>(x), n, op);
    case DType::i32: return loop(static_cast<int32_t*>(acc), static_cast<const int32_t*>(x), n, op);
    case DType::u32: return loop(static_cast<uint32_t*>(acc), static_cast<const uint32_t*>(x), n, op);
    case DType::i64: return loop(static_cast<int64_t*>(acc), static_cast<const int64_t*>(x), n, op);
    case DType::u64: return loop(static_cast<uint64_t*>(acc), static_cast<const uint64_t*>(x), n, op);
    case DType::f16:
    case DType::bf16: return loop_half(acc, x, n, dt, op);
    case DType::c64:
      RLX_CHECK(op == ReduceOp::Sum, "[dist] complex values reduce by sum only");
      return loop(static_cast<float*>(acc), static_cast<const float*>(x), 2 * n, op);
    default: fail("[dist] cannot reduce ", dtype_name(dt), " values");
  }
}

}  // namespace rlx::dist
