// cuBLASLt GEMM plans: row-major (batched) C = A·B (+bias, +relu/gelu_tanh epilogue) mapped onto
// cuBLASLt's column-major API as Cᵀ = Bᵀ·Aᵀ. Planned once per kernel at compile time.
#pragma once
#include <string>
#include <vector>

#include "backends/cuda/cuda_api.h"
#include "rlx/dtype.h"
#include "rlx/lir.h"

namespace rlx::cuda {

struct GemmShape {
  int64_t batch = 1, M = 0, N = 0, K = 0;
  bool a_trans = false, b_trans = false;  // A stored [K,M] / B stored [N,K] (row-major)
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements between batches (0 = broadcast)
  int64_t bias_stride = 0;                           // elements between batches of the bias
  DType dtype = DType::f32;
  bool bias = false;
  std::string epilogue = "none";  // none | relu | gelu_tanh (done by cuBLASLt)
};

// Maps a Linear/MatMul/DotGeneral kernel on float buffers to a GEMM; false when the layout is not
// a (batched) GEMM cuBLASLt can take directly. `post_act` receives an activation cuBLASLt cannot
// fuse exactly (erf gelu, silu), applied afterwards by a generated kernel.
bool plan_gemm(const LirKernel& k, const std::vector<ValueType>& in, const ValueType& out, GemmShape* g,
               std::string* post_act);

class GemmPlan {
 public:
  GemmPlan(const GemmShape& s, size_t workspace_bytes);
  ~GemmPlan();
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;
  void run(CUdeviceptr a, CUdeviceptr b, CUdeviceptr bias, CUdeviceptr c, CUdeviceptr workspace, CUstream s);
  const GemmShape& shape() const { return s_; }
  // Autotuning: the heuristic's top candidates (up to 24); select(i) makes candidate i the one run.
  int candidates() const { return static_cast<int>(cands_.size()); }
  void select(int i) { algo_ = cands_[i].algo, ws_ = cands_[i].workspaceSize; }

 private:
  GemmShape s_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, lc_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  std::vector<cublasLtMatmulHeuristicResult_t> cands_;
  size_t ws_ = 0;
  bool bias_set_ = false;
};

cublasLtHandle_t blas_handle();

}  // namespace rlx::cuda
