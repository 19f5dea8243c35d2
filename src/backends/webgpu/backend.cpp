// Registers the webgpu device: WGSL kernels through wgpu-native (webgpu_api.cpp) on the portable GPU executor.
#include "backends/portable/backend.h"

RLX_REGISTER_BACKEND(webgpu, rlx::gpu::PortableBackend, "webgpu", 13)
