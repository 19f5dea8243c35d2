#include <gtest/gtest.h>

#include <set>

#include "rlx/conformance.h"

using namespace rlx;

TEST(Conformance, EveryOpHasCases) {
  std::set<OpKind> seen;
  for (auto& c : conformance_cases()) seen.insert(c.op);
  for (int i = 0; i < num_ops(); ++i) EXPECT_TRUE(seen.count(static_cast<OpKind>(i))) << op_name(static_cast<OpKind>(i));
}

TEST(Conformance, CpuMatchesReferenceForEveryOpAndDtype) {
  auto rows = run_conformance("cpu", true);
  EXPECT_GE(rows.size(), 500u);
  int pass = 0;
  for (auto& r : rows) {
    EXPECT_EQ(r.status, "pass") << r.op << " " << r.dtype << " " << r.detail << " err=" << r.max_err;
    pass += r.status == "pass";
  }
  std::printf("cpu conformance: %d/%zu op x dtype cases pass\n", pass, rows.size());
}

TEST(Conformance, CompileOnlyDevicesAreNotRun) {
  auto rows = run_conformance("metal", true);  // compile-only on Linux (vulkan may run here)
  ASSERT_FALSE(rows.empty());
  for (auto& r : rows) EXPECT_NE(r.status, "pass") << r.op;
}
