// Registers the directx device: HLSL kernels, run as SPIR-V on Vulkan (directx_api.cpp), on the portable GPU executor.
#include "backends/portable/backend.h"

RLX_REGISTER_BACKEND(directx, rlx::gpu::PortableBackend, "directx", 12)
