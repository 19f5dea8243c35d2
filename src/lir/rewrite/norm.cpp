// Norm rewrites.
//   residual-into-norm: layer_norm/rms_norm(a + b) reads a and b itself when the add (same shapes,
//     a library kernel or a one-node generated add) exists only for it -- the post-attention/FFN
//     residual of every transformer block (attr cuda_residual; inputs a, b, then the norm's).
//   embedding-norm: a transformer's input block
//       x = embedding(table, ids) (+ broadcast adds: position, token type) ; y = layer_norm(x)
//     becomes one LayerNorm kernel with attr cuda_embed (the addend slot) and inputs
//     {table, ids, addends..., gamma[, beta]}: last axis, floats of one dtype, rows of at most 1024.
#include "lir/rewrite/pass.h"
#include "lir/rewrite/uses.h"

namespace rlx {

int pass_residual_into_norm(LirProgram& p, const LirAbsorbs&) {
  LirUses u = lir_uses(p);
  auto& producer = u.producer;
  std::vector<bool> dead(p.kernels.size(), false);
  int folded = 0;
  for (auto& k : p.kernels) {
    if (k.kind != KernelKind::Library || (k.op != OpKind::LayerNorm && k.op != OpKind::RmsNorm)) continue;
    int x = k.in[0], a = producer[x];
    if (a < 0 || !lir_used_once(p, u, x)) continue;
    const LirKernel& ak = p.kernels[a];
    bool is_add = (ak.kind == KernelKind::Library && ak.op == OpKind::Add) ||
                  (ak.kind == KernelKind::Generated && ak.body.nodes.size() == 1 && ak.body.nodes[0].op == OpKind::Add);
    if (!is_add || ak.in.size() != 2) continue;
    const auto& xs = p.buffers[x].type;
    if (p.buffers[ak.in[0]].type.shape != xs.shape || p.buffers[ak.in[1]].type.shape != xs.shape) continue;
    std::vector<int> in = {ak.in[0], ak.in[1]};
    in.insert(in.end(), k.in.begin() + 1, k.in.end());
    k.in = in;
    k.attrs["cuda_residual"] = int64_t{1};
    dead[a] = true;
    ++folded;
  }
  lir_drop(p, dead);
  return folded;
}

int pass_embedding_norm(LirProgram& p, const LirAbsorbs&) {
  LirUses u = lir_uses(p);
  auto& producer = u.producer;
  auto only_use = [&](int b) { return lir_used_once(p, u, b); };
  std::vector<bool> dead(p.kernels.size(), false);
  int folded = 0;
  for (int n = 0; n < static_cast<int>(p.kernels.size()); ++n) {
    LirKernel& nk = p.kernels[n];
    if (nk.kind != KernelKind::Library || nk.op != OpKind::LayerNorm || nk.attrs.count("cuda_residual") ||
        nk.attrs.count("cuda_embed") || nk.in.size() < 2 || nk.in.size() > 3 || nk.out.size() != 1)
      continue;
    int x = nk.in[0], a = producer[x];
    if (a < 0 || dead[a] || !only_use(x)) continue;
    const LirKernel& ak = p.kernels[a];
    if (ak.kind != KernelKind::Generated || ak.out.size() != 1 || ak.body.nodes.empty()) continue;
    bool adds = true;
    for (const Node& nd : ak.body.nodes) adds &= nd.op == OpKind::Add && nd.inputs.size() == 2;
    if (!adds || ak.body.outputs.size() != 1 || ak.body.outputs[0] != ak.body.nodes.back().outputs[0]) continue;
    const ValueType& xt = p.buffers[x].type;
    auto xd = static_dims(xt.shape);
    DType t = xt.dtype;
    if ((t != DType::f16 && t != DType::bf16 && t != DType::f32) || xd.size() < 2 || xd.back() > 1024) continue;
    Node lnd{nk.op, {}, {}, nk.attrs, ""};
    int64_t axis = attr_int(lnd, "axis");
    if (axis != -1 && axis != static_cast<int64_t>(xd.size()) - 1) continue;
    int slot = -1;
    for (size_t i = 0; i < ak.in.size(); ++i) {
      int e = producer[ak.in[i]];
      if (e >= 0 && !dead[e] && only_use(ak.in[i]) && p.kernels[e].kind == KernelKind::Library &&
          p.kernels[e].op == OpKind::Embedding && p.kernels[e].in.size() == 2 &&
          static_dims(p.buffers[ak.in[i]].type.shape) == xd)
        slot = static_cast<int>(i);
    }
    if (slot < 0) continue;
    int e = producer[ak.in[slot]];
    const LirKernel& ek = p.kernels[e];
    bool ok = p.buffers[ek.in[0]].type.dtype == t && static_dims(p.buffers[ek.in[0]].type.shape).size() == 2 &&
              is_int(p.buffers[ek.in[1]].type.dtype) && p.buffers[nk.out[0]].type.dtype == t;
    for (size_t i = 0; i < ak.in.size(); ++i) ok &= p.buffers[ak.in[i]].type.dtype == t;
    for (size_t i = 1; i < nk.in.size(); ++i) ok &= p.buffers[nk.in[i]].type.dtype == t;
    if (!ok) continue;
    // Every input must be ready where the embedding ran (the fused kernel takes its place).
    for (size_t i = 0; i < ak.in.size() && ok; ++i) ok = static_cast<int>(i) == slot || producer[ak.in[i]] < e;
    for (size_t i = 1; i < nk.in.size() && ok; ++i) ok = producer[nk.in[i]] < e;
    if (!ok) continue;
    LirKernel f;
    f.kind = KernelKind::Library;
    f.op = OpKind::LayerNorm;
    f.attrs = nk.attrs;
    f.attrs["cuda_embed"] = static_cast<int64_t>(slot);
    f.body = ak.body;
    f.in = {ek.in[0], ek.in[1]};
    for (size_t i = 0; i < ak.in.size(); ++i)
      if (static_cast<int>(i) != slot) f.in.push_back(ak.in[i]);
    f.in.insert(f.in.end(), nk.in.begin() + 1, nk.in.end());
    f.out = nk.out;
    f.origin = ek.origin + "+" + ak.origin + "+" + nk.origin;
    p.kernels[e] = std::move(f);
    dead[a] = dead[n] = true;
    ++folded;
  }
  lir_drop(p, dead);
  return folded;
}

}  // namespace rlx
