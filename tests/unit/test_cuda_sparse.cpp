// cuda sparse (src/backends/cuda/sparse_cusparse.*): the CG kernels compile with NVRTC anywhere;
// on a GPU, cuSPARSE SpMV/SpMM match the cpu op and the device CG matches the cpu CG.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/cuda/cuda_api.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/sparse_cusparse.h"
#include "cuda_test_util.h"
#include "rlx/sparse.h"

using namespace rlx;

namespace {

sparse::Csr laplacian(int64_t m, DType dt, DType it) { return sparse::poisson2d(m).to_csr(dt, it); }

}  // namespace

TEST(CudaSparse, CgKernelsCompileWithNvrtc) {
  std::string why;
  cuda::Api* a = cuda::nvrtc_only(&why);
  if (!a) GTEST_SKIP() << "no NVRTC here: " << why;
  for (bool f64 : {true, false})
    for (auto& src : cuda::sparse::cg_kernel_sources(f64)) {
      std::string bin;
      EXPECT_NO_THROW(bin = cuda::nvrtc_compile_for(*a, "sm_90", src)) << src;
      EXPECT_GT(bin.size(), 100u);
    }
}

TEST(CudaSparse, CusparseAndDeviceCgMatchCpu) {
  std::string why;
  if (!cuda_test::have_gpu(&why)) GTEST_SKIP() << "no GPU here: " << why;
  why = cuda::sparse::cusparse_probe();
  if (!why.empty()) GTEST_SKIP() << "no cuSPARSE here: " << why;
  for (DType dt : {DType::f64, DType::f32})
    for (DType it : {DType::i32, DType::i64}) {
      sparse::Csr a = laplacian(20, dt, it);
      cuda::sparse::DeviceCsr d(a);
      const int64_t n = a.rows;
      Tensor x(dt, {n}), X(dt, {n, 3});
      for (int64_t i = 0; i < n; ++i) x.set(i, std::sin(0.3 * static_cast<double>(i)));
      for (int64_t i = 0; i < 3 * n; ++i) X.set(i, std::cos(0.2 * static_cast<double>(i)));
      Tensor dense = a.to_dense();
      Tensor y = d.spmv(x), Y = d.spmm(X), yt = d.spmv(x, true);
      const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
      for (int64_t i = 0; i < n; ++i) {
        double s = 0, st = 0;
        for (int64_t j = 0; j < n; ++j) {
          s += dense.get(i * n + j) * x.get(j);
          st += dense.get(j * n + i) * x.get(j);
        }
        EXPECT_NEAR(y.get(i), s, tol * 8);
        EXPECT_NEAR(yt.get(i), st, tol * 8);
        for (int64_t k = 0; k < 3; ++k) {
          double sk = 0;
          for (int64_t j = 0; j < n; ++j) sk += dense.get(i * n + j) * X.get(j * 3 + k);
          EXPECT_NEAR(Y.get(i * 3 + k), sk, tol * 8);
        }
      }
      auto r = d.cg(x, dt == DType::f64 ? 1e-10 : 1e-5);
      EXPECT_LT(r.residual, dt == DType::f64 ? 1e-9 : 1e-4);
      EXPECT_GT(r.iterations, 5);
    }
}
