// Helpers shared by the reference interpreter's op families: index arithmetic, exact loads,
// once-rounded stores, and the per-family entry points that reference.cpp dispatches to.
#pragma once
#include <complex>
#include <cstdint>
#include <functional>
#include <vector>

#include "rlx/graph.h"
#include "rlx/tensor.h"

namespace rlx::ref {

using Dims = std::vector<int64_t>;
using Ins = std::vector<Tensor>;
using Types = std::vector<ValueType>;
using Outs = std::vector<Tensor>;
using cplx = std::complex<double>;

// The arithmetic domain a dtype computes in: double, complex<double>, int64 (wrapping), or bool.
enum class Dom { F, C, I, B };
Dom dom_of(DType t);

Dims strides_of(const Dims& d);
int64_t count(const Dims& d);
void unravel(int64_t flat, const Dims& d, Dims& idx);
// For each flat index of `out`, the flat index of `in` under numpy broadcasting (right-aligned).
std::vector<int64_t> broadcast_map(const Dims& in, const Dims& out);
// A zero-filled tensor of a concrete type.
Tensor alloc(const ValueType& t);
Tensor alloc(DType dt, const Dims& d);
int64_t axis_of(int64_t axis, int64_t rank, const char* what);

// Loads: exact for every dtype (f16/bf16 widen exactly; i64 is read as int64).
inline double ld(const Tensor& t, int64_t i) { return t.get(i); }
inline cplx ldc(const Tensor& t, int64_t i) { return t.getc(i); }
int64_t ldi(const Tensor& t, int64_t i);  // ints and bool
// Stores round once. st: floats round to nearest even (f16/bf16 directly from double), ints
// truncate and saturate (NaN -> 0), bool is x != 0, c64 gets imag 0.
void st(Tensor& t, int64_t i, double v);
// sti: ints wrap to the dtype's width (two's complement); other dtypes convert the value.
void sti(Tensor& t, int64_t i, int64_t v);
void stc(Tensor& t, int64_t i, cplx v);
void copy_elem(Tensor& dst, int64_t di, const Tensor& src, int64_t si);

// Wrapping int64 arithmetic (through uint64, so no signed overflow UB).
inline int64_t wadd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t wsub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
inline int64_t wmul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
int64_t int_min(DType t);
int64_t int_max(DType t);  // u64: all ones (UINT64_MAX's bits)
// u64 values travel in int64 as their 64 bits: add/sub/mul/bitwise wrap correctly as they are;
// ordering, division and conversion to float need the unsigned view.
inline bool is_u64(DType t) { return t == DType::u64; }
inline bool lt_i(int64_t a, int64_t b, bool u) {
  return u ? static_cast<uint64_t>(a) < static_cast<uint64_t>(b) : a < b;
}
// An int64 whose signed order is the value order (u64: the sign bit flipped), for sort keys.
inline int64_t order_key(int64_t v, bool u) { return u ? static_cast<int64_t>(static_cast<uint64_t>(v) ^ (uint64_t{1} << 63)) : v; }

// Windowed iteration over all dims: for each output element, the flat input index of every tap
// (-1 for a tap in the padding). Tap position = out*stride + k*dilation - pad_lo.
void for_each_window(const Dims& in, const Dims& out, const Dims& win, const Dims& stride, const Dims& pad_lo,
                     const Dims& dilation,
                     const std::function<void(int64_t out_flat, const std::vector<int64_t>& taps)>& fn);

// ---- family entry points ----
// generate.cpp
Outs eval_constant(const Node& n, const Ins& in, const Types& ot);
Outs eval_iota(const Node& n, const Ins& in, const Types& ot);
Outs eval_rng_uniform(const Node& n, const Ins& in, const Types& ot);
// elementwise.cpp
Outs eval_unary(const Node& n, const Ins& in, const Types& ot);
Outs eval_convert(const Node& n, const Ins& in, const Types& ot);
Outs eval_binary(const Node& n, const Ins& in, const Types& ot);
Outs eval_compare(const Node& n, const Ins& in, const Types& ot);
Outs eval_select(const Node& n, const Ins& in, const Types& ot);
// reduce.cpp
Outs eval_reduce(const Node& n, const Ins& in, const Types& ot);  // sum max min prod mean
Outs eval_arg_reduce(const Node& n, const Ins& in, const Types& ot);
Outs eval_cumsum(const Node& n, const Ins& in, const Types& ot);
Outs eval_reduce_window(const Node& n, const Ins& in, const Types& ot);
// sort.cpp
Outs eval_sort(const Node& n, const Ins& in, const Types& ot);
Outs eval_topk(const Node& n, const Ins& in, const Types& ot);
// linalg.cpp
Outs eval_dot_general(const Node& n, const Ins& in, const Types& ot);
Outs eval_matmul(const Node& n, const Ins& in, const Types& ot);
Outs eval_linear(const Node& n, const Ins& in, const Types& ot);
Outs eval_conv(const Node& n, const Ins& in, const Types& ot);  // conv and convolution
// movement.cpp
Outs eval_broadcast_in_dim(const Node& n, const Ins& in, const Types& ot);
Outs eval_expand(const Node& n, const Ins& in, const Types& ot);
Outs eval_reshape(const Node& n, const Ins& in, const Types& ot);  // reshape squeeze unsqueeze
Outs eval_transpose(const Node& n, const Ins& in, const Types& ot);
Outs eval_slice(const Node& n, const Ins& in, const Types& ot);
Outs eval_pad(const Node& n, const Ins& in, const Types& ot);
Outs eval_concatenate(const Node& n, const Ins& in, const Types& ot);
Outs eval_gather(const Node& n, const Ins& in, const Types& ot);  // gather and embedding
Outs eval_scatter_add(const Node& n, const Ins& in, const Types& ot);
// nn.cpp
Outs eval_pool(const Node& n, const Ins& in, const Types& ot);  // max avg global_avg
Outs eval_norm(const Node& n, const Ins& in, const Types& ot);  // layer_norm rms_norm
Outs eval_softmax(const Node& n, const Ins& in, const Types& ot);  // softmax log_softmax
Outs eval_activation(const Node& n, const Ins& in, const Types& ot);  // gelu silu relu
Outs eval_rope(const Node& n, const Ins& in, const Types& ot);
// attention.cpp
Outs eval_attention(const Node& n, const Ins& in, const Types& ot);
// quant.cpp (quantized weights)
Outs eval_dequantize(const Node& n, const Ins& in, const Types& ot);
Outs eval_dequant_matmul(const Node& n, const Ins& in, const Types& ot);
// quant_affine.cpp
Outs eval_quantize_affine(const Node& n, const Ins& in, const Types& ot);
Outs eval_dequantize_affine(const Node& n, const Ins& in, const Types& ot);
Outs eval_qmatmul(const Node& n, const Ins& in, const Types& ot);
Outs eval_requantize(const Node& n, const Ins& in, const Types& ot);
Outs eval_qlinear(const Node& n, const Ins& in, const Types& ot);
Outs eval_qconv(const Node& n, const Ins& in, const Types& ot);
// src/sparse/reference_sparse.cpp (the sparse_* ops)
Outs eval_sparse(const Node& n, const Ins& in, const Types& ot);
Outs eval_collective(const Node& n, const Ins& in, const Types& ot);  // collective.cpp

}  // namespace rlx::ref
