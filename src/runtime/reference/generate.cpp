// Ops without inputs: constant, iota, rng_uniform.
#include "ir/rng.h"
#include "runtime/reference/common.h"

namespace rlx::ref {

Outs eval_constant(const Node& n, const Ins&, const Types&) { return {attr_tensor(n, "value").clone()}; }

Outs eval_iota(const Node& n, const Ins&, const Types& ot) {
  Tensor out = alloc(ot[0]);
  int64_t dim = attr_int(n, "dim");
  Dims d = out.shape(), idx;
  RLX_CHECK(dim >= 0 && dim < static_cast<int64_t>(d.size()), "[reference] iota dim ", dim, " out of range");
  for (int64_t i = 0; i < out.numel(); ++i) {
    unravel(i, d, idx);
    sti(out, i, idx[dim]);
  }
  return {out};
}

Outs eval_rng_uniform(const Node& n, const Ins&, const Types& ot) {
  Tensor out = alloc(ot[0]);
  auto seed = static_cast<uint64_t>(attr_int(n, "seed"));
  double lo = attr_float(n, "low"), hi = attr_float(n, "high");
  for (int64_t i = 0; i < out.numel(); ++i) st(out, i, lo + (hi - lo) * rng_uniform_at(seed, static_cast<uint64_t>(i)));
  return {out};
}

}  // namespace rlx::ref
