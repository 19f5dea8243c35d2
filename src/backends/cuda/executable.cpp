// The cuda executable. At compile time: one arena allocation for every planned LIR buffer,
// constants uploaded once, every generated/library kernel rendered and compiled (NVRTC, cached),
// cuBLASLt plans chosen. A run copies inputs through pinned staging, launches the schedule on one
// stream (replaying a CUDA graph captured on the second run), and synchronizes only for outputs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <tuple>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/gemm.h"
#include "backends/cuda/memory.h"
#include "backends/cuda/render.h"
#include "lir/plan.h"

namespace rlx::cuda {

namespace {

constexpr size_t kWorkspace = 32u << 20;

struct Module {
  CUmodule mod = nullptr;
  CUfunction fn = nullptr;
};

// Loaded modules by cubin hash (a module is loaded once per process).
CUfunction load_function(const std::string& source, bool* disk_hit) {
  static std::mutex mu;
  static std::map<std::string, Module> loaded;
  std::string bin = nvrtc_compile(source, disk_hit);
  std::lock_guard<std::mutex> g(mu);
  auto it = loaded.find(source);
  if (it != loaded.end()) return it->second.fn;
  Module m;
  Api& a = api();
  check(a.cuModuleLoadData(&m.mod, bin.data()), "cuModuleLoadData");
  check(a.cuModuleGetFunction(&m.fn, m.mod, "rlx_kernel"), "cuModuleGetFunction");
  loaded[source] = m;
  return m.fn;
}

struct Step {
  enum Kind { Launch, Gemm, Copy } kind = Launch;
  std::string label;
  // Launch
  CUfunction fn = nullptr;
  unsigned grid = 1, grid_y = 1, block = 256, smem = 0;
  std::vector<CUdeviceptr> args;
  // Gemm: args = {A, B, bias or 0, C}
  std::unique_ptr<GemmPlan> gemm;
  // Copy: args = {src, dst}
  size_t bytes = 0;
  // The LIR kernels this step runs (several for a merged launch); `concurrent`: a merged launch
  // whose parts run at the same time (no order between them).
  std::vector<int> kernels;
  bool concurrent = false;
  bool reordered = false;  // a row launch (no in-place feedback into its kernels, conservatively)
};

bool env_on(const char* name, bool dflt) {
  const char* e = std::getenv(name);
  if (!e) return dflt;
  return std::string(e) != "0";
}

// fold-attention-transposes: attention reads q/k/v in [B,S,H,D] and writes its output in [B,S,H,D]
// when the transposes (perm 0,2,1,3) around it exist only for it (BERT-style head split/merge);
// the transposes disappear and the arena is planned again. RLX_CUDA_NO_FOLD=1 turns it off.
int fold_attention_transposes(LirProgram& p) {
  const int nb = static_cast<int>(p.buffers.size());
  std::vector<int> uses(nb, 0), producer(nb, -1);
  for (int k = 0; k < static_cast<int>(p.kernels.size()); ++k) {
    for (int b : p.kernels[k].in) ++uses[b];
    for (int b : p.kernels[k].out) producer[b] = k;
  }
  for (int b = 0; b < nb; ++b)
    if (p.buffers[b].kind == BufferKind::View) uses[p.buffers[b].view_of] += 2;  // never fold through views
  for (int b : p.outputs) uses[b] += 2;
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
  if (!folded) return 0;
  erase_kernels(p, dead);
  plan_memory(p);
  return folded;
}

// fold-residual-add: layer_norm(a + b) reads a and b itself when the add (same shapes, a library
// kernel) exists only for it — the post-attention/FFN residual of every transformer block.
int fold_residual_adds(LirProgram& p) {
  const int nb = static_cast<int>(p.buffers.size());
  std::vector<int> uses(nb, 0), producer(nb, -1);
  for (int k = 0; k < static_cast<int>(p.kernels.size()); ++k) {
    for (int b : p.kernels[k].in) ++uses[b];
    for (int b : p.kernels[k].out) producer[b] = k;
  }
  for (int b = 0; b < nb; ++b)
    if (p.buffers[b].kind == BufferKind::View) uses[p.buffers[b].view_of] += 2;
  for (int b : p.outputs) uses[b] += 2;
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
  if (!folded) return 0;
  erase_kernels(p, dead);
  plan_memory(p);
  return folded;
}

// batch-sibling-linears: Linear kernels that read the same input with constant weights (and biases)
// of one shape — a transformer's Q, K and V projections — become one batched cuBLASLt GEMM over the
// weights concatenated at compile time (attr cuda_siblings = n; outputs written to one contiguous
// block, see CudaExecutable). One launch instead of n, and n times the tiles in flight.
bool same_type(const ValueType& a, const ValueType& b) {
  return a.dtype == b.dtype && static_dims(a.shape) == static_dims(b.shape);
}
std::string activation(const LirKernel& k) {
  if (!k.attrs.count("activation")) return "none";
  Node nd{k.op, {}, {}, k.attrs, ""};
  return attr_str(nd, "activation");
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
                  activation(ki) == activation(k0) && same_type(p.buffers[ki.out[0]].type, p.buffers[k0.out[0]].type) &&
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
  if (!fused) return 0;
  erase_kernels(p, dead);
  plan_memory(p);
  return fused;
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
  const int nb = static_cast<int>(p.buffers.size());
  std::vector<int> uses(nb, 0), producer(nb, -1);
  for (int k = 0; k < static_cast<int>(p.kernels.size()); ++k) {
    for (int b : p.kernels[k].in) ++uses[b];
    for (int b : p.kernels[k].out) producer[b] = k;
  }
  for (int b = 0; b < nb; ++b)
    if (p.buffers[b].kind == BufferKind::View) uses[p.buffers[b].view_of] += 2;
  for (int b : p.outputs) uses[b] += 2;
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
  if (!folded) return 0;
  // The GEMM now writes the add's output earlier in the schedule; its bias was produced before it.
  erase_kernels(p, dead);
  plan_memory(p);
  return folded;
}

// merge-launches: consecutive kernels that the renderer can run as parts of one launch become one
// step: a run of small kernels (every buffer <= kSmallElems elements; reductions included) runs
// in one block, part after part (a loss head: ~20 launches -> 1); a run of independent
// elementwise kernels of any size runs side by side (the SGD updates: 4 -> 1).
// RLX_CUDA_MERGE=0 launches every kernel on its own. `addr(b)` is buffer b's device address (or
// any address with the same overlaps), for the independence test of side-by-side parts.
struct MergePlanner {
  static constexpr int64_t kSmallElems = 16384;
  static constexpr size_t kMaxParts = 64;
  const LirProgram& p;
  std::function<uint64_t(int)> addr;

  std::vector<ValueType> types(const std::vector<int>& ids) const {
    std::vector<ValueType> t;
    for (int b : ids) t.push_back(p.buffers[b].type);
    return t;
  }
  static bool is_reduction(const LirKernel& k) {
    return k.kind == KernelKind::Library && (k.op == OpKind::ReduceSum || k.op == OpKind::ReduceMax ||
                                             k.op == OpKind::ReduceMin || k.op == OpKind::ReduceProd);
  }
  static constexpr int64_t kRowElems = int64_t{1} << 22;  // a row launch spreads over blocks: larger runs
  bool mergeable_at(size_t i, bool sequential, int64_t limit = kSmallElems) const {
    const LirKernel& k = p.kernels[i];
    auto in = types(k.in), out = types(k.out);
    if (!mergeable(k, in, out, sequential)) return false;
    if (!sequential) return !is_reduction(k);
    for (auto& t : in)
      if (numel(t.shape) > limit) return false;
    return numel(out[0].shape) <= limit;
  }
  size_t row_run(size_t i) const {
    size_t j = i;
    while (j < p.kernels.size() && j - i < kMaxParts && mergeable_at(j, true, kRowElems)) ++j;
    return j - i;
  }
  // A row launch with a tail starting at kernel i (row kernels L, then the cross-row tail X):
  // the number of kernels it covers, or 0.
  size_t row_launch_at(size_t i, std::vector<size_t>* L, std::vector<size_t>* X, int64_t* R, bool check_hazards) const {
    if (!env_on("RLX_CUDA_MERGE", true) || !env_on("RLX_CUDA_ROWS", true) || !env_on("RLX_CUDA_ROW_TAIL", true)) return 0;
    size_t rl = row_run(i), cl = concurrent_run(i);
    if (rl < 2 || (cl >= 2 && cl >= rl)) return 0;
    L->clear(), X->clear();
    if (!split_rows(i, rl, L, X, R, check_hazards, 1)) return 0;
    if (X->empty() ? L->size() < 2 : !tailable(*X, *R)) return 0;
    return rl;
  }
  bool overlaps(int a, int b) const {
    uint64_t pa = addr(a), pb = addr(b);
    uint64_t ea = pa + static_cast<uint64_t>(p.buffers[a].bytes()), eb = pb + static_cast<uint64_t>(p.buffers[b].bytes());
    return pa < eb && pb < ea;
  }
  size_t sequential_run(size_t i) const {
    size_t j = i;
    while (j < p.kernels.size() && j - i < kMaxParts && mergeable_at(j, true)) ++j;
    return j - i;
  }
  size_t concurrent_run(size_t i) const {
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
  static constexpr int64_t kSmemBudget = 200 << 10;
  std::vector<MergePart> parts(const std::vector<size_t>& ks, MergeMode mode, int64_t rows, size_t tail = 0) const {
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
  bool row_local(const LirKernel& k, int64_t R, const std::set<int>& made_in_l) const {
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
  bool split_rows(size_t i, size_t len, std::vector<size_t>* L, std::vector<size_t>* X, int64_t* R,
                  bool check_hazards = true, size_t min_l = 2) const {
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

  struct Launch {
    std::vector<size_t> ks;  // LIR kernels, in launch order
    MergeMode mode = MergeMode::Sequential;
    int64_t rows = 0;
    bool reordered = false;  // part of a row split (reorder-row-regions changed the schedule there)
    size_t tail = 0;         // rows: the last `tail` kernels are the launch's tail (MergePart::tail)
  };
  // X can ride on the row launch as its tail: its reductions are over the rows and read nothing X
  // makes; its other kernels are small and run in the last block.
  bool tailable(const std::vector<size_t>& X, int64_t R) const {
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
  std::vector<Launch> plan(bool merge, bool rows) const {
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
};

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

// The backend's LIR rewrites, in the executable's order.
void backend_rewrites(LirProgram& p, int* folded, int* folded_adds, int* batched, int* gemm_bias) {
  if (env_on("RLX_CUDA_NO_FOLD", false)) return;
  *folded = fold_attention_transposes(p);
  *folded_adds = fold_residual_adds(p);
  if (env_on("RLX_CUDA_BATCH_LINEARS", true)) *batched = batch_sibling_linears(p);
  *gemm_bias = fold_gemm_bias(p);
  reorder_row_regions(p);
}

class CudaExecutable : public CudaExecutableApi {
 public:
  explicit CudaExecutable(const LirProgram& p) : p_(p) {
    Api& a = api();
    backend_rewrites(p_, &folded_, &folded_adds_, &batched_, &gemm_bias_);
    check(a.cuStreamCreate(&stream_, 1 /* non-blocking */), "cuStreamCreate");
    profile_ = env_on("RLX_PROFILE", false);
    graphs_ = env_on("RLX_CUDA_GRAPHS", true);
    arena_ = DeviceBlock(static_cast<size_t>(std::max<int64_t>(p_.arena_bytes, 256)));
    ptr_.assign(p_.buffers.size(), 0);
    for (size_t b = 0; b < p_.buffers.size(); ++b) {
      const LirBuffer& lb = p_.buffers[b];
      size_t bytes = static_cast<size_t>(lb.bytes());
      switch (lb.kind) {
        case BufferKind::Arena: ptr_[b] = arena_.ptr + static_cast<CUdeviceptr>(lb.offset); break;
        case BufferKind::Input:
        case BufferKind::Output:
          owned_.emplace_back(bytes);
          ptr_[b] = owned_.back().ptr;
          staging_[b] = PinnedBlock(bytes);
          break;
        case BufferKind::Const:
          owned_.emplace_back(bytes);
          ptr_[b] = owned_.back().ptr;
          if (bytes) check(a.cuMemcpyHtoDAsync(ptr_[b], lb.value.raw(), bytes, stream_), "upload constant");
          break;
        case BufferKind::View: break;
      }
    }
    for (auto& k : p_.kernels) {  // batched sibling linears write their outputs to one block
      if (!k.attrs.count("cuda_siblings")) continue;
      size_t bytes = static_cast<size_t>(p_.buffers[k.out[0]].bytes());
      owned_.emplace_back(bytes * k.out.size());
      for (size_t i = 0; i < k.out.size(); ++i) ptr_[k.out[i]] = owned_.back().ptr + static_cast<CUdeviceptr>(i * bytes);
    }
    for (size_t b = 0; b < p_.buffers.size(); ++b)  // views after their bases
      if (p_.buffers[b].kind == BufferKind::View) ptr_[b] = ptr_[p_.buffers[b].view_of];
    build_all();
    check(a.cuStreamSynchronize(stream_), "upload");
    if (env_on("RLX_CUDA_GEMM_AUTOTUNE", true)) autotune_gemms();
  }

  ~CudaExecutable() override {
    Api& a = api();
    for (auto& [b, e] : write_ev_) a.cuEventDestroy(e);
    if (exec_) a.cuGraphExecDestroy(exec_);
    if (graph_) a.cuGraphDestroy(graph_);
  }

  std::vector<Tensor> run(const std::vector<Tensor>& inputs) override {
    upload(inputs);
    launch_schedule();
    return download();
  }

  std::vector<double> time_device(const std::vector<Tensor>& inputs, int warmup, int iters) override {
    upload(inputs);
    Api& a = api();
    check(a.cuStreamSynchronize(stream_), "sync");
    for (int i = 0; i < warmup; ++i) {
      launch_schedule();
      check(a.cuStreamSynchronize(stream_), "sync");
    }
    std::vector<double> ms;
    for (int i = 0; i < iters; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      launch_schedule();
      check(a.cuStreamSynchronize(stream_), "sync");
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return ms;
  }

  void set_feedback(const std::vector<std::pair<int, int>>& out_to_in) override {
    RLX_CHECK(!exec_, "[cuda] set_feedback after the CUDA graph was captured");
    for (auto [o, i] : out_to_in) {
      fb_targets_.insert(i);
      RLX_CHECK(o >= 0 && o < static_cast<int>(p_.outputs.size()) && i >= 0 && i < static_cast<int>(p_.inputs.size()),
                "[cuda] feedback pair out of range");
      int ob = p_.outputs[o], ib = p_.inputs[i];
      RLX_CHECK(p_.buffers[ob].bytes() == p_.buffers[ib].bytes() && p_.buffers[ob].type.dtype == p_.buffers[ib].type.dtype,
                "[cuda] feedback output ", o, " and input ", i, " differ in size or dtype");
      if (env_on("RLX_CUDA_INPLACE_FEEDBACK", true) && write_in_place(ob, ib)) {
        ++in_place_;
        continue;
      }
      Step s;
      s.kind = Step::Copy;
      s.args = {ptr_[ob], ptr_[ib]};
      s.bytes = static_cast<size_t>(p_.buffers[ob].bytes());
      s.label = "feedback copy";
      steps_.push_back(std::move(s));
    }
  }

  // The elementwise kernel producing output `ob` writes straight into input `ib` when it is the
  // last kernel to read `ib` and reads it at the index it writes (same shape): a parameter update
  // p' = p - lr*g done in place, no copy. Every step's pointer to `ob` is redirected.
  bool write_in_place(int ob, int ib) {
    const LirBuffer &o = p_.buffers[ob], &i = p_.buffers[ib];
    if (o.kind != BufferKind::Output || i.kind != BufferKind::Input || static_dims(o.type.shape) != static_dims(i.type.shape))
      return false;
    for (const LirBuffer& b : p_.buffers)
      if (b.kind == BufferKind::View && (b.view_of == ob || b.view_of == ib)) return false;
    int prod = -1, last_read = -1;
    for (int k = 0; k < static_cast<int>(p_.kernels.size()); ++k) {
      const LirKernel& lk = p_.kernels[k];
      for (int b : lk.out)
        if (b == ob) prod = k;
      for (int b : lk.in)
        if (b == ib) last_read = k;
    }
    if (prod < 0 || last_read > prod) return false;
    const LirKernel& pk = p_.kernels[prod];
    bool elementwise = pk.kind == KernelKind::Generated || (pk.kind == KernelKind::Library && is_elementwise(pk.op));
    if (!elementwise || pk.out.size() != 1) return false;
    for (auto& st : steps_)  // the schedule order no longer holds around a row split
      if (st.reordered && std::find(st.kernels.begin(), st.kernels.end(), prod) != st.kernels.end()) return false;
    for (auto& st : steps_)  // a concurrent merged launch: no other part may read the input
      if (st.concurrent && std::find(st.kernels.begin(), st.kernels.end(), prod) != st.kernels.end())
        for (int k : st.kernels)
          if (k != prod && std::find(p_.kernels[k].in.begin(), p_.kernels[k].in.end(), ib) != p_.kernels[k].in.end())
            return false;
    CUdeviceptr from = ptr_[ob], to = ptr_[ib];
    for (auto& st : steps_)
      for (auto& a : st.args)
        if (a == from) a = to;
    ptr_[ob] = to;
    return true;
  }

  void upload_inputs(const std::vector<Tensor>& inputs) override {
    upload(inputs);
    check(api().cuStreamSynchronize(stream_), "upload");
  }

  double run_resident(int n) override {
    Api& a = api();
    CUevent e0, e1;
    check(a.cuEventCreate(&e0, 0), "event"), check(a.cuEventCreate(&e1, 0), "event");
    check(a.cuEventRecord(e0, stream_), "event");
    for (int i = 0; i < n; ++i) launch_schedule();
    check(a.cuEventRecord(e1, stream_), "event");
    check(a.cuEventSynchronize(e1), "run_resident");
    float ms = 0;
    check(a.cuEventElapsedTime(&ms, e0, e1), "event time");
    a.cuEventDestroy(e0), a.cuEventDestroy(e1);
    return n > 0 ? ms / n : 0.0;
  }

  // [issue 6] The device-neutral resident API (runtime/backend.h) that train::Trainer drives: the
  // parameters and optimizer state stay on the GPU (feedback inside the CUDA graph), a step writes
  // only its data and scalars (one async H2D copy each; a small input whose bytes did not change is
  // not copied again) and reads back only what the caller asks for.
  void resident_feedback(const std::vector<std::pair<int, int>>& out_to_in) override { set_feedback(out_to_in); }
  void resident_upload(const std::vector<Tensor>& inputs) override {
    upload_inputs(inputs);
    last_small_.clear();
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].nbytes() <= kSmallWrite)
        last_small_[static_cast<int>(i)] = std::string(static_cast<const char*>(inputs[i].raw()), inputs[i].nbytes());
  }
  void resident_write(int i, const Tensor& t) override {
    RLX_CHECK(i >= 0 && i < static_cast<int>(p_.inputs.size()), "[cuda] resident_write: input ", i, " out of range");
    int b = p_.inputs[i];
    size_t bytes = static_cast<size_t>(p_.buffers[b].bytes());
    RLX_CHECK(t.nbytes() == bytes && t.dtype() == p_.buffers[b].type.dtype, "[cuda] resident_write: input ", i,
              " expects ", bytes, " bytes of ", dtype_name(p_.buffers[b].type.dtype));
    if (!bytes) return;
    if (bytes <= kSmallWrite && !fb_targets_.count(i)) {  // a fed-back input changes on the device
      std::string now(static_cast<const char*>(t.raw()), bytes);
      auto it = last_small_.find(i);
      if (it != last_small_.end() && it->second == now) return;
      last_small_[i] = std::move(now);
    }
    Api& a = api();
    auto ev = write_ev_.find(b);
    if (ev == write_ev_.end()) {
      CUevent e;
      check(a.cuEventCreate(&e, 2 /* CU_EVENT_DISABLE_TIMING */), "event");
      ev = write_ev_.emplace(b, e).first;
    } else {
      check(a.cuEventSynchronize(ev->second), "resident_write");  // the last copy out of the staging block is done
    }
    PinnedBlock& pin = staging_.at(b);
    std::memcpy(pin.ptr, t.raw(), bytes);
    check(a.cuMemcpyHtoDAsync(ptr_[b], pin.ptr, bytes, stream_), "resident_write");
    check(a.cuEventRecord(ev->second, stream_), "event");
  }
  // Queues n runs and returns at once (no host synchronization; 0 is returned: time with
  // run_resident, which synchronizes).
  double resident_run(int n) override {
    for (int i = 0; i < n; ++i) launch_schedule();
    return 0.0;
  }
  Tensor resident_read_output(int i) override {
    RLX_CHECK(i >= 0 && i < static_cast<int>(p_.outputs.size()), "[cuda] resident_read_output: ", i, " out of range");
    return read_buffer(p_.outputs[i]);
  }
  Tensor resident_read_input(int i) override {
    RLX_CHECK(i >= 0 && i < static_cast<int>(p_.inputs.size()), "[cuda] resident_read_input: ", i, " out of range");
    return read_buffer(p_.inputs[i]);
  }
  Tensor read_buffer(int b) {
    Api& a = api();
    const LirBuffer& lb = p_.buffers[b];
    Tensor t(lb.type.dtype, static_dims(lb.type.shape));
    if (t.nbytes()) {
      check(a.cuMemcpyDtoHAsync(staging_.at(b).ptr, ptr_[b], t.nbytes(), stream_), "read buffer");
      check(a.cuStreamSynchronize(stream_), "sync");
      std::memcpy(t.raw(), staging_.at(b).ptr, t.nbytes());
    }
    return t;
  }

  std::vector<Tensor> read_outputs() override { return download(); }

  std::vector<Tensor> read_inputs() override {
    Api& a = api();
    std::vector<Tensor> r;
    check(a.cuStreamSynchronize(stream_), "sync");
    for (int b : p_.inputs) {
      const LirBuffer& lb = p_.buffers[b];
      Tensor t(lb.type.dtype, static_dims(lb.type.shape));
      if (t.nbytes()) {
        check(a.cuMemcpyDtoHAsync(staging_.at(b).ptr, ptr_[b], t.nbytes(), stream_), "read input");
        check(a.cuStreamSynchronize(stream_), "sync");
        std::memcpy(t.raw(), staging_.at(b).ptr, t.nbytes());
      }
      r.push_back(std::move(t));
    }
    return r;
  }

  std::string summary() const override {
    int gemms = 0, launches = 0, copies = 0;
    for (auto& s : steps_) (s.kind == Step::Gemm ? gemms : s.kind == Step::Launch ? launches : copies)++;
    std::ostringstream os;
    os << steps_.size() << " steps (" << gemms << " cuBLASLt GEMMs, " << launches << " NVRTC kernel launches, " << copies
       << " copies; " << folded_ << " transposes folded into attention, " << folded_adds_ << " residual adds into norms, " << batched_ << " sibling-linear groups batched, " << gemm_bias_ << " bias adds into GEMM epilogues, " << in_place_ << " feedbacks written in place, " << merged_ << " kernels merged into " << merged_launches_ << " launches, " << tuned_ << " GEMMs autotuned off the heuristic's first choice; " << compiled_ << " kernels compiled, " << disk_hits_ << " from the disk cache), CUDA graph "
       << (graphs_ ? (exec_ ? "captured" : "pending") : "off") << ", arena " << (p_.arena_bytes >> 10) << " KiB";
    return os.str();
  }

  std::string profile() const override {
    if (!profile_) return "";
    std::ostringstream os;
    os << "profile (cuda, eager runs, CUDA events between back-to-back launches, cumulative):\n";
    std::vector<std::pair<double, std::string>> rows;
    for (auto& [k, v] : times_) rows.push_back({v.first, k});
    std::sort(rows.rbegin(), rows.rend());
    char buf[320];
    for (auto& [ms, k] : rows) {
      std::snprintf(buf, sizeof buf, "  %10.1f us  %6d calls  %s\n", ms * 1000, times_.at(k).second, k.c_str());
      os << buf;
    }
    return os.str();
  }

 private:
  std::vector<ValueType> types(const std::vector<int>& ids) const {
    std::vector<ValueType> t;
    for (int b : ids) t.push_back(p_.buffers[b].type);
    return t;
  }

  void add_launch(const KernelSource& ks, std::vector<CUdeviceptr> args, const std::string& label) {
    Step s;
    s.kind = Step::Launch;
    bool hit = false;
    s.fn = load_function(ks.code, &hit);
    ++compiled_;
    disk_hits_ += hit;
    s.grid = ks.grid, s.grid_y = ks.grid_y, s.block = ks.block, s.smem = ks.smem;
    if (ks.smem > 48 * 1024)  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
      check(api().cuFuncSetAttribute(s.fn, 8, static_cast<int>(ks.smem)), "cuFuncSetAttribute(dynamic smem)");
    s.args = std::move(args);
    s.label = label;
    steps_.push_back(std::move(s));
  }

  void build_all() {
    MergePlanner mp{p_, [this](int b) { return static_cast<uint64_t>(ptr_[b]); }};
    for (auto& L : mp.plan(env_on("RLX_CUDA_MERGE", true), env_on("RLX_CUDA_ROWS", true))) {
      std::vector<int> ks(L.ks.begin(), L.ks.end());
      if (L.ks.size() >= 2) {
        std::vector<MergePart> parts = mp.parts(L.ks, L.mode, L.rows, L.tail);
        std::vector<CUdeviceptr> args;
        const char* kind = L.mode == MergeMode::Rows ? "rows" : (L.mode == MergeMode::Sequential ? "region" : "side-by-side");
        std::string label = std::string(kind) + "(" + std::to_string(L.ks.size()) + ":";
        for (size_t j : L.ks) {
          const LirKernel& k = p_.kernels[j];
          for (int b : k.in) args.push_back(ptr_[b]);
          args.push_back(ptr_[k.out[0]]);
          label += (j != L.ks[0] ? " " : "") + k.label();
        }
        KernelSource ks_m = render_merged(parts, L.mode, L.rows, api().sm_count);
        if (ks_m.scratch_bytes) {  // zero-filled once; the kernel leaves it zero-filled
          owned_.emplace_back(ks_m.scratch_bytes);
          check(api().cuMemsetD8Async(owned_.back().ptr, 0, ks_m.scratch_bytes, stream_), "scratch");
          args.push_back(owned_.back().ptr);
        }
        add_launch(ks_m, args, label + ")");
        steps_.back().kernels = ks;
        steps_.back().concurrent = L.mode == MergeMode::Concurrent;
        steps_.back().reordered = L.reordered;
        merged_ += static_cast<int>(L.ks.size());
        ++merged_launches_;
        continue;
      }
      size_t before = steps_.size();
      build(p_.kernels[L.ks[0]]);
      for (size_t t = before; t < steps_.size(); ++t) steps_[t].kernels = ks, steps_[t].reordered = L.reordered;
    }
  }

  void build(const LirKernel& k) {
    auto in = types(k.in), out = types(k.out);
    std::vector<CUdeviceptr> args;
    for (int b : k.in) args.push_back(ptr_[b]);
    for (int b : k.out) args.push_back(ptr_[b]);
    std::string label = k.label();
    for (auto& t : in)
      if (t.dtype == DType::c64) fail("[cuda] ", label, ": complex buffers are not supported on cuda");
    if (k.kind == KernelKind::Generated) {
      add_launch(render_fused(k.body, out[0]), args, label);
      return;
    }
    if (k.op == OpKind::Reshape && k.in.size() == 1) {  // a copy into an output buffer
      Step s;
      s.kind = Step::Copy;
      s.args = {ptr_[k.in[0]], ptr_[k.out[0]]};
      s.bytes = static_cast<size_t>(p_.buffers[k.out[0]].bytes());
      s.label = "copy";
      steps_.push_back(std::move(s));
      return;
    }
    GemmShape g;
    std::string post;
    if (k.attrs.count("cuda_siblings")) {  // batched sibling linears: A shared, B/bias/C strided
      LirKernel one = k;
      one.attrs.erase("cuda_siblings");
      std::vector<ValueType> in1 = in;
      int64_t n = static_cast<int64_t>(k.out.size());
      for (size_t j = 1; j < in1.size(); ++j) {
        auto d = static_dims(in1[j].shape);
        d[0] /= n;
        in1[j].shape = to_shape(d);
      }
      RLX_CHECK(plan_gemm(one, in1, out[0], &g, &post), "[cuda] batched linears: no GEMM plan");
      g.batch = n;
      g.stride_a = 0, g.stride_b = g.N * g.K, g.stride_c = g.M * g.N, g.bias_stride = g.bias ? g.N : 0;
      if (!workspace_.ptr) workspace_ = DeviceBlock(kWorkspace);
      Step s;
      s.kind = Step::Gemm;
      s.gemm = std::make_unique<GemmPlan>(g, kWorkspace);
      s.args = {ptr_[k.in[0]], ptr_[k.in[1]], g.bias ? ptr_[k.in[2]] : 0, ptr_[k.out[0]]};
      s.label = label + "[cublasLt batched " + std::to_string(n) + "x" + std::to_string(g.M) + "x" + std::to_string(g.N) +
                "x" + std::to_string(g.K) + "]";
      steps_.push_back(std::move(s));
      for (size_t i = 0; i < k.out.size() && post != "none"; ++i)
        add_launch(render_activation(post, out[i]), {ptr_[k.out[i]]}, label + "[" + post + "]");
      return;
    }
    if ((k.op == OpKind::Linear || k.op == OpKind::MatMul || k.op == OpKind::DotGeneral) &&
        plan_gemm(k, in, out[0], &g, &post)) {
      if (g.M * g.N * g.K == 0) fail("[cuda] ", label, ": empty GEMM is not supported");
      if (!workspace_.ptr) workspace_ = DeviceBlock(kWorkspace);
      if (k.attrs.count("cuda_bias")) g.bias = true;  // fold-bias-into-gemm: the epilogue adds it
      if (k.attrs.count("cuda_relu")) g.epilogue = "relu";
      Step s;
      s.kind = Step::Gemm;
      s.gemm = std::make_unique<GemmPlan>(g, kWorkspace);
      s.args = {ptr_[k.in[0]], ptr_[k.in[1]], g.bias ? ptr_[k.in.back()] : 0, ptr_[k.out[0]]};
      s.label = label + "[cublasLt " + std::string(dtype_name(g.dtype)) + " " + std::to_string(g.batch) + "x" +
                std::to_string(g.M) + "x" + std::to_string(g.N) + "x" + std::to_string(g.K) +
                (g.epilogue != "none" ? " +" + g.epilogue : "") + (g.bias ? " +bias" : "") + "]";
      steps_.push_back(std::move(s));
      if (post != "none") add_launch(render_activation(post, out[0]), {ptr_[k.out[0]]}, label + "[" + post + "]");
      return;
    }
    KernelSource ks;
    if (!render_library(k, in, out, &ks, api().sm_count))
      fail("[cuda] no cuda kernel for ", label, " (", dtype_name(in.empty() ? out[0].dtype : in[0].dtype),
           "); the capability set in src/dispatch/devices.cpp should not have claimed it");
    add_launch(ks, args, label);
  }

  // gemm-autotune: each GEMM step times the heuristic's candidates (up to 24) on its real buffers
  // (contents arbitrary; outputs are rewritten by every run) and keeps the fastest, unless it is
  // within 3% of the heuristic's first choice. RLX_CUDA_GEMM_AUTOTUNE=0 keeps the first choice.
  void autotune_gemms() {
    Api& a = api();
    CUevent e0, e1;
    check(a.cuEventCreate(&e0, 0), "event"), check(a.cuEventCreate(&e1, 0), "event");
    for (auto& s : steps_) {
      if (s.kind != Step::Gemm || s.gemm->candidates() < 2) continue;
      std::vector<float> best(s.gemm->candidates(), 1e30f);
      for (int c = 0; c < s.gemm->candidates(); ++c) {
        s.gemm->select(c);
        try {
          enqueue(s);  // warm-up (and rejects a candidate that cannot run)
          for (int rep = 0; rep < 3; ++rep) {
            check(a.cuEventRecord(e0, stream_), "event");
            for (int i = 0; i < 5; ++i) enqueue(s);
            check(a.cuEventRecord(e1, stream_), "event");
            check(a.cuEventSynchronize(e1), "autotune");
            float ms = 0;
            check(a.cuEventElapsedTime(&ms, e0, e1), "event time");
            best[c] = std::min(best[c], ms);
          }
        } catch (const Error&) {
          best[c] = 1e30f;
        }
      }
      int pick = static_cast<int>(std::min_element(best.begin(), best.end()) - best.begin());
      if (best[pick] > 0.97f * best[0]) pick = 0;
      s.gemm->select(pick);
      if (pick) ++tuned_;
    }
    a.cuEventDestroy(e0), a.cuEventDestroy(e1);
    check(a.cuStreamSynchronize(stream_), "autotune");
  }

  void upload(const std::vector<Tensor>& inputs) {
    RLX_CHECK(inputs.size() == p_.inputs.size(), "[cuda] expected ", p_.inputs.size(), " inputs, got ", inputs.size());
    Api& a = api();
    last_small_.clear();  // the device inputs change here: resident_write must not skip a later write
    for (size_t i = 0; i < inputs.size(); ++i) {
      int b = p_.inputs[i];
      size_t bytes = static_cast<size_t>(p_.buffers[b].bytes());
      RLX_CHECK(inputs[i].nbytes() == bytes && inputs[i].dtype() == p_.buffers[b].type.dtype, "[cuda] input ", i,
                " ('", p_.buffers[b].name, "') has ", inputs[i].nbytes(), " bytes of ", dtype_name(inputs[i].dtype()),
                ", expected ", bytes, " of ", dtype_name(p_.buffers[b].type.dtype));
      if (!bytes) continue;
      PinnedBlock& pin = staging_.at(b);
      std::memcpy(pin.ptr, inputs[i].raw(), bytes);
      check(a.cuMemcpyHtoDAsync(ptr_[b], pin.ptr, bytes, stream_), "upload input");
    }
  }

  std::vector<Tensor> download() {
    Api& a = api();
    for (int b : p_.outputs) {
      size_t bytes = static_cast<size_t>(p_.buffers[b].bytes());
      if (bytes) check(a.cuMemcpyDtoHAsync(staging_.at(b).ptr, ptr_[b], bytes, stream_), "download output");
    }
    check(a.cuStreamSynchronize(stream_), "run");
    std::vector<Tensor> outs;
    for (int b : p_.outputs) {
      const LirBuffer& lb = p_.buffers[b];
      Tensor t(lb.type.dtype, static_dims(lb.type.shape));
      if (t.nbytes()) std::memcpy(t.raw(), staging_.at(b).ptr, t.nbytes());
      outs.push_back(std::move(t));
    }
    return outs;
  }

  void enqueue(Step& s) {
    Api& a = api();
    switch (s.kind) {
      case Step::Launch: {
        std::vector<void*> params;
        for (auto& p : s.args) params.push_back(&p);
        check(a.cuLaunchKernel(s.fn, s.grid, s.grid_y, 1, s.block, 1, 1, s.smem, stream_, params.data(), nullptr),
              s.label.c_str());
        break;
      }
      case Step::Gemm: s.gemm->run(s.args[0], s.args[1], s.args[2], s.args[3], workspace_.ptr, stream_); break;
      case Step::Copy:
        if (s.bytes) check(a.cuMemcpyDtoDAsync(s.args[1], s.args[0], s.bytes, stream_), "copy");
        break;
    }
  }

  void launch_schedule() {
    Api& a = api();
    ++runs_;
    if (graphs_ && !profile_ && runs_ >= 2 && !steps_.empty()) {
      if (!exec_) {  // capture once: buffer addresses never change for this executable
        check(a.cuStreamBeginCapture(stream_, kCaptureModeThreadLocal), "cuStreamBeginCapture");
        for (auto& s : steps_) enqueue(s);
        check(a.cuStreamEndCapture(stream_, &graph_), "cuStreamEndCapture");
        check(a.cuGraphInstantiateWithFlags(&exec_, graph_, 0), "cuGraphInstantiate");
      }
      check(a.cuGraphLaunch(exec_, stream_), "cuGraphLaunch");
      return;
    }
    if (!profile_) {
      for (auto& s : steps_) enqueue(s);
      return;
    }
    // One event between consecutive steps, one host synchronization at the end: the launches queue
    // back to back as in a normal run (no per-kernel host round trip inside the numbers).
    std::vector<CUevent> ev(steps_.size() + 1);
    for (auto& e : ev) check(a.cuEventCreate(&e, 0), "event");
    check(a.cuEventRecord(ev[0], stream_), "event");
    for (size_t i = 0; i < steps_.size(); ++i) {
      enqueue(steps_[i]);
      check(a.cuEventRecord(ev[i + 1], stream_), "event");
    }
    check(a.cuEventSynchronize(ev.back()), "profile");
    for (size_t i = 0; i < steps_.size(); ++i) {
      float ms = 0;
      a.cuEventElapsedTime(&ms, ev[i], ev[i + 1]);
      auto& t = times_[steps_[i].label];
      t.first += ms;
      t.second += 1;
    }
    for (auto& e : ev) a.cuEventDestroy(e);
  }

  LirProgram p_;
  CUstream stream_ = nullptr;
  DeviceBlock arena_, workspace_;
  std::vector<DeviceBlock> owned_;
  std::map<int, PinnedBlock> staging_;
  std::vector<CUdeviceptr> ptr_;
  std::vector<Step> steps_;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
  bool profile_ = false, graphs_ = true;
  int merged_ = 0, merged_launches_ = 0;
  static constexpr size_t kSmallWrite = 256;
  std::map<int, std::string> last_small_;  // resident_write: the bytes of small inputs last copied
  std::set<int> fb_targets_;               // inputs that feedback overwrites
  std::map<int, CUevent> write_ev_;        // resident_write: per input, its last H2D copy
  int runs_ = 0, compiled_ = 0, disk_hits_ = 0, folded_ = 0, folded_adds_ = 0, batched_ = 0, tuned_ = 0, gemm_bias_ = 0,
      in_place_ = 0;
  std::map<std::string, std::pair<double, int>> times_;
};

}  // namespace

std::vector<std::pair<std::string, KernelSource>> render_for_check(const LirProgram& program) {
  LirProgram p = program;
  int f = 0, fa = 0, b = 0, gb = 0;
  backend_rewrites(p, &f, &fa, &b, &gb);
  // Addresses as the executable lays buffers out: the arena at 0, every other buffer on its own.
  MergePlanner mp{p, [&p](int id) {
    while (p.buffers[id].kind == BufferKind::View) id = p.buffers[id].view_of;
    return p.buffers[id].kind == BufferKind::Arena ? static_cast<uint64_t>(p.buffers[id].offset)
                                                   : (static_cast<uint64_t>(id) + 1) << 40;
  }};
  std::vector<std::pair<std::string, KernelSource>> r;
  for (auto& L : mp.plan(env_on("RLX_CUDA_MERGE", true), env_on("RLX_CUDA_ROWS", true))) {
    if (L.ks.size() >= 2) {
      const char* kind = L.mode == MergeMode::Rows ? "rows" : (L.mode == MergeMode::Sequential ? "region" : "side-by-side");
      r.emplace_back(std::string(kind) + "(" + std::to_string(L.ks.size()) + ")",
                     render_merged(mp.parts(L.ks, L.mode, L.rows, L.tail), L.mode, L.rows));
      continue;
    }
    const LirKernel& k = p.kernels[L.ks[0]];
    auto in = mp.types(k.in), out = mp.types(k.out);
    GemmShape g;
    std::string post;
    if (k.kind == KernelKind::Generated) {
      r.emplace_back(k.label(), render_fused(k.body, out[0]));
    } else if (k.attrs.count("cuda_siblings") || ((k.op == OpKind::Linear || k.op == OpKind::MatMul || k.op == OpKind::DotGeneral) &&
                                                  plan_gemm(k, in, out[0], &g, &post))) {
      if (k.attrs.count("cuda_siblings")) {
        Node nd{k.op, {}, {}, k.attrs, ""};
        post = k.attrs.count("activation") ? attr_str(nd, "activation") : "none";
        if (post == "relu" || post == "gelu_tanh") post = "none";
      }
      r.emplace_back(k.label() + "[cublasLt]", KernelSource{});
      if (post != "none") r.emplace_back(k.label() + "[" + post + "]", render_activation(post, out[0]));
    } else if (k.op == OpKind::Reshape && k.in.size() == 1) {
      r.emplace_back("copy", KernelSource{});
    } else {
      KernelSource ks;
      RLX_CHECK(render_library(k, in, out, &ks), "[cuda] no cuda kernel for ", k.label());
      r.emplace_back(k.label(), ks);
    }
  }
  return r;
}

void register_cuda_backend() {
  register_backend("cuda", [](const LirProgram& p) { return std::make_unique<CudaExecutable>(p); });
}

}  // namespace rlx::cuda
