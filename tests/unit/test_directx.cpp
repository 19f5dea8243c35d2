#include "unit/test_codegen_common.h"

// HLSL kernels compiled by glslang's HLSL front end and run on Vulkan (Direct3D 12 needs Windows).
TEST(DirectX, ConformanceOnEveryClaimedCase) { expect_device_conformance("directx"); }

TEST(DirectX, DevicesSaysDirect3DDidNotRun) {
  const rlx::DeviceInfo& d = rlx::device_info("directx");
  EXPECT_NE(d.reason.find("Direct3D 12"), std::string::npos) << d.reason;
  if (d.can_execute()) {
    EXPECT_NE(d.reason.find("Direct3D 12 not run"), std::string::npos) << d.reason;
  }
}
