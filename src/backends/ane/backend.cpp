// The `ane` device: Core ML ML Programs for the Apple Neural Engine. Its entry gives dispatch the
// op x dtype set a Core ML program of the Neural Engine supports (f32 and f16: the MIR primitives,
// matmul/linear, softmax, the norms, attention, gelu), so `rlx devices` and legalization report it.
// No Core ML package emitter exists yet, and prediction needs macOS with a Neural Engine: this
// machine cannot execute it, so compile refuses with that message.
#include "dispatch/registry.h"
#include "rlx/device.h"
#include "runtime/backend.h"

namespace rlx {
namespace {

class AneBackend : public Backend {
 public:
  std::string name() const override { return "ane"; }
  int rank() const override { return 3; }
  DeviceInfo info(bool) const override {
    using D = DType;
    const DTypeSet f16x = DTypeSet::of({D::f32, D::f16});
    DeviceInfo d{"ane", "Core ML program for the Apple Neural Engine", DeviceStatus::NoHardware,
                 "no Core ML package is emitted yet; prediction needs macOS + an Apple Neural Engine: not run",
                 mir_capabilities(f16x)};
    add_ops(d.caps, {OpKind::MatMul, OpKind::Linear, OpKind::Softmax, OpKind::LayerNorm, OpKind::RmsNorm,
                     OpKind::Attention, OpKind::Gelu},
            f16x);
    return d;
  }
  std::unique_ptr<Executable> compile(const LirProgram&) const override {
    fail("[ane] cannot execute here: Core ML prediction needs macOS with an Apple Neural Engine");
  }
};

}  // namespace
}  // namespace rlx

RLX_REGISTER_BACKEND(ane, rlx::AneBackend)
