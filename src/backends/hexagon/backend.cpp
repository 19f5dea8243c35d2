// The hexagon backend: its device entry and registration. The capability set is what the Hexagon
// renderer has kernels for (f16/bf16 are stored, computed in f32 after legalization); the device
// is available wherever the toolchain is (clang's Hexagon target, ld.lld, qemu-hexagon), and its
// status says that it runs emulated.
#include "backends/hexagon/hexagon.h"
#include "rlx/device.h"
#include "runtime/backend.h"

namespace rlx {

DeviceInfo hexagon_device_info(bool probing) {
  using D = DType;
  auto r = codegen::make_hexagon_renderer();
  DTypeSet storage = DTypeSet::of({D::f32, D::f16, D::bf16, D::f64, D::i8, D::u8, D::i16, D::i32, D::i64, D::boolean});
  CapabilitySet caps = renderer_caps(*r, storage);
  const char* what = "Hexagon C kernels built by clang for v68, run under qemu-hexagon (emulated)";
  if (!probing) return DeviceInfo{"hexagon", what, DeviceStatus::Available, "not probed", caps};
  std::string why;
  gpu::Api* api = hexagon::hexagon_api(&why);
  if (!api) return DeviceInfo{"hexagon", what, DeviceStatus::NoDriver, why, caps};
  return DeviceInfo{"hexagon", what, DeviceStatus::Available,
                    "emulated, not hardware: " + api->device() + "; timings are emulator wall time", caps};
}

namespace {
class HexagonBackend : public Backend {
 public:
  std::string name() const override { return "hexagon"; }
  int rank() const override { return 8; }
  DeviceInfo info(bool probing) const override { return hexagon_device_info(probing); }
  std::unique_ptr<Executable> compile(const LirProgram& p) const override {
    std::string why;
    gpu::Api* api = hexagon::hexagon_api(&why);
    if (!api) fail("[hexagon] cannot execute here: ", why);
    return gpu::make_portable_executable(*api, p);
  }
};
}  // namespace

}  // namespace rlx

RLX_REGISTER_BACKEND(hexagon, rlx::HexagonBackend)
