// The cpu executable: one arena allocated at compile time and reused by every run; buffers are
// views into it; kernels run in schedule order (the schedule cpu_schedule's LIR passes made;
// RLX_CPU_FUSE=0 runs none). Constant Linear weights are packed once for the GEMM. Kernel argument lists are prepared once too, so a run allocates nothing but
// its output tensors. RLX_PROFILE=1 times each kernel.
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>  // aligned operator new
#include <sstream>

#include <time.h>  // clock_gettime for RLX_PROFILE=cpu

#include "backends/cpu/conv.h"
#include "backends/cpu/gemm_avx2.h"
#include "backends/cpu/jit.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/train_kernels.h"
#include "runtime/backend.h"
#include "runtime/env.h"

namespace rlx {

namespace {

// 64-byte aligned storage for packed weights: a 16-float panel row is then one
// cache line (std::vector's 16-byte alignment split every row over two; ~1-2% on MiniLM).
template <class T>
struct CacheAligned {
  using value_type = T;
  CacheAligned() = default;
  template <class U>
  CacheAligned(const CacheAligned<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64})); }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t{64}); }
  template <class U>
  bool operator==(const CacheAligned<U>&) const { return true; }
};
using PackedWeight = std::vector<float, CacheAligned<float>>;

class CpuExecutable : public Executable {
 public:
  explicit CpuExecutable(const LirProgram& p) : p_(p) {
    profile_ = std::getenv("RLX_PROFILE") && std::string(std::getenv("RLX_PROFILE")) == "1";
    // RLX_PROFILE=cpu: per-kernel process CPU time (all threads), for a loaded machine.
    profile_cpu_ = std::getenv("RLX_PROFILE") && std::string(std::getenv("RLX_PROFILE")) == "cpu";
    profile_ = profile_ || profile_cpu_;
    arena_ = Tensor(DType::u8, {std::max<int64_t>(p_.arena_bytes, 1)});
    for (auto& k : p_.kernels) {
      // Constant f32 Linear weights: packed once for the GEMM (cpu::linear_fast).
      PackedWeight wp;  // 64-byte aligned
      if (k.kind == KernelKind::Library && k.op == OpKind::Linear && cpu::fast_gemm_available() && k.in.size() >= 2) {
        const LirBuffer& w = p_.buffers[k.in[1]];
        if (w.kind == BufferKind::Const && w.type.dtype == DType::f32 && w.value.rank() == 2) {
          int64_t O = w.value.shape()[0], I = w.value.shape()[1];
          wp.resize(static_cast<size_t>(cpu::packed_b_size(I, O)));
          cpu::pack_b(true, w.value.data<float>(), I, I, O, wp.data());
        }
      }
      // Constant f32 conv weights: packed once when the conv's plan wants them packed (conv.cpp).
      if (k.kind == KernelKind::Library && k.op == OpKind::Conv && k.in.size() >= 2 && k.out.size() == 1) {
        const LirBuffer& w = p_.buffers[k.in[1]];
        if (w.kind == BufferKind::Const && w.type.dtype == DType::f32) {
          auto cp = cpu::conv_prepack(Node{k.op, {}, {}, k.attrs, ""}, w.value,
                                      static_dims(p_.buffers[k.in[0]].type.shape),
                                      static_dims(p_.buffers[k.out[0]].type.shape));
          wp.assign(cp.begin(), cp.end());
        }
      }
      packed_.push_back(std::move(wp));
      // Constant qlinear weights: packed once for the int8 GEMM (cpu::qlinear_packed).
      std::shared_ptr<const void> qp;
      if (k.kind == KernelKind::Library && k.op == OpKind::QLinear && k.in.size() >= 2) {
        const LirBuffer& w = p_.buffers[k.in[1]];
        if (w.kind == BufferKind::Const && w.type.dtype == DType::i8 && w.value.rank() == 2) qp = cpu::qlinear_prepack(w.value);
      }
      qpacked_.push_back(std::move(qp));
      conv_epi_.push_back(k.kind == KernelKind::Library ? cpu::conv_epi_prepare(k, p_) : nullptr);
      std::string label = k.label();  // fused forms the LIR passes made get their own profile rows
      if (k.attrs.count("cpu_qkv")) label += "(qkv in place)";
      if (k.attrs.count("cpu_res")) label += "+residual";
      if (k.kind == KernelKind::Library && k.in_place) label += "(in place)";
      if (k.attrs.count("cpu_pool_div")) label += "+div";
      if (k.attrs.count("cpu_ln_g")) label += "+layer_norm";
      if (k.attrs.count("cpu_epi")) (label += "+") += attr_str(Node{k.op, {}, {}, k.attrs, ""}, "cpu_epi");
      if (k.attrs.count("cpu_rows") && label.rfind("fused", 0) == 0) label = "rows" + label.substr(5);
      if (k.kind == KernelKind::Library && k.op == OpKind::Conv && k.in.size() >= 2 && k.out.size() == 1) {
        auto fixed = [&](size_t b) {
          for (auto& d : p_.buffers[b].type.shape)
            if (!d.is_static()) return false;
          return true;
        };
        if (fixed(k.in[0]) && fixed(k.in[1]) && fixed(k.out[0])) {  // the conv kernel's plan (conv.cpp)
          const std::string plan = cpu::conv_plan_name(Node{k.op, {}, {}, k.attrs, ""},
                                                       static_dims(p_.buffers[k.in[0]].type.shape),
                                                       static_dims(p_.buffers[k.in[1]].type.shape),
                                                       static_dims(p_.buffers[k.out[0]].type.shape));
          if (!plan.empty()) label += " [" + plan + "]";
        }
      }
      if (k.op == OpKind::Linear && k.attrs.count("activation")) {
        Node n{k.op, {}, {}, k.attrs, ""};
        if (attr_str(n, "activation") != "none" && !attr_str(n, "activation").empty()) (label += "+") += attr_str(n, "activation");
      }
      labels_.push_back(label);
      Node n{k.op, {}, {}, k.attrs, k.origin};
      nodes_.push_back(n);
      // a row region's plan, built once (rows_kernel runs it every step)
      rows_.push_back(k.kind == KernelKind::Generated && k.attrs.count("cpu_rows")
                          ? cpu::rows_prepare(k.body, attr_int(n, "cpu_rows"), attr_int(n, "cpu_cols"))
                          : nullptr);
      // A lone elementwise op runs on the typed fused evaluator as a one-node body.
      Graph body;
      if (k.kind == KernelKind::Library && is_elementwise(k.op) && k.out.size() == 1) {
        std::vector<ValueId> ins;
        for (size_t i = 0; i < k.in.size(); ++i) {
          const ValueType& t = p_.buffers[k.in[i]].type;
          ins.push_back(body.add_input("a" + std::to_string(i), t.dtype, t.shape));
        }
        body.outputs = body.add_node(k.op, ins, k.attrs, k.origin);
      }
      single_.push_back(std::move(body));
    }
    // fused bodies compiled to C++ (jit.h); kernels it does not cover keep the evaluator.
    std::vector<const Graph*> bodies(p_.kernels.size(), nullptr);
    for (size_t k = 0; k < p_.kernels.size(); ++k)
      bodies[k] = p_.kernels[k].kind == KernelKind::Generated ? &p_.kernels[k].body
                  : single_[k].nodes.empty()                   ? nullptr
                                                               : &single_[k];
    jit_ = std::make_unique<cpu::JitProgram>(p_, bodies);
  }

  std::vector<Tensor> run(const std::vector<Tensor>& inputs) override {
    std::lock_guard<std::mutex> lock(run_mutex_);  // one arena: runs of one executable take turns
    return run_locked(inputs);
  }

  std::vector<Tensor> run_locked(const std::vector<Tensor>& inputs) {
    RLX_CHECK(inputs.size() == p_.inputs.size(), "[cpu] expected ", p_.inputs.size(), " inputs, got ", inputs.size());
    if (!prepared_) prepare();
    // Only graph inputs, outputs and views of them change between runs.
    for (size_t i = 0; i < p_.inputs.size(); ++i) bufs_[p_.inputs[i]] = inputs[i];
    for (int b : p_.outputs) {
      const LirBuffer& lb = p_.buffers[b];
      if (!dest_) bufs_[b] = Tensor(lb.type.dtype, static_dims(lb.type.shape));
    }
    if (dest_)  // [training] run_into: caller-owned output tensors become the output buffers
      for (size_t i = 0; i < p_.outputs.size(); ++i) bufs_[p_.outputs[i]] = (*dest_)[i];
    for (int b : dyn_views_) bufs_[b] = bufs_[p_.buffers[b].view_of].reshaped(static_dims(p_.buffers[b].type.shape));
    for (auto& [k, slot, b] : dyn_args_) (slot >= 0 ? kin_[k][slot] : kout_[k][-slot - 1]) = bufs_[b];
    for (size_t k = 0; k < p_.kernels.size(); ++k) {
      const LirKernel& kr = p_.kernels[k];
      std::vector<Tensor>& in = kin_[k];
      std::vector<Tensor>& out = kout_[k];
      auto t0 = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      const double c0 = profile_cpu_ ? cpu_us() : 0.0;
      if (jit_->has(k)) {
        jit_->run(k, in, out[0]);
      } else if (kr.kind == KernelKind::Generated && kr.attrs.count("cpu_rows")) {  // row region
        cpu::rows_kernel(rows_[k].get(), kr.body, attr_int(nodes_[k], "cpu_rows"), attr_int(nodes_[k], "cpu_cols"), in, out);
      } else if (kr.kind == KernelKind::Generated) {
        cpu::fused_kernel(kr.body, in, out[0]);
      } else if (!single_[k].nodes.empty()) {
        cpu::fused_kernel(single_[k], in, out[0]);
      } else if (kr.kind == KernelKind::Library && kr.op == OpKind::Conv) {
        cpu::conv_packed(nodes_[k], in, out, packed_[k].empty() ? nullptr : packed_[k].data(), conv_epi_[k].get());
      } else if (!packed_[k].empty() && cpu::linear_fast(nodes_[k], in, out, packed_[k].data())) {
      } else if (qpacked_[k]) {
        cpu::qlinear_packed(nodes_[k], in, out, qpacked_[k].get());
      } else {
        cpu::KernelFn fn = cpu::find_kernel(kr.op, in.empty() ? out[0].dtype() : in[0].dtype());
        (fn ? fn : &cpu::generic_kernel)(nodes_[k], in, out);
      }
      if (profile_) {
        double us = profile_cpu_ ? cpu_us() - c0
                                 : std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        auto& e = times_[labels_[k]];
        e.first += us;
        e.second += 1;
      }
    }
    std::vector<Tensor> outs;
    if (dest_) return outs;  // run_into: the caller holds the outputs; allocate nothing
    for (int b : p_.outputs) outs.push_back(bufs_[b]);
    for (int b : p_.outputs) bufs_[b] = Tensor();  // drop our references so the caller owns the outputs
    return outs;
  }

  // [training] run() with the outputs bound to caller-owned tensors (checked by the session).
  void run_into(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    RLX_CHECK(outputs.size() == p_.outputs.size(), "[cpu] expected ", p_.outputs.size(), " outputs, got ", outputs.size());
    std::lock_guard<std::mutex> lock(run_mutex_);
    dest_ = &outputs;
    try {
      run_locked(inputs);
    } catch (...) {
      dest_ = nullptr;
      throw;
    }
    dest_ = nullptr;
  }

  // Buffers that never change (constants, arena slices and views of them) are bound once; the
  // rest are listed in dyn_views_ / dyn_args_ and rebound per run.
  void prepare() {
    const size_t nb = p_.buffers.size();
    bufs_.assign(nb, Tensor());
    std::vector<bool> dyn(nb, false);
    for (size_t b = 0; b < nb; ++b) {
      const LirBuffer& lb = p_.buffers[b];
      auto dims = static_dims(lb.type.shape);
      if (lb.kind == BufferKind::Const) bufs_[b] = lb.value;
      if (lb.kind == BufferKind::Arena)
        bufs_[b] = Tensor::wrap(lb.type.dtype, dims, nullptr, static_cast<char*>(arena_.raw()) + lb.offset);
      if (lb.kind == BufferKind::Input || lb.kind == BufferKind::Output) dyn[b] = true;
    }
    for (size_t b = 0; b < nb; ++b) {  // views after their bases (bases precede them)
      const LirBuffer& lb = p_.buffers[b];
      if (lb.kind != BufferKind::View) continue;
      if (dyn[lb.view_of]) {
        dyn[b] = true;
        dyn_views_.push_back(static_cast<int>(b));
      } else {
        bufs_[b] = bufs_[lb.view_of].reshaped(static_dims(lb.type.shape));
      }
    }
    kin_.resize(p_.kernels.size());
    kout_.resize(p_.kernels.size());
    for (size_t k = 0; k < p_.kernels.size(); ++k) {
      const LirKernel& kr = p_.kernels[k];
      for (size_t i = 0; i < kr.in.size(); ++i) {
        kin_[k].push_back(bufs_[kr.in[i]]);
        if (dyn[kr.in[i]]) dyn_args_.push_back({static_cast<int>(k), static_cast<int>(i), kr.in[i]});
      }
      for (size_t i = 0; i < kr.out.size(); ++i) {
        kout_[k].push_back(bufs_[kr.out[i]]);
        if (dyn[kr.out[i]]) dyn_args_.push_back({static_cast<int>(k), -static_cast<int>(i) - 1, kr.out[i]});
      }
    }
    prepared_ = true;
  }

  std::string profile() const override {
    if (!profile_) return "";
    std::ostringstream os;
    os << "profile (cpu, cumulative over runs" << (profile_cpu_ ? ", process CPU time" : "") << "):\n";
    os << "  fused kernels: " << jit_->summary() << "\n";
    std::vector<std::pair<double, std::string>> rows;
    for (auto& [k, v] : times_) rows.push_back({v.first, k});
    std::sort(rows.rbegin(), rows.rend());
    char buf[256];
    for (auto& [us, k] : rows) {
      std::snprintf(buf, sizeof buf, "  %10.1f us  %6d calls  %s\n", us, times_.at(k).second, k.c_str());
      os << buf;
    }
    return os.str();
  }

 private:
  LirProgram p_;
  Tensor arena_;
  std::vector<Node> nodes_;
  std::vector<std::shared_ptr<const cpu::RowPlan>> rows_;  // per kernel: a row region's plan, else null
  std::vector<Graph> single_;  // per kernel: a one-node body for lone elementwise ops, else empty
  std::unique_ptr<cpu::JitProgram> jit_;
  std::vector<std::string> labels_;
  std::vector<std::shared_ptr<const void>> qpacked_;  // per kernel: the packed constant qlinear weight, or null
  std::vector<PackedWeight> packed_;  // per kernel: the packed constant Linear or conv weight, or empty
  std::vector<std::shared_ptr<const cpu::ConvEpiPlan>> conv_epi_;  // per kernel: a fused conv epilogue, or null
  bool prepared_ = false;
  std::mutex run_mutex_;
  std::vector<Tensor> bufs_;
  std::vector<std::vector<Tensor>> kin_, kout_;
  std::vector<int> dyn_views_;
  struct DynArg {
    int kernel, slot, buffer;  // slot >= 0: input slot; -1 - slot: output slot
  };
  std::vector<DynArg> dyn_args_;
  bool profile_ = false;
  bool profile_cpu_ = false;  // RLX_PROFILE=cpu
  static double cpu_us() {   // process CPU time (every thread's), microseconds
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
  }
  std::vector<Tensor>* dest_ = nullptr;  // [training] run_into's outputs while it runs
  std::map<std::string, std::pair<double, int>> times_;
};

}  // namespace

// The cpu backend's LIR schedule: which shared passes (src/lir/rewrite) it runs, and what its
// kernels can absorb. The GEMM-epilogue passes need the packed AVX2 GEMM (the kernels that read
// their attrs); RLX_CPU_FUSE=0 runs none, RLX_CPU_BIASGRAD=0 / RLX_CPU_ROWS=0 /
// RLX_CPU_CONCAT_IN_PLACE=0 leave one out.
LirSchedule cpu_schedule() {
  LirSchedule s;
  if (!env_on("RLX_CPU_FUSE", true)) return s;
  if (cpu::fast_gemm_available()) {
    s.passes = {"matmul-into-linear", "merge-qkv", "residual-into-linear", "layernorm-into-linear", "train-epilogues"};
    if (env_on("RLX_CPU_BIASGRAD", true)) s.passes.push_back("bias-grad-into-gemm");
  }
  if (env_on("RLX_CPU_ROWS", true)) s.passes.push_back("row-regions");
  s.passes.push_back("conv-epilogue");
  s.passes.push_back("pool-divide");
  if (env_on("RLX_CPU_CONCAT_IN_PLACE", true)) s.passes.push_back("concat-in-place");
  s.absorbs.conv = [](const LirKernel& d, const LirProgram& p) {
    return cpu::conv_f32_supported(Node{d.op, {}, {}, d.attrs, ""}, p.buffers[d.in[0]].type, p.buffers[d.in[1]].type,
                                   p.buffers[d.out[0]].type);
  };
  s.absorbs.conv_epilogue = [](const Graph& body, const std::vector<int>& slots,
                               const Shape& y) -> std::optional<std::string> {
    auto plan = cpu::conv_epi_plan(body, slots, y);
    if (!plan) return std::nullopt;
    return cpu::conv_epi_label(*plan);
  };
  s.absorbs.row_region = cpu::rows_plan_ok;
  return s;
}

std::unique_ptr<Executable> make_cpu_executable(const LirProgram& p) { return std::make_unique<CpuExecutable>(p); }

}  // namespace rlx
