// `directx`: HLSL compute kernels (src/codegen/hlsl.cpp). Direct3D 12 needs Windows, so here the
// same HLSL is compiled to SPIR-V by glslang's HLSL front end (glslangValidator -D, Debian
// glslang-tools; RLX_HLSL_COMPILER overrides) and run by the Vulkan executor (lavapipe here):
// every claimed case is checked for semantics, not only syntax. The Direct3D 12 executor for
// the same kernels is d3d12_executor.cpp (compiled, never run, on Linux); it is used first where
// Direct3D 12 and DXC are found.
#include "backends/portable/api.h"

namespace rlx::gpu {

std::unique_ptr<Api> make_d3d12_api(std::string* why);  // d3d12_executor.cpp

std::unique_ptr<Api> make_directx_api(std::string* why) {
  std::string d3d12;
  if (auto a = make_d3d12_api(&d3d12)) return a;
  VulkanFlavor f;
  f.note = "Direct3D 12 not run: " + d3d12 + "; the HLSL kernels ran as SPIR-V (glslang HLSL front end) on ";
  f.device = "directx";
  f.renderer = [] { return codegen::make_hlsl_renderer(); };
  f.compiler_env = "RLX_HLSL_COMPILER";
  f.compiler = "glslangValidator";
  f.flags = "-D -V -S comp -e main --target-env vulkan1.1 --quiet";
  f.ext = ".hlsl";
  auto a = make_vulkan_api_with(f, why);
  if (!a && why) *why += " (Direct3D 12 itself needs Windows)";
  return a;
}

}  // namespace rlx::gpu
