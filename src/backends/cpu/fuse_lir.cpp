// fuse-cpu-lir: cpu-only rewrites of a lowered schedule, run once when the executable is built
// (only when the packed AVX2 GEMM is available; the kernels it makes live in gemm.cpp / nn.cpp).
//   1. merge-qkv + drop-head-transposes: three Linears of one input whose outputs are reshaped to
//      [B,S,NH,D] and transposed to [B,NH,S,D] for an Attention, whose output is transposed back,
//      become one Linear with the concatenated weight ([3H, K]) writing a [B,S,3H] buffer, and an
//      Attention (attr cpu_qkv = NH) that reads the heads in place and writes [B,S,NH,D].
//   2. residual-into-gemm: Linear -> Add(y, r) becomes a Linear whose epilogue adds r.
//   3. layernorm-into-gemm: ... -> LayerNorm over the last dim runs on each finished row block of
//      that Linear (out[1]), while the rows are still in cache.
// Buffers no kernel touches any more stay in the table (unplanned, size 0 in the arena) and the
// memory plan is recomputed.
#include <map>
#include <set>

#include "backends/cpu/gemm_avx2.h"
#include "backends/cpu/kernels.h"
#include "lir/plan.h"

namespace rlx::cpu {

namespace {

struct Uses {
  std::vector<std::vector<int>> readers;  // buffer -> kernels reading it (directly)
  std::vector<int> producer;              // buffer -> kernel writing it, or -1
  std::vector<int> views;                 // buffer -> number of views of it
};

Uses uses_of(const LirProgram& p) {
  Uses u;
  u.readers.resize(p.buffers.size());
  u.producer.assign(p.buffers.size(), -1);
  u.views.assign(p.buffers.size(), 0);
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    for (int b : p.kernels[k].in) u.readers[b].push_back(static_cast<int>(k));
    for (int b : p.kernels[k].out) u.producer[b] = static_cast<int>(k);
  }
  for (auto& b : p.buffers)
    if (b.kind == BufferKind::View) ++u.views[b.view_of];
  return u;
}

bool same_type(const ValueType& a, const ValueType& b) { return a.dtype == b.dtype && a.shape == b.shape; }

bool is_lib(const LirKernel& k, OpKind op) { return k.kind == KernelKind::Library && k.op == op; }

bool plain_linear(const LirProgram& p, const LirKernel& k) {
  if (!is_lib(k, OpKind::Linear) || k.out.size() != 1 || k.in.size() < 2 || k.in.size() > 3) return false;
  if (k.attrs.count("cpu_res") || k.attrs.count("cpu_ln_g")) return false;
  for (int b : k.in)
    if (p.buffers[b].type.dtype != DType::f32) return false;
  return p.buffers[k.in[1]].type.shape.size() == 2;
}

// Only kernel `k` reads buffer b, through no view, and b is an arena temporary.
bool sole_reader(const LirProgram& p, const Uses& u, int b, int k) {
  return p.buffers[b].kind == BufferKind::Arena && u.views[b] == 0 && u.readers[b].size() == 1 && u.readers[b][0] == k;
}

bool perm_0213(const LirKernel& k) {
  if (!is_lib(k, OpKind::Transpose)) return false;
  auto it = k.attrs.find("perm");
  if (it == k.attrs.end()) return false;
  Node n{k.op, {}, {}, k.attrs, ""};
  return attr_ints(n, "perm") == std::vector<int64_t>{0, 2, 1, 3};
}

// The Linear feeding Attention input `slot` through View -> Transpose(0,2,1,3); -1 if not that shape.
int head_linear(const LirProgram& p, const Uses& u, int att, int slot, int* tr) {
  int t = p.kernels[att].in[slot];
  int tk = u.producer[t];
  if (tk < 0 || !perm_0213(p.kernels[tk]) || !sole_reader(p, u, t, att)) return -1;
  int view = p.kernels[tk].in[0];
  const LirBuffer& vb = p.buffers[view];
  if (vb.kind != BufferKind::View || u.readers[view].size() != 1 || u.views[view] != 0) return -1;
  int y = vb.view_of;
  int lk = u.producer[y];
  if (lk < 0 || !plain_linear(p, p.kernels[lk]) || p.buffers[y].kind != BufferKind::Arena || u.views[y] != 1 ||
      !u.readers[y].empty())
    return -1;
  *tr = tk;
  return lk;
}

Tensor concat_rows(const std::vector<Tensor>& ts) {
  int64_t rows = 0;
  for (auto& t : ts) rows += t.shape()[0];
  std::vector<int64_t> shape = ts[0].shape();
  shape[0] = rows;
  Tensor r(DType::f32, shape);
  float* d = r.data<float>();
  for (auto& t : ts) d = std::copy(t.data<float>(), t.data<float>() + t.numel(), d);
  return r;
}

int add_buffer(LirProgram& p, LirBuffer b) {
  p.buffers.push_back(std::move(b));
  return static_cast<int>(p.buffers.size() - 1);
}

// Rewrite 1. Returns true when it changed the program.
bool merge_qkv(LirProgram& p, std::vector<bool>& dead) {
  bool changed = false;
  Uses u = uses_of(p);
  for (size_t a = 0; a < p.kernels.size(); ++a) {
    LirKernel& at = p.kernels[a];
    if (dead[a] || !is_lib(at, OpKind::Attention) || at.in.size() < 3 || at.in.size() > 4 || at.out.size() != 1) continue;
    const std::string mask = [&] {
      Node n{at.op, {}, {}, at.attrs, ""};
      return attr_str(n, "mask");
    }();
    if (!(mask == "none" || mask == "padding" || mask == "causal" || mask == "causal_padding")) continue;
    int tr[3], lin[3];
    bool ok = true;
    for (int i = 0; i < 3 && ok; ++i) ok = (lin[i] = head_linear(p, u, static_cast<int>(a), i, &tr[i])) >= 0;
    if (!ok) continue;
    const LirKernel &lq = p.kernels[lin[0]], &lk = p.kernels[lin[1]], &lv = p.kernels[lin[2]];
    ok = lq.in[0] == lk.in[0] && lq.in[0] == lv.in[0] && lq.in.size() == lk.in.size() && lq.in.size() == lv.in.size();
    for (int i = 0; i < 3 && ok; ++i) {
      const LirKernel& l = p.kernels[lin[i]];
      Node n{l.op, {}, {}, l.attrs, ""};
      std::string act = attr_str(n, "activation");
      ok = (act.empty() || act == "none") && p.buffers[l.in[1]].kind == BufferKind::Const &&
           (l.in.size() < 3 || p.buffers[l.in[2]].kind == BufferKind::Const) &&
           p.buffers[l.in[1]].type.shape == p.buffers[lq.in[1]].type.shape;
    }
    // Attention output -> Transpose(0,2,1,3), the transposed buffer read by anything.
    int o = at.out[0];
    if (!ok || p.buffers[o].kind != BufferKind::Arena || u.views[o] != 0 || u.readers[o].size() != 1) continue;
    int to = u.readers[o][0];
    if (!perm_0213(p.kernels[to])) continue;
    const Shape qs = p.buffers[at.in[0]].type.shape;  // [B, NH, S, D] (a copy: buffers grow below)
    const Shape ks = p.buffers[at.in[1]].type.shape;
    if (qs.size() != 4 || qs != ks || qs != p.buffers[at.in[2]].type.shape) continue;
    const int64_t NH = qs[1].v;
    // The merged Linear: weight [3H, K], bias [3H], output [..., 3H].
    std::vector<Tensor> ws, bs;
    for (int i = 0; i < 3; ++i) {
      ws.push_back(p.buffers[p.kernels[lin[i]].in[1]].value);
      if (lq.in.size() > 2) bs.push_back(p.buffers[p.kernels[lin[i]].in[2]].value);
    }
    LirBuffer wb;
    wb.kind = BufferKind::Const;
    wb.value = concat_rows(ws);
    wb.type = ValueType{DType::f32, to_shape(wb.value.shape())};
    LirBuffer ob = p.buffers[p.buffers[p.kernels[tr[0]].in[0]].view_of];  // q's linear output [.., H]
    ob.type.shape.back() = Dim(ob.type.shape.back().v * 3);
    ob.name = "qkv";
    int wbi = add_buffer(p, std::move(wb));
    int obi = add_buffer(p, std::move(ob));
    LirKernel m = p.kernels[lin[0]];
    m.in[1] = wbi;
    if (!bs.empty()) {
      LirBuffer bb;
      bb.kind = BufferKind::Const;
      bb.value = concat_rows(bs);
      bb.type = ValueType{DType::f32, to_shape(bb.value.shape())};
      m.in[2] = add_buffer(p, std::move(bb));
    }
    m.out = {obi};
    m.origin += "+k+v (merged qkv)";
    // The merged QKV buffer must be [B, S, 3H] for the attention's index math.
    const Shape xs = p.buffers[obi].type.shape;
    if (xs.size() != 3 || xs[0] != qs[0] || xs[1] != qs[2]) {
      p.buffers.resize(p.buffers.size() - (bs.empty() ? 2 : 3));
      continue;
    }
    LirKernel& at2 = p.kernels[a];
    std::vector<int> ain = {obi};
    if (at2.in.size() > 3) ain.push_back(at2.in[3]);
    at2.in = ain;
    at2.attrs["cpu_qkv"] = NH;
    at2.out = {p.kernels[to].out[0]};
    p.kernels[lin[0]] = std::move(m);
    for (int k : {lin[1], lin[2], tr[0], tr[1], tr[2], to}) dead[k] = true;
    changed = true;
  }
  return changed;
}

// Rewrites 2 and 3.
bool fuse_epilogues(LirProgram& p, std::vector<bool>& dead) {
  bool changed = false;
  Uses u = uses_of(p);
  for (size_t l = 0; l < p.kernels.size(); ++l) {
    if (dead[l] || !plain_linear(p, p.kernels[l])) continue;
    int y = p.kernels[l].out[0];
    if (!sole_reader(p, u, y, u.readers[y].empty() ? -1 : u.readers[y][0])) continue;
    int ak = u.readers[y][0];
    LirKernel& add = p.kernels[ak];
    if (dead[ak] || !is_lib(add, OpKind::Add) || add.in.size() != 2 || add.out.size() != 1) continue;
    int r = add.in[0] == y ? add.in[1] : add.in[0];
    if (r == y || !same_type(p.buffers[r].type, p.buffers[y].type) || !same_type(p.buffers[add.out[0]].type, p.buffers[y].type))
      continue;
    // r must exist when the Linear runs: produced before it (or an input/constant).
    int rp = r;
    while (p.buffers[rp].kind == BufferKind::View) rp = p.buffers[rp].view_of;
    if (u.producer[rp] >= static_cast<int>(l)) continue;
    LirKernel& lin = p.kernels[l];
    lin.attrs["cpu_res"] = static_cast<int64_t>(lin.in.size());
    lin.in.push_back(r);
    int z = add.out[0];
    lin.out = {z};
    dead[ak] = true;
    changed = true;
    // LayerNorm over the last dim as the only reader of z.
    if (p.buffers[z].kind != BufferKind::Arena || u.views[z] != 0 || u.readers[z].size() != 1) continue;
    int nk = u.readers[z][0];
    LirKernel& ln = p.kernels[nk];
    if (dead[nk] || !is_lib(ln, OpKind::LayerNorm) || ln.in[0] != z || ln.out.size() != 1) continue;
    Node nn{ln.op, {}, {}, ln.attrs, ""};
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
  }
  return changed;
}

}  // namespace

void fuse_cpu_lir(LirProgram& p) {
  if (!fast_gemm_available()) return;
  std::vector<bool> dead(p.kernels.size(), false);
  bool changed = merge_qkv(p, dead);
  if (changed) {  // recompute uses before the second rewrite
    erase_kernels(p, dead);
    dead.assign(p.kernels.size(), false);
  }
  bool changed2 = fuse_epilogues(p, dead);
  if (!changed && !changed2) return;
  erase_kernels(p, dead);
  plan_memory(p);
}

}  // namespace rlx::cpu
