// Before/after tests for specialize-shapes, fold-constants and eliminate-dead-code.
#include <gtest/gtest.h>

#include "passes/passes.h"
#include "rlx/builder.h"
#include "rlx/reference.h"

using namespace rlx;

TEST(GraphPasses, SpecializeBindsInputsAndDimsAttributes) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, {"batch", 6});
  auto y = b.reshape(x, {"batch", 2, 3});
  g.values[y].name = "y";
  b.output(y);
  Graph s = specialize_shapes(g, {{"batch", 4}});
  EXPECT_EQ(shape_str(s.type(s.inputs[0]).shape), "[4,6]");
  EXPECT_EQ(shape_str(s.type(s.outputs[0]).shape), "[4,2,3]");
  EXPECT_EQ(s.values[s.outputs[0]].name, "y");
  EXPECT_THROW(specialize_shapes(g, {}), Error);  // batch unbound
}

TEST(GraphPasses, FoldConstantsEvaluatesConstantSubgraphs) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, {3});
  auto c = b.add(b.scalar(2.0, DType::f32), b.scalar(3.0, DType::f32));  // foldable
  auto e = b.unary(OpKind::Exp, b.op1(OpKind::Iota, {}, {{"shape", Shape{3}}, {"dtype", DType::f32}}));
  b.output(b.mul(b.add(x, c), e));
  Graph f = eliminate_dead_code(fold_constants(g));
  int constants = 0, others = 0;
  for (auto& n : f.nodes) (n.op == OpKind::Constant ? constants : others)++;
  EXPECT_EQ(others, 2);  // add(x, 5) and mul(., exp(iota)) remain
  EXPECT_EQ(constants, 2);
  Tensor in = Tensor::from(DType::f32, {3}, std::vector<float>{1, 2, 3});
  auto want = reference_run(g, {in}), got = reference_run(f, {in});
  for (int64_t i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(static_cast<float>(got[0].get(i)), static_cast<float>(want[0].get(i)));
  // Nothing foldable reads an input: a size limit of 0 elements folds nothing.
  EXPECT_EQ(fold_constants(g, 0).nodes.size(), g.nodes.size());
}

TEST(GraphPasses, DeadCodeGoesAndNamesStay) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, {2});
  b.unary(OpKind::Exp, x);  // dead
  auto y = b.unary(OpKind::Neg, x);
  g.values[y].name = "y";
  b.output(y);
  Graph d = eliminate_dead_code(g);
  ASSERT_EQ(d.nodes.size(), 1u);
  EXPECT_EQ(d.nodes[0].op, OpKind::Neg);
  EXPECT_EQ(d.values[d.outputs[0]].name, "y");
  EXPECT_EQ(d.values[d.inputs[0]].name, "x");
}
