// The tpu backend: StableHLO through a PJRT plugin dlopened and a client created (status from
// that); the capability set is what stablehlo*.cpp emits (graph_api/caps.cpp).
#include "backends/graph_api/flat.h"
#include "runtime/backend.h"

namespace rlx {
int pjrt_probe(std::string* why);                                    // pjrt.cpp: 0 runs, 1 no plugin, 2 no device
std::unique_ptr<Executable> make_tpu_executable(const LirProgram& p);  // executable.cpp

namespace {

class TpuBackend : public Backend {
 public:
  std::string name() const override { return "tpu"; }
  int rank() const override { return 7; }
  DeviceInfo info(bool probing) const override {
    std::string why;
    int st = probing ? pjrt_probe(&why) : 0;
    return DeviceInfo{"tpu", "StableHLO through the PJRT C API (any PJRT plugin: XLA CPU, CUDA, libtpu)",
                      st == 0 ? DeviceStatus::Available : (st == 1 ? DeviceStatus::NoDriver : DeviceStatus::NoHardware),
                      why, graph_api::caps(true)};
  }
  std::unique_ptr<Executable> compile(const LirProgram& p) const override { return make_tpu_executable(p); }
};

}  // namespace
}  // namespace rlx

RLX_REGISTER_BACKEND(tpu, rlx::TpuBackend)
