// CSR on the cuda device: cuSPARSE SpMV/SpMM (libcusparse loaded at run time with dlopen, like the
// driver, NVRTC and cuBLASLt in cuda_api.cpp) and a conjugate-gradient solve that stays on the GPU
// (cuSPARSE SpMV + NVRTC kernels for the dot products and vector updates, convergence read back
// every few iterations). A library API for now: the cuda graph executor does not claim the
// sparse_* ops yet (they run on cpu), see docs/sparse.md.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "rlx/sparse.h"
#include "rlx/tensor.h"

namespace rlx::cuda::sparse {

// "" when libcusparse loaded and a GPU is usable, else why not.
std::string cusparse_probe();
// The CUDA C of the CG kernels (dot, x/r update, scalar step, direction) for f64 or f32, so tests
// can NVRTC-compile them where no GPU is present.
std::vector<std::string> cg_kernel_sources(bool f64);

// A CSR matrix resident on the GPU (f32/f64 values, i32/i64 indices), with its cuSPARSE descriptor.
class DeviceCsr {
 public:
  explicit DeviceCsr(const rlx::sparse::Csr& a);
  ~DeviceCsr();
  DeviceCsr(const DeviceCsr&) = delete;
  DeviceCsr& operator=(const DeviceCsr&) = delete;

  // y = op(A) x and Y = op(A) X (X [cols, k] row-major), host tensors in and out.
  Tensor spmv(const Tensor& x, bool transpose = false);
  Tensor spmm(const Tensor& x, bool transpose = false);
  // Times `reps` device-resident products back to back between CUDA events; milliseconds per call.
  double time_spmv(int reps);
  double time_spmm(int64_t k, int reps);

  struct CgResult {
    Tensor x;
    int64_t iterations = 0;
    double residual = 0;  // |b - A x| / |b|, recomputed on the host in double at the end
    double solve_ms = 0;  // device time of the iteration (uploads/downloads excluded)
  };
  // Unpreconditioned CG (A SPD), stopping at |r| <= tol |b| or maxiter (0 = 10 n).
  CgResult cg(const Tensor& b, double tol, int64_t maxiter = 0);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  rlx::sparse::Csr host_;
};

}  // namespace rlx::cuda::sparse
