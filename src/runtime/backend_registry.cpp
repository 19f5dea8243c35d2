#include <chrono>
#include <map>
#include <mutex>

#include "rlx/device.h"
#include "runtime/backend.h"

namespace rlx {

void register_cpu_backend();
namespace cuda {
void register_cuda_backend();  // src/backends/cuda
}
void register_portable_gpu_backends();  // vulkan, opengl, gpu: src/backends/portable
void register_tpu_backend();  // src/backends/tpu (PJRT plugin dlopened at first use)
void register_mlx_backend();  // src/backends/mlx (no-op when MLX is compiled out)
void register_oneapi_backend();         // src/backends/oneapi (a no-op when built without oneDNN)
void register_hexagon_backend();        // src/backends/hexagon
void register_rocm_backend();           // src/backends/rocm
void register_cortexm_backend();        // src/backends/cortexm

namespace {
struct Registered {
  BackendFactory make;
  ScheduleFactory schedule;
};
std::map<std::string, Registered>& registry() {
  static std::map<std::string, Registered> r;
  return r;
}
std::map<std::string, Registered>& builtins() {
  // Built-in backends are registered explicitly: static registrars in a static library get dropped.
  static std::once_flag once;
  std::call_once(once, [] {
    register_cpu_backend();
    cuda::register_cuda_backend();  // registered always; device_info says whether it can run
    register_portable_gpu_backends();  // registered always; device_info probes loader + device
    register_tpu_backend();
    register_mlx_backend();
    register_oneapi_backend();
    register_hexagon_backend();        // registered always; device_info probes the toolchain
    register_rocm_backend();           // registered always; device_info probes libamdhip64 + a GPU
    register_cortexm_backend();        // registered always; device_info probes arm-none-eabi-gcc + qemu
  });
  return registry();
}
}  // namespace

bool register_backend(const std::string& device, BackendFactory f, ScheduleFactory s) {
  registry()[device] = Registered{std::move(f), std::move(s)};
  return true;
}

LirSchedule backend_schedule(const std::string& device) {
  auto it = builtins().find(device);
  return it == builtins().end() || !it->second.schedule ? LirSchedule{} : it->second.schedule();
}

std::unique_ptr<Executable> make_executable(const std::string& device, const LirProgram& p) {
  const DeviceInfo& d = device_info(device);
  auto it = builtins().find(device);
  if (!d.can_execute() || it == builtins().end())
    fail("[run] device '", device, "' cannot execute on this machine: ", device_status_name(d.status), " (", d.reason,
         "). Compile-only commands (rlx compile --report/--dump) still work for it.");
  if (p.scheduled) return it->second.make(p);
  LirProgram s = p;
  schedule_lir(s, it->second.schedule ? it->second.schedule() : LirSchedule{});
  return it->second.make(s);
}

// The host default of Executable's resident API (backend.h).
void Executable::resident_feedback(const std::vector<std::pair<int, int>>& out_to_in) { res_fb_ = out_to_in; }

void Executable::resident_upload(const std::vector<Tensor>& inputs) {
  res_in_ = inputs;
  res_out_.clear();
}

void Executable::resident_write(int i, const Tensor& t) {
  RLX_CHECK(i >= 0 && i < static_cast<int>(res_in_.size()), "[resident] input ", i, " out of range (upload first)");
  res_in_[i] = t;
}

double Executable::resident_run(int n) {
  auto t0 = std::chrono::steady_clock::now();
  for (int k = 0; k < n; ++k) {
    if (res_out_.empty()) {
      res_out_ = run(res_in_);  // the only allocation: the second set of buffers
      // An output that is an input passed through (an update folded to the identity, a parameter
      // the loss ignores) may come back as that input's own storage; after the feedback swaps,
      // run_into would then write an output into a live input (or two outputs into one buffer).
      // Give every such output its own buffer, once.
      auto overlaps = [](const Tensor& a, const Tensor& b) {
        auto pa = static_cast<const char*>(a.raw()), pb = static_cast<const char*>(b.raw());
        return a.nbytes() && b.nbytes() && pa < pb + b.nbytes() && pb < pa + a.nbytes();
      };
      for (size_t o = 0; o < res_out_.size(); ++o) {
        bool shared = false;
        for (const Tensor& in : res_in_) shared = shared || overlaps(res_out_[o], in);
        for (size_t j = 0; j < o; ++j) shared = shared || overlaps(res_out_[o], res_out_[j]);
        if (shared) res_out_[o] = res_out_[o].clone();
      }
    } else {
      run_into(res_in_, res_out_);
    }
    for (auto [o, i] : res_fb_) {
      RLX_CHECK(o >= 0 && o < static_cast<int>(res_out_.size()) && i >= 0 && i < static_cast<int>(res_in_.size()),
                "[resident] feedback pair (", o, ", ", i, ") out of range");
      RLX_CHECK(res_out_[o].dtype() == res_in_[i].dtype() && res_out_[o].nbytes() == res_in_[i].nbytes(),
                "[resident] feedback output ", o, " and input ", i, " differ in dtype or size");
      std::swap(res_in_[i], res_out_[o]);
    }
  }
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return n > 0 ? ms / n : 0.0;
}

Tensor Executable::resident_read_output(int i) {
  RLX_CHECK(i >= 0 && i < static_cast<int>(res_out_.size()), "[resident] output ", i, " not available (run first)");
  for (auto [o, in] : res_fb_)  // fed back: the value now sits in the input slot
    if (o == i) return res_in_[in];
  return res_out_[i];
}

Tensor Executable::resident_read_input(int i) {
  RLX_CHECK(i >= 0 && i < static_cast<int>(res_in_.size()), "[resident] input ", i, " out of range (upload first)");
  return res_in_[i];
}

}  // namespace rlx
