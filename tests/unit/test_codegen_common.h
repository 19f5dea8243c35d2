// Shared body of the per-device conformance tests (vulkan, opengl, gpu): every case the device
// claims (native, common-IR or rewritten) must run and match the reference within tolerance.
#pragma once
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "rlx/conformance.h"
#include "rlx/device.h"
#include "test_util.h"  // RLX_REQUIRE

inline void expect_device_conformance(const std::string& device) {
  const rlx::DeviceInfo& d = rlx::device_info(device);
  // bootstrap.sh installs every runtime these devices need: under CI=true one that cannot execute fails.
  RLX_REQUIRE(d.can_execute(), device + ": " + std::string(rlx::device_status_name(d.status)) + " (" + d.reason + ")");
  auto t0 = std::chrono::steady_clock::now();
  auto rows = rlx::run_conformance(device, true);
  int claimed = 0, pass = 0, native = 0;
  for (auto& r : rows) {
    if (r.status == "unsupported") continue;
    ++claimed;
    native += r.path == rlx::DispatchPath::Native;
    EXPECT_EQ(r.status, "pass") << device << " " << r.op << " " << r.dtype << " err=" << r.max_err << " " << r.detail;
    pass += r.status == "pass";
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s conformance: %d/%d claimed op x dtype cases pass (%d native; %zu cases total) in %.1f s on %s\n",
              device.c_str(), pass, claimed, native, rows.size(), s, d.reason.c_str());
  EXPECT_GT(claimed, 100);
}
