// Registers the gpu device: OpenCL C kernels (opencl_api.cpp) on the portable GPU executor.
#include "backends/portable/backend.h"

RLX_REGISTER_BACKEND(portable, rlx::gpu::PortableBackend, "gpu", 9)
