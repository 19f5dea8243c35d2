#include <gtest/gtest.h>

#include <thread>

#include "rlx/builder.h"
#include "rlx/conformance.h"
#include "rlx/device.h"
#include "passes/passes.h"
#include "rlx/text.h"

using namespace rlx;

namespace {
std::string example(const char* name) { return std::string(RLX_SOURCE_DIR) + "/examples/" + name; }

int count_path(const DispatchReport& r, DispatchPath p) {
  int n = 0;
  for (auto& row : r.rows) n += row.path == p ? row.count : 0;
  return n;
}

Graph mlp(DType dt) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", dt, {2, 8});
  auto w = b.input("w", dt, {4, 8});
  auto h = b.gelu(b.linear(x, w));
  b.output(b.softmax(h));
  return g;
}
}  // namespace

TEST(Dispatch, SixteenTargetsCpuAvailable) {
  ASSERT_EQ(device_names().size(), 16u);
  EXPECT_TRUE(device_info("cpu").can_execute());
  for (auto& n : device_names()) EXPECT_FALSE(device_info(n).reason.empty()) << n;
  EXPECT_THROW(device_info("quantum"), Error);
}

// Threads asking for every device at once (each entry has its own
// once_flag) all get the one entry built per name; a failed lookup can be repeated.
TEST(Dispatch, DeviceInfoFromManyThreadsBuildsEachEntryOnce) {
  const std::vector<std::string>& names = device_names();
  std::vector<std::vector<const DeviceInfo*>> seen(6, std::vector<const DeviceInfo*>(names.size()));
  std::vector<std::thread> ts;
  for (size_t t = 0; t < seen.size(); ++t)
    ts.emplace_back([&, t] {
      for (size_t k = 0; k < names.size(); ++k) {
        size_t i = t % 2 ? names.size() - 1 - k : k;  // half the threads go backwards
        seen[t][i] = &device_info(names[i]);
      }
    });
  for (auto& th : ts) th.join();
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(seen[0][i]->name, names[i]);
    for (size_t t = 1; t < seen.size(); ++t) EXPECT_EQ(seen[t][i], seen[0][i]) << names[i];
    EXPECT_EQ(&device_info(names[i]), seen[0][i]);
  }
  EXPECT_THROW(device_info("quantum"), Error);
  EXPECT_THROW(device_info("quantum"), Error);
}

TEST(Dispatch, AllThreePathsOnCpu) {
  Graph g = specialize_shapes(load_graph_file(example("mixed.rlx")), {{"batch", 2}});
  Legalized l = legalize(g, "cpu", {});
  EXPECT_GT(count_path(l.report, DispatchPath::Native), 0);
  EXPECT_GT(count_path(l.report, DispatchPath::CommonIR), 0);
  EXPECT_GT(count_path(l.report, DispatchPath::Rewritten), 0);
  EXPECT_NE(l.report.table().find("promoted f16 -> f32"), std::string::npos);
  // Everything left is native on cpu: a MIR graph plus natively claimed HIR ops.
  for (auto& n : l.graph.nodes) {
    std::vector<ValueType> in;
    for (auto v : n.inputs) in.push_back(l.graph.type(v));
    EXPECT_TRUE(device_info("cpu").caps.has(n.op, in.empty() ? l.graph.type(n.outputs[0]).dtype : in[0].dtype))
        << op_name(n.op);
  }
  verify_graph(l.graph);
}

TEST(Dispatch, ForcedPaths) {
  Graph g = mlp(DType::f32);
  Legalized native = legalize(g, "cpu", {});
  bool linear_native = false;
  for (auto& n : native.graph.nodes) linear_native |= n.op == OpKind::Linear;
  EXPECT_TRUE(linear_native);
  DispatchOptions o;
  o.force_common.insert("linear");
  Legalized common = legalize(g, "cpu", o);
  for (auto& n : common.graph.nodes) EXPECT_NE(n.op, OpKind::Linear);
  DispatchOptions bad;
  bad.force_native.insert("gelu");
  try {
    legalize(g, "cpu", bad);
    FAIL() << "forcing a native gelu on cpu must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--force-native"), std::string::npos) << e.what();
  }
  DispatchOptions unknown;
  unknown.force_common.insert("not_an_op");
  EXPECT_THROW(legalize(g, "cpu", unknown), Error);
}

TEST(Dispatch, UnsupportedNamesNodeDeviceAndAlternatives) {
  Graph g = load_graph_file(example("f64_attention.rlx"));
  try {
    legalize(g, "webgpu", {});
    FAIL() << "webgpu has no f64";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("self_attn"), std::string::npos) << m;
    EXPECT_NE(m.find("attention"), std::string::npos) << m;
    EXPECT_NE(m.find("f64[1,2,4,8]"), std::string::npos) << m;
    EXPECT_NE(m.find("webgpu"), std::string::npos) << m;
    EXPECT_NE(m.find("tried:"), std::string::npos) << m;
    EXPECT_NE(m.find("could run it: cpu"), std::string::npos) << m;
    // the hint reads the static tables: OpenCL's f64 depends on the driver, said as such
    EXPECT_NE(m.find("gpu (if its driver supports f64)"), std::string::npos) << m;
    EXPECT_EQ(m.find("webgpu,"), std::string::npos) << m;  // not the failing device itself
  }
}

// device_caps (static tables, no probe) claims what device_info (probed) claims, and
// more only in the dtypes it says a driver decides.
TEST(Dispatch, StaticCapsMatchProbedCaps) {
  for (auto& d : device_names()) {
    DTypeSet driver;
    const CapabilitySet& st = device_caps(d, &driver);
    const CapabilitySet& pr = device_info(d).caps;
    EXPECT_EQ(pr.storage.minus(st.storage).bits, 0u) << d;
    EXPECT_EQ(st.storage.minus(pr.storage).minus(driver).bits, 0u) << d << " storage " << st.storage.str();
    for (auto& [k, s] : pr.ops) {
      ASSERT_TRUE(st.ops.count(k)) << d << " " << op_name(k);
      EXPECT_EQ(s.minus(st.ops.at(k)).bits, 0u) << d << " " << op_name(k);
    }
    for (auto& [k, s] : st.ops) {
      DTypeSet p = pr.ops.count(k) ? pr.ops.at(k) : DTypeSet{};
      EXPECT_EQ(s.minus(p).minus(driver).bits, 0u) << d << " " << op_name(k) << " " << s.str() << " vs " << p.str();
    }
    EXPECT_EQ(driver.bits, d == "gpu" ? DTypeSet::of({DType::f64}).bits : 0u) << d;
  }
  EXPECT_THROW(device_caps("nope"), Error);
}

TEST(Dispatch, IntegerWideningRewrite) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::i8, {2, 3});
  auto y = b.input("y", DType::i8, {3, 2});
  b.output(b.matmul(x, y));
  Legalized l = legalize(g, "cpu", {});
  EXPECT_NE(l.report.table().find("promoted i8 -> i32"), std::string::npos) << l.report.table();
}

TEST(Dispatch, EveryTargetLegalizesOrExplains) {
  Graph g = mlp(DType::f32);
  int ok = 0;
  for (auto& d : device_names()) {
    try {
      Legalized l = legalize(g, d, {});
      verify_graph(l.graph);
      ++ok;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cannot legalize"), std::string::npos) << d << ": " << e.what();
    }
  }
  EXPECT_GE(ok, 13);  // fpga has no f32; everything else with f32 runs an MLP
  EXPECT_THROW(legalize(g, "fpga", {}), Error);
}

// Legalizing every conformance case for every device terminates with a verdict (a convert of a dtype
// the device lacks once recursed forever through its own promotion rewrite).
TEST(Dispatch, EveryDeviceLegalizesEveryCaseWithAVerdict) {
  for (const auto& d : rlx::device_names()) {
    auto rows = rlx::run_conformance(d, /*execute=*/false);
    EXPECT_FALSE(rows.empty()) << d;
  }
}
