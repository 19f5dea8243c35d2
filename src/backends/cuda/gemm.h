// cuBLASLt GEMM plans: row-major (batched) C = A·B (+bias, +relu/gelu_tanh epilogue) mapped onto
// cuBLASLt's column-major API as Cᵀ = Bᵀ·Aᵀ. Planned once per kernel at compile time.
#pragma once
#include <string>
#include <vector>

#include "backends/cuda/cuda_api.h"
#include "backends/cuda/render.h"
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
  //   | gelu (erf) | silu | layernorm (Linear only; bias + residual + LayerNorm
  // over the row): our fused kernel, or cuBLASLt followed by the separate kernel (whichever times faster)
  double eps = 0;  // layernorm
};

// Maps a Linear/MatMul/DotGeneral kernel on float buffers to a GEMM; false when the layout is not
// a (batched) GEMM cuBLASLt can take directly. `post_act` receives an activation cuBLASLt cannot
// fuse exactly (erf gelu, silu), applied afterwards by a generated kernel.
bool plan_gemm(const LirKernel& k, const std::vector<ValueType>& in, const ValueType& out, GemmShape* g,
               std::string* post_act);

// The layernorm-into-gemm pass (src/lir/rewrite/gemm_epilogue.cpp) makes a Linear kernel with
// attr cuda_ln (its eps in cuda_ln_eps), inputs {x, W, res, gamma, beta, b}, writing the norm's
// output, where our fused GEMM takes the shape (own_gemm_configs, f16/bf16; cuda_schedule asks).

class GemmPlan {
 public:
  GemmPlan(const GemmShape& s, size_t workspace_bytes);
  ~GemmPlan();
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;
  void run(CUdeviceptr a, CUdeviceptr b, CUdeviceptr bias, CUdeviceptr c, CUdeviceptr workspace, CUstream s);
  const GemmShape& shape() const { return s_; }
  // Autotuning: the heuristic's top candidates (up to 24); select(i) makes candidate i the one run.
  // After cuBLASLt's candidates come our own kernels (render_gemm.h) where they
  // take the shape; a cuBLASLt candidate of an epilogue it cannot do runs the separate kernel after.
  // RLX_CUDA_GEMM_OWN_ONLY=1 (measurements): only our kernels where they take the shape.
  // Our kernels are NVRTC-compiled lazily, when select() first picks one (autotuning times them;
  // RLX_CUDA_GEMM_AUTOTUNE=0 keeps cuBLASLt's first choice and compiles none of them).
  int candidates() const { return static_cast<int>(cands_.size() + own_.size()) - base_; }
  void select(int i);
  // Kernels this plan compiled (or loaded from the disk cache) so far, for the executable's summary.
  int compiled() const { return compiled_; }
  int disk_hits() const { return disk_hits_; }
  std::string choice() const;  // "cublasLt #i" / "own BMxBNxBK ..." (+ the separate epilogue kernel)
  // layernorm: the residual, gamma and beta buffers (fixed for the plan's life).
  void set_norm_args(CUdeviceptr res, CUdeviceptr gamma, CUdeviceptr beta) { res_ = res, gamma_ = gamma, beta_ = beta; }

 private:
  GemmShape s_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, lc_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  std::vector<cublasLtMatmulHeuristicResult_t> cands_;
  size_t ws_ = 0;
  bool bias_set_ = false;
  // Our kernels (render_gemm.h) as further candidates, and the separate epilogue kernel.
  void build_own();
  struct Own {
    std::string name;
    KernelSource ks;         // rendered at plan time
    CUfunction fn = nullptr;  // loaded on first use (load())
    unsigned grid_z = 1;
  };
  void load(Own& o);
  int compiled_ = 0, disk_hits_ = 0;
  std::vector<Own> own_;
  int sel_ = 0, base_ = 0;
  Own post_;                  // cuBLASLt candidates: erf-GELU/SiLU in place, or the residual LayerNorm
  CUdeviceptr scratch_ = 0;   // layernorm via cuBLASLt: the GEMM's output before the norm
  size_t scratch_bytes_ = 0;
  CUdeviceptr res_ = 0, gamma_ = 0, beta_ = 0;
};

cublasLtHandle_t blas_handle();

}  // namespace rlx::cuda
