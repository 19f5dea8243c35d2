// concat-in-place: a concatenate whose operands are each one contiguous byte range of its output
// (every dim before the axis is 1: a channel concat of one image, as in SqueezeNet's fire modules
// and the Inception blocks at batch 1) and are arena temporaries that only it reads is marked
// lir_concat_in_place. The memory planner (plan_memory) then places each operand inside the
// output at its offset and sets the kernel's in_place: the producers (convs, pools) write straight
// into the concatenated tensor and the concatenate copies nothing (a kernel skips an operand that
// already lies where it would copy it). The planner declines where the lifetimes do not allow it
// (an operand in another in-place chain, or read after the concat), and the kernel copies as before.
#include "lir/rewrite/pass.h"
#include "lir/rewrite/uses.h"

namespace rlx {

int pass_concat_in_place(LirProgram& p, const LirAbsorbs&) {
  const LirUses u = lir_uses(p);
  int n = 0;
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    LirKernel& kr = p.kernels[k];
    if (!lir_is_lib(kr, OpKind::Concatenate) || kr.in.size() < 2 || kr.out.size() != 1) continue;
    const LirBuffer& y = p.buffers[kr.out[0]];
    if (y.kind != BufferKind::Arena || !is_static(y.type.shape)) continue;
    const auto dims = static_dims(y.type.shape);
    int64_t ax = attr_int(lir_node(kr), "axis");
    if (ax < 0) ax += static_cast<int64_t>(dims.size());
    if (ax < 0 || ax >= static_cast<int64_t>(dims.size())) continue;
    bool ok = true;
    for (int64_t d = 0; d < ax; ++d) ok = ok && dims[static_cast<size_t>(d)] == 1;
    for (size_t i = 0; ok && i < kr.in.size(); ++i) {
      const int b = kr.in[i];
      ok = lir_sole_reader(p, u, b, static_cast<int>(k)) && u.producer[b] >= 0 &&
           p.buffers[b].type.dtype == y.type.dtype;
      for (size_t j = 0; ok && j < i; ++j) ok = kr.in[j] != b;  // one operand twice: it cannot sit in two places
    }
    if (!ok) continue;
    kr.attrs["lir_concat_in_place"] = Attr(int64_t{1});
    ++n;
  }
  return n;
}

}  // namespace rlx
