#include <gtest/gtest.h>

#include "passes/passes.h"
#include "rlx/builder.h"
#include "rlx/device.h"
#include "rlx/lir.h"
#include "rlx/text.h"

using namespace rlx;

namespace {
LirProgram lower(const Graph& g, bool fuse = true) {
  return lower_to_lir(eliminate_dead_code(legalize(g, "cpu", {}).graph), fuse);
}

Graph chain() {
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, {4, 8});
  auto y = b.input("y", DType::f32, {8});
  Tensor w(DType::f32, {8, 8});
  for (int64_t i = 0; i < 64; ++i) w.set(i, 0.01 * static_cast<double>(i % 7));
  auto m = b.matmul(x, b.constant(w));  // dies in the fused chain below: in-place candidate
  auto t = b.unary(OpKind::Tanh, b.mul(b.add(m, y), y));
  auto r = b.reshape(t, {32});
  auto s = b.reduce(OpKind::ReduceSum, r, {0}, false);
  auto e = b.unary(OpKind::Exp, b.unary(OpKind::Neg, b.reshape(b.unary(OpKind::Exp, t), {2, 16})));
  b.output(s);
  b.output(e);
  return g;
}
}  // namespace

TEST(Lir, FusesChainsAndViewsReshapes) {
  LirProgram p = lower(chain());
  verify_lir(p);
  int generated = 0, reshape_kernels = 0, views = 0;
  for (auto& k : p.kernels) {
    generated += k.kind == KernelKind::Generated;
    reshape_kernels += k.kind == KernelKind::Library && k.op == OpKind::Reshape;
  }
  for (auto& b : p.buffers) views += b.kind == BufferKind::View;
  EXPECT_GE(generated, 2);
  EXPECT_EQ(reshape_kernels, 0);
  EXPECT_EQ(views, 2);
  LirProgram unfused = lower(chain(), false);
  EXPECT_GT(unfused.kernels.size(), p.kernels.size());
}

TEST(Lir, ArenaReuseAndInPlace) {
  LirProgram p = lower(chain(), false);
  verify_lir(p);
  EXPECT_LT(p.arena_bytes, p.naive_bytes);
  bool in_place = false;
  LirProgram f = lower(chain());
  for (auto& k : f.kernels) in_place |= k.in_place;
  EXPECT_TRUE(in_place);  // the add-mul-tanh chain writes over the dying matmul result
}

TEST(Lir, PrintParseRoundTrip) {
  LirProgram p = lower(chain());
  std::string text = print_lir(p);
  LirProgram q = parse_lir(text);
  verify_lir(q);
  EXPECT_EQ(print_lir(q), text);
  EXPECT_THROW(parse_lir(print_lir(p, true)), Error);  // elided constants cannot come back
  EXPECT_THROW(parse_lir("lir @x arena_bytes=0 unplanned_bytes=0 {\n  bogus\n}\n"), Error);
  EXPECT_THROW(parse_lir("lir @x arena_bytes=0 unplanned_bytes=0 {\n"), Error);
}

TEST(Lir, VerifierCatchesOverlapAndOrder) {
  LirProgram p = lower(chain(), false);
  verify_lir(p);
  // Two simultaneously live arena buffers forced onto the same bytes.
  LirProgram bad = p;
  int a = -1, b = -1;
  for (int i = 0; i < static_cast<int>(bad.buffers.size()) && b < 0; ++i) {
    if (bad.buffers[i].kind != BufferKind::Arena) continue;
    for (int j = 0; j < i; ++j) {
      auto &x = bad.buffers[i], &y = bad.buffers[j];
      if (y.kind == BufferKind::Arena && x.def <= y.last && y.def <= x.last) {
        a = j;
        b = i;
        break;
      }
    }
  }
  ASSERT_GE(b, 0);
  bad.buffers[b].offset = bad.buffers[a].offset;
  EXPECT_THROW(verify_lir(bad), Error);
  LirProgram swapped = p;
  std::swap(swapped.kernels.front(), swapped.kernels.back());
  EXPECT_THROW(verify_lir(swapped), Error);
}
