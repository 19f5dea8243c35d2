#include "backends/cuda/gemm.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>

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
    g->bias = in.size() > 2;
    const std::string& act = attr_str(nd, "activation");
    if (act == "relu" || act == "gelu_tanh") g->epilogue = act;
    else *post_act = act;
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
  bool tf32 = s.dtype == DType::f32 && std::getenv("RLX_ALLOW_TF32") && std::string(std::getenv("RLX_ALLOW_TF32")) == "1";
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
}

GemmPlan::~GemmPlan() {
  Api& a = api();
  if (la_) a.cublasLtMatrixLayoutDestroy(la_);
  if (lb_) a.cublasLtMatrixLayoutDestroy(lb_);
  if (lc_) a.cublasLtMatrixLayoutDestroy(lc_);
  if (desc_) a.cublasLtMatmulDescDestroy(desc_);
}

void GemmPlan::run(CUdeviceptr A, CUdeviceptr B, CUdeviceptr bias, CUdeviceptr C, CUdeviceptr ws, CUstream st) {
  Api& a = api();
  if (s_.bias && !bias_set_) {  // buffer addresses are fixed for the executable's life
    void* p = reinterpret_cast<void*>(bias);
    check_blas(a.cublasLtMatmulDescSetAttribute(desc_, kDescBiasPointer, &p, sizeof p), "bias pointer");
    bias_set_ = true;
  }
  float one = 1.0f, zero = 0.0f;
  check_blas(a.cublasLtMatmul(blas_handle(), desc_, &one, reinterpret_cast<void*>(B), la_, reinterpret_cast<void*>(A),
                              lb_, &zero, reinterpret_cast<void*>(C), lc_, reinterpret_cast<void*>(C), lc_, &algo_,
                              reinterpret_cast<void*>(ws), ws_, st),
             "matmul");
}

}  // namespace rlx::cuda
