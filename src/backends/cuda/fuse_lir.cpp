// The cuda backend's LIR rewrites and the merge-launches planner (see fuse_lir.h): everything the
// executable decides about the schedule before it renders, compiles and launches anything.
#include "backends/cuda/fuse_lir.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "backends/cuda/fuse_embed.h"
#include "backends/cuda/gemm.h"
#include "lir/plan.h"

namespace rlx::cuda {

// drop_folded, Uses and count_uses are declared in fuse_lir.h (gemm.cpp and
// fuse_embed.cpp fold with them too).
// The end of a rewrite that folded `n` kernels away (marked in `dead`): drop them and plan the
// arena again; returns n.
int drop_folded(LirProgram& p, const std::vector<bool>& dead, int n) {
  if (!n) return 0;
  erase_kernels(p, dead);
  plan_memory(p);
  return n;
}

// Per buffer: how many kernel inputs read it (a view's base and a program output count 2 more, so
// a buffer "used once" is read by one kernel and nothing else; never fold through views) and
// which kernel writes it (-1: none).
Uses count_uses(const LirProgram& p) {
  const int nb = static_cast<int>(p.buffers.size());
  Uses u{std::vector<int>(nb, 0), std::vector<int>(nb, -1)};
  for (int k = 0; k < static_cast<int>(p.kernels.size()); ++k) {
    for (int b : p.kernels[k].in) ++u.uses[b];
    for (int b : p.kernels[k].out) u.producer[b] = k;
  }
  for (int b = 0; b < nb; ++b)
    if (p.buffers[b].kind == BufferKind::View) u.uses[p.buffers[b].view_of] += 2;
  for (int b : p.outputs) u.uses[b] += 2;
  return u;
}

namespace {

// fold-attention-transposes: attention reads q/k/v in [B,S,H,D] and writes its output in [B,S,H,D]
// when the transposes (perm 0,2,1,3) around it exist only for it (BERT-style head split/merge);
// the transposes disappear and the arena is planned again. RLX_CUDA_NO_FOLD=1 turns it off.
int fold_attention_transposes(LirProgram& p) {
  auto [uses, producer] = count_uses(p);
  auto is_head_transpose = [&](const LirKernel& k) {
    if (k.kind != KernelKind::Library || k.op != OpKind::Transpose) return false;
    Node n{k.op, {}, {}, k.attrs, ""};
    return attr_ints(n, "perm") == std::vector<int64_t>{0, 2, 1, 3};
  };
  std::vector<bool> dead(p.kernels.size(), false);
  int folded = 0;
  for (int a = 0; a < static_cast<int>(p.kernels.size()); ++a) {
    LirKernel& ak = p.kernels[a];
    if (ak.kind != KernelKind::Library || ak.op != OpKind::Attention) continue;
    const char* names[] = {"cuda_q_bshd", "cuda_k_bshd", "cuda_v_bshd"};
    for (int i = 0; i < 3; ++i) {
      int b = ak.in[i], t = producer[b];
      if (t < 0 || dead[t] || uses[b] != 1 || p.buffers[b].kind != BufferKind::Arena || !is_head_transpose(p.kernels[t]))
        continue;
      ak.in[i] = p.kernels[t].in[0];
      ak.attrs[names[i]] = int64_t{1};
      dead[t] = true;
      ++folded;
    }
    int o = ak.out[0];
    if (p.buffers[o].kind == BufferKind::Arena && uses[o] == 1) {
      for (int t = a + 1; t < static_cast<int>(p.kernels.size()); ++t) {
        LirKernel& tk = p.kernels[t];
        if (tk.in.size() == 1 && tk.in[0] == o && is_head_transpose(tk)) {
          ak.out[0] = tk.out[0];
          ak.attrs["cuda_out_bshd"] = int64_t{1};
          dead[t] = true;
          ++folded;
          break;
        }
      }
    }
  }
  return drop_folded(p, dead, folded);
}

// fold-residual-add: layer_norm(a + b) reads a and b itself when the add (same shapes, a library
// kernel) exists only for it — the post-attention/FFN residual of every transformer block.
int fold_residual_adds(LirProgram& p) {
  auto [uses, producer] = count_uses(p);
  std::vector<bool> dead(p.kernels.size(), false);
  int folded = 0;
  for (auto& k : p.kernels) {
    if (k.kind != KernelKind::Library || (k.op != OpKind::LayerNorm && k.op != OpKind::RmsNorm)) continue;
    int x = k.in[0], a = producer[x];
    if (a < 0 || uses[x] != 1 || p.buffers[x].kind != BufferKind::Arena) continue;
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
  return drop_folded(p, dead, folded);
}

// batch-sibling-linears: Linear kernels that read the same input with constant weights (and biases)
// of one shape — a transformer's Q, K and V projections — become one batched cuBLASLt GEMM over the
// weights concatenated at compile time (attr cuda_siblings = n; outputs written to one contiguous
// block, see CudaExecutable). One launch instead of n, and n times the tiles in flight.
bool same_type(const ValueType& a, const ValueType& b) {
  return a.dtype == b.dtype && static_dims(a.shape) == static_dims(b.shape);
}
int batch_sibling_linears(LirProgram& p) {
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
                  activation_of(ki) == activation_of(k0) && same_type(p.buffers[ki.out[0]].type, p.buffers[k0.out[0]].type) &&
                  p.buffers[ki.out[0]].kind == BufferKind::Arena;
      for (size_t j = 1; j < ki.in.size() && same; ++j)
        same = same_type(p.buffers[ki.in[j]].type, p.buffers[k0.in[j]].type);
      if (same) group.push_back(ks[i]);
    }
    if (group.size() < 2 || p.buffers[k0.out[0]].kind != BufferKind::Arena) continue;
    LirKernel f = k0;
    f.in = {x};
    f.out.clear();
    for (size_t j = 1; j < k0.in.size(); ++j) {  // concatenated weight, then bias
      const LirBuffer& b0 = p.buffers[k0.in[j]];
      auto dims = static_dims(b0.type.shape);
      int64_t n = static_cast<int64_t>(group.size());
      dims[0] *= n;
      LirBuffer cat;
      cat.kind = BufferKind::Const;
      cat.type = ValueType{b0.type.dtype, to_shape(dims)};
      cat.value = Tensor(b0.type.dtype, dims);
      size_t bytes = static_cast<size_t>(b0.bytes());
      for (size_t g = 0; g < group.size(); ++g)
        std::memcpy(static_cast<char*>(cat.value.raw()) + g * bytes, p.buffers[p.kernels[group[g]].in[j]].value.raw(), bytes);
      cat.name = "cuda_siblings_cat";
      p.buffers.push_back(std::move(cat));
      f.in.push_back(static_cast<int>(p.buffers.size()) - 1);
    }
    for (int g : group) f.out.push_back(p.kernels[g].out[0]), dead[g] = true;
    f.attrs["cuda_siblings"] = static_cast<int64_t>(group.size());
    f.origin = "batched(" + std::to_string(group.size()) + " linears)";
    p.kernels[ks[0]] = std::move(f);
    dead[ks[0]] = false;
    ++fused;
  }
  return drop_folded(p, dead, fused);
}

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

// fold-bias-into-gemm: dot_general/matmul whose output only feeds `add(out, bias[N])` (a row
// vector over the last dim, same dtype) gets the bias as its cuBLASLt epilogue and writes the add's
// output (attr cuda_bias; the bias is the kernel's last input). One launch less per layer.
int fold_gemm_bias(LirProgram& p) {
  auto [uses, producer] = count_uses(p);
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
      if (g < 0 || dead[g] || uses[x] != 1 || p.buffers[x].kind != BufferKind::Arena || producer[bias] >= g) continue;
      LirKernel& gk = p.kernels[g];
      if (gk.kind != KernelKind::Library || (gk.op != OpKind::DotGeneral && gk.op != OpKind::MatMul) || gk.attrs.count("cuda_bias"))
        continue;
      const ValueType &xt = p.buffers[x].type, &bt = p.buffers[bias].type, &ot = p.buffers[ak.out[0]].type;
      auto xd = static_dims(xt.shape), bd = static_dims(bt.shape);
      bool row = !xd.empty() && bt.dtype == xt.dtype && ot.dtype == xt.dtype && static_dims(ot.shape) == xd &&
                 ((bd.size() == 1 && bd[0] == xd.back()) || (bd.size() == 2 && bd[0] == 1 && bd[1] == xd.back()));
      std::vector<ValueType> in;
      for (int b : gk.in) in.push_back(p.buffers[b].type);
      GemmShape gs;
      std::string post;
      if (!row || xt.dtype == DType::f64 || !plan_gemm(gk, in, xt, &gs, &post) || gs.batch != 1 || gs.N != xd.back()) continue;
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
  return drop_folded(p, dead, folded);
}

}  // namespace

// ---- merge-launches planner ----------------------------------------------------------------------

std::vector<ValueType> MergePlanner::types(const std::vector<int>& ids) const {
  std::vector<ValueType> t;
  for (int b : ids) t.push_back(p.buffers[b].type);
  return t;
}

bool MergePlanner::is_reduction(const LirKernel& k) {
  return k.kind == KernelKind::Library && is_reduce_op(k.op);
}

bool MergePlanner::mergeable_at(size_t i, bool sequential, int64_t limit) const {
  const LirKernel& k = p.kernels[i];
  auto in = types(k.in), out = types(k.out);
  if (!mergeable(k, in, out, sequential)) return false;
  if (!sequential) return !is_reduction(k);
  for (auto& t : in)
    if (numel(t.shape) > limit) return false;
  return numel(out[0].shape) <= limit;
}

size_t MergePlanner::row_run(size_t i) const {
  size_t j = i;
  while (j < p.kernels.size() && j - i < kMaxParts && mergeable_at(j, true, kRowElems)) ++j;
  return j - i;
}

// A row launch with a tail starting at kernel i (row kernels L, then the cross-row tail X):
// the number of kernels it covers, or 0.
size_t MergePlanner::row_launch_at(size_t i, std::vector<size_t>* L, std::vector<size_t>* X, int64_t* R, bool check_hazards) const {
  if (!env_on("RLX_CUDA_MERGE", true) || !env_on("RLX_CUDA_ROWS", true) || !env_on("RLX_CUDA_ROW_TAIL", true)) return 0;
  size_t rl = row_run(i), cl = concurrent_run(i);
  if (rl < 2 || (cl >= 2 && cl >= rl)) return 0;
  L->clear(), X->clear();
  if (!split_rows(i, rl, L, X, R, check_hazards, 1)) return 0;
  if (X->empty() ? L->size() < 2 : !tailable(*X, *R)) return 0;
  return rl;
}

bool MergePlanner::overlaps(int a, int b) const {
  uint64_t pa = addr(a), pb = addr(b);
  uint64_t ea = pa + static_cast<uint64_t>(p.buffers[a].bytes()), eb = pb + static_cast<uint64_t>(p.buffers[b].bytes());
  return pa < eb && pb < ea;
}

size_t MergePlanner::sequential_run(size_t i) const {
  size_t j = i;
  while (j < p.kernels.size() && j - i < kMaxParts && mergeable_at(j, true)) ++j;
  return j - i;
}

size_t MergePlanner::concurrent_run(size_t i) const {
  size_t j = i;
  for (; j < p.kernels.size() && j - i < kMaxParts && mergeable_at(j, false); ++j) {
    const LirKernel& k = p.kernels[j];
    bool indep = true;
    for (size_t g = i; g < j && indep; ++g) {
      const LirKernel& h = p.kernels[g];
      for (int o : h.out)
        for (int x : k.in) indep &= !overlaps(o, x);
      for (int o : k.out) {
        for (int x : h.in) indep &= !overlaps(o, x);
        for (int x : h.out) indep &= !overlaps(o, x);
      }
    }
    if (!indep) break;
  }
  return j - i;
}

// The parts of a merged launch. Sequential/rows: an arena buffer written and read only inside
// the launch lives in its shared memory (offsets planned by liveness inside the launch, up to
// kSmemBudget bytes; a row launch's blocks hold their own rows only); the rest stays global.
std::vector<MergePart> MergePlanner::parts(const std::vector<size_t>& ks, MergeMode mode, int64_t rows, size_t tail) const {
  std::vector<MergePart> r;
  for (size_t j : ks) r.push_back({&p.kernels[j], types(p.kernels[j].in), types(p.kernels[j].out), {}});
  for (size_t q = ks.size() - tail; q < ks.size(); ++q) r[q].tail = true;
  if (mode == MergeMode::Concurrent) return r;
  std::set<int> global;  // tail outputs, and what the tail's non-reductions read, stay global
  for (size_t q = ks.size() - tail; q < ks.size(); ++q) {
    global.insert(p.kernels[ks[q]].out[0]);
    if (!is_reduction(p.kernels[ks[q]]))
      for (int x : p.kernels[ks[q]].in) global.insert(x);
  }
  int64_t rpb = 0;
  if (mode == MergeMode::Rows) {
    int64_t mx = 1;
    for (auto& mp : r)
      if (!mp.tail) mx = std::max<int64_t>(mx, numel(mp.out[0].shape) / rows);
    rpb = rows_per_block(mx, rows, tail > 0);
  }
  std::set<size_t> in_launch(ks.begin(), ks.end());
  std::map<int, int64_t> off;  // buffer -> shared offset
  std::vector<std::tuple<int64_t, int64_t, size_t>> live;  // (offset, bytes, last position reading it)
  for (size_t pos = 0; pos < ks.size(); ++pos) {
    int b = p.kernels[ks[pos]].out[0];
    const LirBuffer& lb = p.buffers[b];
    bool internal = lb.kind == BufferKind::Arena;
    size_t last = pos;
    for (size_t k = 0; k < p.kernels.size() && internal; ++k)
      for (int x : p.kernels[k].in)
        if (x == b) {
          if (!in_launch.count(k)) internal = false;
          else last = std::max(last, static_cast<size_t>(std::find(ks.begin(), ks.end(), k) - ks.begin()));
        }
    for (auto& v : p.buffers) internal &= !(v.kind == BufferKind::View && v.view_of == b);
    for (int o : p.outputs) internal &= o != b;
    if (!internal || global.count(b)) continue;
    std::erase_if(live, [&](auto& t) { return std::get<2>(t) < pos; });
    std::sort(live.begin(), live.end());
    int64_t bytes = mode == MergeMode::Rows ? numel(lb.type.shape) / rows * rpb * static_cast<int64_t>(dtype_size(lb.type.dtype))
                                            : lb.bytes();
    bytes = (bytes + 15) / 16 * 16;
    int64_t at = 0;
    for (auto& [o, n, l] : live) {  // first fit
      if (at + bytes <= o) break;
      at = std::max(at, o + n);
    }
    if (at + bytes > kSmemBudget) continue;
    live.emplace_back(at, bytes, last);
    off[b] = at;
  }
  for (auto& mp : r) {
    for (int x : mp.k->in) mp.smem.push_back(off.count(x) ? off[x] : -1);
    mp.smem.push_back(off.count(mp.k->out[0]) ? off[mp.k->out[0]] : -1);
  }
  return r;
}

// row-split: a sequential run whose kernels mostly work row by row (leading dim R) runs as a row
// launch over many blocks (L: every kernel that maps row r to row r and needs nothing cross-row)
// followed by a sequential launch of the rest (X: the cross-row reductions and what follows
// them). Refused when moving L ahead of X would overwrite a buffer X still reads (arena reuse).
bool MergePlanner::row_local(const LirKernel& k, int64_t R, const std::set<int>& made_in_l) const {
  auto od = static_dims(p.buffers[k.out[0]].type.shape);
  if (od.empty() || od[0] != R) return false;
  Node nd{k.op, {}, {}, k.attrs, ""};
  if (is_reduction(k)) {
    for (auto a : attr_ints(nd, "axes"))
      if (a == 0 || a == -static_cast<int64_t>(static_dims(p.buffers[k.in[0]].type.shape).size())) return false;
    return static_dims(p.buffers[k.in[0]].type.shape)[0] == R;
  }
  if (k.kind == KernelKind::Library && (k.op == OpKind::ArgMax || k.op == OpKind::ArgMin)) {
    auto id = static_dims(p.buffers[k.in[0]].type.shape);
    return attr_int(nd, "axis") != 0 && attr_int(nd, "axis") != -static_cast<int64_t>(id.size()) && id[0] == R;
  }
  bool elementwise = k.kind == KernelKind::Generated || is_elementwise(k.op);
  for (int x : k.in) {
    if (!made_in_l.count(x)) continue;  // made before the launch: read as is, any row
    auto id = static_dims(p.buffers[x].type.shape);
    if (id.empty() || id[0] != R) return false;
    if (elementwise && id.size() == od.size()) continue;
    if (k.kind == KernelKind::Library && k.op == OpKind::BroadcastInDim && !attr_ints(nd, "dims").empty() &&
        attr_ints(nd, "dims")[0] == 0)
      continue;
    return false;
  }
  return true;
}

bool MergePlanner::split_rows(size_t i, size_t len, std::vector<size_t>* L, std::vector<size_t>* X, int64_t* R,
                              bool check_hazards, size_t min_l) const {
  auto od = static_dims(p.buffers[p.kernels[i].out[0]].type.shape);
  if (od.empty() || od[0] < 2) return false;
  *R = od[0];
  std::set<int> made_l, made_x;
  for (size_t j = i; j < i + len; ++j) {
    const LirKernel& k = p.kernels[j];
    bool dep_x = false;
    for (int x : k.in) dep_x |= made_x.count(x) > 0;
    if (!dep_x && row_local(k, *R, made_l)) L->push_back(j), made_l.insert(k.out[0]);
    else X->push_back(j), made_x.insert(k.out[0]);
  }
  if (L->size() < min_l) return false;
  for (size_t x : *X)
    if (!check_hazards) break;
    else
    for (size_t l : *L) {
      if (l < x) continue;
      for (int o : p.kernels[l].out) {
        bool hit = false;
        for (int b : p.kernels[x].in) hit |= overlaps(o, b);
        for (int b : p.kernels[x].out) hit |= overlaps(o, b);
        if (hit) return false;
      }
    }
  return true;
}

// X can ride on the row launch as its tail: its reductions are over the rows and read nothing X
// makes; its other kernels are small and run in the last block.
bool MergePlanner::tailable(const std::vector<size_t>& X, int64_t R) const {
  std::set<int> made_x;
  for (size_t x : X) {
    const LirKernel& k = p.kernels[x];
    if (is_reduction(k)) {
      if (!tail_reduction(k, p.buffers[k.in[0]].type, R) || made_x.count(k.in[0])) return false;
    } else if (numel(p.buffers[k.out[0]].type.shape) > kSmallElems) {
      return false;  // the tail's other kernels run in one block
    }
    made_x.insert(k.out[0]);
  }
  return true;
}

std::vector<MergePlanner::Launch> MergePlanner::plan(bool merge, bool rows) const {
  std::vector<Launch> r;
  auto range = [](size_t i, size_t n) {
    std::vector<size_t> v;
    for (size_t j = i; j < i + n; ++j) v.push_back(j);
    return v;
  };
  for (size_t i = 0; i < p.kernels.size();) {
    std::vector<size_t> L, X;
    int64_t R = 0;
    if (size_t rl = merge && rows ? row_launch_at(i, &L, &X, &R, true) : 0) {
      std::vector<size_t> all = L;
      all.insert(all.end(), X.begin(), X.end());
      r.push_back({all, MergeMode::Rows, R, true, X.size()});
      i += rl;
      continue;
    }
    L.clear(), X.clear();
    size_t sl = merge ? sequential_run(i) : 0, cl = merge ? concurrent_run(i) : 0;
    if (sl >= 2 && sl >= cl) {
      if (rows && split_rows(i, sl, &L, &X, &R)) {
        if (!X.empty() && tailable(X, R) && env_on("RLX_CUDA_ROW_TAIL", true)) {
          std::vector<size_t> all = L;
          all.insert(all.end(), X.begin(), X.end());
          r.push_back({all, MergeMode::Rows, R, true, X.size()});
        } else {
          r.push_back({L, MergeMode::Rows, R, true});
          if (!X.empty()) r.push_back({X, MergeMode::Sequential, 0, true});
        }
      } else {
        r.push_back({range(i, sl), MergeMode::Sequential, 0, false});
      }
      i += sl;
    } else if (cl >= 2) {
      r.push_back({range(i, cl), MergeMode::Concurrent, 0, false}), i += cl;
    } else {
      r.push_back({range(i, 1), MergeMode::Sequential, 0, false}), ++i;
    }
  }
  return r;
}

std::vector<GridPart> MergePlanner::grid_parts(bool laid_out) const {
  if (!env_on("RLX_CUDA_MERGE", true) || !env_on("RLX_CUDA_PERSISTENT", true) || p.kernels.size() < 2) return {};
  if (laid_out && !arena_disjoint(p)) return {};  // grid_layout refused (or did not run): the merged plan
  std::vector<GridPart> parts;
  std::vector<int> phase_in, phase_out;  // buffers the current phase reads / writes (open segment included)
  std::set<int> seg_made;                // buffers the open row segment made
  int seg = -1, nseg = 0;
  int64_t seg_rows = 0;
  double flops = 0;
  auto made = [&](int b) {  // b (and the views on it) made by the open row segment
    seg_made.insert(b);
    for (size_t v = 0; v < p.buffers.size(); ++v)
      if (p.buffers[v].kind == BufferKind::View && seg_made.count(p.buffers[v].view_of)) seg_made.insert(static_cast<int>(v));
  };
  auto hits = [&](int b, const std::vector<int>& set) {
    for (int w : set)
      if (overlaps(b, w)) return true;
    return false;
  };
  for (size_t j = 0; j < p.kernels.size(); ++j) {
    const LirKernel& k = p.kernels[j];
    GridPart gp;
    if (!grid_part_ok(k, types(k.in), types(k.out), &gp)) return {};
    for (auto& t : gp.in)
      if (numel(t.shape) > kGridMaxElems) return {};
    if (numel(gp.out[0].shape) > kGridMaxElems) return {};
    if (gp.gemm) flops += 2.0 * static_cast<double>(gp.g.M) * static_cast<double>(gp.g.N) * static_cast<double>(gp.g.K);
    gp.kernel = static_cast<int>(j);
    // Join the open row segment: row-local on its rows, what it reads from outside the segment not
    // written in this phase, what it writes touched by nothing in this phase.
    bool wr_free = !hits(k.out[0], phase_in) && !hits(k.out[0], phase_out);
    if (seg >= 0 && !gp.gemm && wr_free && row_local(k, seg_rows, seg_made)) {
      bool ok = true;
      for (int x : k.in)
        if (!seg_made.count(x)) ok &= !hits(x, phase_out);
      if (ok) {
        gp.seg = seg, gp.rows = seg_rows;
        phase_in.insert(phase_in.end(), k.in.begin(), k.in.end());
        phase_out.push_back(k.out[0]);
        made(k.out[0]);
        parts.push_back(std::move(gp));
        continue;
      }
    }
    seg = -1, seg_made.clear();
    bool hazard = !wr_free;
    for (int x : k.in) hazard |= hits(x, phase_out);
    if (hazard) phase_in.clear(), phase_out.clear();
    gp.barrier = hazard;
    // Open a row segment here when the kernel works row by row (the next kernels may join it).
    auto od = static_dims(gp.out[0].shape);
    if (!gp.gemm && !od.empty() && od[0] >= 2 && row_local(k, od[0], {})) {
      seg = nseg++, seg_rows = od[0];
      gp.seg = seg, gp.rows = seg_rows;
      made(k.out[0]);
    }
    phase_in.insert(phase_in.end(), k.in.begin(), k.in.end());
    phase_out.push_back(k.out[0]);
    parts.push_back(std::move(gp));
  }
  bool any_gemm = false;
  for (auto& gp : parts) any_gemm |= gp.gemm;
  const char* cap = std::getenv("RLX_CUDA_GRID_MAX_MFLOP");
  if (!any_gemm || flops > (cap ? std::atof(cap) * 1e6 : kGridMaxFlops)) return {};
  return parts;
}

namespace {

// reorder-row-regions: in each run of small kernels that splits into row-local kernels (L) and
// cross-row ones (X, see MergePlanner::split_rows), the schedule becomes L then X and the arena is
// planned again for that order, so the row launch and the sequential launch after it reuse no
// memory the other still needs. RLX_CUDA_ROWS=0 (or RLX_CUDA_MERGE=0) keeps the order.
int reorder_row_regions(LirProgram& p) {
  if (!env_on("RLX_CUDA_MERGE", true) || !env_on("RLX_CUDA_ROWS", true)) return 0;
  MergePlanner mp{p, [](int) { return uint64_t{0}; }};
  std::vector<size_t> order;
  int n = 0;
  for (size_t i = 0; i < p.kernels.size();) {
    std::vector<size_t> L, X;
    int64_t R = 0;
    if (size_t rl = mp.row_launch_at(i, &L, &X, &R, false)) {
      order.insert(order.end(), L.begin(), L.end());
      order.insert(order.end(), X.begin(), X.end());
      n += !X.empty();
      i += rl;
      continue;
    }
    L.clear(), X.clear();
    size_t sl = mp.sequential_run(i);
    if (sl >= 2 && mp.split_rows(i, sl, &L, &X, &R, false) && !X.empty()) {
      order.insert(order.end(), L.begin(), L.end());
      order.insert(order.end(), X.begin(), X.end());
      ++n;
      i += sl;
    } else {
      order.push_back(i++);
    }
  }
  if (!n) return 0;
  std::vector<LirKernel> ks;
  for (size_t k : order) ks.push_back(std::move(p.kernels[k]));
  p.kernels = std::move(ks);
  plan_memory(p);
  return n;
}

}  // namespace

bool arena_disjoint(const LirProgram& p) {
  std::vector<std::pair<int64_t, int64_t>> r;
  for (auto& b : p.buffers)
    if (b.kind == BufferKind::Arena && b.bytes() > 0) r.push_back({b.offset, b.offset + b.bytes()});
  std::sort(r.begin(), r.end());
  for (size_t i = 1; i < r.size(); ++i)
    if (r[i].first < r[i - 1].second) return false;
  return true;
}

// grid-layout (fuse_lir.h): every arena buffer gets its own bytes, so the only
// grid barriers are the true dependencies (the plan's reuse assumes one kernel after the other).
int grid_layout(LirProgram& p, int64_t max_arena) {
  MergePlanner mp{p, [&p](int id) {  // every buffer on its own (views on their base)
    while (p.buffers[id].kind == BufferKind::View) id = p.buffers[id].view_of;
    return (static_cast<uint64_t>(id) + 1) << 40;
  }};
  if (mp.grid_parts(false).empty()) return 0;
  // The size first: a refusal leaves the schedule and the plan's arena as they were (the order the
  // plan's reuse was computed for).
  int64_t off = 0;
  for (auto& b : p.buffers)
    if (b.kind == BufferKind::Arena) off += (b.bytes() + 255) / 256 * 256;
  if (off > max_arena) return 0;
  // Sinks last: a kernel whose output no kernel reads (the loss value, the correct count, the
  // parameter updates) moves to the end of the schedule, in order, so it joins a later phase
  // instead of splitting one with a barrier. Buffers are not reused below, so its inputs stay
  // intact; an in-place feedback it would now read after is refused by write_in_place's order check.
  std::vector<bool> read(p.buffers.size(), false);
  for (auto& k : p.kernels)
    for (int x : k.in) {
      int b = x;
      read[b] = true;
      while (p.buffers[b].kind == BufferKind::View) b = p.buffers[b].view_of, read[b] = true;
    }
  std::vector<LirKernel> head, tail;
  for (auto& k : p.kernels) (k.out.size() == 1 && !read[k.out[0]] ? tail : head).push_back(std::move(k));
  head.insert(head.end(), std::make_move_iterator(tail.begin()), std::make_move_iterator(tail.end()));
  p.kernels = std::move(head);
  off = 0;
  for (auto& b : p.buffers)
    if (b.kind == BufferKind::Arena) b.offset = off, off += (b.bytes() + 255) / 256 * 256;
  p.arena_bytes = off;
  return 1;
}

// The backend's LIR rewrites, in the executable's order.
void backend_rewrites(LirProgram& p, int* folded, int* folded_adds, int* batched, int* gemm_bias) {
  if (env_on("RLX_CUDA_NO_FOLD", false)) return;
  *folded = fold_attention_transposes(p);
  *folded_adds = fold_residual_adds(p);
  if (env_on("RLX_CUDA_BATCH_LINEARS", true)) *batched = batch_sibling_linears(p);
  *gemm_bias = fold_gemm_bias(p);
  fold_gemm_layernorm(p);  // linear + residual layer_norm -> one GEMM with a norm epilogue (gemm.cpp)
  if (env_on("RLX_CUDA_EMBED_NORM", true)) fold_embedding_norm(p);  // embedding + adds + layer_norm -> one kernel (fuse_embed.cpp)
  reorder_row_regions(p);
  grid_layout(p);  // for a persistent launch (fuse_lir.h)
}

}  // namespace rlx::cuda
