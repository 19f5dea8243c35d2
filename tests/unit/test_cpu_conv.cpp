// The cpu conv and reduce_window kernels (conv.cpp, pool.cpp) against the reference interpreter:
// a grid of kernel sizes, strides, pads, dilations, groups and batches called straight through
// find_kernel; shapes picked to reach each plan (direct, im2col columns, rows, K and pixel blocks,
// channel split, 1x1, 1-D); compiled models with constant weights (packed at build time) and the
// conv epilogue; pooling with pads; and the training step's conv gradients.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>

#include "autodiff/autodiff.h"
#include "backends/cpu/conv.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/kernels.h"
#include "rlx/builder.h"
#include "rlx/reference.h"
#include "rlx/session.h"
#include "test_util.h"

using namespace rlx;
using rlx_test::max_rel_diff;
using Ints = std::vector<int64_t>;

namespace {

Tensor uniform(const Ints& shape, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> d(-1.0, 1.0);
  Tensor t(DType::f32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, d(g));
  return t;
}

struct ConvCase {
  int64_t N, C, O, groups;
  Ints x_sp, k_sp, strides, pads, dil;  // spatial dims; pads = begins then ends
  std::string str() const {
    auto j = [](const Ints& v) {
      std::string s;
      for (auto e : v) s += (s.empty() ? "" : ",") + std::to_string(e);
      return "[" + s + "]";
    };
    return "N=" + std::to_string(N) + " C=" + std::to_string(C) + " O=" + std::to_string(O) + " g=" +
           std::to_string(groups) + " x=" + j(x_sp) + " k=" + j(k_sp) + " s=" + j(strides) + " p=" + j(pads) +
           " d=" + j(dil);
  }
  // Output spatial dims, or empty when the dilated window does not fit.
  Ints out_sp() const {
    Ints o;
    const size_t sp = x_sp.size();
    for (size_t i = 0; i < sp; ++i) {
      int64_t span = x_sp[i] + pads[i] + pads[sp + i] - (dil[i] * (k_sp[i] - 1) + 1);
      if (span < 0) return {};
      o.push_back(span / strides[i] + 1);
    }
    return o;
  }
  Node node() const {
    return Node{OpKind::Conv, {}, {}, {{"strides", strides}, {"pads", pads}, {"dilations", dil}, {"groups", groups}}, ""};
  }
};

// Float accumulation over K = C/groups * kernel taps: the bound grows like sqrt(K).
double conv_tol(const ConvCase& c) {
  double k = double(c.C / c.groups);
  for (auto e : c.k_sp) k *= double(e);
  return std::max(2e-5, 1e-6 * std::sqrt(k));
}

// Runs the cpu conv kernel on c and returns its relative error against the reference.
double conv_error(const ConvCase& c, unsigned seed) {
  Ints xs{c.N, c.C}, ws{c.O, c.C / c.groups}, ys{c.N, c.O};
  Ints osp = c.out_sp();
  xs.insert(xs.end(), c.x_sp.begin(), c.x_sp.end());
  ws.insert(ws.end(), c.k_sp.begin(), c.k_sp.end());
  ys.insert(ys.end(), osp.begin(), osp.end());
  std::vector<Tensor> in{uniform(xs, seed), uniform(ws, seed + 1)};
  Node n = c.node();
  auto want = reference_eval(n, in, {ValueType{DType::f32, to_shape(ys)}});
  cpu::KernelFn fn = cpu::find_kernel(OpKind::Conv, DType::f32);
  EXPECT_NE(fn, nullptr);
  if (!fn) return std::numeric_limits<double>::infinity();
  std::vector<Tensor> out{Tensor(DType::f32, ys)};
  for (int64_t i = 0; i < out[0].numel(); ++i) out[0].set(i, std::nan(""));  // every element must be written
  fn(n, in, out);
  return max_rel_diff(out[0], want[0]);
}

}  // namespace

TEST(CpuConv, KernelMatchesReferenceGrid) {
  int cases = 0;
  unsigned seed = 1;
  for (int64_t k : {1, 3, 5, 7})
    for (int64_t s : {1, 2})
      for (int pad_kind = 0; pad_kind < 3; ++pad_kind)
        for (int64_t d : {1, 2})
          for (int gk = 0; gk < 3; ++gk)
            for (int64_t N : {1, 3}) {
              ConvCase c;
              c.N = N;
              c.C = gk == 2 ? 5 : 4;  // depthwise: 5 channels, 2 outputs each
              c.groups = gk == 0 ? 1 : gk == 1 ? 2 : 5;
              c.O = gk == 2 ? 10 : 6;
              c.x_sp = {11, 13};
              c.k_sp = {k, gk == 1 && k > 1 ? k - 2 : k};  // square and non-square kernels
              c.strides = {s, pad_kind == 2 ? 1 : s};
              c.pads = pad_kind == 0 ? Ints{0, 0, 0, 0} : pad_kind == 1 ? Ints{1, 1, 1, 1} : Ints{2, 0, 1, 3};
              c.dil = {d, d == 2 && k > 1 ? 2 : 1};
              if (c.out_sp().empty()) continue;
              ++cases;
              EXPECT_LE(conv_error(c, seed++), conv_tol(c)) << c.str();
            }
  EXPECT_GT(cases, 200);
}

TEST(CpuConv, PlansAndBlocking) {
  const ConvCase cases[] = {
      // 1x1 stride 1 unpadded (the input packed in place), several images and groups
      {3, 6, 8, 1, {9, 7}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}},
      {2, 6, 9, 3, {5, 11}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}},
      // 1x1 stride 2 (a ResNet shortcut)
      {1, 16, 24, 1, {14, 14}, {1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}},
      // few output pixels, many channels: the rows plan, one and several K blocks
      {1, 40, 64, 1, {7, 7}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      {2, 320, 48, 1, {7, 7}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      {1, 12, 32, 2, {3, 3}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      // the weight-gradient shape of a strided conv: large kernel, 3x3 output
      {2, 24, 16, 1, {14, 14}, {7, 7}, {1, 1}, {1, 1, 1, 1}, {2, 2}},
      // columns plan with K blocks (K = 256 * 9) and several pixel blocks (P = 6400)
      {1, 256, 16, 1, {10, 10}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      {1, 3, 8, 1, {80, 80}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      // 16 output pixels, 48 channels, one image: the output channels split over threads
      {1, 5, 48, 1, {4, 4}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}},
      // first layer of a ResNet (7x7 stride 2 pad 3) at a small size; C = 1 (direct plan)
      {1, 3, 8, 1, {33, 31}, {7, 7}, {2, 2}, {3, 3, 3, 3}, {1, 1}},
      {2, 1, 8, 1, {28, 28}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},
      // depthwise with stride 3 and a wide row (phase-split input), and channel multiplier 3
      {1, 7, 7, 7, {9, 40}, {3, 3}, {3, 3}, {1, 1, 1, 1}, {1, 1}},
      {2, 4, 12, 4, {10, 10}, {5, 3}, {2, 1}, {2, 1, 2, 1}, {1, 2}},
      // 1-D convs
      {2, 6, 10, 1, {31}, {5}, {2}, {2, 1}, {1}},
      {1, 4, 4, 4, {17}, {3}, {1}, {1, 1}, {3}},
      {3, 6, 6, 1, {9}, {1}, {1}, {0, 0}, {1}},
  };
  // Each case once with the Winograd plan allowed and once with it off (the im2col/rows plans on
  // the 3x3 stride-1 shapes it would take).
  for (bool wino : {true, false}) {
    const bool was = cpu::conv_set_winograd(wino);
    unsigned seed = 100;
    for (const ConvCase& c : cases) EXPECT_LE(conv_error(c, seed++), conv_tol(c)) << c.str() << " winograd " << wino;
    cpu::conv_set_winograd(was);
  }
}

namespace {

std::string plan_of(const ConvCase& c) {
  Ints xs{c.N, c.C}, ws{c.O, c.C / c.groups}, ys{c.N, c.O}, osp = c.out_sp();
  xs.insert(xs.end(), c.x_sp.begin(), c.x_sp.end());
  ws.insert(ws.end(), c.k_sp.begin(), c.k_sp.end());
  ys.insert(ys.end(), osp.begin(), osp.end());
  return cpu::conv_plan_name(c.node(), xs, ws, ys);
}

}  // namespace

// The Winograd F(2x2, 3x3) plan (conv_winograd.cpp) against the reference: odd and even map sizes
// (partial tiles at the right and bottom edges), pads 0-2 and asymmetric ones, output channels that
// are not a multiple of the micro-kernel's rows, several tile blocks, channel groups and M blocks.
TEST(CpuConv, WinogradMatchesReference) {
  const bool avx2 = cpu::cpu_isa() >= cpu::CpuIsa::Avx2;
  int cases = 0;
  unsigned seed = 300;
  for (int co = 0; co < 2; ++co)  // (C, O) = (32, 70), (37, 16)
    for (Ints sp : {Ints{14, 13}, Ints{15, 18}})
      for (Ints pads : {Ints{0, 0, 0, 0}, Ints{1, 1, 1, 1}, Ints{2, 0, 1, 2}}) {
        ConvCase c{1 + co, co ? 37 : 32, co ? 16 : 70, 1, sp, {3, 3}, {1, 1}, pads, {1, 1}};
        if (c.out_sp().empty() || c.out_sp()[1] < 13) continue;
        EXPECT_EQ(plan_of(c), avx2 ? "winograd" : "cols") << c.str();
        EXPECT_LE(conv_error(c, seed++), 2 * conv_tol(c)) << c.str();
        ++cases;
      }
  EXPECT_GE(cases, 8);
  // Several tile blocks (C = 256: ~160 tiles a block) and output channel groups; many tiles per
  // block with M blocks of fewer channels than the item's (C = 32, a 60x61 map: ~960 tiles a block).
  for (const ConvCase& c : {ConvCase{1, 256, 16, 1, {26, 30}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
                            ConvCase{1, 32, 24, 1, {60, 61}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
                            ConvCase{3, 64, 24, 1, {14, 14}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}}}) {
    EXPECT_EQ(plan_of(c), avx2 ? "winograd" : "cols") << c.str();
    EXPECT_LE(conv_error(c, seed++), 2 * conv_tol(c)) << c.str();
  }
  // What it leaves to the other plans: strides, dilations, groups, other kernel sizes, few channels,
  // narrow maps (7x7: 4 tiles a row, half of each 8-tile vector would be padding).
  EXPECT_NE(plan_of({1, 32, 32, 1, {28, 28}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}}), "winograd");
  EXPECT_NE(plan_of({1, 32, 32, 1, {18, 18}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {2, 2}}), "winograd");
  EXPECT_NE(plan_of({1, 64, 64, 2, {14, 14}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}}), "winograd");
  EXPECT_NE(plan_of({1, 32, 32, 1, {14, 14}, {5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}}), "winograd");
  EXPECT_NE(plan_of({1, 16, 64, 1, {14, 14}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}}), "winograd");
  EXPECT_NE(plan_of({1, 64, 64, 1, {7, 7}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}}), "winograd");
  const bool was = cpu::conv_set_winograd(false);
  EXPECT_NE(plan_of({1, 32, 32, 1, {14, 14}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}}), "winograd");
  cpu::conv_set_winograd(was);
}

TEST(CpuConv, ThreeDimensionalFallsBackToGenericAndMatches) {
  ConvCase c{1, 2, 3, 1, {4, 5, 3}, {2, 3, 1}, {1, 2, 1}, {0, 1, 0, 1, 0, 1}, {1, 1, 2}};
  EXPECT_LE(conv_error(c, 7), conv_tol(c)) << c.str();
}

namespace {

// conv(x, W) + bias, then an ONNX-style BatchNorm and ReLU, with W (and the bias) constants or inputs.
Graph conv_bn_relu(const ConvCase& c, bool const_w, bool residual) {
  Graph g;
  Builder b(g);
  Ints xs{c.N, c.C}, ws{c.O, c.C / c.groups}, osp = c.out_sp();
  xs.insert(xs.end(), c.x_sp.begin(), c.x_sp.end());
  ws.insert(ws.end(), c.k_sp.begin(), c.k_sp.end());
  auto x = b.input("x", DType::f32, to_shape(xs));
  auto w = const_w ? b.constant(uniform(ws, 3)) : b.input("w", DType::f32, to_shape(ws));
  auto y = b.op1(OpKind::Conv, {x, w}, {{"strides", c.strides}, {"pads", c.pads}, {"dilations", c.dil}, {"groups", c.groups}});
  Ints pc(xs.size(), 1);
  pc[1] = c.O;
  auto chan = [&](unsigned seed, double lo) {
    Tensor t = uniform({c.O}, seed);
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, lo + std::abs(t.get(i)));
    return b.reshape(b.constant(t), to_shape(pc));
  };
  y = b.add(y, chan(4, -0.5));
  y = b.mul(b.sub(y, chan(5, -0.2)), chan(6, 0.5));
  y = b.add(b.mul(y, chan(7, 0.5)), chan(8, -0.3));
  if (residual) {
    Ints ys{c.N, c.O};
    ys.insert(ys.end(), osp.begin(), osp.end());
    y = b.add(y, b.input("r", DType::f32, to_shape(ys)));
  }
  b.output(b.max(y, b.scalar(0, DType::f32)));
  return g;
}

}  // namespace

TEST(CpuConv, CompiledModelsMatchReference) {
  const ConvCase cases[] = {
      {2, 8, 16, 1, {9, 9}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},     // columns
      {1, 64, 96, 1, {7, 7}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},    // rows: weight packed at build time
      {3, 24, 40, 2, {5, 5}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}},    // rows, 1x1, groups
      {1, 16, 32, 1, {12, 12}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}},  // 1x1 columns
      {2, 6, 6, 6, {11, 11}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},    // depthwise
      {2, 32, 40, 1, {14, 15}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},  // winograd (AVX2 hosts)
  };
  for (const ConvCase& c : cases)
    for (bool const_w : {true, false})
      for (bool residual : {false, true}) {
        Graph g = conv_bn_relu(c, const_w, residual);
        Ints xs{c.N, c.C}, ws{c.O, c.C / c.groups}, ys{c.N, c.O}, osp = c.out_sp();
        xs.insert(xs.end(), c.x_sp.begin(), c.x_sp.end());
        ws.insert(ws.end(), c.k_sp.begin(), c.k_sp.end());
        ys.insert(ys.end(), osp.begin(), osp.end());
        std::vector<Tensor> in{uniform(xs, 11)};
        in[0].set(3, std::nan(""));  // a NaN reaches the ReLU epilogue and must stay NaN
        if (!const_w) in.push_back(uniform(ws, 12));
        if (residual) in.push_back(uniform(ys, 13));
        auto want = reference_run(g, in);
        rlx_test::ScopedEnv profile("RLX_PROFILE", "1");
        CompiledModel cm(g, CompileOptions{});
        cm.run(in);
        auto got = cm.run(in);  // second run: prepared arguments, same arena
        EXPECT_LE(max_rel_diff(got[0], want[0]), 2e-5) << c.str() << " const_w=" << const_w << " residual=" << residual;
        const std::string prof = cm.profile();
        EXPECT_NE(prof.find(residual ? "conv+affine+residual+max" : "conv+affine+max"), std::string::npos) << prof;
        EXPECT_EQ(prof.find("fused["), std::string::npos) << "the BatchNorm/ReLU region should be in the conv\n" << prof;
        EXPECT_NE(prof.find("[" + plan_of(c) + "]"), std::string::npos) << "the conv's plan in its profile row\n" << prof;
      }
}

namespace {

// conv(x, W) followed by one elementwise tail `tail(b, y, r)`; outputs the tail (and y when `keep_y`).
template <class Tail>
Graph conv_then(Tail tail, bool keep_y) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, Shape{2, 6, 9, 9});
  auto r = b.input("r", DType::f32, Shape{2, 8, 9, 9});
  auto w = b.constant(uniform({8, 6, 3, 3}, 21));
  auto y = b.op1(OpKind::Conv, {x, w}, {{"pads", Ints{1, 1, 1, 1}}});
  b.output(tail(b, y, r));
  if (keep_y) b.output(y);
  return g;
}

}  // namespace

TEST(CpuConv, EpilogueFormsMatchReference) {
  auto chan = [](Builder& b, unsigned seed) { return b.reshape(b.constant(uniform({8}, seed)), Shape{1, 8, 1, 1}); };
  auto scalar = [](Builder& b, double v) { return b.scalar(v, DType::f32); };
  struct Case {
    const char* name;
    std::function<ValueId(Builder&, ValueId, ValueId)> tail;
    const char* label;  // the fused profile label, or null: must stay unfused
    bool keep_y = false;
  };
  std::vector<Case> cases = {
      {"relu6", [&](Builder& b, ValueId y, ValueId) {
         return b.op1(OpKind::Min, {b.max(b.add(b.mul(y, chan(b, 1)), chan(b, 2)), scalar(b, 0)), scalar(b, 0.5)});
       }, "conv+affine+clamp"},
      {"min then max, lo > hi", [&](Builder& b, ValueId y, ValueId) {
         return b.max(b.op1(OpKind::Min, {y, scalar(b, -0.25)}), scalar(b, 0.25));
       }, "conv+affine+clamp"},
      {"scaled residual, divide, negate", [&](Builder& b, ValueId y, ValueId r) {
         return b.op1(OpKind::Neg, {b.mul(b.add(b.div(y, chan(b, 3)), r), chan(b, 4))});
       }, "conv+affine+residual"},
      {"constant minus conv", [&](Builder& b, ValueId y, ValueId) { return b.sub(chan(b, 5), b.mul(y, scalar(b, 2))); },
       "conv+affine"},
      {"NaN bound: the region runs as it was", [&](Builder& b, ValueId y, ValueId) {
         return b.max(y, scalar(b, std::nan("")));
       }, "conv+affine+max"},
      {"exp is not affine", [&](Builder& b, ValueId y, ValueId) { return b.op1(OpKind::Exp, {b.mul(y, scalar(b, 0.1))}); },
       nullptr},
      {"square is not affine", [&](Builder& b, ValueId y, ValueId) { return b.mul(y, y); }, nullptr},
      {"conv output also read elsewhere", [&](Builder& b, ValueId y, ValueId) { return b.max(y, scalar(b, 0)); }, nullptr,
       true},
  };
  for (const Case& c : cases) {
    Graph g = conv_then(c.tail, c.keep_y);
    std::vector<Tensor> in{uniform({2, 6, 9, 9}, 22), uniform({2, 8, 9, 9}, 23)};
    auto want = reference_run(g, in);
    rlx_test::ScopedEnv profile("RLX_PROFILE", "1");
    CompiledModel cm(g, CompileOptions{});
    auto got = cm.run(in);
    ASSERT_EQ(got.size(), want.size()) << c.name;
    for (size_t i = 0; i < got.size(); ++i) EXPECT_LE(max_rel_diff(got[i], want[i]), 2e-5) << c.name << " output " << i;
    const std::string prof = cm.profile();
    if (c.label)
      EXPECT_NE(prof.find(std::string(c.label) + " [cols]\n"), std::string::npos) << c.name << "\n" << prof;
    else
      EXPECT_EQ(prof.find("conv+"), std::string::npos) << c.name << "\n" << prof;
  }
}

namespace {

double pool_error(const std::string& kind, const Ints& xs, const Ints& win, const Ints& st, const Ints& pads,
                  unsigned seed, bool with_nan) {
  Tensor x = uniform(xs, seed);
  if (with_nan) x.set(x.numel() / 2, std::nan(""));
  Node n{OpKind::ReduceWindow, {}, {}, {{"kind", kind}, {"window", win}, {"strides", st}, {"pads", pads}}, ""};
  const size_t r = xs.size();
  Ints ys;
  for (size_t d = 0; d < r; ++d) ys.push_back((xs[d] + pads[d] + pads[r + d] - win[d]) / st[d] + 1);
  auto want = reference_eval(n, {x}, {ValueType{DType::f32, to_shape(ys)}});
  cpu::KernelFn fn = cpu::find_kernel(OpKind::ReduceWindow, DType::f32);
  EXPECT_NE(fn, nullptr);
  if (!fn) return std::numeric_limits<double>::infinity();
  std::vector<Tensor> out{Tensor(DType::f32, ys)};
  for (int64_t i = 0; i < out[0].numel(); ++i) out[0].set(i, 12345.0);
  fn(n, {x}, out);
  return max_rel_diff(out[0], want[0]);
}

}  // namespace

TEST(CpuConv, PoolKernelMatchesReference) {
  unsigned seed = 200;
  for (const char* kind : {"max", "sum", "min"})
    for (int64_t k : {1, 2, 3, 5})
      for (int64_t s : {1, 2, 3})
        for (int pk = 0; pk < 3; ++pk)
          for (int64_t N : {1, 3}) {
            Ints pads = pk == 0 ? Ints{0, 0, 0, 0, 0, 0, 0, 0} : pk == 1 ? Ints{0, 0, 1, 1, 0, 0, 1, 1}
                                                                         : Ints{0, 0, 2, 0, 0, 0, 0, 3};
            if (pads[2] >= k || pads[3] >= k) pads = {0, 0, 0, 0, 0, 0, 0, 0};  // a window of only padding is allowed but rare
            Ints xs{N, 3, 12, 9};
            EXPECT_LE(pool_error(kind, xs, {1, 1, k, k + (k > 1)}, {1, 1, s, s}, pads, seed++, false), 1e-6)
                << kind << " k=" << k << " s=" << s << " pads=" << pk << " N=" << N;
          }
  // NaN propagates through max/min; windows made only of padding; 1-D windows on a rank-3 input;
  // a window over a leading dim takes the generic kernel.
  EXPECT_LE(pool_error("max", {1, 2, 7, 7}, {1, 1, 3, 3}, {1, 1, 2, 2}, {0, 0, 1, 1, 0, 0, 1, 1}, 1, true), 0);
  EXPECT_LE(pool_error("min", {1, 2, 7, 7}, {1, 1, 3, 3}, {1, 1, 1, 1}, {0, 0, 1, 1, 0, 0, 1, 1}, 2, true), 0);
  EXPECT_LE(pool_error("max", {1, 1, 4, 4}, {1, 1, 2, 2}, {1, 1, 3, 3}, {0, 0, 0, 0, 0, 0, 3, 3}, 3, false), 0);
  EXPECT_LE(pool_error("sum", {2, 3, 20}, {1, 1, 4}, {1, 1, 3}, {0, 0, 1, 0, 0, 2}, 4, false), 1e-6);
  EXPECT_LE(pool_error("max", {4, 3, 5, 5}, {2, 1, 3, 3}, {2, 1, 1, 1}, {0, 0, 1, 1, 0, 0, 1, 1}, 5, false), 0);
  // Rows wider than 64 (the separable form rather than the flat one), with pads and strides.
  for (const char* kind : {"max", "sum"})
    for (int64_t st : {1, 2, 3})
      EXPECT_LE(pool_error(kind, {2, 3, 9, 77}, {1, 1, 3, 4}, {1, 1, st, st}, {0, 0, 1, 2, 0, 0, 1, 1}, 9, true), 1e-6)
          << kind << " wide, stride " << st;
  // One windowed dim before the last two (LRN's sum over channels), and a rank-1 window.
  EXPECT_LE(pool_error("sum", {2, 7, 5, 6}, {1, 5, 1, 1}, {1, 1, 1, 1}, {0, 2, 0, 0, 0, 2, 0, 0}, 6, false), 1e-6);
  EXPECT_LE(pool_error("max", {3, 9, 4}, {1, 3, 1}, {1, 2, 1}, {0, 1, 0, 0, 0, 0}, 7, true), 0);
  EXPECT_LE(pool_error("min", {11}, {4}, {3}, {1, 2}, 8, false), 0);
}

TEST(CpuConv, LrnAndConcatLayersMatchReference) {
  // What LRN and Concat import to: reduce_window over channels, x^beta in a fused region, and
  // concatenate along channels (and along the last dim).
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, Shape{2, 6, 5, 7});
  auto sq = b.mul(x, x);
  auto s = b.op1(OpKind::ReduceWindow, {sq},
                 {{"kind", std::string("sum")}, {"window", Ints{1, 5, 1, 1}}, {"strides", Ints{1, 1, 1, 1}},
                  {"pads", Ints{0, 2, 0, 0, 0, 2, 0, 0}}});
  auto den = b.op1(OpKind::Pow, {b.add(b.mul(s, b.scalar(1e-4 / 5, DType::f32)), b.scalar(1, DType::f32)),
                                 b.scalar(0.75, DType::f32)});
  auto lrn = b.div(x, den);
  b.output(b.op1(OpKind::Concatenate, {lrn, x, sq}, {{"axis", int64_t{1}}}));
  b.output(b.op1(OpKind::Concatenate, {x, lrn}, {{"axis", int64_t{-1}}}));
  std::vector<Tensor> in{uniform({2, 6, 5, 7}, 50)};
  auto want = reference_run(g, in);
  CompiledModel cm(g, CompileOptions{});
  auto got = cm.run(in);
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_LE(max_rel_diff(got[i], want[i]), 1e-6) << "output " << i;
  // The fused pow over a wide range of bases and exponents, with the special cases in every chunk.
  Graph pg;
  Builder pb(pg);
  auto a = pb.input("a", DType::f32, Shape{4096}), e = pb.input("e", DType::f32, Shape{4096});
  pb.output(pb.op1(OpKind::Pow, {pb.mul(a, pb.scalar(1, DType::f32)), e}));
  Tensor av(DType::f32, {4096}), ev(DType::f32, {4096});
  std::mt19937 rng(3);
  for (int64_t i = 0; i < 4096; ++i) {
    // mostly |e ln a| <= 1 (the fast lanes), some chunks far outside (std::pow)
    av.set(i, std::exp(std::uniform_real_distribution<double>(i < 3000 ? -1.5 : -20, i < 3000 ? 1.5 : 20)(rng)));
    ev.set(i, std::uniform_real_distribution<double>(i < 3000 ? -0.66 : -3, i < 3000 ? 0.66 : 3)(rng));
  }
  const double specials[] = {0.0, -2.0, std::nan(""), std::numeric_limits<double>::infinity(), 1e-40};
  for (int k = 0; k < 5; ++k) av.set(1000 + 97 * k, specials[k]);
  ev.set(2000, 2.0), av.set(2000, -3.0);  // a negative base with an integer exponent
  auto pw = reference_run(pg, {av, ev});
  CompiledModel pm(pg, CompileOptions{});
  auto pgot = pm.run(std::vector<Tensor>{av, ev});
  double worst = 0;
  for (int64_t i = 0; i < 4096; ++i) {
    const double w = pw[0].get(i), g = pgot[0].get(i);
    if (std::isnan(w) || std::isinf(w) || w == 0) {
      EXPECT_TRUE((std::isnan(w) && std::isnan(g)) || w == g) << "a=" << av.get(i) << " e=" << ev.get(i);
      continue;
    }
    worst = std::max(worst, std::abs(g - w) / std::abs(w));
  }
  EXPECT_LE(worst, 2e-6);
}

TEST(CpuConv, PoolingLayersCompiledMatchReference) {
  // MaxPool / AvgPool (count_include_pad 0 and 1) as the ONNX importer writes them, with pads.
  for (int which = 0; which < 3; ++which) {
    Graph g;
    Builder b(g);
    auto x = b.input("x", DType::f32, Shape{2, 5, 13, 11});
    Attrs a{{"kernel", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}};
    if (which == 2) a["count_include_pad"] = int64_t{1};
    b.output(b.op1(which == 0 ? OpKind::MaxPool : OpKind::AvgPool, {x}, a));
    std::vector<Tensor> in{uniform({2, 5, 13, 11}, 30 + which)};
    auto want = reference_run(g, in);
    CompiledModel cm(g, CompileOptions{});
    EXPECT_LE(max_rel_diff(cm.run(in)[0], want[0]), 1e-6) << "pool " << which;
  }
}

TEST(CpuConv, SliceAndPadKernelsMatchReference) {
  // The conv VJP's dilation (pad between elements), crops (slice, negative pad) and strided slices.
  struct Case {
    OpKind op;
    Ints shape;
    Attrs attrs;
    DType dt;
  };
  const Case cases[] = {
      {OpKind::Pad, {2, 3, 5, 1}, {{"low", Ints{0, 0, 0, 0}}, {"high", Ints{0, 0, 0, 1}}}, DType::f32},
      {OpKind::Pad, {2, 3, 4, 5}, {{"low", Ints{1, 0, -1, 2}}, {"high", Ints{0, 2, 1, -2}}, {"value", 1.5}}, DType::f32},
      {OpKind::Pad, {3, 7}, {{"low", Ints{-1, 3}}, {"high", Ints{2, 0}}, {"value", -2.0}}, DType::i64},
      {OpKind::Slice, {4, 6, 9}, {{"start", Ints{1, 0, 2}}, {"limit", Ints{4, 6, 9}}}, DType::f32},
      {OpKind::Slice, {4, 6, 9}, {{"start", Ints{0, 1, 1}}, {"limit", Ints{4, 6, 8}}, {"stride", Ints{2, 2, 3}}}, DType::f32},
      {OpKind::Slice, {5, 8}, {{"start", Ints{1, 2}}, {"limit", Ints{5, 8}}, {"stride", Ints{1, 2}}}, DType::i64},
  };
  for (const Case& c : cases) {
    Graph g;
    Builder b(g);
    auto x = b.input("x", c.dt, to_shape(c.shape));
    b.output(b.op1(c.op, {x}, c.attrs));
    Tensor xv(c.dt, c.shape);
    for (int64_t i = 0; i < xv.numel(); ++i) xv.set(i, static_cast<double>((i * 37) % 101) - 50);
    auto want = reference_run(g, {xv});
    CompiledModel cm(g, CompileOptions{});
    auto got = cm.run({xv});
    ASSERT_EQ(got[0].shape(), want[0].shape()) << op_name(c.op);
    EXPECT_EQ(rlx_test::max_abs_diff(got[0], want[0]), 0.0) << op_name(c.op);
  }
}

TEST(CpuConv, TrainingGradientsMatchReference) {
  // The MNIST CNN's two strided convs and their VJP (further convs on dilated / transposed operands).
  Graph f;
  Builder b(f);
  auto x = b.input("x", DType::f32, Shape{4, 1, 28, 28});
  auto w1 = b.input("w1", DType::f32, Shape{8, 1, 3, 3});
  auto w2 = b.input("w2", DType::f32, Shape{16, 8, 3, 3});
  Attrs a{{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}};
  auto h = b.max(b.op1(OpKind::Conv, {x, w1}, a), b.scalar(0, DType::f32));
  h = b.op1(OpKind::Conv, {h, w2}, a);
  b.output(b.reduce(OpKind::ReduceSum, b.mul(h, h), {0, 1, 2, 3}, false));
  Graph gr = ad::grad(f, {1, 2});
  std::vector<Tensor> in{uniform({4, 1, 28, 28}, 40), uniform({8, 1, 3, 3}, 41), uniform({16, 8, 3, 3}, 42)};
  auto want = reference_run(gr, in);
  CompiledModel cm(gr, CompileOptions{});
  auto got = cm.run(in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_LE(max_rel_diff(got[i], want[i]), 1e-4) << "gradient " << i;
}
