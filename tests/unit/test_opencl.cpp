#include "unit/test_codegen_common.h"

TEST(OpenCl, ConformanceOnEveryClaimedCase) { expect_device_conformance("gpu"); }
