// The i64 -> i32 narrowing rewrite (src/dispatch/legalize.cpp) on a device without 64-bit integer
// arithmetic: exact constants are narrowed, constants outside int32 refuse the rewrite.
#include <gtest/gtest.h>

#include "rlx/builder.h"
#include "rlx/device.h"

using namespace rlx;

namespace {

// x (i64 input) + constant `vals`.
Graph add_const(std::vector<int64_t> vals) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::i64, {static_cast<int64_t>(vals.size())});
  Tensor t(DType::i64, {static_cast<int64_t>(vals.size())});
  for (size_t i = 0; i < vals.size(); ++i) t.set_int(static_cast<int64_t>(i), vals[i]);
  b.set_origin("offsets");
  auto c = b.constant(t);
  b.set_origin("shift");
  b.output(b.add(x, c));
  return g;
}

std::string legalize_error(const Graph& g, const std::string& dev) {
  try {
    legalize(g, dev, {});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Legalize, NarrowsI64ConstantsThatFitInInt32) {
  ASSERT_FALSE(device_info("vulkan").caps.has(OpKind::Add, DType::i64));
  Graph g = add_const({-2147483648LL, 7, 2147483647LL});
  Legalized l = legalize(g, "vulkan", {});
  EXPECT_NE(l.report.table().find("narrowed i64 -> i32"), std::string::npos) << l.report.table();
  bool found = false;
  for (auto& n : l.graph.nodes) {
    if (n.op != OpKind::Constant) continue;
    const Tensor& t = std::get<Tensor>(n.attrs.at("value").v);
    ASSERT_EQ(t.dtype(), DType::i32);
    EXPECT_EQ(t.get_int(0), -2147483648LL);
    EXPECT_EQ(t.get_int(1), 7);
    EXPECT_EQ(t.get_int(2), 2147483647LL);
    found = true;
  }
  EXPECT_TRUE(found);
}

TEST(Legalize, RefusesToNarrowAConstantOutsideInt32) {
  Graph g = add_const({1, int64_t{1} << 40});
  std::string e = legalize_error(g, "vulkan");
  ASSERT_FALSE(e.empty()) << "a constant of 2^40 was narrowed to i32 (truncated) instead of failing";
  EXPECT_NE(e.find("node 'offsets'"), std::string::npos) << e;
  EXPECT_NE(e.find("1099511627776"), std::string::npos) << e;
  EXPECT_NE(e.find("does not fit in int32"), std::string::npos) << e;
  EXPECT_NE(e.find("devices that could run it: "), std::string::npos) << e;
  EXPECT_NE(e.find("cpu"), std::string::npos) << e;
  EXPECT_TRUE(legalize_error(g, "cpu").empty());  // cpu has i64 arithmetic: nothing to narrow
  EXPECT_FALSE(legalize_error(add_const({-(int64_t{1} << 31) - 1}), "opengl").empty());
}

TEST(Legalize, RefusesToNarrowAnI64PadValueOutsideInt32) {
  auto pad = [](double value) {
    Graph g;
    Builder b(g);
    auto x = b.input("x", DType::i64, {3});
    b.set_origin("pad_big");
    b.output(b.op1(OpKind::Pad, {x}, {{"low", std::vector<int64_t>{1}}, {"high", std::vector<int64_t>{1}}, {"value", value}}));
    return g;
  };
  EXPECT_TRUE(legalize_error(pad(-5.0), "vulkan").empty());
  std::string e = legalize_error(pad(5e9), "vulkan");
  EXPECT_NE(e.find("node 'pad_big'"), std::string::npos) << e;
  EXPECT_NE(e.find("attribute 'value'"), std::string::npos) << e;
  EXPECT_NE(e.find("does not fit in int32"), std::string::npos) << e;
}
