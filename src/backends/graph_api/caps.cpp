// The capability sets of the graph-API devices (tpu, mlx): the MIR primitives and dtypes their
// lowerings emit (tpu/stablehlo*.cpp, mlx/lower.cpp), each checked by `rlx ops --device`.
// Everything else decomposes or fails at dispatch.
#include "backends/graph_api/flat.h"
#include "dispatch/registry.h"

namespace rlx::graph_api {

CapabilitySet caps(bool pjrt) {
  using D = DType;
  using K = OpKind;
  // XLA runs f16/bf16/f64 (the PJRT CPU and CUDA plugins); MLX's are not claimed.
  const DTypeSet wide = pjrt ? DTypeSet::of({D::f64, D::f16, D::bf16}) : DTypeSet{};
  const DTypeSet f = DTypeSet::of({D::f32}) | wide, num = DTypeSet::of({D::f32, D::i32, D::i64}) | wide,
                 logic = DTypeSet::of({D::boolean, D::i32, D::i64}),
                 any = DTypeSet::of({D::f32, D::i32, D::i64, D::boolean}) | wide;
  CapabilitySet c;
  for (auto k : {K::Exp, K::Log, K::Sqrt, K::Rsqrt, K::Tanh, K::Erf, K::Sin, K::Cos, K::Logistic, K::Floor, K::Ceil,
                 K::Round, K::IsNan, K::Div, K::Pow})
    c.add(k, f);
  for (auto k : {K::Neg, K::Abs, K::Sign, K::Add, K::Sub, K::Mul, K::Max, K::Min, K::Lt, K::Le, K::Gt, K::Ge,
                 K::ReduceSum, K::ReduceMax, K::ReduceMin, K::ReduceProd, K::ArgMax, K::ArgMin, K::Iota})
    c.add(k, num);
  for (auto k : {K::Not, K::And, K::Or, K::Xor}) c.add(k, logic);
  for (auto k : {K::Constant, K::Convert, K::Eq, K::Ne, K::BroadcastInDim, K::Reshape, K::Transpose, K::Slice, K::Pad,
                 K::Concatenate, K::Gather})
    c.add(k, any);
  c.add(K::Select, DTypeSet::of({D::boolean}));
  c.add(K::DotGeneral, pjrt ? num : DTypeSet::of({D::f32}));
  c.storage = any;
  return c;
}

}  // namespace rlx::graph_api
