// rocm without an AMD GPU: every conformance case the device claims is lowered, rendered to HIP
// (the CUDA renderer's kernels in the HIP dialect) and built by hipcc for each offline target in
// one translation unit per target; the runtime probe reports the missing GPU.
#include <gtest/gtest.h>

#include "test_util.h"  // RLX_REQUIRE

#include <chrono>
#include <fstream>
#include <set>

#include "backends/rocm/rocm.h"
#include "rlx/conformance.h"
#include "rlx/device.h"
#include "rlx/lir.h"
#include "runtime/disk_cache.h"

using namespace rlx;

TEST(Rocm, StatusNamesTheMissingGpu) {
  const DeviceInfo& d = device_info("rocm");
  if (d.status == DeviceStatus::Available) GTEST_SKIP() << "an AMD GPU is here: " << d.reason;
  EXPECT_TRUE(d.reason.find("no AMD GPU") != std::string::npos || d.reason.find("no HIP runtime") != std::string::npos)
      << d.reason;
  EXPECT_FALSE(d.caps.has(OpKind::Linear, DType::f32)) << "no hipBLASLt: linear decomposes to dot_general";
  EXPECT_TRUE(d.caps.has(OpKind::DotGeneral, DType::f32));
}

TEST(Rocm, HipDialectHasNoPtx) {
  std::string cuda = "__device__ __forceinline__ float h2f(unsigned short h) { float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f; }\n"
                     "extern \"C\" __global__ void rlx_kernel(float* out0) { out0[0] = h2f(1); }\n";
  std::string hip = rocm::hip_from_cuda(cuda);
  EXPECT_EQ(hip.find("asm("), std::string::npos) << hip;
  EXPECT_NE(hip.find("_Float16"), std::string::npos) << hip;
  EXPECT_EQ(rocm::hip_from_cuda("__global__ void k() { asm volatile(\"mma.sync...\"); }\n"), "") << "tensor-core PTX is refused";
}

TEST(Rocm, EveryClaimedCaseBuildsForGfx90aAndGfx940) {
  RLX_REQUIRE(!rocm::hipcc_path().empty(), "hipcc (scripts/bootstrap.sh installs it)");
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> srcs;
  std::set<std::string> seen;
  int claimed = 0;
  for (auto& c : conformance_cases()) {
    Legalized l;
    try {
      l = legalize(c.graph, "rocm", {});
    } catch (const Error&) {
      continue;  // not claimed
    }
    ++claimed;
    try {
      for (auto& k : rocm::render_hip(lower_to_lir(l.graph, true)))
        if (seen.insert(k.source).second) srcs.push_back(k.source);
    } catch (const Error& e) {
      ADD_FAILURE() << op_name(c.op) << " " << dtype_name(c.dtype) << ": " << e.what();
    }
  }
  ASSERT_GT(claimed, 100);
  std::string batch = rocm::hip_batch(srcs);
  for (auto& arch : rocm::offline_targets()) {
    std::string out = cache_dir("rocm-test") + "/all_" + arch + ".hsaco";
    std::string err = rocm::hipcc_compile(batch, arch, out);
    ASSERT_EQ(err, "") << arch;
    std::ifstream f(out, std::ios::binary);
    std::string obj((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_NE(obj.find("amdgcn-amd-amdhsa--" + arch), std::string::npos) << "the bundle holds a " << arch << " code object";
    EXPECT_NE(obj.find("rlx_kernel_" + std::to_string(srcs.size() - 1)), std::string::npos) << "every entry is in it";
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("rocm: %d claimed cases, %zu distinct HIP kernels built for gfx90a + gfx940 in %.1f s\n", claimed,
              srcs.size(), s);
}
