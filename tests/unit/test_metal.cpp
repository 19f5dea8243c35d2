// metal without an Apple GPU: `rlx ops --device metal` with RLX_METAL_SHIM=1 compiles every claimed
// case's rendered MSL as C++ against the Metal shim and runs it on the host CPU against the
// reference (src/backends/metal/msl_shim_api.cpp). A child process, so the switch does not reach
// this process's other tests (which check that metal does not execute without it).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

std::string run(const std::string& args, int* code) {
  std::string cmd = std::string("RLX_METAL_SHIM=1 ") + RLX_BIN + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  *code = WEXITSTATUS(pclose(p));
  return out;
}

}  // namespace

TEST(Metal, ShimConformanceOnEveryClaimedCase) {
  int code = 0;
  std::string out = run("ops --device metal --quiet", &code);
  int passed = -1, failed = -1;
  size_t at = out.find("conformance on metal: ");
  ASSERT_NE(at, std::string::npos) << out.substr(0, 4000);
  ASSERT_EQ(std::sscanf(out.c_str() + at, "conformance on metal: %d passed, %d failed", &passed, &failed), 2);
  // a device that could not execute would pass nothing; every claimed case must pass
  EXPECT_EQ(failed, 0) << out.substr(0, 4000);
  EXPECT_GT(passed, 100) << out.substr(0, 4000);
  std::printf("metal (MSL as C++ against the Metal shim, host CPU): %d claimed op x dtype cases pass\n", passed);
}

TEST(Metal, DevicesSaysNoAppleGpuRanThem) {
  int code = 0;
  std::string out = run("devices", &code);
  EXPECT_NE(out.find("no Apple GPU"), std::string::npos) << out;
}
