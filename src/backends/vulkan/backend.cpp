// Registers the vulkan device: GLSL compute -> SPIR-V on Vulkan (vulkan_api.cpp) on the portable GPU executor.
#include "backends/portable/backend.h"

RLX_REGISTER_BACKEND(vulkan, rlx::gpu::PortableBackend, "vulkan", 10)
