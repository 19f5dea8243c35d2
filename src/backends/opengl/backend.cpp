// Registers the opengl device: GLSL compute through EGL (opengl_api.cpp) on the portable GPU executor.
#include "backends/portable/backend.h"

RLX_REGISTER_BACKEND(opengl, rlx::gpu::PortableBackend, "opengl", 11)
