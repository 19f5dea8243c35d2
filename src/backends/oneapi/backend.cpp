// The oneapi backend: oneDNN primitives on the CPU engine, over host memory, and the cpu
// backend's kernels for every kernel oneDNN has no primitive for; so the set is the cpu device's
// dense set (no sparse, linear-algebra, splatting or GGML kernels) plus the HIR ops it runs as
// primitives: linear/matmul (matmul + post-ops), softmax, layer norm.
#include "rlx/device.h"
#include "runtime/backend.h"

namespace rlx::oneapi {
std::string probe(bool* ok);                                   // executable.cpp
LirSchedule schedule();                                        // executable.cpp
std::unique_ptr<Executable> make_executable(const LirProgram& p);  // executable.cpp

namespace {

class OneapiBackend : public Backend {
 public:
  std::string name() const override { return "oneapi"; }
  int rank() const override { return 6; }
  DeviceInfo info(bool) const override {
    using D = DType;
    bool ok = false;
    std::string why = probe(&ok);
    DeviceInfo one{"oneapi", "oneDNN primitives (CPU engine here) + the cpu kernels for the rest",
                   ok ? DeviceStatus::Available : DeviceStatus::CompiledOut, why, mir_capabilities(DTypeSet::all())};
    one.caps.ops[OpKind::DotGeneral] = DTypeSet::of({D::f32, D::f64, D::i32, D::i64, D::c64, D::u16, D::u32, D::u64});
    one.caps.ops[OpKind::Conv] = DTypeSet::of({D::f32, D::f64});
    add_ops(one.caps, {OpKind::MatMul, OpKind::Linear, OpKind::Softmax, OpKind::LayerNorm}, DTypeSet::of({D::f32}));
    return one;
  }
  LirSchedule schedule() const override { return oneapi::schedule(); }
  std::unique_ptr<Executable> compile(const LirProgram& p) const override { return oneapi::make_executable(p); }
};

}  // namespace
}  // namespace rlx::oneapi

RLX_REGISTER_BACKEND(oneapi, rlx::oneapi::OneapiBackend)
