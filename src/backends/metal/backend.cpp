// Registers the metal device: MSL kernels (metal_api.mm on Apple, msl_shim_api.cpp elsewhere) on the portable GPU executor.
#include "backends/portable/backend.h"

RLX_REGISTER_BACKEND(metal, rlx::gpu::PortableBackend, "metal", 1)
