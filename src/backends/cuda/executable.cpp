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

class CudaExecutable : public CudaExecutableApi {
 public:
  explicit CudaExecutable(const LirProgram& p) : p_(p) {
    Api& a = api();
    if (!env_on("RLX_CUDA_NO_FOLD", false)) {
      folded_ = fold_attention_transposes(p_);
      folded_adds_ = fold_residual_adds(p_);
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
    for (size_t b = 0; b < p_.buffers.size(); ++b)  // views after their bases
      if (p_.buffers[b].kind == BufferKind::View) ptr_[b] = ptr_[p_.buffers[b].view_of];
    for (auto& k : p_.kernels) build(k);
    check(a.cuStreamSynchronize(stream_), "upload");
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

  std::string summary() const override {
    int gemms = 0, launches = 0, copies = 0;
    for (auto& s : steps_) (s.kind == Step::Gemm ? gemms : s.kind == Step::Launch ? launches : copies)++;
    std::ostringstream os;
    os << steps_.size() << " steps (" << gemms << " cuBLASLt GEMMs, " << launches << " NVRTC kernel launches, " << copies
       << " copies; " << folded_ << " transposes folded into attention, " << folded_adds_ << " residual adds into norms; " << compiled_ << " kernels compiled, " << disk_hits_ << " from the disk cache), CUDA graph "
       << (graphs_ ? (exec_ ? "captured" : "pending") : "off") << ", arena " << (p_.arena_bytes >> 10) << " KiB";
    return os.str();
  }

  std::string profile() const override {
    if (!profile_) return "";
    std::ostringstream os;
    os << "profile (cuda, eager runs, CUDA events, cumulative):\n";
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
    if ((k.op == OpKind::Linear || k.op == OpKind::MatMul || k.op == OpKind::DotGeneral) &&
        plan_gemm(k, in, out[0], &g, &post)) {
      if (g.M * g.N * g.K == 0) fail("[cuda] ", label, ": empty GEMM is not supported");
      if (!workspace_.ptr) workspace_ = DeviceBlock(kWorkspace);
      Step s;
      s.kind = Step::Gemm;
      s.gemm = std::make_unique<GemmPlan>(g, kWorkspace);
      s.args = {ptr_[k.in[0]], ptr_[k.in[1]], k.in.size() > 2 && g.bias ? ptr_[k.in[2]] : 0, ptr_[k.out[0]]};
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

  // In-place activation after a GEMM whose epilogue cuBLASLt cannot fuse exactly (erf-GELU, SiLU).
  static KernelSource render_activation(const std::string& act, const ValueType& t) {
    Graph body;
    ValueId x = body.add_input("a0", t.dtype, t.shape);
    ValueId y;
    if (act == "gelu") {  // 0.5 x (1 + erf(x / sqrt 2)) in compute precision, rounded once
      body.outputs.push_back(x);
      KernelSource ks;
      std::string ld = t.dtype == DType::f16 ? "h2f(out0[i])" : t.dtype == DType::bf16 ? "bf2f(out0[i])" : "out0[i]";
      std::string st = t.dtype == DType::f16 ? "f2h(y)" : t.dtype == DType::bf16 ? "f2bf(y)" : "y";
      int64_t n = numel(t.shape);
      KernelSource base = render_fused(body, t);  // for the prelude and launch shape
      std::string pre = base.code.substr(0, base.code.find("extern \"C\""));
      ks.code = pre + "extern \"C\" __global__ void rlx_kernel(" + c_type(t.dtype) + "* out0) {\n" +
                "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < " + std::to_string(n) +
                "; i += (long long)gridDim.x * blockDim.x) {\n    float x = " + ld +
                ";\n    float y = 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));\n    out0[i] = " + st +
                ";\n  }\n}\n";
      ks.grid = base.grid, ks.block = base.block, ks.num_params = 1;
      return ks;
    }
    RLX_CHECK(act == "silu", "[cuda] linear: unknown activation '", act, "'");
    y = x;
    body.outputs.push_back(y);
    KernelSource base = render_fused(body, t);
    std::string pre = base.code.substr(0, base.code.find("extern \"C\""));
    std::string ld = t.dtype == DType::f16 ? "h2f(out0[i])" : t.dtype == DType::bf16 ? "bf2f(out0[i])" : "out0[i]";
    std::string st = t.dtype == DType::f16 ? "f2h(y)" : t.dtype == DType::bf16 ? "f2bf(y)" : "y";
    KernelSource ks;
    ks.code = pre + "extern \"C\" __global__ void rlx_kernel(" + c_type(t.dtype) + "* out0) {\n" +
              "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < " +
              std::to_string(numel(t.shape)) + "; i += (long long)gridDim.x * blockDim.x) {\n    float x = " + ld +
              ";\n    float y = x / (1.0f + expf(-x));\n    out0[i] = " + st + ";\n  }\n}\n";
    ks.grid = base.grid, ks.block = base.block, ks.num_params = 1;
    return ks;
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
    CUevent e0, e1;
    check(a.cuEventCreate(&e0, 0), "event"), check(a.cuEventCreate(&e1, 0), "event");
    for (auto& s : steps_) {
      a.cuEventRecord(e0, stream_);
      enqueue(s);
      a.cuEventRecord(e1, stream_);
      a.cuEventSynchronize(e1);
      float ms = 0;
      a.cuEventElapsedTime(&ms, e0, e1);
      auto& t = times_[s.label];
      t.first += ms;
      t.second += 1;
    }
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
  int runs_ = 0, compiled_ = 0, disk_hits_ = 0, folded_ = 0, folded_adds_ = 0;
  std::map<std::string, std::pair<double, int>> times_;
};

}  // namespace

void register_cuda_backend() {
  register_backend("cuda", [](const LirProgram& p) { return std::make_unique<CudaExecutable>(p); });
}

}  // namespace rlx::cuda
