// Use-def helper shared by the LIR rewrites (uses.h).
#include "lir/rewrite/uses.h"

#include "lir/plan.h"

namespace rlx {

LirUses lir_uses(const LirProgram& p) {
  const size_t nb = p.buffers.size();
  LirUses u;
  u.readers.resize(nb);
  u.producer.assign(nb, -1);
  u.views.assign(nb, 0);
  u.uses.assign(nb, 0);
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    for (int b : p.kernels[k].in) u.readers[b].push_back(static_cast<int>(k)), ++u.uses[b];
    for (int b : p.kernels[k].out) u.producer[b] = static_cast<int>(k);
  }
  for (auto& b : p.buffers)
    if (b.kind == BufferKind::View) ++u.views[b.view_of], u.uses[b.view_of] += 2;
  for (int b : p.outputs) u.uses[b] += 2;
  return u;
}

int lir_root(const LirProgram& p, int b) {
  while (p.buffers[b].kind == BufferKind::View) b = p.buffers[b].view_of;
  return b;
}

bool lir_sole_reader(const LirProgram& p, const LirUses& u, int b, int k) {
  return p.buffers[b].kind == BufferKind::Arena && u.views[b] == 0 && u.readers[b].size() == 1 && u.readers[b][0] == k;
}

bool lir_used_once(const LirProgram& p, const LirUses& u, int b) {
  return b >= 0 && u.uses[b] == 1 && p.buffers[b].kind == BufferKind::Arena;
}

int lir_add_buffer(LirProgram& p, LirBuffer b) {
  p.buffers.push_back(std::move(b));
  return static_cast<int>(p.buffers.size() - 1);
}

int lir_drop(LirProgram& p, const std::vector<bool>& dead) {
  int n = 0;
  for (bool d : dead) n += d;
  if (n) erase_kernels(p, dead);
  return n;
}

bool lir_head_transpose(const LirKernel& k) {
  if (!lir_is_lib(k, OpKind::Transpose) || !k.attrs.count("perm")) return false;
  return attr_ints(lir_node(k), "perm") == std::vector<int64_t>{0, 2, 1, 3};
}

bool lir_plain_linear(const LirProgram& p, const LirKernel& k) {
  if (!lir_is_lib(k, OpKind::Linear) || k.out.size() != 1 || k.in.size() < 2 || k.in.size() > 3) return false;
  if (k.attrs.count("cpu_res") || k.attrs.count("cpu_ln_g")) return false;
  for (int b : k.in)
    if (p.buffers[b].type.dtype != DType::f32) return false;
  return p.buffers[k.in[1]].type.shape.size() == 2;
}

}  // namespace rlx
