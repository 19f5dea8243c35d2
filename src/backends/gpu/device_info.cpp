// Capability sets and status for the portable GPU devices, derived from the renderers, so the
// support matrix claims exactly what has a kernel.
#include "backends/gpu/api.h"
#include "rlx/device.h"

namespace rlx {

DeviceInfo portable_gpu_device_info(const std::string& name) {
  using D = DType;
  const bool glsl = name != "gpu";
  auto r = glsl ? codegen::make_glsl_renderer() : codegen::make_opencl_renderer();
  DTypeSet storage = DTypeSet::of({D::f32, D::f16, D::bf16, D::i8, D::u8, D::i16, D::i32, D::boolean});
  if (!glsl) storage = storage | DTypeSet::of({D::f64, D::i64});
  CapabilitySet caps;
  caps.storage = storage;
  for (int i = 0; i < num_ops(); ++i) {
    auto k = static_cast<OpKind>(i);
    if (k == OpKind::Constant) {  // constants are uploaded buffers
      caps.add(k, storage);
      continue;
    }
    if (k == OpKind::Select) {  // keyed by the predicate; branches of any storage dtype
      caps.add(k, DTypeSet::of({D::boolean}));
      continue;
    }
    DTypeSet s;
    for (int d = 0; d < kNumDTypes; ++d) {
      auto t = static_cast<DType>(d);
      const auto& info = op_info(k);
      if (storage.has(t) && (info.min_inputs == 0 || info.dtypes.has(t)) && r->has_kernel(k, t)) s.add(t);
    }
    if (!s.empty()) caps.add(k, s);
  }
  const char* what = name == "vulkan" ? "GLSL compute -> SPIR-V (glslc) -> Vulkan"
                     : name == "opengl" ? "GLSL 4.50 compute through EGL (surfaceless)"
                                        : "OpenCL C 1.2 rendered kernels";
  std::string why;
  gpu::Api* api = gpu::api_for(name, &why);
  DeviceStatus st = DeviceStatus::Available;
  if (api) {
    why = api->device();
  } else {
    st = why.rfind("no hardware", 0) == 0 ? DeviceStatus::NoHardware : DeviceStatus::NoDriver;
    auto colon = why.find(": ");
    if (colon != std::string::npos && colon < 12) why = why.substr(colon + 2);
  }
  return DeviceInfo{name, what, st, why, caps};
}

}  // namespace rlx
