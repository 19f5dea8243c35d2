// The cpu executable: one arena allocated at compile time and reused by every run; buffers are
// views into it; kernels run in schedule order. RLX_PROFILE=1 times each kernel.
#include <chrono>
#include <cstdlib>
#include <map>
#include <sstream>

#include "backends/cpu/kernels.h"
#include "runtime/backend.h"

namespace rlx {

namespace {

class CpuExecutable : public Executable {
 public:
  explicit CpuExecutable(const LirProgram& p) : p_(p), arena_(DType::u8, {std::max<int64_t>(p.arena_bytes, 1)}) {
    profile_ = std::getenv("RLX_PROFILE") && std::string(std::getenv("RLX_PROFILE")) == "1";
    for (auto& k : p_.kernels) {
      Node n{k.op, {}, {}, k.attrs, k.origin};
      nodes_.push_back(n);
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
  }

  std::vector<Tensor> run(const std::vector<Tensor>& inputs) override {
    RLX_CHECK(inputs.size() == p_.inputs.size(), "[cpu] expected ", p_.inputs.size(), " inputs, got ", inputs.size());
    std::vector<Tensor> bufs(p_.buffers.size());
    std::vector<Tensor> outs;
    for (size_t i = 0; i < p_.inputs.size(); ++i) bufs[p_.inputs[i]] = inputs[i];
    for (size_t b = 0; b < p_.buffers.size(); ++b) {
      const LirBuffer& lb = p_.buffers[b];
      auto dims = static_dims(lb.type.shape);
      if (lb.kind == BufferKind::Const) bufs[b] = lb.value;
      if (lb.kind == BufferKind::Arena)
        bufs[b] = Tensor::wrap(lb.type.dtype, dims, nullptr, static_cast<char*>(arena_.raw()) + lb.offset);
      if (lb.kind == BufferKind::Output && !dest_) bufs[b] = Tensor(lb.type.dtype, dims);
    }
    if (dest_)  // [training] run_into: caller-owned output tensors become the output buffers
      for (size_t i = 0; i < p_.outputs.size(); ++i) bufs[p_.outputs[i]] = (*dest_)[i];
    for (size_t b = 0; b < p_.buffers.size(); ++b) {  // views after their bases (bases precede them)
      const LirBuffer& lb = p_.buffers[b];
      if (lb.kind == BufferKind::View) bufs[b] = bufs[lb.view_of].reshaped(static_dims(lb.type.shape));
    }
    for (size_t k = 0; k < p_.kernels.size(); ++k) {
      const LirKernel& kr = p_.kernels[k];
      std::vector<Tensor> in, out;
      for (int b : kr.in) in.push_back(bufs[b]);
      for (int b : kr.out) out.push_back(bufs[b]);
      auto t0 = std::chrono::steady_clock::now();
      if (kr.kind == KernelKind::Generated) {
        cpu::fused_kernel(kr.body, in, out[0]);
      } else if (!single_[k].nodes.empty()) {
        cpu::fused_kernel(single_[k], in, out[0]);
      } else {
        cpu::KernelFn fn = cpu::find_kernel(kr.op, in.empty() ? out[0].dtype() : in[0].dtype());
        (fn ? fn : &cpu::generic_kernel)(nodes_[k], in, out);
      }
      if (profile_) {
        double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        auto& e = times_[kr.label()];
        e.first += us;
        e.second += 1;
      }
    }
    for (int b : p_.outputs) outs.push_back(bufs[b]);
    return outs;
  }

  // [training] run() with the outputs bound to caller-owned tensors (checked by the session).
  void run_into(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    RLX_CHECK(outputs.size() == p_.outputs.size(), "[cpu] expected ", p_.outputs.size(), " outputs, got ", outputs.size());
    dest_ = &outputs;
    try {
      run(inputs);
    } catch (...) {
      dest_ = nullptr;
      throw;
    }
    dest_ = nullptr;
  }

  std::string profile() const override {
    if (!profile_) return "";
    std::ostringstream os;
    os << "profile (cpu, cumulative over runs):\n";
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
  std::vector<Graph> single_;  // per kernel: a one-node body for lone elementwise ops, else empty
  bool profile_ = false;
  std::vector<Tensor>* dest_ = nullptr;  // [training] run_into's outputs while it runs
  std::map<std::string, std::pair<double, int>> times_;
};

}  // namespace

void register_cpu_backend() {
  register_backend("cpu", [](const LirProgram& p) { return std::make_unique<CpuExecutable>(p); });
}

}  // namespace rlx
