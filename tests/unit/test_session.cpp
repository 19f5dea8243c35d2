#include <gtest/gtest.h>

#include <cmath>

#include "rlx/builder.h"
#include "rlx/reference.h"
#include "rlx/session.h"
#include "rlx/text.h"
#include "test_util.h"

using namespace rlx;

namespace {
std::string example(const char* name) { return std::string(RLX_SOURCE_DIR) + "/examples/" + name; }

Tensor seeded(DType dt, std::vector<int64_t> shape, int seed) { return rlx_test::sine_tensor(dt, shape, 0.37, seed); }
using rlx_test::max_abs_diff;
}  // namespace

TEST(Session, SpecializationCacheIsVisible) {
  CompiledModel m(load_graph_file(example("mlp.rlx")), {});
  auto o2 = m.run({seeded(DType::f32, {2, 8}, 1)});
  auto o3 = m.run({seeded(DType::f32, {3, 8}, 2)});
  EXPECT_EQ(m.cache_size(), 2);
  m.run({seeded(DType::f32, {2, 8}, 3)});
  EXPECT_EQ(m.cache_size(), 2);
  const auto& r = m.report({{"batch", 2}});
  bool hit = false;
  for (auto& n : r.notes) hit |= n.find("batch=2: cache hit") != std::string::npos;
  EXPECT_TRUE(hit);
  EXPECT_EQ(o3[0].shape(), (std::vector<int64_t>{3, 4}));
}

TEST(Session, MatchesReferenceOnExamples) {
  for (const char* f : {"mlp.rlx", "attention.rlx", "mixed.rlx"}) {
    Graph g = load_graph_file(example(f));
    std::vector<Tensor> in;
    for (auto i : g.inputs) {
      Shape s = g.type(i).shape;
      std::vector<int64_t> dims;
      for (auto& d : s) dims.push_back(d.is_static() ? d.v : 3);
      in.push_back(seeded(g.type(i).dtype, dims, static_cast<int>(i)));
    }
    auto want = reference_run(g, in);
    for (bool fuse : {true, false}) {
      auto got = rlx_test::run_cpu(g, in, fuse);
      ASSERT_EQ(got.size(), want.size());
      for (size_t k = 0; k < got.size(); ++k) {
        double tol = got[k].dtype() == DType::f32 ? 1e-4 : 2e-2;
        EXPECT_LE(max_abs_diff(got[k], want[k]), tol) << f << " output " << k << " fuse=" << fuse;
      }
    }
  }
}

TEST(Session, BadInputsNameTheInput) {
  CompiledModel m(load_graph_file(example("mlp.rlx")), {});
  auto expect_msg = [&](auto fn, const char* needle) {
    try {
      fn();
      FAIL() << "expected an error containing " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_msg([&] { m.run({seeded(DType::f64, {2, 8}, 0)}); }, "input 'x': expected dtype f32");
  expect_msg([&] { m.run({seeded(DType::f32, {2, 9}, 0)}); }, "input 'x': expected shape [batch,8]");
  expect_msg([&] { m.run(std::vector<Tensor>{}); }, "takes 1 inputs");
  expect_msg([&] { m.run(std::map<std::string, Tensor>{}); }, "missing input 'x'");
  expect_msg([&] { m.run(std::map<std::string, Tensor>{{"x", seeded(DType::f32, {1, 8}, 0)}, {"y", Tensor()}}); },
             "unknown input 'y'");
}

TEST(Session, UnavailableDeviceCompilesButRefusesToRun) {
  CompileOptions o;
  o.device = "cuda";
  CompiledModel m(load_graph_file(example("mlp.rlx")), o);
  EXPECT_FALSE(m.report({{"batch", 2}}).rows.empty());
  try {
    m.run({seeded(DType::f32, {2, 8}, 0)});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot execute on this machine"), std::string::npos) << e.what();
  }
  CompileOptions nope;
  nope.device = "nope";
  EXPECT_THROW(CompiledModel(load_graph_file(example("mlp.rlx")), nope), Error);
}

TEST(Session, DumpsEveryLevel) {
  CompiledModel m(load_graph_file(example("mlp.rlx")), {});
  EXPECT_NE(m.dump("hir", {{"batch", 2}}).find("linear("), std::string::npos);
  std::string mir = m.dump("mir", {{"batch", 2}});
  EXPECT_EQ(parse_graph(mir).nodes.size() > 0, true);
  EXPECT_NE(m.dump("lir", {{"batch", 2}}).find("lir @"), std::string::npos);
  EXPECT_THROW(m.dump("xir"), Error);
}
