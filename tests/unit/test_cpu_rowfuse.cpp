// Row-fused cpu kernels (the row-regions LIR pass and train_kernels.h rows_kernel): chains of
// row-wise kernels over one [R, C] shape run as one kernel over blocks of rows. Checked against the
// unfused schedule (RLX_CPU_ROWS=0: the same kernels one by one; bitwise), against the reference
// interpreter (tolerance), and the short-row reductions against the documented fold order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <algorithm>
#include <ctime>
#include <optional>

#include "backends/cpu/train_kernels.h"
#include "models/mlp.h"
#include "rlx/builder.h"
#include "rlx/reference.h"
#include "rlx/session.h"
#include "train/train.h"
#include "test_util.h"

using namespace rlx;

namespace {

using rlx_test::randn;
using rlx_test::ScopedEnv;

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Compiles g with RLX_CPU_ROWS=rows and RLX_PROFILE=1; returns the outputs, the profile in *prof.
std::vector<Tensor> run_cpu(const Graph& g, const std::vector<Tensor>& in, const char* rows, std::string* prof) {
  ScopedEnv env_rows("RLX_CPU_ROWS", rows), env_profile("RLX_PROFILE", "1");
  CompiledModel m(g, CompileOptions{});
  auto out = m.run(in);
  *prof = m.profile();
  return out;
}

// Bitwise (NaN == NaN) equality of two output lists.
void expect_bitwise(const std::vector<Tensor>& a, const std::vector<Tensor>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t o = 0; o < a.size(); ++o) {
    ASSERT_EQ(a[o].dtype(), b[o].dtype()) << what;
    ASSERT_EQ(a[o].shape(), b[o].shape()) << what;
    size_t bytes = static_cast<size_t>(a[o].numel()) * dtype_size(a[o].dtype());
    if (std::memcmp(a[o].raw(), b[o].raw(), bytes) == 0) continue;
    for (int64_t i = 0; i < a[o].numel(); ++i) {
      double x = a[o].get(i), y = b[o].get(i);
      if (std::isnan(x) && std::isnan(y)) continue;
      ASSERT_EQ(x, y) << what << ": output " << o << " [" << i << "]";
    }
  }
}

void expect_near(const std::vector<Tensor>& a, const std::vector<Tensor>& b, double tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t o = 0; o < a.size(); ++o) {
    ASSERT_EQ(a[o].shape(), b[o].shape()) << what;
    for (int64_t i = 0; i < a[o].numel(); ++i) {
      double x = a[o].get(i), y = b[o].get(i);
      if (std::isnan(y)) {
        EXPECT_TRUE(std::isnan(x)) << what << ": output " << o << " [" << i << "]";
        continue;
      }
      ASSERT_NEAR(x, y, tol * (1 + std::fabs(y))) << what << ": output " << o << " [" << i << "]";
    }
  }
}

}  // namespace

// reduce_rows_f32 / argreduce_rows_f32 (the AVX2 8-rows-per-vector path for rows shorter than 16 and
// the scalar path) against the fold order the reduce kernels document: left to right below 16
// elements, else 8 interleaved lanes folded in order, then the tail. NaN propagates; argmax takes the
// first extreme and the first NaN.
TEST(RowFuse, RowReductionsFollowTheDocumentedOrder) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> nd;
  for (int64_t n : {1, 2, 3, 7, 8, 9, 10, 15, 16, 17, 33}) {
    for (int64_t rows : {1, 7, 8, 9, 37}) {
      std::vector<float> x(static_cast<size_t>(rows * n));
      for (auto& v : x) v = nd(rng) * 1e3f;
      if (rows * n > 5) x[5] = NAN;
      if (rows > 3 && n > 2) x[static_cast<size_t>(3 * n + 2)] = x[static_cast<size_t>(3 * n)];  // a tie
      for (int kind = 0; kind < 3; ++kind) {
        std::vector<float> y(static_cast<size_t>(rows));
        cpu::reduce_rows_f32(kind, x.data(), rows, n, y.data());
        auto fold = [&](float acc, float v) {
          if (kind == 0) return acc + v;
          bool take = kind == 1 ? v > acc : v < acc;
          return (take || v != v) ? v : acc;
        };
        for (int64_t r = 0; r < rows; ++r) {
          const float* p = x.data() + r * n;
          float want;
          if (n < 16) {
            want = p[0];
            for (int64_t j = 1; j < n; ++j) want = fold(want, p[j]);
          } else {
            float lane[8];
            int64_t i = 8;
            for (int l = 0; l < 8; ++l) lane[l] = p[l];
            for (; i + 8 <= n; i += 8)
              for (int l = 0; l < 8; ++l) lane[l] = fold(lane[l], p[i + l]);
            want = lane[0];
            for (int l = 1; l < 8; ++l) want = fold(want, lane[l]);
            for (; i < n; ++i) want = fold(want, p[i]);
          }
          if (std::isnan(want)) EXPECT_TRUE(std::isnan(y[static_cast<size_t>(r)])) << kind << " n " << n << " r " << r;
          else EXPECT_EQ(bits(y[static_cast<size_t>(r)]), bits(want)) << kind << " n " << n << " r " << r;
        }
      }
      for (bool mx : {true, false}) {
        std::vector<int64_t> y(static_cast<size_t>(rows));
        cpu::argreduce_rows_f32(mx, x.data(), rows, n, y.data());
        for (int64_t r = 0; r < rows; ++r) {
          const float* p = x.data() + r * n;
          int64_t best = 0;
          for (int64_t j = 1; j < n && !std::isnan(p[best]); ++j)
            if (std::isnan(p[j]) || (mx ? p[j] > p[best] : p[j] < p[best])) best = j;
          EXPECT_EQ(y[static_cast<size_t>(r)], best) << (mx ? "argmax" : "argmin") << " n " << n << " r " << r;
        }
      }
    }
  }
}

// Hand-built row chains: softmax with keepdims sums, log-softmax, a LayerNorm-style row (mean, variance,
// rsqrt, a [C] gain and a scalar), argmax accuracy against i64 labels, a bool output, over row lengths
// that take the AVX2 path (10), the scalar one (37, 384) and a row count that is not a block multiple.
TEST(RowFuse, RowChainsMatchUnfusedAndReference) {
  for (auto [R, C] : std::vector<std::pair<int64_t, int64_t>>{{1000, 10}, {37, 7}, {65, 37}, {9, 384}}) {
    Graph g;
    Builder b(g);
    Shape full{Dim(R), Dim(C)};
    ValueId x = b.input("x", DType::f32, full);
    ValueId gain = b.input("gain", DType::f32, {C});
    ValueId lab = b.input("labels", DType::i64, {R});
    ValueId s = b.input("s", DType::f32, {});
    // an elementwise prologue (joins the region backwards), then softmax with the sum kept as [R, 1]
    x = b.add(b.mul(x, b.scalar(0.5, DType::f32)), gain);
    ValueId mx = b.reduce(OpKind::ReduceMax, x, {1}, false);
    ValueId sh = b.sub(x, b.broadcast_in_dim(mx, full, {0}));
    ValueId e = b.unary(OpKind::Exp, sh);
    ValueId se = b.reduce(OpKind::ReduceSum, e, {1}, true);
    ValueId sm = b.div(e, b.broadcast_in_dim(se, full, {0, 1}));
    b.output(sm);
    // log-softmax scaled by a [C] gain and a scalar
    ValueId ls = b.sub(sh, b.broadcast_in_dim(b.unary(OpKind::Log, b.reshape(se, Shape{Dim(R)})), full, {0}));
    b.output(b.mul(b.mul(ls, gain), s));
    // LayerNorm-style row
    ValueId mean = b.div(b.reduce(OpKind::ReduceSum, x, {-1}, false), b.scalar(double(C), DType::f32));
    ValueId xc = b.sub(x, b.broadcast_in_dim(mean, full, {0}));
    ValueId var = b.div(b.reduce(OpKind::ReduceSum, b.mul(xc, xc), {1}, false), b.scalar(double(C), DType::f32));
    ValueId rs = b.unary(OpKind::Rsqrt, b.add(var, b.scalar(1e-5, DType::f32)));
    b.output(b.mul(b.mul(xc, b.broadcast_in_dim(rs, full, {0})), gain));
    // accuracy: argmax == label as f32, min row, and a bool output
    ValueId am = b.op1(OpKind::ArgMax, {x}, {{"axis", int64_t{1}}});
    b.output(b.convert(b.op1(OpKind::Eq, {am, lab}), DType::f32));
    b.output(b.reduce(OpKind::ReduceMin, x, {1}, false));
    b.output(b.op1(OpKind::Gt, {mx, b.scalar(0.5, DType::f32)}));
    Tensor tx = randn({R, C}, static_cast<uint64_t>(R * C), 3.0), tg = randn({C}, 3), ts(DType::f32, {});
    ts.set(0, 0.25);
    tx.set(C + 3, std::nan(""));                // a NaN row
    tx.set(2 * C + 1, tx.get(2 * C + C - 1));   // a tie
    Tensor tl(DType::i64, {R});
    for (int64_t i = 0; i < R; ++i) tl.set_int(i, (i * 7) % C);
    std::vector<Tensor> in{tx, tg, tl, ts};
    std::string pf, pu;
    auto fused = run_cpu(g, in, "1", &pf);
    auto unfused = run_cpu(g, in, "0", &pu);
    std::string what = "R=" + std::to_string(R) + " C=" + std::to_string(C);
    EXPECT_NE(pf.find("rows[mul,add,reduce_max,"), std::string::npos) << what << "\n" << pf;  // prologue joined
    EXPECT_EQ(pu.find("rows["), std::string::npos) << what << "\n" << pu;
    expect_bitwise(fused, unfused, what);
    expect_near(fused, reference_run(g, in), 2e-5, what + " vs reference");
  }
}

// A deep chain (ten row sums, each fed back as an implicit [R, 1] broadcast operand of a Full step):
// one row kernel, bitwise the unfused kernels.
TEST(RowFuse, DeepChainWithImplicitRowOperands) {
  Graph g = rlx_test::chain_model(50);
  std::vector<Tensor> in{randn({50, 40}, 31, 0.2), randn({40}, 32, 0.2)};
  std::string pf, pu;
  auto fused = run_cpu(g, in, "1", &pf);
  auto unfused = run_cpu(g, in, "0", &pu);
  EXPECT_NE(pf.find("rows[add,tanh,reduce_sum,reshape,mul,add,"), std::string::npos) << pf;
  EXPECT_EQ(pf.find("fused["), std::string::npos) << pf;  // nothing left outside the region
  expect_bitwise(fused, unfused, "deep chain");
  expect_near(fused, reference_run(g, in), 1e-4, "deep chain vs reference");
}

// A region whose first output is planned over the bytes of an input that dies there (in-place reuse
// by the memory planner): every block reads its input rows before the output rows are written.
TEST(RowFuse, InPlaceOutputOverItsInput) {
  const int64_t R = 300, C = 10;
  Graph g;
  Builder b(g);
  Shape full{Dim(R), Dim(C)};
  ValueId in = b.input("in", DType::f32, full);
  ValueId x = b.add(in, in);  // an arena value that dies in the region
  ValueId y = b.sub(x, b.broadcast_in_dim(b.reduce(OpKind::ReduceMax, x, {1}, false), full, {0}));
  ValueId e = b.unary(OpKind::Exp, y);
  ValueId p = b.div(e, b.broadcast_in_dim(b.reduce(OpKind::ReduceSum, e, {1}, false), full, {0}));
  b.output(b.reduce(OpKind::ReduceSum, p, {0}, false));  // cross-row: reads the region's output
  b.output(b.reduce(OpKind::ReduceSum, b.mul(y, p), {0}, false));
  std::vector<Tensor> inputs{randn({R, C}, 21, 2.0)};
  std::string pf, pu;
  auto fused = run_cpu(g, inputs, "1", &pf);
  auto unfused = run_cpu(g, inputs, "0", &pu);
  EXPECT_NE(pf.find("rows["), std::string::npos) << pf;
  expect_bitwise(fused, unfused, "in place");
  expect_near(fused, reference_run(g, inputs), 1e-5, "in place vs reference");
}

// The softmax-cross-entropy SGD step of an MLP: the loss head becomes one row kernel and a few steps
// of training give bit-identical parameters, loss and accuracy to the unfused schedule.
TEST(RowFuse, MlpTrainStepIsBitwiseTheUnfusedStep) {
  for (int64_t B : {100, 128}) {
    std::vector<int64_t> sizes = {64, 32, 10};
    Graph loss = models::mlp_loss_graph(sizes, B);
    train::OptimizerConfig c;  // plain SGD
    Graph step = train::build_train_step(loss, static_cast<int>(2 * (sizes.size() - 1)), c);
    std::vector<Tensor> in = rlx_test::train_step_inputs(step, 900, 0.3);
    std::string pf, pu;
    std::vector<Tensor> a = in, b = in;
    for (int it = 0; it < 3; ++it) {  // feed the updated parameters back
      auto fa = run_cpu(step, a, "1", &pf);
      auto fb = run_cpu(step, b, "0", &pu);
      expect_bitwise(fa, fb, "B=" + std::to_string(B) + " step " + std::to_string(it));
      if (it == 0) expect_near(fa, reference_run(step, a), 1e-4, "vs reference");
      // outputs: loss, accuracy, then the new parameters in input order
      for (size_t p = 0; p + 2 < fa.size() && p < a.size(); ++p) {
        a[p] = fa[p + 2];
        b[p] = fb[p + 2];
      }
    }
    EXPECT_NE(pf.find("rows["), std::string::npos) << pf;
    EXPECT_EQ(pu.find("rows["), std::string::npos) << pu;
  }
}

// Not a test (a measurement, disabled): thread CPU time and wall time of the softmax-cross-entropy
// head alone ([B, 10] logits -> loss, accuracy, dlogits, bias gradient), as the MNIST step's
// schedule has it, fused vs unfused. RLX_NUM_THREADS=1 ./rlx_tests --gtest_also_run_disabled_tests
// --gtest_filter=RowFuse.DISABLED_HeadCpuTime
TEST(RowFuse, DISABLED_HeadCpuTime) {
  for (int64_t B : {128, 1024}) {
    const int64_t C = 10;
    Graph g;
    Builder b(g);
    Shape full{Dim(B), Dim(C)};
    ValueId z = b.input("z", DType::f32, full);
    ValueId lab = b.input("labels", DType::i64, {B});
    Tensor iota(DType::i64, {B, C}), cst(DType::f32, {B, C}), inv(DType::f32, {B});
    for (int64_t i = 0; i < B * C; ++i) iota.set_int(i, i % C), cst.set(i, -1.0 / B);
    for (int64_t i = 0; i < B; ++i) inv.set(i, 1.0 / B);
    ValueId mx = b.reduce(OpKind::ReduceMax, z, {1}, false);
    ValueId sh = b.sub(z, b.broadcast_in_dim(mx, full, {0}));
    ValueId e = b.unary(OpKind::Exp, sh);
    ValueId s = b.reduce(OpKind::ReduceSum, e, {1}, false);
    ValueId ls = b.unary(OpKind::Log, s);
    ValueId oh = b.convert(b.op1(OpKind::Eq, {b.constant(iota), b.broadcast_in_dim(lab, full, {0})}), DType::f32);
    ValueId t = b.mul(oh, sh);
    b.output(b.mul(b.sub(b.reduce(OpKind::ReduceSum, ls, {0}, false), b.reduce(OpKind::ReduceSum, t, {0, 1}, false)),
                   b.scalar(1.0 / B, DType::f32)));
    ValueId am = b.op1(OpKind::ArgMax, {z}, {{"axis", int64_t{1}}});
    b.output(b.reduce(OpKind::ReduceSum, b.convert(b.op1(OpKind::Eq, {am, lab}), DType::f32), {0}, false));
    ValueId gs = b.div(b.constant(inv), s);
    ValueId d = b.add(b.mul(b.constant(cst), oh), b.mul(b.broadcast_in_dim(b.reshape(gs, Shape{Dim(B), Dim(1)}), full, {0, 1}), e));
    b.output(d);
    b.output(b.reduce(OpKind::ReduceSum, d, {0}, false));
    Tensor tz = randn({B, C}, 3, 2.0), tl(DType::i64, {B});
    for (int64_t i = 0; i < B; ++i) tl.set_int(i, (i * 7) % C);
    std::vector<Tensor> in{tz, tl};
    for (int rep = 0; rep < 3; ++rep)
      for (const char* rows : {"0", "1"}) {
        std::optional<ScopedEnv> env_rows(std::in_place, "RLX_CPU_ROWS", rows);
        CompiledModel m(g, CompileOptions{});
        m.run(in);  // the executable is built on the first run
        env_rows.reset();
        std::vector<double> us, wall;
        for (int it = 0; it < 2000; ++it) {
          timespec a{}, c{}, wa{}, wc{};
          clock_gettime(CLOCK_MONOTONIC, &wa);
          clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
          m.run(in);
          clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c);
          clock_gettime(CLOCK_MONOTONIC, &wc);
          us.push_back((c.tv_sec - a.tv_sec) * 1e6 + (c.tv_nsec - a.tv_nsec) * 1e-3);
          wall.push_back((wc.tv_sec - wa.tv_sec) * 1e6 + (wc.tv_nsec - wa.tv_nsec) * 1e-3);
        }
        std::sort(us.begin(), us.end());
        std::sort(wall.begin(), wall.end());
        std::printf("head B=%lld rows=%s thread CPU us: min %.1f p50 %.1f | wall us: min %.1f p25 %.1f p50 %.1f\n",
                    static_cast<long long>(B), rows, us[0], us[us.size() / 2], wall[0], wall[wall.size() / 4],
                    wall[wall.size() / 2]);
      }
  }
}
