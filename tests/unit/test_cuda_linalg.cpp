// cholesky on cuda (cuSOLVER between two NVRTC kernels): legalization claims it natively, the kernels
// around the cuSOLVER call compile with NVRTC (no GPU needed), and on a GPU the factor matches the
// reference in f64/f32, batched and single, with the NaN + info policy for a matrix that is not
// positive definite. scripts/device/h200_linalg.sh runs these on the H200.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/cuda/cuda_api.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/solver.h"
#include "cuda_test_util.h"
#include "rlx/builder.h"
#include "rlx/reference.h"
#include "rlx/session.h"

using namespace rlx;

namespace {

Graph chol_graph(DType dt, std::vector<int64_t> shape) {
  Graph g;
  Builder b(g);
  for (auto o : b.op(OpKind::Cholesky, {b.input("a", dt, to_shape(shape))})) b.output(o);
  return g;
}

Tensor spd(DType dt, int64_t batch, int64_t n, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  Tensor m = cuda_test::rnd(DType::f64, {batch, n, n}, rng), a(dt, {batch, n, n});
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double v = i == j ? static_cast<double>(n) : 0.0;
        for (int64_t k = 0; k < n; ++k) v += m.get((b * n + i) * n + k) * m.get((b * n + j) * n + k);
        a.set((b * n + i) * n + j, v);
      }
  return a;
}

TEST(LinalgCuda, CholeskyIsNativeAndItsKernelsCompile) {
  std::string why;
  cuda::Api* a = cuda::nvrtc_only(&why);
  for (DType dt : {DType::f32, DType::f64})
    for (std::vector<int64_t> shape : {std::vector<int64_t>{5, 5}, std::vector<int64_t>{3, 2, 8, 8}}) {
      LirProgram p = cuda_test::cuda_lir(chol_graph(dt, shape));
      int solver = 0;
      for (auto& [label, ks] : cuda::render_for_check(p)) {
        if (label.find("[cusolver]") != std::string::npos) ++solver;
        if (!ks.code.empty() && a) {
          EXPECT_NO_THROW(cuda::nvrtc_compile_for(*a, "sm_90", ks.code)) << label;
        }
      }
      EXPECT_EQ(solver, 1);
    }
  if (!a) GTEST_SKIP() << "rendered, not compiled: no NVRTC here: " << why;
}

TEST(LinalgCuda, CholeskyMatchesReferenceOnGpu) {
  std::string why;
  if (!cuda_test::have_gpu(&why)) GTEST_SKIP() << "no GPU here: " << why;
  for (DType dt : {DType::f64, DType::f32})
    for (auto [batch, n] : std::vector<std::pair<int64_t, int64_t>>{{1, 5}, {1, 200}, {64, 8}, {16, 33}}) {
      Tensor a = spd(dt, batch, n, 3 + n);
      if (batch > 1) a.set((n + 2) * n + 2, -1e3);  // matrix 1 is not positive definite
      Graph g = chol_graph(dt, {batch, n, n});
      CompileOptions o;
      o.device = "cuda";
      CompiledModel cm(g, o);
      auto got = cm.run({a});
      got = cm.run({a});  // the second run replays the captured CUDA graph
      auto want = reference_run(g, {a});
      double tol = dt == DType::f64 ? 1e-10 : 1e-4;
      for (int64_t b = 0; b < batch; ++b) {
        EXPECT_EQ(got[1].get(b), want[1].get(b)) << "info, matrix " << b;
        for (int64_t i = 0; i < n * n; ++i) {
          double w = want[0].get(b * n * n + i), x = got[0].get(b * n * n + i);
          if (std::isnan(w)) {
            ASSERT_TRUE(std::isnan(x)) << "matrix " << b;
          } else {
            ASSERT_NEAR(x, w, tol * (1 + std::abs(w))) << dtype_name(dt) << " " << batch << "x" << n << " at " << i;
          }
        }
      }
    }
}

}  // namespace
