#include <gtest/gtest.h>

#include "rlx/builder.h"

using namespace rlx;

TEST(OpTable, NamesRoundTripAndLevels) {
  for (int i = 0; i < num_ops(); ++i) {
    auto k = static_cast<OpKind>(i);
    OpKind back;
    ASSERT_TRUE(op_by_name(op_name(k), &back)) << op_name(k);
    EXPECT_EQ(back, k);
    const auto& info = op_info(k);
    // MIR primitives have no decomposition; a HIR op has one or is native-only.
    if (info.level == Level::Mir) {
      EXPECT_EQ(info.decompose, nullptr) << op_name(k);
    }
  }
}

TEST(OpTable, GroupsTolerancesAndVjpNamesComeFromTheTable) {
  EXPECT_EQ(num_ops(), kNumOps);
  // The fusable set: MIR elementwise primitives only (cumsum keeps its input's shape but scans;
  // gelu is elementwise in meaning but HIR).
  EXPECT_TRUE(is_elementwise(OpKind::Add));
  EXPECT_TRUE(is_elementwise(OpKind::Select));
  EXPECT_TRUE(is_elementwise(OpKind::Convert));
  EXPECT_FALSE(is_elementwise(OpKind::Cumsum));
  EXPECT_EQ(op_info(OpKind::Cumsum).group, OpGroup::Scan);
  EXPECT_FALSE(is_elementwise(OpKind::Gelu));
  EXPECT_EQ(op_info(OpKind::Gelu).group, OpGroup::Elementwise);
  EXPECT_FALSE(is_elementwise(OpKind::StopGradient));
  EXPECT_EQ(op_group_name(OpGroup::Movement), "movement");
  EXPECT_EQ(op_info(OpKind::Exp).tolerance, ToleranceClass::Transcendental);
  EXPECT_EQ(op_info(OpKind::DotGeneral).tolerance, ToleranceClass::Accumulating);
  EXPECT_EQ(op_info(OpKind::Transpose).tolerance, ToleranceClass::Rounded);
  EXPECT_EQ(op_info(OpKind::Neg).vjp, "vjp_neg");
  EXPECT_EQ(op_info(OpKind::MatMul).vjp, "decomposed");
  for (int i = 0; i < num_ops(); ++i) {
    const auto& info = op_info(static_cast<OpKind>(i));
    EXPECT_FALSE(info.vjp.empty()) << info.name;
    if (info.decompose != nullptr) {  // differentiated through the decomposition, or stops it
      EXPECT_TRUE(info.vjp == "decomposed" || info.vjp == "nondiff") << info.name;
    } else {
      EXPECT_NE(info.vjp, "decomposed") << info.name;
    }
  }
}

TEST(ShapeRules, BroadcastAndSymbolic) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, {"batch", 4});
  auto y = b.input("y", DType::f32, {4});
  auto s = b.add(x, y);
  EXPECT_EQ(shape_str(g.type(s).shape), "[batch,4]");
  auto r = b.reshape(s, {"batch", 2, -1});
  EXPECT_EQ(shape_str(g.type(r).shape), "[batch,2,2]");
  EXPECT_THROW(b.add(x, b.input("z", DType::f32, {3})), Error);
  EXPECT_THROW(b.add(x, b.input("w", DType::f64, {4})), Error);
}

TEST(ShapeRules, AttentionAndMatmul) {
  Graph g;
  Builder b(g);
  auto q = b.input("q", DType::f32, {2, 8, "seq", 16});
  auto k = b.input("k", DType::f32, {2, 2, "seq", 16});
  auto o = b.attention(q, k, k, -1, "causal");
  EXPECT_EQ(shape_str(g.type(o).shape), "[2,8,seq,16]");
  auto a = b.input("a", DType::f32, {3, 1, 5, 6});
  auto c = b.input("c", DType::f32, {4, 6, 7});
  EXPECT_EQ(shape_str(g.type(b.matmul(a, c)).shape), "[3,4,5,7]");
}

// An element count that does not fit int64 is an error, not a wrapped (and later "0 B") size.
TEST(Shape, NumelOverflowIsAnError) {
  rlx::Shape ok{rlx::Dim(1 << 20), rlx::Dim(1 << 20)};
  EXPECT_EQ(rlx::numel(ok), int64_t{1} << 40);
  rlx::Shape big{rlx::Dim(int64_t{1} << 62), rlx::Dim(int64_t{1} << 62)};
  EXPECT_THROW(rlx::numel(big), rlx::Error);
}
