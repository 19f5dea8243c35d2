// The cuda executable. At compile time: one arena allocation for every planned LIR buffer,
// constants uploaded once, every generated/library kernel rendered and compiled (NVRTC, cached),
// cuBLASLt plans chosen. A run copies inputs through pinned staging, launches the schedule on one
// stream (replaying a CUDA graph captured on the second run), and synchronizes only for outputs.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
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
  std::vector<LirKernel> kept;
  for (size_t k = 0; k < p.kernels.size(); ++k)
    if (!dead[k]) kept.push_back(std::move(p.kernels[k]));
  p.kernels = std::move(kept);
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
  std::vector<LirKernel> kept;
  for (size_t k = 0; k < p.kernels.size(); ++k)
    if (!dead[k]) kept.push_back(std::move(p.kernels[k]));
  p.kernels = std::move(kept);
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
  std::vector<LirKernel> kept;
  for (size_t k = 0; k < p.kernels.size(); ++k)
    if (!dead[k]) kept.push_back(std::move(p.kernels[k]));
  p.kernels = std::move(kept);
  plan_memory(p);
  return fused;
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
    if (!is_add || ak.in.size() != 2) continue;
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
      gk.in.push_back(bias);
      gk.out[0] = ak.out[0];
      dead[k] = true;
      ++folded;
      break;
    }
  }
  if (!folded) return 0;
  // The GEMM now writes the add's output earlier in the schedule; its bias was produced before it.
  std::vector<LirKernel> kept;
  for (size_t k = 0; k < p.kernels.size(); ++k)
    if (!dead[k]) kept.push_back(std::move(p.kernels[k]));
  p.kernels = std::move(kept);
  plan_memory(p);
  return folded;
}

class CudaExecutable : public CudaExecutableApi {
 public:
  explicit CudaExecutable(const LirProgram& p) : p_(p) {
    Api& a = api();
    if (!env_on("RLX_CUDA_NO_FOLD", false)) {
      folded_ = fold_attention_transposes(p_);
      folded_adds_ = fold_residual_adds(p_);
      if (env_on("RLX_CUDA_BATCH_LINEARS", true)) batched_ = batch_sibling_linears(p_);
      gemm_bias_ = fold_gemm_bias(p_);
    }
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
    for (auto& k : p_.kernels) build(k);
    check(a.cuStreamSynchronize(stream_), "upload");
    if (env_on("RLX_CUDA_GEMM_AUTOTUNE", true)) autotune_gemms();
  }

  ~CudaExecutable() override {
    Api& a = api();
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
       << " copies; " << folded_ << " transposes folded into attention, " << folded_adds_ << " residual adds into norms, " << batched_ << " sibling-linear groups batched, " << gemm_bias_ << " bias adds into GEMM epilogues, " << in_place_ << " feedbacks written in place, " << tuned_ << " GEMMs autotuned off the heuristic's first choice; " << compiled_ << " kernels compiled, " << disk_hits_ << " from the disk cache), CUDA graph "
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

  // gemm-autotune: each GEMM step times the heuristic's candidates (up to 8) on its real buffers
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
  int runs_ = 0, compiled_ = 0, disk_hits_ = 0, folded_ = 0, folded_adds_ = 0, batched_ = 0, tuned_ = 0, gemm_bias_ = 0,
      in_place_ = 0;
  std::map<std::string, std::pair<double, int>> times_;
};

}  // namespace

void register_cuda_backend() {
  register_backend("cuda", [](const LirProgram& p) { return std::make_unique<CudaExecutable>(p); });
}

}  // namespace rlx::cuda
