// GEMM epilogue rewrites: the elementwise step after a GEMM becomes part of the GEMM.
//   train-epilogues: a 2-D f32 dot_general whose only reader is the next elementwise step takes
//     that step into its epilogue (cpu train_gemm): bias add (+ ReLU) after X.W, ReLU's backward mask
//     select(h > 0, dH.W^T, 0), and the plain SGD update W - lr.(X^T.dH) written straight into the
//     new weight (attrs cpu_epi, cpu_bias, cpu_mask, cpu_sgd_w, cpu_sgd_lr).
//   bias-grad-into-gemm: see below.
//   bias-into-gemm: dot_general/matmul whose output only feeds add(out, bias[N]) [then max(., 0)]
//     gets the bias (+ReLU) as its epilogue and writes the add's output (attrs cuda_bias,
//     cuda_relu; the bias is the kernel's last input), when the backend's GEMM can (gemm_bias).
//   layernorm-into-gemm: Linear -> LayerNorm(residual) (a norm with cuda_residual) becomes one
//     GEMM with a residual+LayerNorm epilogue (attrs cuda_ln, cuda_ln_eps) when the backend's
//     GEMM can (gemm_layernorm).
#include <string>

#include "lir/rewrite/pass.h"
#include "lir/rewrite/uses.h"

namespace rlx {

namespace {

bool f32_shape(const LirBuffer& b, const Shape& s) { return b.type.dtype == DType::f32 && b.type.shape == s; }

bool const_zero(const LirProgram& p, int b) {
  const LirBuffer& lb = p.buffers[b];
  return lb.kind == BufferKind::Const && lb.type.dtype == DType::f32 && lb.value.numel() == 1 && lb.value.get(0) == 0.0;
}

// A dot_general train_gemm runs: f32, 2-D operands, one contracting dim each, no batch dims.
bool train_dot(const LirProgram& p, const LirKernel& k) {
  if (k.kind != KernelKind::Library || k.op != OpKind::DotGeneral || k.in.size() != 2 || k.out.size() != 1) return false;
  if (k.attrs.count("cpu_epi")) return false;
  for (int b : {k.in[0], k.in[1], k.out[0]})
    if (p.buffers[b].type.dtype != DType::f32 || p.buffers[b].type.shape.size() != 2) return false;
  Node n{k.op, {}, {}, k.attrs, ""};
  return attr_ints(n, "lhs_batch").empty() && attr_ints(n, "rhs_batch").empty() &&
         attr_ints(n, "lhs_contract").size() == 1 && attr_ints(n, "rhs_contract").size() == 1;
}

// The kernel input slot that body value v is, or -1 (an intermediate).
int slot_of(const Graph& body, ValueId v) {
  for (size_t i = 0; i < body.inputs.size(); ++i)
    if (body.inputs[i] == v) return static_cast<int>(i);
  return -1;
}

// Matches reader kernel `r` (the only reader of z, the GEMM's output) against the three epilogues;
// on success appends the extra inputs to `d` and sets its attrs.
bool absorb(const LirProgram& p, LirKernel& d, const LirKernel& r, int z) {
  const Shape& zs = p.buffers[z].type.shape;
  const int64_t N = zs[1].v;
  if (r.out.size() != 1 || !f32_shape(p.buffers[r.out[0]], zs)) return false;
  auto add_in = [&](const char* attr, int b) {
    d.attrs[attr] = static_cast<int64_t>(d.in.size());
    d.in.push_back(b);
  };
  // Library add(z, bias) (a last layer without activation).
  if (r.kind == KernelKind::Library && r.op == OpKind::Add && r.in.size() == 2) {
    int other = r.in[0] == z ? r.in[1] : r.in[1] == z ? r.in[0] : -1;
    if (other < 0 || other == z || !f32_shape(p.buffers[other], Shape{Dim(N)})) return false;
    add_in("cpu_bias", other);
    d.attrs["cpu_epi"] = std::string("bias");
    return true;
  }
  if (r.kind != KernelKind::Generated || r.body.outputs.size() != 1) return false;
  const Graph& g = r.body;
  auto buf = [&](ValueId v) {  // kernel buffer of a body input, or -1
    int s = slot_of(g, v);
    return s < 0 ? -1 : r.in[static_cast<size_t>(s)];
  };
  const auto& ns = g.nodes;
  // add(z, bias) [, max(., 0)]
  if ((ns.size() == 1 || ns.size() == 2) && ns[0].op == OpKind::Add && ns[0].inputs.size() == 2) {
    int a0 = buf(ns[0].inputs[0]), a1 = buf(ns[0].inputs[1]);
    int bias = a0 == z ? a1 : a1 == z ? a0 : -1;
    if (bias < 0 || bias == z || !f32_shape(p.buffers[bias], Shape{Dim(N)})) return false;
    bool relu = false;
    if (ns.size() == 2) {
      const Node& m = ns[1];
      if (m.op != OpKind::Max || m.inputs.size() != 2 || m.inputs[0] != ns[0].outputs[0] || !const_zero(p, buf(m.inputs[1])))
        return false;
      relu = true;
    }
    if (g.outputs[0] != ns.back().outputs[0]) return false;
    add_in("cpu_bias", bias);
    if (relu) d.attrs["activation"] = std::string("relu");
    d.attrs["cpu_epi"] = std::string(relu ? "bias+relu" : "bias");
    return true;
  }
  if (ns.size() != 2 || g.outputs[0] != ns[1].outputs[0]) return false;
  // gt(h, 0) ; select(., z, 0): ReLU's backward.
  if (ns[0].op == OpKind::Gt && ns[1].op == OpKind::Select && ns[0].inputs.size() == 2 && ns[1].inputs.size() == 3) {
    int h = buf(ns[0].inputs[0]);
    if (h < 0 || h == z || !f32_shape(p.buffers[h], zs) || !const_zero(p, buf(ns[0].inputs[1]))) return false;
    if (ns[1].inputs[0] != ns[0].outputs[0] || buf(ns[1].inputs[1]) != z || !const_zero(p, buf(ns[1].inputs[2])))
      return false;
    add_in("cpu_mask", h);
    d.attrs["cpu_epi"] = std::string("relu_mask");
    return true;
  }
  // mul(lr, z) ; sub(W, .): plain SGD.
  if (ns[0].op == OpKind::Mul && ns[1].op == OpKind::Sub && ns[0].inputs.size() == 2 && ns[1].inputs.size() == 2) {
    int m0 = buf(ns[0].inputs[0]), m1 = buf(ns[0].inputs[1]);
    int lr = m0 == z ? m1 : m1 == z ? m0 : -1;
    if (lr < 0 || lr == z || p.buffers[lr].type.dtype != DType::f32 || !p.buffers[lr].type.shape.empty()) return false;
    if (ns[1].inputs[1] != ns[0].outputs[0]) return false;
    int w = buf(ns[1].inputs[0]);
    if (w < 0 || w == z || !f32_shape(p.buffers[w], zs) || w == r.out[0]) return false;
    add_in("cpu_sgd_w", w);
    add_in("cpu_sgd_lr", lr);
    d.attrs["cpu_epi"] = std::string("sgd");
    return true;
  }
  return false;
}

}  // namespace

int pass_train_epilogues(LirProgram& p, const LirAbsorbs&) {
  LirUses u = lir_uses(p);
  auto& readers = u.readers;
  auto& views = u.views;
  std::vector<bool> dead(p.kernels.size(), false);
  int changed = 0;
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    LirKernel& d = p.kernels[k];
    if (dead[k] || !train_dot(p, d)) continue;
    const int z = d.out[0];
    if (p.buffers[z].kind != BufferKind::Arena || views[z] != 0 || readers[z].size() != 1) continue;
    const int rk = readers[z][0];
    if (rk <= static_cast<int>(k) || dead[rk]) continue;
    LirKernel& r = p.kernels[rk];
    // The reader's other inputs must exist when the GEMM runs: produced before it (or never).
    bool ready = true;
    for (int b : r.in)
      for (size_t j = k + 1; j < static_cast<size_t>(rk) && ready; ++j)
        for (int o : p.kernels[j].out) ready &= o != b;
    if (!ready || !absorb(p, d, r, z)) continue;
    // absorb's extra inputs were read by r; they are now read by d too.
    for (size_t i = 2; i < d.in.size(); ++i) readers[d.in[i]].push_back(static_cast<int>(k));
    d.out = {r.out[0]};
    d.origin += " +" + attr_str(Node{d.op, {}, {}, d.attrs, ""}, "cpu_epi");
    dead[rk] = true;
    ++changed;
  }
  lir_drop(p, dead);
  return changed;
}

// reduce_sum(dH, axis 0) where dH [K,N] is also the B operand (contracted over its
// rows) of a 2-D f32 dot_general in the schedule (the weight gradient hᵀ·dH): the GEMM writes the sums
// as a second output (attr cpu_colsum = its output slot), taken while it packs dH (gemm_f32's
// GemmEpi::colsum, rows in order: the reduce_sum kernel's bits), and the reduce kernel goes.
int pass_bias_grad_into_gemm(LirProgram& p, const LirAbsorbs&) {
  const size_t nk = p.kernels.size();
  std::vector<bool> dead(nk, false);
  int changed = 0;
  for (size_t r = 0; r < nk; ++r) {
    const LirKernel& rk = p.kernels[r];
    if (rk.kind != KernelKind::Library || rk.op != OpKind::ReduceSum || rk.in.size() != 1 || rk.out.size() != 1) continue;
    const int x = rk.in[0], y = rk.out[0];
    const LirBuffer &xb = p.buffers[x], &yb = p.buffers[y];
    if (xb.type.dtype != DType::f32 || yb.type.dtype != DType::f32 || xb.type.shape.size() != 2) continue;
    if (!xb.type.shape[0].is_static() || !xb.type.shape[1].is_static()) continue;
    if (yb.kind == BufferKind::View || yb.kind == BufferKind::Const) continue;
    const Node rn{rk.op, {}, {}, rk.attrs, ""};
    const auto& ax = attr_ints(rn, "axes");
    if (ax.size() != 1 || !(ax[0] == 0 || ax[0] == -2)) continue;
    const int64_t K = xb.type.shape[0].v, N = xb.type.shape[1].v;
    const Shape& ys = yb.type.shape;
    if (K < 1 || !(ys == Shape{Dim(N)} || ys == Shape{Dim(1), Dim(N)})) continue;
    // The GEMM: reads x as its B operand, contracted over dim 0 (op(B) = B, not transposed).
    int d = -1;
    for (size_t j = 0; j < nk && d < 0; ++j) {
      const LirKernel& g = p.kernels[j];
      if (dead[j] || g.kind != KernelKind::Library || g.op != OpKind::DotGeneral || g.in.size() < 2 || g.in[1] != x ||
          g.attrs.count("cpu_colsum"))
        continue;
      if (p.buffers[g.in[0]].type.dtype != DType::f32 || p.buffers[g.in[0]].type.shape.size() != 2) continue;
      if (p.buffers[g.out[0]].type.dtype != DType::f32 || p.buffers[g.out[0]].type.shape.size() != 2) continue;
      Node n{g.op, {}, {}, g.attrs, ""};
      const auto &lc = attr_ints(n, "lhs_contract"), &rc = attr_ints(n, "rhs_contract");
      if (!attr_ints(n, "lhs_batch").empty() || !attr_ints(n, "rhs_batch").empty() || lc.size() != 1 || rc.size() != 1)
        continue;
      if (!(rc[0] == 0 || rc[0] == -2)) continue;
      d = static_cast<int>(j);
    }
    if (d < 0) continue;
    // The sums now appear when the GEMM runs: nothing between the reduce and a later GEMM may read them.
    bool ok = true;
    for (size_t j = r + 1; j < static_cast<size_t>(d) && ok; ++j)
      for (int b : p.kernels[j].in) ok &= lir_root(p, b) != y;
    if (!ok) continue;
    LirKernel& g = p.kernels[static_cast<size_t>(d)];
    g.attrs["cpu_colsum"] = static_cast<int64_t>(g.out.size());
    g.out.push_back(y);
    std::string epi;  // (built with +=: GCC 12 warns -Wrestrict on string + literal here)
    if (g.attrs.count("cpu_epi")) {
      epi = attr_str(Node{g.op, {}, {}, g.attrs, ""}, "cpu_epi");
      epi += '+';
    }
    epi += "colsum";
    g.attrs["cpu_epi"] = epi;
    g.origin += " +colsum";
    dead[r] = true;
    ++changed;
  }
  lir_drop(p, dead);
  return changed;
}

namespace {

// A generated kernel computing max(in0 + in1, 0) (either operand order; the 0 a constant scalar).
bool is_add_relu(const LirProgram& p, const LirKernel& k) {
  if (k.kind != KernelKind::Generated || k.in.size() != 3 || k.body.nodes.size() != 2) return false;
  const Graph& g = k.body;
  const Node &a = g.nodes[0], &m = g.nodes[1];
  if (a.op != OpKind::Add || m.op != OpKind::Max || g.inputs.size() != 3 || g.outputs.size() != 1 ||
      g.outputs[0] != m.outputs[0])
    return false;
  bool ops01 = (a.inputs[0] == g.inputs[0] && a.inputs[1] == g.inputs[1]) ||
               (a.inputs[0] == g.inputs[1] && a.inputs[1] == g.inputs[0]);
  bool max_ok = (m.inputs[0] == a.outputs[0] && m.inputs[1] == g.inputs[2]) ||
                (m.inputs[1] == a.outputs[0] && m.inputs[0] == g.inputs[2]);
  const LirBuffer& z = p.buffers[k.in[2]];
  bool zero = z.kind == BufferKind::Const && z.value.numel() == 1 && z.value.get(0) == 0.0 && is_float(z.type.dtype);
  return ops01 && max_ok && zero;
}

}  // namespace

int pass_bias_into_gemm(LirProgram& p, const LirAbsorbs& abs) {
  if (!abs.gemm_bias) return 0;
  LirUses u = lir_uses(p);
  auto& producer = u.producer;
  std::vector<bool> dead(p.kernels.size(), false);
  int folded = 0;
  for (int k = 0; k < static_cast<int>(p.kernels.size()); ++k) {
    LirKernel& ak = p.kernels[k];
    bool is_add = (ak.kind == KernelKind::Library && ak.op == OpKind::Add) ||
                  (ak.kind == KernelKind::Generated && ak.body.nodes.size() == 1 && ak.body.nodes[0].op == OpKind::Add);
    bool relu = !is_add && is_add_relu(p, ak);  // max(x + bias, 0): cuBLASLt's RELU_BIAS epilogue
    if (!((is_add && ak.in.size() == 2) || relu)) continue;
    for (int side = 0; side < 2; ++side) {
      int x = ak.in[side], bias = ak.in[1 - side], g = producer[x];
      if (g < 0 || dead[g] || !lir_used_once(p, u, x) || producer[bias] >= g) continue;
      LirKernel& gk = p.kernels[g];
      if (gk.kind != KernelKind::Library || (gk.op != OpKind::DotGeneral && gk.op != OpKind::MatMul) || gk.attrs.count("cuda_bias"))
        continue;
      const ValueType &xt = p.buffers[x].type, &bt = p.buffers[bias].type, &ot = p.buffers[ak.out[0]].type;
      auto xd = static_dims(xt.shape), bd = static_dims(bt.shape);
      bool row = !xd.empty() && bt.dtype == xt.dtype && ot.dtype == xt.dtype && static_dims(ot.shape) == xd &&
                 ((bd.size() == 1 && bd[0] == xd.back()) || (bd.size() == 2 && bd[0] == 1 && bd[1] == xd.back()));
      std::vector<ValueType> in;
      for (int b : gk.in) in.push_back(p.buffers[b].type);
      if (!row || xt.dtype == DType::f64 || !abs.gemm_bias(gk, in, xt)) continue;
      gk.attrs["cuda_bias"] = int64_t{1};
      if (relu) gk.attrs["cuda_relu"] = int64_t{1};
      gk.in.push_back(bias);
      gk.out[0] = ak.out[0];
      dead[k] = true;
      ++folded;
      break;
    }
  }
  // The GEMM now writes the add's output earlier in the schedule; its bias was produced before it.
  lir_drop(p, dead);
  return folded;
}

int pass_layernorm_into_gemm(LirProgram& p, const LirAbsorbs& abs) {
  if (!abs.gemm_layernorm) return 0;
  LirUses u = lir_uses(p);
  auto& producer = u.producer;
  std::vector<bool> dead(p.kernels.size(), false);
  int folded = 0;
  for (int n = 0; n < static_cast<int>(p.kernels.size()); ++n) {
    LirKernel& nk = p.kernels[n];
    if (nk.kind != KernelKind::Library || nk.op != OpKind::LayerNorm || !nk.attrs.count("cuda_residual") ||
        nk.in.size() != 4 || nk.out.size() != 1)
      continue;
    const ValueType& xt = p.buffers[nk.in[0]].type;
    auto xd = static_dims(xt.shape);
    Node nd{nk.op, {}, {}, nk.attrs, ""};
    int64_t axis = attr_int(nd, "axis");
    if (xd.empty() || (axis != -1 && axis != static_cast<int64_t>(xd.size()) - 1)) continue;
    bool same = p.buffers[nk.out[0]].type.dtype == xt.dtype;
    for (int b : nk.in) same &= p.buffers[b].type.dtype == xt.dtype;
    for (int b = 2; b < 4; ++b) same &= static_dims(p.buffers[nk.in[b]].type.shape) == std::vector<int64_t>{xd.back()};
    if (!same) continue;
    for (int side = 0; side < 2; ++side) {
      int y = nk.in[side], res = nk.in[1 - side], l = producer[y];
      if (l < 0 || dead[l] || !lir_used_once(p, u, y) || y == res) continue;
      LirKernel& lk = p.kernels[l];
      if (lk.kind != KernelKind::Library || lk.op != OpKind::Linear || lk.in.size() != 3 || lk.out.size() != 1 ||
          lk.attrs.count("cuda_siblings") || lk.attrs.count("cuda_ln") ||
          (lk.attrs.count("activation") && attr_str(lir_node(lk), "activation") != "none"))
        continue;
      if (producer[res] >= l || producer[nk.in[2]] >= l || producer[nk.in[3]] >= l) continue;  // ready at the linear
      std::vector<ValueType> in;
      for (int b : lk.in) in.push_back(p.buffers[b].type);
      const double eps = attr_float(nd, "eps");
      if (!abs.gemm_layernorm(lk, in, xt, eps)) continue;
      int bias = lk.in[2];
      lk.in = {lk.in[0], lk.in[1], res, nk.in[2], nk.in[3], bias};
      lk.out = {nk.out[0]};
      lk.attrs["cuda_ln"] = int64_t{1};
      lk.attrs["cuda_ln_eps"] = eps;
      lk.origin += "+layer_norm";
      dead[n] = true;
      ++folded;
      break;
    }
  }
  lir_drop(p, dead);
  return folded;
}

}  // namespace rlx
