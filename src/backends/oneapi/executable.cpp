// The oneapi executable: one host arena planned at compile time (oneDNN's CPU engine works on host
// memory), every kernel oneDNN has a primitive for runs as that primitive (primitives.cpp), and the
// rest run on the cpu backend's kernels (fused kernels on its JIT or evaluator, library kernels
// from its table) over the same buffers, so a kernel placed on the cpu kernels costs no copy.
// RLX_PROFILE=1 times each kernel and names the engine that ran it.
#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <sstream>

#include "rlx/device.h"
#include "runtime/backend.h"

#if RLX_HAVE_DNNL
#include "backends/cpu/jit.h"
#include "backends/cpu/kernels.h"
#include "backends/oneapi/primitives.h"
#endif

namespace rlx {

#if RLX_HAVE_DNNL
namespace oneapi {
namespace {

// Which engine runs each kernel, counted by label, for the compile report.
std::string placement_summary(const LirProgram& p) {
  std::map<std::string, int> on_dnnl, on_cpu;
  for (auto& k : p.kernels) {
    std::string kind = dnnl_kind(k, p);
    if (!kind.empty()) ++on_dnnl[std::string(op_name(k.op)) + "->" + kind];
    else ++on_cpu[k.kind == KernelKind::Generated ? "fused" : std::string(op_name(k.op))];
  }
  auto list = [](const std::map<std::string, int>& m) {
    std::string s;
    for (auto& [n, c] : m) s += (s.empty() ? "" : ", ") + n + " x" + std::to_string(c);
    return s.empty() ? std::string("none") : s;
  };
  int a = 0, b = 0;
  for (auto& [n, c] : on_dnnl) a += c;
  for (auto& [n, c] : on_cpu) b += c;
  return "oneapi placement: " + std::to_string(a) + " kernels on oneDNN primitives (" + list(on_dnnl) + "); " +
         std::to_string(b) + " on the cpu backend's kernels, same host memory, no copy (" + list(on_cpu) + ")";
}

class OneapiExecutable : public Executable {
 public:
  explicit OneapiExecutable(const LirProgram& p) : p_(p) {
    profile_ = std::getenv("RLX_PROFILE") && std::string(std::getenv("RLX_PROFILE")) == "1";
    arena_ = Tensor(DType::u8, {std::max<int64_t>(p_.arena_bytes, 1)});
    std::vector<const Graph*> bodies(p_.kernels.size(), nullptr);
    for (size_t k = 0; k < p_.kernels.size(); ++k) {
      const LirKernel& kr = p_.kernels[k];
      dnnl_.push_back(dnnl_kind(kr, p_).empty() ? nullptr : make_dnnl_kernel(kr, p_));
      nodes_.push_back(Node{kr.op, {}, {}, kr.attrs, kr.origin});
      Graph body;  // a lone elementwise op runs on the cpu fused evaluator as a one-node body
      if (!dnnl_[k] && kr.kind == KernelKind::Library && is_elementwise(kr.op) && kr.out.size() == 1) {
        std::vector<ValueId> ins;
        for (size_t i = 0; i < kr.in.size(); ++i) {
          const ValueType& t = p_.buffers[kr.in[i]].type;
          ins.push_back(body.add_input("a" + std::to_string(i), t.dtype, t.shape));
        }
        body.outputs = body.add_node(kr.op, ins, kr.attrs, kr.origin);
      }
      single_.push_back(std::move(body));
      labels_.push_back(dnnl_[k] ? "onednn " + dnnl_[k]->label() : "cpu " + kr.label());
    }
    for (size_t k = 0; k < p_.kernels.size(); ++k)
      bodies[k] = p_.kernels[k].kind == KernelKind::Generated ? &p_.kernels[k].body
                  : single_[k].nodes.empty()                   ? nullptr
                                                               : &single_[k];
    jit_ = std::make_unique<cpu::JitProgram>(p_, bodies);
  }

  std::vector<Tensor> run(const std::vector<Tensor>& inputs) override {
    std::lock_guard<std::mutex> lock(mu_);
    RLX_CHECK(inputs.size() == p_.inputs.size(), "[oneapi] expected ", p_.inputs.size(), " inputs, got ", inputs.size());
    if (bufs_.empty()) prepare();
    for (size_t i = 0; i < p_.inputs.size(); ++i) bufs_[p_.inputs[i]] = inputs[i];
    for (int b : p_.outputs) bufs_[b] = Tensor(p_.buffers[b].type.dtype, static_dims(p_.buffers[b].type.shape));
    for (int b : dyn_views_) bufs_[b] = bufs_[p_.buffers[b].view_of].reshaped(static_dims(p_.buffers[b].type.shape));
    for (size_t k = 0; k < p_.kernels.size(); ++k) {
      const LirKernel& kr = p_.kernels[k];
      std::vector<Tensor> in, out;
      for (int b : kr.in) in.push_back(bufs_[b]);
      for (int b : kr.out) out.push_back(bufs_[b]);
      auto t0 = std::chrono::steady_clock::now();
      if (dnnl_[k]) {
        dnnl_[k]->run(in, out);
      } else if (jit_->has(k)) {
        jit_->run(k, in, out[0]);
      } else if (kr.kind == KernelKind::Generated) {
        cpu::fused_kernel(kr.body, in, out[0]);
      } else if (!single_[k].nodes.empty()) {
        cpu::fused_kernel(single_[k], in, out[0]);
      } else if (kr.op == OpKind::Linear && kr.attrs.count("cpu_res")) {
        RLX_CHECK(cpu::linear_fast(nodes_[k], in, out, nullptr), "[oneapi] linear with a residual epilogue on ",
                  dtype_name(p_.buffers[kr.in[0]].type.dtype), ": no kernel");
      } else {
        cpu::KernelFn fn = cpu::find_kernel(kr.op, in.empty() ? out[0].dtype() : in[0].dtype());
        (fn ? fn : &cpu::generic_kernel)(nodes_[k], in, out);
      }
      if (profile_) {
        auto& e = times_[labels_[k]];
        e.first += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        e.second += 1;
      }
    }
    std::vector<Tensor> outs;
    for (int b : p_.outputs) outs.push_back(bufs_[b]);
    for (int b : p_.outputs) bufs_[b] = Tensor();
    return outs;
  }

  std::string profile() const override {
    if (!profile_) return "";
    std::ostringstream os;
    os << "profile (oneapi, cumulative over runs):\n  fused kernels on the cpu backend: " << jit_->summary() << "\n";
    std::vector<std::pair<double, std::string>> rows;
    for (auto& [k, v] : times_) rows.push_back({v.first, k});
    std::sort(rows.rbegin(), rows.rend());
    char buf[320];
    for (auto& [us, k] : rows) {
      std::snprintf(buf, sizeof buf, "  %10.1f us  %6d calls  %s\n", us, times_.at(k).second, k.c_str());
      os << buf;
    }
    return os.str();
  }

 private:
  // Constants and arena slices are bound once; inputs, outputs and their views every run.
  void prepare() {
    bufs_.assign(p_.buffers.size(), Tensor());
    std::vector<bool> dyn(p_.buffers.size(), false);
    for (size_t b = 0; b < p_.buffers.size(); ++b) {
      const LirBuffer& lb = p_.buffers[b];
      if (lb.kind == BufferKind::Const) bufs_[b] = lb.value;
      if (lb.kind == BufferKind::Arena)
        bufs_[b] = Tensor::wrap(lb.type.dtype, static_dims(lb.type.shape), nullptr,
                                static_cast<char*>(arena_.raw()) + lb.offset);
      if (lb.kind == BufferKind::Input || lb.kind == BufferKind::Output) dyn[b] = true;
      if (lb.kind == BufferKind::View) {
        if (dyn[lb.view_of]) dyn[b] = true, dyn_views_.push_back(static_cast<int>(b));
        else bufs_[b] = bufs_[lb.view_of].reshaped(static_dims(lb.type.shape));
      }
    }
  }

  LirProgram p_;
  Tensor arena_;
  std::vector<std::unique_ptr<DnnlKernel>> dnnl_;  // per kernel: its oneDNN primitive, or null (cpu kernels)
  std::vector<Node> nodes_;
  std::vector<Graph> single_;
  std::vector<std::string> labels_;
  std::unique_ptr<cpu::JitProgram> jit_;
  std::vector<Tensor> bufs_;
  std::vector<int> dyn_views_;
  std::mutex mu_;
  bool profile_ = false;
  std::map<std::string, std::pair<double, int>> times_;
};

// The LIR passes: a constant-weight MatMul becomes a Linear (whose bias then rides the matmul
// primitive), and a residual Add after a Linear becomes its binary-add post-op.
LirSchedule oneapi_schedule() {
  LirSchedule s;
  s.passes = {"matmul-into-linear", "residual-into-linear"};
  s.placement = placement_summary;
  return s;
}

}  // namespace

std::string probe(bool* ok) {
  *ok = true;
  return dnnl_summary() + "; kernels oneDNN has no primitive for run on the cpu backend's kernels in the same memory; "
         "oneDNN's GPU engine (Intel GPUs only) is not probed or used";
}
}  // namespace oneapi

namespace oneapi {
std::unique_ptr<Executable> make_executable(const LirProgram& p) { return std::make_unique<OneapiExecutable>(p); }
LirSchedule schedule() { return oneapi_schedule(); }
}  // namespace oneapi
#else
namespace oneapi {
std::string probe(bool* ok) {
  *ok = false;
  return "compiled out: oneDNN (Debian libdnnl-dev) was not found when RLX was built";
}
std::unique_ptr<Executable> make_executable(const LirProgram&) {
  fail("[oneapi] compiled out: oneDNN (Debian libdnnl-dev) was not found when RLX was built");
}
LirSchedule schedule() { return {}; }
}  // namespace oneapi
#endif

}  // namespace rlx
