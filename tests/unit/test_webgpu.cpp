#include "unit/test_codegen_common.h"

// WGSL through wgpu-native (pip wgpu's bundled library) on the Vulkan adapter it finds (lavapipe).
TEST(WebGpu, ConformanceOnEveryClaimedCase) { expect_device_conformance("webgpu"); }
