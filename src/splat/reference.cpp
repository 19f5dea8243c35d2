// The splat ops in float64: inputs widened exactly, the shared math of splat_math.h run serially,
// outputs rounded once to their dtype.
#include "splat/reference.h"

#include "splat/splat_ops.h"

namespace rlx::splat {

bool is_splat_op(OpKind k) {
  switch (k) {
    case OpKind::SplatProject:
    case OpKind::SplatProjectGrad:
    case OpKind::SplatSh:
    case OpKind::SplatRasterize:
    case OpKind::SplatRasterizeGrad: return true;
    default: return false;
  }
}

namespace {
Tensor widen(const Tensor& t) {
  if (t.dtype() == DType::i32 || t.dtype() == DType::f64) return t;
  Tensor w(DType::f64, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) w.set(i, t.get(i));
  return w;
}
std::vector<int64_t> dims_of(const Shape& s) {
  std::vector<int64_t> d;
  for (auto& x : s) d.push_back(x.v);
  return d;
}
}  // namespace

std::vector<Tensor> reference_eval(const Node& n, const std::vector<Tensor>& in, const std::vector<ValueType>& ot) {
  std::vector<Tensor> win;
  for (auto& t : in) win.push_back(widen(t));
  std::vector<Tensor> wout;
  for (auto& t : ot) wout.emplace_back(t.dtype == DType::i32 ? DType::i32 : DType::f64, dims_of(t.shape));
  auto serial = [](int64_t count, auto&& fn) { fn(int64_t{0}, count); };
  RLX_CHECK(eval_splat_op<double>(n, win, wout, serial), "[splat] '", op_name(n.op), "' is not a splat op");
  std::vector<Tensor> out;
  for (size_t i = 0; i < ot.size(); ++i) {
    if (ot[i].dtype == wout[i].dtype()) {
      out.push_back(wout[i]);
      continue;
    }
    Tensor o(ot[i].dtype, dims_of(ot[i].shape));
    for (int64_t j = 0; j < o.numel(); ++j) o.set(j, wout[i].get(j));
    out.push_back(o);
  }
  return out;
}

}  // namespace rlx::splat
