#include "unit/test_codegen_common.h"

TEST(Vulkan, ConformanceOnEveryClaimedCase) { expect_device_conformance("vulkan"); }
