#include "unit/test_codegen_common.h"

// WGSL through wgpu-native (pip wgpu's bundled library) on the Vulkan adapter it finds (lavapipe).
TEST(WebGpu, ConformanceOnEveryClaimedCase) { expect_device_conformance("webgpu"); }

// bootstrap installs pip wgpu before configuring, so a build here has webgpu.h (the conformance
// test above would otherwise skip)
TEST(WebGpu, BuiltWithWebGpuHeaders) {
  const rlx::DeviceInfo& d = rlx::device_info("webgpu");
  EXPECT_EQ(d.reason.find("built without webgpu.h"), std::string::npos) << d.reason;
}
