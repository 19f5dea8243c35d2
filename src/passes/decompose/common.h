// Helpers shared by the HIR decompositions (internal to src/passes/decompose/).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "rlx/builder.h"

namespace rlx::decomp {

using Ints = std::vector<int64_t>;

// Static dims of a value; decompositions run on concrete shapes only.
inline Ints dims_of(Builder& b, ValueId v) {
  const Shape& s = b.shape(v);
  RLX_CHECK(is_static(s), "[decompose] needs static shapes, got ", shape_str(s));
  return static_dims(s);
}

inline int64_t product(const Ints& d, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t p = 1;
  for (size_t i = from; i < d.size() && i < to; ++i) p *= d[i];
  return p;
}

inline Ints range(int64_t from, int64_t to) {
  Ints r;
  for (int64_t i = from; i < to; ++i) r.push_back(i);
  return r;
}

// The op's own output types, from its shape rule (cheap; avoids re-deriving shape logic).
inline std::vector<ValueType> out_types(Builder& b, const Node& n, const std::vector<ValueId>& in) {
  std::vector<ValueType> t;
  for (auto v : in) t.push_back(b.type(v));
  return infer_types(n.op, t, n.attrs, "[decompose] " + std::string(op_name(n.op)));
}

inline bool is_half(DType t) { return t == DType::f16 || t == DType::bf16; }

// Mixed-precision policy: reductions of half inputs run in f32.
inline DType compute_dtype(DType t) { return is_half(t) ? DType::f32 : t; }
inline ValueId to_compute(Builder& b, ValueId v) {
  return is_half(b.dtype(v)) ? b.convert(v, DType::f32) : v;
}
inline ValueId restore(Builder& b, ValueId v, DType orig) {
  return b.dtype(v) == orig ? v : b.convert(v, orig);
}

inline ValueId scalar_like(Builder& b, double x, ValueId like) { return b.scalar(x, b.dtype(like)); }

// numpy-style broadcast of `v` to `shape` (trailing alignment); no-op when already that shape
// unless `always` (a decomposition must not return its input as its output).
inline ValueId broadcast_to(Builder& b, ValueId v, const Ints& shape, bool always = false) {
  Ints d = dims_of(b, v);
  if (d == shape && !always) return v;
  int64_t off = static_cast<int64_t>(shape.size() - d.size());
  return b.broadcast_in_dim(v, to_shape(shape), range(off, static_cast<int64_t>(shape.size())));
}

inline ValueId slice(Builder& b, ValueId v, Ints start, Ints limit) {
  return b.op1(OpKind::Slice, {v}, {{"start", std::move(start)}, {"limit", std::move(limit)}});
}

}  // namespace rlx::decomp
