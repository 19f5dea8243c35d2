// The mlx backend: linked when CMake found MLX; status from running one op; the capability set is
// what lower.cpp emits (graph_api/caps.cpp).
#include "backends/graph_api/flat.h"
#include "runtime/backend.h"

namespace rlx {
int mlx_probe(std::string* why);                                     // executable.cpp: 0 runs, 1 compiled out, 2 fails
std::unique_ptr<Executable> make_mlx_executable(const LirProgram& p);  // executable.cpp

namespace {

class MlxBackend : public Backend {
 public:
  std::string name() const override { return "mlx"; }
  int rank() const override { return 2; }
  DeviceInfo info(bool probing) const override {
    std::string why;
    int st = probing ? mlx_probe(&why) : 0;
    return DeviceInfo{"mlx", "lowering onto the MLX C++ API (mlx::core ops, mlx::core::compile)",
                      st == 0 ? DeviceStatus::Available : (st == 1 ? DeviceStatus::CompiledOut : DeviceStatus::NoDriver),
                      why, graph_api::caps(false)};
  }
  std::unique_ptr<Executable> compile(const LirProgram& p) const override { return make_mlx_executable(p); }
};

}  // namespace
}  // namespace rlx

RLX_REGISTER_BACKEND(mlx, rlx::MlxBackend)
