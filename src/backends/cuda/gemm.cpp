#include "backends/cuda/gemm.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/memory.h"
#include "backends/cuda/render_gemm.h"
#include "backends/cuda/fuse_lir.h"
#include "lir/plan.h"

namespace rlx::cuda {

cublasLtHandle_t blas_handle() {
  static cublasLtHandle_t h = nullptr;
  static std::once_flag once;
  std::call_once(once, [] { check_blas(api().cublasLtCreate(&h), "create"); });
  return h;
}

namespace {

int64_t prod(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= d[i];
  return p;
}

bool consecutive(const std::vector<int64_t>& v, int64_t start) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != start + static_cast<int64_t>(i)) return false;
  return true;
}

}  // namespace

bool plan_gemm(const LirKernel& k, const std::vector<ValueType>& in, const ValueType& out, GemmShape* g,
               std::string* post_act) {
  DType t = in[0].dtype;
  if (t != DType::f32 && t != DType::f16 && t != DType::bf16) return false;
  *g = GemmShape{};
  g->dtype = t;
  *post_act = "none";
  Node nd{k.op, {}, {}, k.attrs, ""};
  auto a = static_dims(in[0].shape), b = static_dims(in[1].shape);
  if (k.op == OpKind::Linear) {
    g->M = prod(a, 0, a.size() - 1);
    g->K = a.back();
    g->N = b[0];
    g->b_trans = true;
    if (k.attrs.count("cuda_ln")) {  // {x, W, res, gamma, beta, b}: fold-gemm-layernorm
      g->bias = in.size() == 6;
      g->epilogue = "layernorm";
      g->eps = std::get<double>(k.attrs.at("cuda_ln_eps").v);
      return true;
    }
    g->bias = in.size() > 2;
    const std::string& act = attr_str(nd, "activation");
    if (act == "relu" || act == "gelu_tanh") {
      g->epilogue = act;
    } else if (act != "none") {
      // erf-GELU/SiLU: inside our GEMM's epilogue where it takes the shape (the
      // plan runs the separate kernel after a cuBLASLt candidate); otherwise the caller's kernel.
      GemmShape t = *g;
      t.epilogue = act;
      if (own_gemm_supported(t)) g->epilogue = act;
      else *post_act = act;
    }
    return true;
  }
  if (k.op == OpKind::MatMul) {
    if (a.size() == 1) a.insert(a.begin(), 1);
    if (b.size() == 1) b.push_back(1);
    std::vector<int64_t> ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
    g->M = a[a.size() - 2], g->K = a.back(), g->N = b.back();
    if (prod(bb, 0, bb.size()) == 1) {  // B shared: fold A's batch into M
      g->M *= prod(ba, 0, ba.size());
    } else if (prod(ba, 0, ba.size()) == 1) {
      g->batch = prod(bb, 0, bb.size());
      g->stride_b = g->K * g->N, g->stride_c = g->M * g->N;
    } else if (ba == bb) {
      g->batch = prod(ba, 0, ba.size());
      g->stride_a = g->M * g->K, g->stride_b = g->K * g->N, g->stride_c = g->M * g->N;
    } else {
      return false;
    }
    return true;
  }
  if (k.op == OpKind::DotGeneral) {
    const auto &lb = attr_ints(nd, "lhs_batch"), &rb = attr_ints(nd, "rhs_batch"), &lc = attr_ints(nd, "lhs_contract"),
               &rc = attr_ints(nd, "rhs_contract");
    int64_t nb = static_cast<int64_t>(lb.size()), nc = static_cast<int64_t>(lc.size());
    if (!consecutive(lb, 0) || !consecutive(rb, 0) || nc == 0) return false;
    int64_t ra = static_cast<int64_t>(a.size()), rbk = static_cast<int64_t>(b.size());
    if (consecutive(lc, ra - nc)) g->a_trans = false;
    else if (consecutive(lc, nb)) g->a_trans = true;
    else return false;
    if (consecutive(rc, nb)) g->b_trans = false;
    else if (consecutive(rc, rbk - nc)) g->b_trans = true;
    else return false;
    g->batch = prod(a, 0, nb);
    g->K = prod(a, lc[0], lc[0] + nc);
    g->M = prod(a, nb, ra) / g->K;
    g->N = prod(b, nb, rbk) / g->K;
    if (g->batch > 1) g->stride_a = g->M * g->K, g->stride_b = g->K * g->N, g->stride_c = g->M * g->N;
    return true;
  }
  return false;
}

GemmPlan::GemmPlan(const GemmShape& s, size_t workspace_bytes) : s_(s) {
  Api& a = api();
  int dt = s.dtype == DType::f16 ? kCudaR16F : (s.dtype == DType::bf16 ? kCudaR16BF : kCudaR32F);
  bool tf32 = s.dtype == DType::f32 && env_is_1("RLX_ALLOW_TF32");
  check_blas(a.cublasLtMatmulDescCreate(&desc_, tf32 ? kCompute32FFastTF32 : kCompute32F, kCudaR32F), "desc");
  // Column-major view: "A" is our B (N x K logical), "B" is our A (K x M logical), C is N x M.
  int opa = s.b_trans ? kOpT : kOpN, opb = s.a_trans ? kOpT : kOpN;
  check_blas(a.cublasLtMatmulDescSetAttribute(desc_, kDescTransA, &opa, sizeof opa), "transa");
  check_blas(a.cublasLtMatmulDescSetAttribute(desc_, kDescTransB, &opb, sizeof opb), "transb");
  int epi = kEpilogueDefault;
  if (s.bias) epi = s.epilogue == "relu" ? kEpilogueReluBias : (s.epilogue == "gelu_tanh" ? kEpilogueGeluBias : kEpilogueBias);
  else if (s.epilogue == "relu") epi = kEpilogueRelu;
  else if (s.epilogue == "gelu_tanh") epi = kEpilogueGelu;
  check_blas(a.cublasLtMatmulDescSetAttribute(desc_, kDescEpilogue, &epi, sizeof epi), "epilogue");
  uint64_t N = s.N, M = s.M, K = s.K;
  if (s.b_trans) check_blas(a.cublasLtMatrixLayoutCreate(&la_, dt, K, N, K), "layout a");
  else check_blas(a.cublasLtMatrixLayoutCreate(&la_, dt, N, K, N), "layout a");
  if (s.a_trans) check_blas(a.cublasLtMatrixLayoutCreate(&lb_, dt, M, K, M), "layout b");
  else check_blas(a.cublasLtMatrixLayoutCreate(&lb_, dt, K, M, K), "layout b");
  check_blas(a.cublasLtMatrixLayoutCreate(&lc_, dt, N, M, N), "layout c");
  if (s.batch > 1) {
    int32_t bc = static_cast<int32_t>(s.batch);
    int64_t sa = s.stride_b, sb = s.stride_a, sc = s.stride_c;
    for (auto [l, st] : {std::pair{la_, sa}, std::pair{lb_, sb}, std::pair{lc_, sc}}) {
      check_blas(a.cublasLtMatrixLayoutSetAttribute(l, kLayoutBatchCount, &bc, sizeof bc), "batch count");
      check_blas(a.cublasLtMatrixLayoutSetAttribute(l, kLayoutStridedBatchOffset, &st, sizeof st), "batch stride");
    }
    if (s.bias && s.bias_stride) {
      int64_t bs = s.bias_stride;
      check_blas(a.cublasLtMatmulDescSetAttribute(desc_, kDescBiasBatchStride, &bs, sizeof bs), "bias batch stride");
    }
  }
  cublasLtMatmulPreference_t pref = nullptr;
  check_blas(a.cublasLtMatmulPreferenceCreate(&pref), "preference");
  uint64_t ws = workspace_bytes;
  check_blas(a.cublasLtMatmulPreferenceSetAttribute(pref, kPrefMaxWorkspace, &ws, sizeof ws), "workspace");
  // Up to 24 candidates, all timed by the executable's autotuner (the heuristic's first choice is
  // often not the fastest for small GEMMs).
  constexpr int kMaxCandidates = 24;
  cublasLtMatmulHeuristicResult_t res[kMaxCandidates] = {};
  int found = 0;
  // The heuristic needs the bias pointer's alignment; a null pointer is accepted for planning.
  check_blas(a.cublasLtMatmulAlgoGetHeuristic(blas_handle(), desc_, la_, lb_, lc_, lc_, pref, kMaxCandidates, res, &found),
             "heuristic");
  cands_.assign(res, res + std::max(found, 0));
  a.cublasLtMatmulPreferenceDestroy(pref);
  RLX_CHECK(found > 0, "[cuda] cuBLASLt has no algorithm for a ", s.M, "x", s.N, "x", s.K, " ", dtype_name(s.dtype),
            " GEMM");
  algo_ = res[0].algo;
  ws_ = res[0].workspaceSize;
  build_own();
}

void GemmPlan::load(Own& o) {
  if (o.fn) return;
  bool hit = false;
  o.fn = load_function(o.ks, &hit);
  ++compiled_;
  disk_hits_ += hit;
}

// Our kernels for the shape (rendered now, compiled when first selected), and
// the separate epilogue kernel the cuBLASLt candidates need for erf-GELU/SiLU/layernorm (compiled
// now: candidate 0 runs it).
void GemmPlan::build_own() {
  const std::string& e = s_.epilogue;
  if (e == "gelu" || e == "silu") {
    post_ = Own{"+" + e, render_activation(e, ValueType{s_.dtype, {s_.batch * s_.M * s_.N}})};
    load(post_);
  } else if (e == "layernorm") {
    LirKernel ln;
    ln.kind = KernelKind::Library;
    ln.op = OpKind::LayerNorm;
    ln.attrs["eps"] = s_.eps;
    ln.attrs["axis"] = int64_t{-1};
    ln.attrs["cuda_residual"] = int64_t{1};
    ValueType x{s_.dtype, {s_.M, s_.N}}, v{s_.dtype, {s_.N}};
    post_ = Own{"+layernorm", {}};
    RLX_CHECK(render_library(ln, {x, x, v, v}, {x}, &post_.ks, api().sm_count), "[cuda] GEMM+layernorm: no norm kernel");
    load(post_);
    scratch_bytes_ = static_cast<size_t>(s_.M * s_.N * 2);
    scratch_ = CachingAllocator::get().alloc(scratch_bytes_);
  }
  for (const OwnGemmConfig& c : own_gemm_configs(s_, api().sm_count))
    own_.push_back(Own{"own " + c.name(), render_own_gemm(s_, c), nullptr, static_cast<unsigned>(s_.batch)});
  if (env_is_1("RLX_CUDA_GEMM_OWN_ONLY") && !own_.empty()) {
    base_ = static_cast<int>(cands_.size()), sel_ = base_;
    load(own_[0]);
  }
}

void GemmPlan::select(int i) {
  const int n = static_cast<int>(cands_.size());
  if (i + base_ >= n) load(own_[i + base_ - n]);  // may throw (NVRTC): the selection stays as it was
  sel_ = i + base_;
  if (sel_ < n) algo_ = cands_[sel_].algo, ws_ = cands_[sel_].workspaceSize;
}

std::string GemmPlan::choice() const {
  if (sel_ >= static_cast<int>(cands_.size())) return own_[sel_ - cands_.size()].name;
  return "cublasLt #" + std::to_string(sel_) + (post_.fn ? " " + post_.name : "");
}

GemmPlan::~GemmPlan() {
  Api& a = api();
  if (la_) a.cublasLtMatrixLayoutDestroy(la_);
  if (lb_) a.cublasLtMatrixLayoutDestroy(lb_);
  if (lc_) a.cublasLtMatrixLayoutDestroy(lc_);
  if (desc_) a.cublasLtMatmulDescDestroy(desc_);
  if (scratch_) CachingAllocator::get().free(scratch_, scratch_bytes_);
}

void GemmPlan::run(CUdeviceptr A, CUdeviceptr B, CUdeviceptr bias, CUdeviceptr C, CUdeviceptr ws, CUstream st) {
  Api& a = api();
  const bool ln = s_.epilogue == "layernorm";
  RLX_CHECK(!ln || (res_ && gamma_ && beta_), "[cuda] GEMM+layernorm: set_norm_args was not called");
  if (sel_ >= static_cast<int>(cands_.size())) {  // our kernel
    const Own& o = own_[sel_ - cands_.size()];
    int m = static_cast<int>(s_.M);
    void* params[] = {&A, &B, &bias, &res_, &gamma_, &beta_, &C, &m};
    check(a.cuLaunchKernel(o.fn, o.ks.grid, o.ks.grid_y, o.grid_z, o.ks.block, 1, 1, o.ks.smem, st, params, nullptr), "own GEMM");
    return;
  }
  const CUdeviceptr out = ln ? scratch_ : C;
  if (s_.bias && !bias_set_) {  // buffer addresses are fixed for the executable's life
    void* p = reinterpret_cast<void*>(bias);
    check_blas(a.cublasLtMatmulDescSetAttribute(desc_, kDescBiasPointer, &p, sizeof p), "bias pointer");
    bias_set_ = true;
  }
  float one = 1.0f, zero = 0.0f;
  check_blas(a.cublasLtMatmul(blas_handle(), desc_, &one, reinterpret_cast<void*>(B), la_, reinterpret_cast<void*>(A),
                              lb_, &zero, reinterpret_cast<void*>(out), lc_, reinterpret_cast<void*>(out), lc_, &algo_,
                              reinterpret_cast<void*>(ws), ws_, st),
             "matmul");
  if (post_.fn) {  // the epilogue cuBLASLt cannot do, as its own kernel
    CUdeviceptr args[5] = {scratch_, res_, gamma_, beta_, C};  // layernorm's operands; an activation takes C alone
    if (!ln) args[0] = C;
    void* params[5] = {&args[0], &args[1], &args[2], &args[3], &args[4]};
    check(a.cuLaunchKernel(post_.fn, post_.ks.grid, post_.ks.grid_y, 1, post_.ks.block, 1, 1, post_.ks.smem, st, params, nullptr),
          "GEMM epilogue kernel");
  }
}


}  // namespace rlx::cuda
