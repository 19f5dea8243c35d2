#include "unit/test_codegen_common.h"

TEST(OpenGl, ConformanceOnEveryClaimedCase) { expect_device_conformance("opengl"); }
