// Attention rewrites.
//   merge-qkv: three Linears of one input whose outputs are reshaped to [B,S,NH,D] and transposed to
//     [B,NH,S,D] for an Attention, whose output is transposed back, become one Linear with the
//     concatenated weight ([3H, K]) writing a [B,S,3H] buffer, and an Attention (attr cpu_qkv = NH)
//     that reads the heads in place and writes [B,S,NH,D]. (cpu: nn.cpp's attention reads that form.)
//   fold-attention-transposes: attention reads q/k/v in [B,S,H,D] and writes its output in
//     [B,S,H,D] when the transposes (perm 0,2,1,3) around it exist only for it (BERT-style head
//     split/merge); the transposes go. (cuda: attrs cuda_{q,k,v,out}_bshd.)
#include <algorithm>

#include "lir/rewrite/pass.h"
#include "lir/rewrite/uses.h"

namespace rlx {

namespace {

// The Linear feeding Attention input `slot` through View -> Transpose(0,2,1,3); -1 if not that shape.
int head_linear(const LirProgram& p, const LirUses& u, int att, int slot, int* tr) {
  int t = p.kernels[att].in[slot];
  int tk = u.producer[t];
  if (tk < 0 || !lir_head_transpose(p.kernels[tk]) || !lir_sole_reader(p, u, t, att)) return -1;
  int view = p.kernels[tk].in[0];
  const LirBuffer& vb = p.buffers[view];
  if (vb.kind != BufferKind::View || u.readers[view].size() != 1 || u.views[view] != 0) return -1;
  int y = vb.view_of;
  int lk = u.producer[y];
  if (lk < 0 || !lir_plain_linear(p, p.kernels[lk]) || p.buffers[y].kind != BufferKind::Arena || u.views[y] != 1 ||
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

}  // namespace

int pass_merge_qkv(LirProgram& p, const LirAbsorbs&) {
  std::vector<bool> dead(p.kernels.size(), false);
  int changed = 0;
  LirUses u = lir_uses(p);
  for (size_t a = 0; a < p.kernels.size(); ++a) {
    LirKernel& at = p.kernels[a];
    if (dead[a] || !lir_is_lib(at, OpKind::Attention) || at.in.size() < 3 || at.in.size() > 4 || at.out.size() != 1) continue;
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
    if (!lir_head_transpose(p.kernels[to])) continue;
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
    int wbi = lir_add_buffer(p, std::move(wb));
    int obi = lir_add_buffer(p, std::move(ob));
    LirKernel m = p.kernels[lin[0]];
    m.in[1] = wbi;
    if (!bs.empty()) {
      LirBuffer bb;
      bb.kind = BufferKind::Const;
      bb.value = concat_rows(bs);
      bb.type = ValueType{DType::f32, to_shape(bb.value.shape())};
      m.in[2] = lir_add_buffer(p, std::move(bb));
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
    ++changed;
  }
  lir_drop(p, dead);
  return changed;
}


int pass_fold_attention_transposes(LirProgram& p, const LirAbsorbs&) {
  LirUses u = lir_uses(p);
  std::vector<bool> dead(p.kernels.size(), false);
  int folded = 0;
  for (int a = 0; a < static_cast<int>(p.kernels.size()); ++a) {
    LirKernel& ak = p.kernels[a];
    if (ak.kind != KernelKind::Library || ak.op != OpKind::Attention) continue;
    const char* names[] = {"cuda_q_bshd", "cuda_k_bshd", "cuda_v_bshd"};
    for (int i = 0; i < 3; ++i) {
      int b = ak.in[i], t = u.producer[b];
      if (t < 0 || dead[t] || !lir_used_once(p, u, b) || !lir_head_transpose(p.kernels[t])) continue;
      ak.in[i] = p.kernels[t].in[0];
      ak.attrs[names[i]] = int64_t{1};
      dead[t] = true;
      ++folded;
    }
    int o = ak.out[0];
    if (lir_used_once(p, u, o)) {
      for (int t = a + 1; t < static_cast<int>(p.kernels.size()); ++t) {
        LirKernel& tk = p.kernels[t];
        if (tk.in.size() == 1 && tk.in[0] == o && lir_head_transpose(tk)) {
          ak.out[0] = tk.out[0];
          ak.attrs["cuda_out_bshd"] = int64_t{1};
          dead[t] = true;
          ++folded;
          break;
        }
      }
    }
  }
  lir_drop(p, dead);
  return folded;
}

}  // namespace rlx
