// Linear rewrites.
//   matmul-into-linear: MatMul(x[..., K], W) with a constant f32 W [K, N] (what an ONNX export of a
//     Linear layer gives) becomes Linear(x, W^T) (the weight transposed once, at compile time), and
//     a library Add of a constant bias [N] that only reads its result becomes the Linear's bias;
//     the Linear kernels (packed GEMM, epilogues) then apply.
//   residual-into-linear: Linear -> Add(y, r) becomes a Linear whose epilogue adds r (attr cpu_res =
//     r's input slot); r must exist when the Linear runs, and the Linear has no activation (the
//     epilogues add r before it). A bias-less Linear -> generated
//     add(add(y, bias), r) (an ONNX export's MatMul + bias + residual) takes bias and residual.
//   layernorm-into-linear: a Linear with a residual epilogue whose output only a LayerNorm over the
//     last dim reads runs that LayerNorm on each finished row block (attrs cpu_ln_g/_b/_eps; the
//     normalized rows are its second output) while the rows are still in cache.
//   batch-sibling-linears: Linear kernels that read the same input with constant weights (and
//     biases) of one shape -- a transformer's Q, K and V projections -- become one batched GEMM over
//     the weights concatenated at compile time (attr cuda_siblings = n; outputs written to one
//     contiguous block). One launch instead of n, and n times the tiles in flight.
#include <cstring>
#include <map>

#include "lir/rewrite/pass.h"
#include "lir/rewrite/uses.h"

namespace rlx {

namespace {
bool same_type(const ValueType& a, const ValueType& b) { return a.dtype == b.dtype && a.shape == b.shape; }
bool same_static_type(const ValueType& a, const ValueType& b) {
  return a.dtype == b.dtype && static_dims(a.shape) == static_dims(b.shape);
}
std::string activation(const LirKernel& k) {
  if (!k.attrs.count("activation")) return "none";
  return attr_str(lir_node(k), "activation");
}
// A bias-less Linear's only reader, a generated kernel add(add(y, bias), r) (either operand order;
// bias a constant [N], r of y's type, made before the Linear): what an ONNX export's
// MatMul -> Add(bias) -> Add(residual) lowers to. The Linear takes the bias and the residual.
bool bias_then_residual(LirProgram& p, LirKernel& lin, const LirKernel& k, int y) {
  if (lin.in.size() != 2 || k.kind != KernelKind::Generated || k.out.size() != 1 || k.body.nodes.size() != 2 ||
      k.body.outputs.size() != 1 || k.in.size() != 3)
    return false;
  const Graph& g = k.body;
  const Node &a0 = g.nodes[0], &a1 = g.nodes[1];
  if (a0.op != OpKind::Add || a1.op != OpKind::Add || a0.inputs.size() != 2 || a1.inputs.size() != 2 ||
      g.outputs[0] != a1.outputs[0])
    return false;
  auto slot = [&](ValueId v) {
    for (size_t i = 0; i < g.inputs.size(); ++i)
      if (g.inputs[i] == v) return static_cast<int>(i);
    return -1;
  };
  const int s0 = slot(a0.inputs[0]), s1 = slot(a0.inputs[1]);
  if (s0 < 0 || s1 < 0) return false;
  const int b0 = k.in[static_cast<size_t>(s0)], b1 = k.in[static_cast<size_t>(s1)];
  const int bias = b0 == y ? b1 : b1 == y ? b0 : -1;
  const ValueId sum = a0.outputs[0];
  const ValueId other = a1.inputs[0] == sum ? a1.inputs[1] : a1.inputs[1] == sum ? a1.inputs[0] : -1;
  const int so = other < 0 ? -1 : slot(other);
  if (bias < 0 || bias == y || so < 0) return false;
  const int r = k.in[static_cast<size_t>(so)];
  const int64_t N = p.buffers[lin.in[1]].type.shape[0].v;
  const LirBuffer& bb = p.buffers[bias];
  if (r == y || r == bias || bb.kind != BufferKind::Const || bb.type.dtype != DType::f32 || bb.type.shape != Shape{Dim(N)} ||
      !same_type(p.buffers[r].type, p.buffers[y].type) || !same_type(p.buffers[k.out[0]].type, p.buffers[y].type))
    return false;
  LirUses u = lir_uses(p);
  const int lk = u.producer[y];
  if (u.producer[lir_root(p, r)] >= lk) return false;  // r must exist when the Linear runs
  lin.in.push_back(bias);
  lin.attrs["cpu_res"] = static_cast<int64_t>(lin.in.size());
  lin.in.push_back(r);
  lin.out = {k.out[0]};
  return true;
}

}  // namespace

int pass_matmul_into_linear(LirProgram& p, const LirAbsorbs&) {
  LirUses u = lir_uses(p);
  std::vector<bool> dead(p.kernels.size(), false);
  int changed = 0;
  for (size_t m = 0; m < p.kernels.size(); ++m) {
    LirKernel& k = p.kernels[m];
    if (!lir_is_lib(k, OpKind::MatMul) || k.in.size() != 2 || k.out.size() != 1) continue;
    const LirBuffer &xb = p.buffers[k.in[0]], &wb = p.buffers[k.in[1]], &yb = p.buffers[k.out[0]];
    if (wb.kind != BufferKind::Const || wb.type.dtype != DType::f32 || xb.type.dtype != DType::f32 ||
        wb.type.shape.size() != 2 || xb.type.shape.size() < 2 || yb.type.dtype != DType::f32)
      continue;
    const int64_t K = wb.type.shape[0].v, N = wb.type.shape[1].v;
    if (xb.type.shape.back().v != K || yb.type.shape.back().v != N) continue;
    LirBuffer wt;
    wt.kind = BufferKind::Const;
    wt.value = Tensor(DType::f32, {N, K});
    const float* w = wb.value.data<float>();
    float* t = wt.value.data<float>();
    for (int64_t i = 0; i < K; ++i)
      for (int64_t j = 0; j < N; ++j) t[j * K + i] = w[i * N + j];
    wt.type = ValueType{DType::f32, Shape{Dim(N), Dim(K)}};
    wt.name = wb.name;
    const int x = k.in[0], y = k.out[0];
    const std::string origin = k.origin;
    const int wti = lir_add_buffer(p, std::move(wt));
    LirKernel& lin = p.kernels[m];  // (the buffer table grew; kernels did not)
    lin.op = OpKind::Linear;
    lin.attrs = {};
    lin.in = {x, wti};
    lin.origin = origin + " (matmul of a constant weight)";
    ++changed;
    // A constant bias [N] added to the result, by a library Add that only reads it.
    if (!lir_sole_reader(p, u, y, u.readers[y].empty() ? -1 : u.readers[y][0])) continue;
    const int ak = u.readers[y][0];
    LirKernel& add = p.kernels[ak];
    if (!lir_is_lib(add, OpKind::Add) || add.in.size() != 2 || add.out.size() != 1) continue;
    const int b = add.in[0] == y ? add.in[1] : add.in[0];
    const LirBuffer& bb = p.buffers[b];
    if (b == y || bb.kind != BufferKind::Const || bb.type.dtype != DType::f32 || bb.type.shape != Shape{Dim(N)} ||
        !same_type(p.buffers[add.out[0]].type, p.buffers[y].type))
      continue;
    lin.in.push_back(b);
    lin.out = {add.out[0]};
    dead[ak] = true;
  }
  lir_drop(p, dead);
  return changed;
}

int pass_residual_into_linear(LirProgram& p, const LirAbsorbs&) {
  LirUses u = lir_uses(p);
  std::vector<bool> dead(p.kernels.size(), false);
  int changed = 0;
  for (size_t l = 0; l < p.kernels.size(); ++l) {
    if (dead[l] || !lir_plain_linear(p, p.kernels[l])) continue;
    // The GEMM epilogues add the residual before the activation: act(x W + b) + r is not one of them.
    if (activation(p.kernels[l]) != "none" && !activation(p.kernels[l]).empty()) continue;
    int y = p.kernels[l].out[0];
    if (!lir_sole_reader(p, u, y, u.readers[y].empty() ? -1 : u.readers[y][0])) continue;
    int ak = u.readers[y][0];
    LirKernel& add = p.kernels[ak];
    if (!dead[ak] && bias_then_residual(p, p.kernels[l], add, y)) {
      dead[ak] = true;
      ++changed;
      continue;
    }
    if (dead[ak] || !lir_is_lib(add, OpKind::Add) || add.in.size() != 2 || add.out.size() != 1) continue;
    int r = add.in[0] == y ? add.in[1] : add.in[0];
    if (r == y || !same_type(p.buffers[r].type, p.buffers[y].type) || !same_type(p.buffers[add.out[0]].type, p.buffers[y].type))
      continue;
    // r must exist when the Linear runs: produced before it (or an input/constant).
    if (u.producer[lir_root(p, r)] >= static_cast<int>(l)) continue;
    LirKernel& lin = p.kernels[l];
    lin.attrs["cpu_res"] = static_cast<int64_t>(lin.in.size());
    lin.in.push_back(r);
    lin.out = {add.out[0]};
    dead[ak] = true;
    ++changed;
  }
  lir_drop(p, dead);
  return changed;
}

int pass_layernorm_into_linear(LirProgram& p, const LirAbsorbs&) {
  LirUses u = lir_uses(p);
  std::vector<bool> dead(p.kernels.size(), false);
  int changed = 0;
  for (size_t l = 0; l < p.kernels.size(); ++l) {
    LirKernel& lin = p.kernels[l];
    if (dead[l] || !lir_is_lib(lin, OpKind::Linear) || !lin.attrs.count("cpu_res") || lin.attrs.count("cpu_ln_g") ||
        lin.out.size() != 1)
      continue;
    int z = lin.out[0];
    // LayerNorm over the last dim as the only reader of z.
    if (p.buffers[z].kind != BufferKind::Arena || u.views[z] != 0 || u.readers[z].size() != 1) continue;
    int nk = u.readers[z][0];
    LirKernel& ln = p.kernels[nk];
    if (dead[nk] || !lir_is_lib(ln, OpKind::LayerNorm) || ln.in[0] != z || ln.out.size() != 1) continue;
    Node nn = lir_node(ln);
    int64_t axis = attr_int(nn, "axis"), rank = static_cast<int64_t>(p.buffers[z].type.shape.size());
    if (axis < 0) axis += rank;
    const int64_t O = p.buffers[lin.in[1]].type.shape[0].v;
    if (axis != rank - 1 || p.buffers[ln.in[1]].type.shape != Shape{Dim(O)}) continue;
    if (ln.in.size() > 2 && p.buffers[ln.in[2]].type.shape != Shape{Dim(O)}) continue;
    lin.attrs["cpu_ln_g"] = static_cast<int64_t>(lin.in.size());
    lin.in.push_back(ln.in[1]);
    if (ln.in.size() > 2) {
      lin.attrs["cpu_ln_b"] = static_cast<int64_t>(lin.in.size());
      lin.in.push_back(ln.in[2]);
    }
    lin.attrs["cpu_ln_eps"] = attr_float(nn, "eps");
    lin.out.push_back(ln.out[0]);
    lin.origin += " +layer_norm";
    dead[nk] = true;
    ++changed;
  }
  lir_drop(p, dead);
  return changed;
}

int pass_batch_sibling_linears(LirProgram& p, const LirAbsorbs&) {
  std::map<int, std::vector<int>> by_input;
  for (int k = 0; k < static_cast<int>(p.kernels.size()); ++k) {
    const LirKernel& lk = p.kernels[k];
    if (lk.kind != KernelKind::Library || lk.op != OpKind::Linear || lk.in.size() < 2 || lk.out.size() != 1) continue;
    bool consts = true;
    for (size_t i = 1; i < lk.in.size(); ++i) consts &= p.buffers[lk.in[i]].kind == BufferKind::Const;
    DType t = p.buffers[lk.in[0]].type.dtype;
    if (consts && (t == DType::f16 || t == DType::bf16 || t == DType::f32)) by_input[lk.in[0]].push_back(k);
  }
  std::vector<bool> dead(p.kernels.size(), false);
  int fused = 0;
  for (auto& [x, ks] : by_input) {
    if (ks.size() < 2) continue;
    const LirKernel& k0 = p.kernels[ks[0]];
    std::vector<int> group{ks[0]};
    for (size_t i = 1; i < ks.size(); ++i) {
      const LirKernel& ki = p.kernels[ks[i]];
      bool same = ki.in.size() == k0.in.size() && ki.attrs.size() == k0.attrs.size() &&
                  activation(ki) == activation(k0) &&
                  same_static_type(p.buffers[ki.out[0]].type, p.buffers[k0.out[0]].type) &&
                  p.buffers[ki.out[0]].kind == BufferKind::Arena;
      for (size_t j = 1; j < ki.in.size() && same; ++j)
        same = same_static_type(p.buffers[ki.in[j]].type, p.buffers[k0.in[j]].type);
      if (same) group.push_back(ks[i]);
    }
    if (group.size() < 2 || p.buffers[k0.out[0]].kind != BufferKind::Arena) continue;
    LirKernel f = k0;
    f.in = {x};
    f.out.clear();
    for (size_t j = 1; j < k0.in.size(); ++j) {  // concatenated weight, then bias
      const LirBuffer& b0 = p.buffers[k0.in[j]];
      auto dims = static_dims(b0.type.shape);
      dims[0] *= static_cast<int64_t>(group.size());
      LirBuffer cat;
      cat.kind = BufferKind::Const;
      cat.type = ValueType{b0.type.dtype, to_shape(dims)};
      cat.value = Tensor(b0.type.dtype, dims);
      size_t bytes = static_cast<size_t>(b0.bytes());
      for (size_t g = 0; g < group.size(); ++g)
        std::memcpy(static_cast<char*>(cat.value.raw()) + g * bytes, p.buffers[p.kernels[group[g]].in[j]].value.raw(), bytes);
      cat.name = "cuda_siblings_cat";
      f.in.push_back(lir_add_buffer(p, std::move(cat)));
    }
    for (int g : group) f.out.push_back(p.kernels[g].out[0]), dead[g] = true;
    f.attrs["cuda_siblings"] = static_cast<int64_t>(group.size());
    f.origin = "batched(" + std::to_string(group.size()) + " linears)";
    p.kernels[ks[0]] = std::move(f);
    dead[ks[0]] = false;
    ++fused;
  }
  lir_drop(p, dead);
  return fused;
}

}  // namespace rlx
