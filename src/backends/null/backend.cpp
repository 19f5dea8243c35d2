// The null backend: a complete backend that drives no device. Its executable walks the scheduled
// LIR program kernel by kernel and evaluates each with the reference interpreter (a library
// kernel as its one op, a generated kernel's body as a graph), one tensor per buffer; so the whole
// pipeline (dispatch, lowering, the LIR schedule, buffers and views, the resident API) runs for
// it, and conformance compares it to the reference. It is the template a new device copies
// (README.md), not a listed target.
#include <utility>

#include "rlx/reference.h"
#include "runtime/backend.h"

namespace rlx {
namespace {

class NullExecutable : public Executable {
 public:
  explicit NullExecutable(const LirProgram& p) : p_(p) {}

  std::vector<Tensor> run(const std::vector<Tensor>& inputs) override {
    RLX_CHECK(inputs.size() == p_.inputs.size(), "[null] expected ", p_.inputs.size(), " inputs, got ", inputs.size());
    std::vector<Tensor> vals(p_.buffers.size());
    for (size_t b = 0; b < p_.buffers.size(); ++b)
      if (p_.buffers[b].kind == BufferKind::Const) vals[b] = p_.buffers[b].value;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const LirBuffer& lb = p_.buffers[p_.inputs[i]];
      bool fits = inputs[i].dtype() == lb.type.dtype && static_cast<int64_t>(inputs[i].nbytes()) == lb.bytes();
      RLX_CHECK(fits, "[null] input ", i, " ('", lb.name, "') expects ", lb.bytes(), " bytes of ",
                dtype_name(lb.type.dtype));
      vals[p_.inputs[i]] = inputs[i];
    }
    for (const LirKernel& k : p_.kernels) {
      std::vector<Tensor> in;
      for (int b : k.in) in.push_back(read(vals, b));
      std::vector<ValueType> ot;
      for (int b : k.out) ot.push_back(p_.buffers[b].type);
      std::vector<Tensor> res = k.kind == KernelKind::Generated
                                    ? reference_run(k.body, in)
                                    : reference_eval(Node{k.op, {}, {}, k.attrs, k.origin}, in, ot);
      RLX_CHECK(res.size() == k.out.size(), "[null] ", k.label(), " produced ", res.size(), " outputs, expected ",
                k.out.size());
      for (size_t j = 0; j < k.out.size(); ++j) write(vals, k.out[j], res[j]);
    }
    std::vector<Tensor> out;
    for (int b : p_.outputs) out.push_back(read(vals, b).clone());  // never an input's or a constant's storage
    return out;
  }

 private:
  int base(int b) const {
    while (p_.buffers[b].kind == BufferKind::View) b = p_.buffers[b].view_of;
    return b;
  }
  // A view reads its base's bytes in its own shape.
  Tensor read(const std::vector<Tensor>& vals, int b) const {
    const Tensor& t = vals[base(b)];
    RLX_CHECK(t.dtype() == p_.buffers[b].type.dtype || p_.buffers[b].kind != BufferKind::View, "[null] view ", b,
              " changes the dtype");
    return b == base(b) ? t : t.reshaped(static_dims(p_.buffers[b].type.shape));
  }
  void write(std::vector<Tensor>& vals, int b, const Tensor& t) const {
    const LirBuffer& lb = p_.buffers[b];
    bool fits = t.dtype() == lb.type.dtype && static_cast<int64_t>(t.nbytes()) == lb.bytes();
    RLX_CHECK(fits, "[null] kernel output for buffer ", b, " has the wrong type");
    int root = base(b);
    vals[root] = root == b ? t : t.reshaped(static_dims(p_.buffers[root].type.shape));
  }

  LirProgram p_;
};

class NullBackend : public Backend {
 public:
  std::string name() const override { return "null"; }
  int rank() const override { return 100; }
  bool listed() const override { return false; }  // a template, not one of the targets
  // Every MIR primitive over every dtype (the reference interpreter's); HIR ops decompose.
  // Sparse, linear-algebra and collective primitives are not claimed.
  DeviceInfo info(bool) const override {
    return DeviceInfo{"null", "the reference interpreter over the LIR schedule (no device; the backend template)",
                      DeviceStatus::Available, "always available (executes on the host, kernel by kernel)",
                      mir_capabilities(DTypeSet::all())};
  }
  // No LIR passes: the schedule is the lowered program, planned.
  LirSchedule schedule() const override { return {}; }
  std::unique_ptr<Executable> compile(const LirProgram& p) const override { return std::make_unique<NullExecutable>(p); }
};

}  // namespace
}  // namespace rlx

RLX_REGISTER_BACKEND(null, rlx::NullBackend)
