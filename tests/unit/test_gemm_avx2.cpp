// gemm_f32, the general entry point of the cpu device's own GEMM (src/backends/cpu/gemm_avx2.cpp),
// against a float64 triple loop: every transpose combination, sizes around the 6x16 and 12x32 micro
// tiles, strided operands, beta 0/1/other, serial and pooled, the K and row blocking, and the epilogue.
// Every test runs once per kernel family (portable, AVX2, AVX-512) through gemm_f32_with, so all the
// families the host has are checked in one process; a family the host lacks is skipped, saying so.
// (The packed-B entry points with the host's family are also covered in test_cpu_fast.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/gemm_avx2.h"
#include "backends/cpu/isa.h"

namespace rlx::cpu {
inline void PrintTo(CpuIsa isa, std::ostream* os) { *os << cpu_isa_name(isa); }  // readable test names
}  // namespace rlx::cpu

using namespace rlx;
using cpu::CpuIsa;

namespace {

// The kernel family under test (the test's parameter).
class GemmF32 : public ::testing::TestWithParam<CpuIsa> {
 protected:
  void SetUp() override {
    if (static_cast<int>(GetParam()) > static_cast<int>(cpu::cpu_isa_host()))
      GTEST_SKIP() << "this CPU cannot run the " << cpu::cpu_isa_name(GetParam()) << " GEMM kernels (host level "
                   << cpu::cpu_isa_name(cpu::cpu_isa_host()) << ": " << cpu::cpu_isa_features() << ")";
  }
  CpuIsa isa() const { return GetParam(); }
};

struct Case {
  bool ta, tb;
  int64_t M, N, K, pad_a, pad_b, pad_c;
  float beta;
  bool parallel;
};

// Runs one case; returns the worst |C - ref| / (1 + sum |a b| + |beta C0|) and checks that C's padding
// columns were not touched (and, for beta 0, that C's old contents were never read: it starts as NaN).
double run_case(CpuIsa isa, const Case& c, std::mt19937& g, const cpu::GemmEpi* epi = nullptr) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  const int64_t ar = c.ta ? c.K : c.M, ac = c.ta ? c.M : c.K, br = c.tb ? c.N : c.K, bc = c.tb ? c.K : c.N;
  const int64_t lda = ac + c.pad_a, ldb = bc + c.pad_b, ldc = c.N + c.pad_c;
  std::vector<float> A(static_cast<size_t>(ar * lda)), B(static_cast<size_t>(br * ldb)), C(static_cast<size_t>(c.M * ldc));
  for (auto& x : A) x = d(g);
  for (auto& x : B) x = d(g);
  for (auto& x : C) x = c.beta == 0.f ? std::numeric_limits<float>::quiet_NaN() : d(g);
  const std::vector<float> C0 = C;
  cpu::gemm_f32_with(isa, c.ta, c.tb, c.M, c.N, c.K, A.data(), lda, B.data(), ldb, C.data(), ldc, c.beta, c.parallel,
                     epi);
  double worst = 0;
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      double s = 0, mag = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        double a = c.ta ? A[k * lda + i] : A[i * lda + k];
        double b = c.tb ? B[j * ldb + k] : B[k * ldb + j];
        s += a * b;
        mag += std::abs(a * b);
      }
      if (c.beta != 0.f) {
        s += double(c.beta) * C0[i * ldc + j];
        mag += std::abs(double(c.beta) * C0[i * ldc + j]);
      }
      if (epi && epi->bias) s += epi->bias[j];
      if (epi && epi->act == cpu::GemmAct::Relu) s = s > 0 ? s : 0;
      const double got = C[i * ldc + j];
      worst = std::max(worst, std::isfinite(got) ? std::abs(got - s) / (1 + mag) : 1e30);
    }
    for (int64_t j = c.N; j < ldc; ++j) {
      const float was = C0[i * ldc + j], now = C[i * ldc + j];
      EXPECT_TRUE(was == now || (std::isnan(was) && std::isnan(now))) << "padding column " << j << " written";
    }
  }
  return worst;
}

std::string describe(const Case& c) {
  return "ta=" + std::to_string(c.ta) + " tb=" + std::to_string(c.tb) + " M=" + std::to_string(c.M) +
         " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) + " pads=" + std::to_string(c.pad_a) + "," +
         std::to_string(c.pad_b) + "," + std::to_string(c.pad_c) + " beta=" + std::to_string(c.beta) +
         " parallel=" + std::to_string(c.parallel);
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Isa, GemmF32, ::testing::Values(CpuIsa::Generic, CpuIsa::Avx2, CpuIsa::Avx512),
                         [](const ::testing::TestParamInfo<CpuIsa>& i) { return std::string(cpu::cpu_isa_name(i.param)); });

TEST_P(GemmF32, AllTransposesOddSizesStridesBeta) {
  std::mt19937 g(11);
  const int64_t sizes[] = {1, 2, 5, 6, 7, 8, 11, 12, 13, 16, 17, 24, 25, 31, 32, 33, 36, 48, 64, 70};
  std::uniform_int_distribution<int> pick(0, 19), pad(0, 3);
  const float betas[] = {0.f, 1.f, 0.5f};
  int n = 0;
  for (int iter = 0; iter < 48; ++iter)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        Case c{ta, tb, sizes[pick(g)], sizes[pick(g)], sizes[pick(g)], pad(g), pad(g), pad(g), betas[iter % 3],
               iter % 2 == 1};
        if (iter == 0) c.M = 70, c.N = 70, c.K = 70;
        if (iter == 1) c.M = 1, c.N = 1, c.K = 1;
        EXPECT_LE(run_case(isa(), c, g), 2e-6) << describe(c);
        ++n;
      }
  EXPECT_EQ(n, 192);
}

TEST_P(GemmF32, BlockedAndPooledShapes) {
  // Several K blocks (K > 768), several 72-row A blocks, A read in place and packed, the row split and the column split of the
  // pool, and MLP training shapes (X·W, Xᵀ·dY, dY·Wᵀ).
  std::mt19937 g(12);
  const Case cases[] = {
      {false, false, 300, 70, 1600, 1, 2, 3, 0.f, true},  {true, false, 300, 70, 1600, 0, 0, 0, 1.f, true},
      {false, true, 200, 40, 800, 3, 1, 0, 0.f, true},    {true, true, 200, 40, 800, 0, 3, 1, 1.f, false},
      {false, false, 20, 300, 500, 0, 0, 0, 0.f, true},   {true, true, 20, 300, 500, 1, 1, 1, 0.5f, true},
      {false, false, 128, 128, 784, 0, 0, 0, 0.f, true},  {true, false, 784, 128, 128, 0, 0, 0, 0.f, true},
      {false, true, 128, 784, 128, 0, 0, 0, 0.f, true},   {true, false, 512, 10, 128, 0, 0, 0, 1.f, true},
      {false, true, 130, 512, 10, 0, 0, 0, 0.f, true},    {false, false, 7, 1000, 3, 5, 0, 2, 1.f, true},
      // A copied into micro-panels (>= 256 columns, > 24 rows) with strided operands, serial and pooled
      {false, false, 100, 300, 50, 2, 1, 3, 1.f, false},  {false, true, 200, 270, 100, 7, 0, 1, 0.f, true},
  };
  for (const Case& c : cases) EXPECT_LE(run_case(isa(), c, g), 2e-6) << describe(c);
}

TEST_P(GemmF32, EpilogueAndRowHook) {
  std::mt19937 g(13);
  for (const Case& c : {Case{true, false, 150, 50, 300, 1, 0, 2, 0.f, true}, Case{false, true, 12, 400, 200, 0, 1, 0, 1.f, true},
                        Case{false, false, 5, 9, 4, 0, 0, 0, 0.f, false}}) {
    std::vector<float> bias(static_cast<size_t>(c.N));
    for (size_t j = 0; j < bias.size(); ++j) bias[j] = 0.25f * float(j % 7) - 0.5f;
    std::vector<int> done(static_cast<size_t>(c.M), 0);
    cpu::GemmEpi e;
    e.bias = bias.data();
    e.act = cpu::GemmAct::Relu;
    e.ctx = &done;
    e.rows_done = [](void* ctx, int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) ++(*static_cast<std::vector<int>*>(ctx))[r];
    };
    EXPECT_LE(run_case(isa(), c, g, &e), 2e-6) << describe(c);
    for (int64_t i = 0; i < c.M; ++i) EXPECT_EQ(done[i], 1) << "row " << i << " " << describe(c);
  }
}

TEST_P(GemmF32, EmptyAndZeroK) {
  std::vector<float> C = {1.f, 2.f, 3.f, 4.f};
  float dummy = 0.f;
  cpu::gemm_f32_with(isa(), false, false, 0, 2, 3, &dummy, 3, &dummy, 2, C.data(), 2);  // M = 0: nothing written
  EXPECT_EQ(C[0], 1.f);
  cpu::gemm_f32_with(isa(), true, true, 2, 2, 0, &dummy, 2, &dummy, 0, C.data(), 2, 1.f);  // K = 0, beta 1: unchanged
  EXPECT_EQ(C[3], 4.f);
  cpu::gemm_f32_with(isa(), false, false, 2, 2, 0, &dummy, 0, &dummy, 2, C.data(), 2, 0.f);  // K = 0, beta 0: zeros
  for (float v : C) EXPECT_EQ(v, 0.f);
}

// [fixB] alpha scales op(A)·op(B) (the SGD update W - lr·Xᵀ·dH is residual = W, alpha = -lr), and the
// epilogue ReLU keeps NaN like the reference max(x, 0): a NaN in row 0 of A makes row 0 of C NaN.
TEST_P(GemmF32, AlphaResidualAndReluKeepsNaN) {
  std::mt19937 g(29);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool par : {false, true}) {
        const int64_t M = 40, N = 70, K = 300;
        std::vector<float> A(static_cast<size_t>(M * K)), B(static_cast<size_t>(K * N)), W(static_cast<size_t>(M * N));
        for (auto* v : {&A, &B, &W})
          for (auto& x : *v) x = d(g);
        A[0] = std::numeric_limits<float>::quiet_NaN();  // op(A)(0, 0): stored at [0] either way
        std::vector<float> C(static_cast<size_t>(M * N));
        cpu::GemmEpi e;
        e.residual = W.data();
        e.ldr = N;
        e.act = cpu::GemmAct::Relu;
        const float alpha = -0.3f;
        cpu::gemm_f32_with(isa(), ta, tb, M, N, K, A.data(), ta ? M : K, B.data(), tb ? K : N, C.data(), N, 0.f, par, &e, alpha);
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double s = 0;
            for (int64_t k = 0; k < K; ++k)
              s += double(ta ? A[k * M + i] : A[i * K + k]) * (tb ? B[j * K + k] : B[k * N + j]);
            const double want = std::max(0.0, W[i * N + j] + alpha * s);
            if (i == 0) EXPECT_TRUE(std::isnan(C[j])) << "col " << j << " ta " << ta << " tb " << tb;
            else ASSERT_NEAR(C[i * N + j], want, 1e-4) << i << "," << j << " ta " << ta << " tb " << tb << " par " << par;
          }
      }
}

// The narrow path (N <= 12: the outer-product kernel for a transposed A, the
// dot-product kernel for K >= 256) and the in-register ReLU-mask epilogue (GemmEpi::mask), against a
// float64 loop with the whole epilogue: alpha, beta, bias, residual, ReLU, mask, rows_done. Sizes
// cover the 8-row and 2-row tiles' tails, K tails of the dot kernel (K % 8 != 0), 1..12 columns and
// the 16-column tile (N 16, 33) with the mask; serial and pooled.
TEST_P(GemmF32, NarrowAndMaskEpilogue) {
  std::mt19937 g(31);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  struct C6 { bool ta, tb; int64_t M, N, K; float beta; bool par, bias, res, relu, mask; float alpha; };
  std::vector<C6> cases = {
      {true, false, 128, 10, 1024, 0.f, true, false, true, false, false, -0.1f},  // dW of a classifier (SGD)
      {true, false, 517, 10, 130, 0.f, true, false, true, false, false, -0.1f},
      {false, false, 1024, 10, 512, 0.f, true, true, false, false, false, 1.f},  // its forward (bias)
      {false, false, 77, 10, 300, 1.f, false, true, false, true, false, 1.f},
      {false, true, 45, 7, 257, 0.5f, true, true, true, true, false, 0.7f},
      {true, true, 33, 12, 40, 0.f, true, true, true, true, true, 1.f},
      {false, false, 200, 10, 10, 0.f, true, true, false, false, true, 1.f},   // K < 256: the 6x16 path
      {false, true, 300, 128, 10, 0.f, true, false, false, false, true, 1.f},  // ReLU backward, K = 10
      {false, true, 130, 33, 10, 0.f, false, false, false, false, true, 1.f},
      {true, false, 70, 16, 300, 1.f, true, true, true, true, true, -0.5f},
  };
  for (int64_t n = 1; n <= 12; ++n)
    for (bool ta : {false, true}) cases.push_back({ta, n % 2 == 0, 9 + 3 * n, n, 250 + 3 * n, 0.f, n % 3 == 0, true,
                                                   n % 2 == 1, n % 4 == 1, n % 5 == 0, n % 2 ? 1.f : -0.25f});
  for (const C6& c : cases) {
    const int64_t lda = c.ta ? c.M : c.K, ldb = c.tb ? c.K : c.N;
    std::vector<float> A(static_cast<size_t>(c.M * c.K)), B(static_cast<size_t>(c.K * c.N)),
        C(static_cast<size_t>(c.M * c.N)), R(C.size()), Mk(C.size()), bias(static_cast<size_t>(c.N));
    for (auto* v : {&A, &B, &C, &R, &Mk, &bias})
      for (auto& x : *v) x = d(g);
    if (c.beta == 0.f)
      for (auto& x : C) x = std::numeric_limits<float>::quiet_NaN();  // never read
    const std::vector<float> C0 = C;
    std::vector<int> done(static_cast<size_t>(c.M), 0);
    cpu::GemmEpi e;
    if (c.bias) e.bias = bias.data();
    if (c.res) e.residual = R.data(), e.ldr = c.N;
    if (c.relu) e.act = cpu::GemmAct::Relu;
    if (c.mask) e.mask = Mk.data(), e.ldm = c.N;
    e.ctx = &done;
    e.rows_done = [](void* ctx, int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) ++(*static_cast<std::vector<int>*>(ctx))[r];
    };
    cpu::gemm_f32_with(isa(), c.ta, c.tb, c.M, c.N, c.K, A.data(), lda, B.data(), ldb, C.data(), c.N, c.beta, c.par, &e, c.alpha);
    const std::string what = "ta=" + std::to_string(c.ta) + " tb=" + std::to_string(c.tb) + " M=" + std::to_string(c.M) +
                             " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K);
    for (int64_t i = 0; i < c.M; ++i) {
      EXPECT_EQ(done[i], 1) << "row " << i << " " << what;
      for (int64_t j = 0; j < c.N; ++j) {
        double s = 0, mag = 0;
        for (int64_t k = 0; k < c.K; ++k) {
          const double p = double(c.ta ? A[k * lda + i] : A[i * lda + k]) * (c.tb ? B[j * ldb + k] : B[k * ldb + j]);
          s += p, mag += std::abs(p);
        }
        s *= c.alpha, mag *= std::abs(c.alpha);
        if (c.beta != 0.f) s += double(c.beta) * C0[i * c.N + j];
        if (c.bias) s += bias[j];
        if (c.res) s += R[i * c.N + j];
        if (c.relu) s = s < 0 ? 0 : s;
        if (c.mask && !(Mk[i * c.N + j] > 0.f)) s = 0;
        ASSERT_NEAR(C[i * c.N + j], s, 2e-6 * (4 + mag)) << i << "," << j << " " << what;
      }
    }
  }
}

// The mask keeps a NaN of C where the mask is positive and gives 0 where it is not
// (also for a NaN mask), on the 6x16 path and on the narrow path.
TEST_P(GemmF32, MaskEpilogueNaN) {
  for (int64_t N : {5, 32}) {
    const int64_t M = 30, K = 300;
    std::vector<float> A(static_cast<size_t>(M * K), 0.5f), B(static_cast<size_t>(K * N), 0.25f), C(static_cast<size_t>(M * N));
    std::vector<float> Mk(C.size(), 1.f);
    A[0] = std::numeric_limits<float>::quiet_NaN();  // row 0 of C is NaN
    Mk[1] = 0.f;                                      // (0, 1) masked off
    Mk[N + 2] = std::numeric_limits<float>::quiet_NaN();  // (1, 2): a NaN mask gives 0
    cpu::GemmEpi e;
    e.mask = Mk.data();
    e.ldm = N;
    cpu::gemm_f32_with(isa(), false, false, M, N, K, A.data(), K, B.data(), N, C.data(), N, 0.f, true, &e);
    EXPECT_TRUE(std::isnan(C[0])) << N;
    EXPECT_EQ(C[1], 0.f) << N;
    EXPECT_EQ(C[N + 2], 0.f) << N;
    EXPECT_FLOAT_EQ(C[N + 3], 0.125f * K) << N;
  }
}

// GemmEpi::colsum: with op(B) = B [K,N] (not transposed), gemm_f32 also writes
// colsum[j] = B[0][j] + B[1][j] + ... (rows in order, unscaled by alpha) while it packs B: bitwise that
// sequential float fold, within K ulps-ish of the float64 sum, and C is bitwise the same as without it.
// Covers the narrow path (N <= 12), partial 16-column panels, strided B, serial and pooled packing
// (row split and column split), alpha with a residual, K = 1 and M = 0.
TEST_P(GemmF32, ColumnSumsWhilePackingB) {
  std::mt19937 g(77);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  struct S {
    bool ta;
    int64_t M, N, K, pad_b;
    bool parallel;
  };
  const S cases[] = {{true, 50, 10, 37, 0, true},     {true, 784, 512, 256, 3, true}, {true, 300, 130, 200, 0, true},
                     {false, 64, 256, 200, 0, true},  {false, 20, 300, 400, 5, true}, {true, 33, 17, 1, 0, false},
                     {false, 7, 5, 300, 2, false},    {true, 0, 40, 9, 0, true},      {true, 128, 128, 128, 0, false}};
  for (const S& c : cases)
    for (float alpha : {1.f, -0.05f}) {
      const int64_t ar = c.ta ? c.K : c.M, ac = c.ta ? c.M : c.K, ldb = c.N + c.pad_b;
      std::vector<float> A(static_cast<size_t>(std::max<int64_t>(ar * ac, 1))), B(static_cast<size_t>(c.K * ldb)),
          W(static_cast<size_t>(std::max<int64_t>(c.M * c.N, 1)));
      for (auto& x : A) x = d(g);
      for (auto& x : B) x = d(g) * 3.f;
      for (auto& x : W) x = d(g);
      cpu::GemmEpi e;
      if (alpha != 1.f) {
        e.residual = W.data();
        e.ldr = c.N;
      }
      std::vector<float> C1(static_cast<size_t>(std::max<int64_t>(c.M * c.N, 1))), C2 = C1;
      cpu::gemm_f32_with(isa(), c.ta, false, c.M, c.N, c.K, A.data(), ac, B.data(), ldb, C1.data(), c.N, 0.f, c.parallel, &e, alpha);
      std::vector<float> cs(static_cast<size_t>(c.N), std::numeric_limits<float>::quiet_NaN());
      e.colsum = cs.data();
      cpu::gemm_f32_with(isa(), c.ta, false, c.M, c.N, c.K, A.data(), ac, B.data(), ldb, C2.data(), c.N, 0.f, c.parallel, &e, alpha);
      const std::string what = std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K);
      for (int64_t i = 0; i < c.M * c.N; ++i) ASSERT_EQ(C1[i], C2[i]) << what << " C[" << i << "]";
      for (int64_t j = 0; j < c.N; ++j) {
        float f = B[j];
        double s = B[j], mag = std::fabs(B[j]);
        for (int64_t k = 1; k < c.K; ++k) {
          f += B[k * ldb + j];
          s += B[k * ldb + j];
          mag += std::fabs(B[k * ldb + j]);
        }
        ASSERT_EQ(cs[j], f) << what << " colsum[" << j << "] (row-order fold)";
        ASSERT_NEAR(cs[j], s, 1e-6 * c.K * (1 + mag)) << what << " colsum[" << j << "] (float64)";
      }
    }
}

namespace {

double act_ref(cpu::GemmAct act, double s) {
  switch (act) {
    case cpu::GemmAct::None: return s;
    case cpu::GemmAct::Relu: return s < 0 ? 0 : s;
    case cpu::GemmAct::Gelu: return 0.5 * s * (1 + std::erf(s / std::sqrt(2.0)));
    case cpu::GemmAct::GeluTanh: return 0.5 * s * (1 + std::tanh(std::sqrt(2 / M_PI) * (s + 0.044715 * s * s * s)));
    case cpu::GemmAct::Silu: return s / (1 + std::exp(-s));
  }
  return s;
}

// C (row stride ldc) against alpha·op(A)·op(B) + beta·C0 + bias + residual, then act and mask, in float64.
// Returns the worst error over (2e-6 (1 + sum |a b| + |beta C0|) + 1e-6); <= 1 passes.
double worst_vs_ref(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const std::vector<float>& A, int64_t lda,
                    const std::vector<float>& B, int64_t ldb, const std::vector<float>& C0, const std::vector<float>& C,
                    int64_t ldc, float beta, float alpha, const cpu::GemmEpi& e) {
  double worst = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = double(ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]);
        s += p, mag += std::abs(p);
      }
      s *= alpha, mag *= std::abs(alpha);
      if (beta != 0.f) s += double(beta) * C0[i * ldc + j], mag += std::abs(double(beta) * C0[i * ldc + j]);
      if (e.bias) s += e.bias[j];
      if (e.residual) s += e.residual[i * e.ldr + j];
      s = act_ref(e.act, s);
      if (e.mask && !(e.mask[i * e.ldm + j] > 0.f)) s = 0;
      const double got = C[i * ldc + j];
      worst = std::max(worst, std::isfinite(got) ? std::abs(got - s) / (2e-6 * (1 + mag) + 1e-6) : 1e30);
    }
  return worst;
}

}  // namespace

// Every activation with bias, residual and mask on the tiles' edges: 32-column tiles with a partial
// second panel (N 33, 70), single 16-column panels (N 17), 12-row tiles with row tails (M 13, 25, 37),
// two K blocks (K 800: the epilogue on the accumulating pass), all transposes, serial and pooled.
TEST_P(GemmF32, EveryActivationOnTileEdges) {
  std::mt19937 g(41);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  const int64_t shapes[][3] = {{37, 70, 50}, {25, 33, 300}, {12, 32, 17}, {13, 17, 5}, {150, 48, 800}, {64, 300, 40}};
  int n = 0;
  for (auto& sh : shapes)
    for (int act = 0; act <= static_cast<int>(cpu::GemmAct::Silu); ++act) {
      const int64_t M = sh[0], N = sh[1], K = sh[2];
      const bool ta = n % 2, tb = n / 2 % 2, par = n % 3 != 0;
      const float beta = n % 4 == 3 ? 1.f : 0.f, alpha = n % 5 == 4 ? -0.5f : 1.f;
      ++n;
      const int64_t lda = (ta ? M : K) + 1, ldb = (tb ? K : N) + 2, ldc = N + 3;
      std::vector<float> A(static_cast<size_t>((ta ? K : M) * lda)), B(static_cast<size_t>((tb ? N : K) * ldb)),
          C(static_cast<size_t>(M * ldc)), R(static_cast<size_t>(M * N)), Mk(R.size()), bias(static_cast<size_t>(N));
      for (auto* v : {&A, &B, &C, &R, &Mk, &bias})
        for (auto& x : *v) x = d(g);
      for (auto& x : A) x *= 0.3f;  // pre-activations of a few units: the activations' curved range
      if (beta == 0.f)
        for (auto& x : C) x = std::numeric_limits<float>::quiet_NaN();
      const std::vector<float> C0 = C;
      cpu::GemmEpi e;
      e.bias = bias.data();
      e.residual = n % 2 ? R.data() : nullptr;
      e.ldr = N;
      e.mask = n % 3 == 1 ? Mk.data() : nullptr;
      e.ldm = N;
      e.act = static_cast<cpu::GemmAct>(act);
      cpu::gemm_f32_with(isa(), ta, tb, M, N, K, A.data(), lda, B.data(), ldb, C.data(), ldc, beta, par, &e, alpha);
      EXPECT_LE(worst_vs_ref(ta, tb, M, N, K, A, lda, B, ldb, C0, C, ldc, beta, alpha, e), 1.0)
          << "M=" << M << " N=" << N << " K=" << K << " ta=" << ta << " tb=" << tb << " act=" << act;
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = N; j < ldc; ++j)
          ASSERT_TRUE(std::isnan(C[i * ldc + j]) || C[i * ldc + j] == C0[i * ldc + j]) << "padding column written";
    }
}

// The packed-weight entry (a Linear's weight packed once) with this family: strided A and C, rows
// around the 6- and 12-row tiles, columns around the 16- and 32-column tiles, one and two K blocks,
// bias + residual + GELU or ReLU, the row hook once per row, serial and pooled (row and column splits).
TEST_P(GemmF32, PackedWeightEntry) {
  std::mt19937 g(43);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  const int64_t Ms[] = {1, 11, 12, 13, 24, 100, 300}, Ns[] = {16, 31, 32, 33, 70, 384}, Ks[] = {1, 64, 800};
  int n = 0;
  for (int64_t M : Ms)
    for (int64_t N : Ns) {
      const int64_t K = Ks[n % 3], lda = K + n % 3, ldc = N + n % 2;
      const bool par = n % 2 == 0;
      ++n;
      std::vector<float> A(static_cast<size_t>(M * lda)), W(static_cast<size_t>(N * K)), C(static_cast<size_t>(M * ldc)),
          R(static_cast<size_t>(M * N)), bias(static_cast<size_t>(N));
      for (auto* v : {&A, &W, &R, &bias})
        for (auto& x : *v) x = d(g);
      for (auto& x : C) x = std::numeric_limits<float>::quiet_NaN();
      const std::vector<float> C0 = C;
      std::vector<float> Wp(static_cast<size_t>(cpu::packed_b_size(K, N)));
      cpu::pack_b(true, W.data(), K, K, N, Wp.data());
      std::vector<int> done(static_cast<size_t>(M), 0);
      cpu::GemmEpi e;
      e.bias = bias.data();
      e.residual = R.data();
      e.ldr = N;
      e.act = n % 2 ? cpu::GemmAct::Gelu : cpu::GemmAct::Relu;
      e.ctx = &done;
      e.rows_done = [](void* ctx, int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) ++(*static_cast<std::vector<int>*>(ctx))[r];
      };
      cpu::gemm_packed_with(isa(), M, N, K, A.data(), lda, Wp.data(), C.data(), ldc, &e, par);
      const std::string what = "M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K);
      EXPECT_LE(worst_vs_ref(false, true, M, N, K, A, lda, W, K, C0, C, ldc, 0.f, 1.f, e), 1.0) << what;
      for (int64_t i = 0; i < M; ++i) {
        ASSERT_EQ(done[i], 1) << "row " << i << " " << what;
        for (int64_t j = N; j < ldc; ++j) ASSERT_TRUE(std::isnan(C[i * ldc + j])) << "padding column written " << what;
      }
    }
}

// The AVX-512 and AVX2 tiles sum each element over k in the same order with the same K blocking, so
// they agree exactly (as values) with bias, residual, ReLU and the mask, and with GELU on whole
// 16-column panels (the AVX2 tile's partial panels take the scalar GELU).
TEST(GemmF32Families, Avx512EqualsAvx2) {
  if (cpu::cpu_isa_host() < CpuIsa::Avx512)
    GTEST_SKIP() << "this CPU has no AVX-512 (host level " << cpu::cpu_isa_name(cpu::cpu_isa_host()) << ": "
                 << cpu::cpu_isa_features() << ")";
  std::mt19937 g(47);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  const int64_t shapes[][3] = {{300, 70, 1600}, {37, 33, 77}, {128, 384, 384}, {16, 1536, 384}, {5, 48, 9}, {200, 10, 300}};
  int n = 0;
  for (auto& sh : shapes)
    for (bool ta : {false, true})
      for (bool gelu : {false, true}) {
        const int64_t M = sh[0], N = sh[1], K = sh[2];
        if (gelu && N % 16) continue;
        const bool tb = n % 2, par = n % 3 != 0;
        ++n;
        std::vector<float> A(static_cast<size_t>(M * K)), B(static_cast<size_t>(K * N)), R(static_cast<size_t>(M * N)),
            Mk(R.size()), bias(static_cast<size_t>(N));
        for (auto* v : {&A, &B, &R, &Mk, &bias})
          for (auto& x : *v) x = d(g);
        cpu::GemmEpi e;
        e.bias = bias.data();
        e.residual = R.data();
        e.ldr = N;
        e.act = gelu ? cpu::GemmAct::Gelu : cpu::GemmAct::Relu;
        if (!gelu) e.mask = Mk.data(), e.ldm = N;
        std::vector<float> C2(R.size()), C5(R.size());
        for (auto [isa, C] : {std::pair{CpuIsa::Avx2, &C2}, std::pair{CpuIsa::Avx512, &C5}})
          cpu::gemm_f32_with(isa, ta, tb, M, N, K, A.data(), ta ? M : K, B.data(), tb ? K : N, C->data(), N, 0.f, par, &e);
        for (size_t i = 0; i < C2.size(); ++i)
          ASSERT_EQ(C2[i], C5[i]) << "element " << i << " M=" << M << " N=" << N << " K=" << K << " ta=" << ta
                                  << " tb=" << tb << " gelu=" << gelu;
      }
}
