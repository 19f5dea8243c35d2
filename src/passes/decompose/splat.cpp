// Decomposition of splat_sh (spherical-harmonics color) into MIR: normalize the directions, build
// the (degree+1)^2 real SH basis from products of x, y, z, contract it with the coefficients.
// (cpu also runs splat_sh natively when it is compiled, not differentiated: backends/cpu/splat.cpp.)
#include "passes/decompose/common.h"
#include "splat/splat_math.h"

namespace rlx {

using namespace decomp;

std::vector<int32_t> decompose_splat_sh(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  const int64_t deg = attr_int(n, "degree");
  Ints dd = dims_of(b, in[0]), cd = dims_of(b, in[1]);
  const int64_t N = dd[0], K = cd[1], C = cd[2], nb = (deg + 1) * (deg + 1);
  ValueId d = in[0];
  ValueId inv = b.unary(OpKind::Rsqrt, b.reduce(OpKind::ReduceSum, b.mul(d, d), {1}, true));
  ValueId u = b.mul(d, broadcast_to(b, inv, {N, 3}));
  auto col = [&](int64_t j) { return b.op1(OpKind::Slice, {u}, {{"start", Ints{0, j}}, {"limit", Ints{N, j + 1}}}); };
  ValueId x = col(0), y = col(1), z = col(2);
  auto k = [&](double v) { return scalar_like(b, v, d); };
  std::vector<ValueId> basis;
  basis.push_back(broadcast_to(b, k(0.2820947917738781), {N, 1}, true));
  if (deg >= 1) {
    basis.push_back(b.mul(y, k(-0.48860251190292)));
    basis.push_back(b.mul(z, k(0.48860251190292)));
    basis.push_back(b.mul(x, k(-0.48860251190292)));
  }
  if (deg >= 2) {
    ValueId z2 = b.mul(z, z), t0b = b.mul(z, k(-1.092548430592079));
    ValueId c1 = b.sub(b.mul(x, x), b.mul(y, y)), s1 = b.mul(b.mul(x, y), k(2));
    basis.push_back(b.mul(s1, k(0.5462742152960395)));
    basis.push_back(b.mul(t0b, y));
    basis.push_back(b.sub(b.mul(z2, k(0.9461746957575601)), k(0.3153915652525201)));
    basis.push_back(b.mul(t0b, x));
    basis.push_back(b.mul(c1, k(0.5462742152960395)));
    if (deg >= 3) {
      ValueId t0c = b.add(b.mul(z2, k(-2.285228997322329)), k(0.4570457994644658));
      ValueId t1b = b.mul(z, k(1.445305721320277));
      ValueId c2 = b.sub(b.mul(x, c1), b.mul(y, s1)), s2 = b.add(b.mul(x, s1), b.mul(y, c1));
      basis.push_back(b.mul(s2, k(-0.5900435899266435)));
      basis.push_back(b.mul(t1b, s1));
      basis.push_back(b.mul(t0c, y));
      basis.push_back(b.mul(z, b.sub(b.mul(z2, k(1.865881662950577)), k(1.119528997770346))));
      basis.push_back(b.mul(t0c, x));
      basis.push_back(b.mul(t1b, c1));
      basis.push_back(b.mul(c2, k(-0.5900435899266435)));
    }
  }
  ValueId B = basis.size() == 1 ? basis[0] : b.op1(OpKind::Concatenate, basis, {{"axis", int64_t{1}}});
  ValueId coeffs = in[1];
  if (K > nb) coeffs = b.op1(OpKind::Slice, {coeffs}, {{"start", Ints{0, 0, 0}}, {"limit", Ints{N, nb, C}}});
  // sum_k basis[n,k] * coeffs[n,k,c] as a broadcast product and a reduction: elementwise work that
  // fuses (a batched dot_general of N 1xK·KxC products is far slower on every device here).
  ValueId Bb = b.broadcast_in_dim(B, {N, nb, C}, {0, 1});
  return {b.reduce(OpKind::ReduceSum, b.mul(Bb, coeffs), {1}, false)};
}

}  // namespace rlx
