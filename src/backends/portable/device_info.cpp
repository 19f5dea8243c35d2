// Capability sets and status for the portable GPU devices, derived from the renderers, so the
// support matrix claims exactly what has a kernel.
#include "backends/portable/api.h"
#include "rlx/device.h"

namespace rlx {

std::string gpu::Features::str() const {
  auto yn = [](bool b) { return b ? "yes" : "no"; };
  return std::string("fp16 ") + yn(fp16) + ", fp64 " + yn(fp64) + ", int64 " + yn(int64) + ", int8 " + yn(int8) +
         ", subgroups " +
         (subgroup_size > 0 ? std::to_string(subgroup_size) : std::string(subgroup_size < 0 ? "yes" : "no"));
}

DTypeSet portable_gpu_driver_dtypes(const std::string& name) {
  return name == "gpu" ? DTypeSet::of({DType::f64}) : DTypeSet{};
}

CapabilitySet renderer_caps(const codegen::CLikeRenderer& r, DTypeSet storage) {
  using D = DType;
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
      if (storage.has(t) && (info.min_inputs == 0 || info.dtypes.has(t)) && r.has_kernel(k, t)) s.add(t);
    }
    if (!s.empty()) caps.add(k, s);
  }
  return caps;
}

DeviceInfo portable_gpu_device_info(const std::string& name, bool probing) {
  using D = DType;
  auto r = name == "gpu"       ? codegen::make_opencl_renderer()
           : name == "webgpu"  ? codegen::make_wgsl_renderer()
           : name == "directx" ? codegen::make_hlsl_renderer()
           : name == "metal"   ? codegen::make_msl_renderer()
                               : codegen::make_glsl_renderer();
  // GLSL, WGSL and HLSL store i64 as word pairs with 32-bit compute (only convert is claimed,
  // dispatch narrows the rest to i32) and halves packed in words (computed in f32: WGSL's f16
  // arithmetic extension is not needed); OpenCL has 64-bit integers and cl_khr_fp64.
  DTypeSet storage = DTypeSet::of({D::f32, D::f16, D::bf16, D::i8, D::u8, D::i16, D::i32, D::boolean, D::i64});
  std::string why;
  gpu::Api* api = probing ? gpu::api_for(name, &why) : nullptr;  // probing=false: load nothing
  // OpenCL C needs cl_khr_fp64 for double kernels: claim f64 only where the device reports it
  // (without a device, the API's nominal set stands, as for the devices that cannot run here).
  if (!api || api->features.fp64) storage = storage | portable_gpu_driver_dtypes(name);
  CapabilitySet caps = renderer_caps(*r, storage);
  const char* what = name == "vulkan"    ? "GLSL compute -> SPIR-V (glslc) -> Vulkan"
                     : name == "opengl"  ? "GLSL 4.50 compute through EGL (surfaceless)"
                     : name == "webgpu"  ? "WGSL compute through webgpu.h (wgpu-native)"
                     : name == "directx" ? "HLSL compute (Direct3D 12; checked as SPIR-V on Vulkan)"
                     : name == "metal"   ? "MSL compute kernels (Metal; checked as C++ against a Metal shim)"
                                         : "OpenCL C 1.2 rendered kernels";
  DeviceStatus st = DeviceStatus::Available;
  if (api) {
    why = api->device() + " (" + api->features.str() + ")";
  } else if (!probing) {
    why = "not probed";
  } else {
    st = why.rfind("no hardware", 0) == 0 ? DeviceStatus::NoHardware : DeviceStatus::NoDriver;
    auto colon = why.find(": ");
    if (colon != std::string::npos && colon < 12) why = why.substr(colon + 2);
  }
  return DeviceInfo{name, what, st, why, caps};
}

}  // namespace rlx
