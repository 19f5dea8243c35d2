// Contractions: dot_general, linear and matmul. 2-D f32 dot_generals (the training step's X·W,
// Xᵀ·dH and dH·Wᵀ) run on our packed AVX2 GEMM (train_gemm below) with the training epilogues that
// the train-epilogues LIR pass (src/lir/rewrite) attaches; other f32 contractions go to sgemm (blas.cpp:
// the same packed GEMM, or OpenBLAS split over our pool under RLX_GEMM=blas; a batch of small GEMMs
// is split over the pool by batch element); other dtypes use one packed batched loop GEMM (C[b] = A[b] · B[b],
// A [M,K], B [K,N] row-major).
#include <algorithm>
#include <array>
#include <complex>
#include <cstring>
#include <type_traits>

#include "backends/cpu/blas.h"
#include "backends/cpu/gemm_avx2.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/vmath.h"

namespace rlx::cpu {

namespace {

template <class T, class Acc>
void gemm(const T* A, const T* B, T* C, int64_t M, int64_t K, int64_t N) {
  // i-k-j order keeps the inner loop contiguous so the compiler vectorizes it.
  std::vector<Acc> row(static_cast<size_t>(N));
  for (int64_t i = 0; i < M; ++i) {
    std::fill(row.begin(), row.end(), Acc{});
    for (int64_t k = 0; k < K; ++k) {
      Acc a = static_cast<Acc>(A[i * K + k]);
      const T* b = B + k * N;
      for (int64_t j = 0; j < N; ++j) row[j] += a * static_cast<Acc>(b[j]);
    }
    for (int64_t j = 0; j < N; ++j) C[i * N + j] = static_cast<T>(row[j]);
  }
}

// Copies `t` permuted so that dims `order` come first..last, into contiguous memory.
template <class T>
std::vector<T> permute(const Tensor& t, const std::vector<int64_t>& order) {
  const auto& s = t.shape();
  int64_t r = t.rank();
  std::vector<int64_t> stride(r, 1);
  for (int64_t i = r - 2; i >= 0; --i) stride[i] = stride[i + 1] * s[i + 1];
  std::vector<T> out(static_cast<size_t>(t.numel()));
  std::vector<int64_t> idx(r, 0);
  const T* src = t.data<T>();
  for (int64_t n = 0; n < t.numel(); ++n) {
    int64_t off = 0;
    for (int64_t d = 0; d < r; ++d) off += idx[order[d]] * stride[order[d]];
    out[n] = src[off];
    for (int64_t d = r - 1; d >= 0; --d) {
      if (++idx[order[d]] < s[order[d]]) break;
      idx[order[d]] = 0;
    }
  }
  return out;
}

std::vector<int64_t> norm(std::vector<int64_t> v, int64_t r) {
  for (auto& x : v)
    if (x < 0) x += r;
  return v;
}

// Epilogues the train-epilogues LIR pass attaches to a 2-D dot_general (attrs name the input
// slots): cpu_bias (+ activation relu) for the forward layer, cpu_mask for ReLU's backward
// (C = mask > 0 ? C : 0), cpu_sgd_w / cpu_sgd_lr for the SGD update (C = W - lr * C).
// cpu_colsum (an output slot): the bias gradient, column sums of B [K,N].
struct TrainEpi {
  const float* bias = nullptr;  // [N]
  bool relu = false;            // max(v, 0), NaN kept (as the reference max)
  const float* mask = nullptr;  // [M,N]
  const float* sgd_w = nullptr;  // [M,N]
  float lr = 0.f;
  float* colsum = nullptr;  // [N]
};

int64_t attr_or_neg(const Node& n, const char* k) {
  auto it = n.attrs.find(k);
  return it == n.attrs.end() ? -1 : attr_int(n, k);
}

TrainEpi train_epi(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  TrainEpi e;
  int64_t i;
  if ((i = attr_or_neg(n, "cpu_colsum")) >= 0) e.colsum = out[i].data<float>();
  if ((i = attr_or_neg(n, "cpu_bias")) >= 0) e.bias = in[i].data<float>();
  if (n.attrs.count("activation") && attr_str(n, "activation") == "relu") e.relu = true;
  if ((i = attr_or_neg(n, "cpu_mask")) >= 0) e.mask = in[i].data<float>();
  if ((i = attr_or_neg(n, "cpu_sgd_w")) >= 0) e.sgd_w = in[i].data<float>();
  if ((i = attr_or_neg(n, "cpu_sgd_lr")) >= 0) e.lr = in[i].data<float>()[0];
  return e;
}

// ReLU's backward mask on finished rows [r0, r1) of C (GemmEpi::rows_done): C = mask > 0 ? C : 0.
struct MaskCtx {
  const float* mask;
  float* C;
  int64_t n;  // columns (= row stride of C and mask)
};
RLX_SIMD void mask_rows(void* p, int64_t r0, int64_t r1) {
  const auto& m = *static_cast<const MaskCtx*>(p);
  // Restrict-qualified locals let GCC vectorize this as a blend; through the struct it stayed a
  // scalar loop with a data-dependent branch (~50% mispredicted on a ReLU mask).
  const float* __restrict mk = m.mask + r0 * m.n;
  float* __restrict c = m.C + r0 * m.n;
  for (int64_t i = 0, e = (r1 - r0) * m.n; i < e; ++i) {
    const float v = c[i];
    c[i] = mk[i] > 0.f ? v : 0.f;
  }
}

// C[M,N] (row stride N) = op(A)[M,K] · op(B)[K,N] with the training epilogue: an adapter onto
// gemm_f32 (bias, ReLU as GemmAct::Relu, the mask as GemmEpi::mask, the SGD update as residual = W
// with alpha = -lr). RLX_GEMM=blas (or no AVX2/FMA) runs sgemm and the epilogue afterwards.
void train_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                int64_t ldb, float* C, const TrainEpi& te) {
  if (M <= 0 || N <= 0) return;
  GemmEpi e;
  e.bias = te.bias;
  e.residual = te.sgd_w;
  e.ldr = N;
  e.act = te.relu ? GemmAct::Relu : GemmAct::None;
  // the mask is applied on each tile in registers (GemmEpi::mask), not as a pass
  // over finished rows.
  e.mask = te.mask;
  e.ldm = N;
  e.colsum = tb ? nullptr : te.colsum;  // taken while B is packed
  MaskCtx mc{te.mask, C, N};
  const float alpha = te.sgd_w ? -te.lr : 1.f;
  if (fast_gemm_available()) return gemm_f32(ta, tb, M, N, K, A, lda, B, ldb, C, N, 0.f, true, &e, alpha);
  if (te.colsum && !tb)  // rows in order, as the reduce_sum kernel
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) te.colsum[j] = k == 0 ? B[j] : te.colsum[j] + B[k * ldb + j];
  sgemm(ta, tb, M, N, K, A, lda, B, ldb, C, N);
  for (int64_t r = 0; r < M; ++r) {
    float* c = C + r * N;
    for (int64_t j = 0; j < N; ++j) {
      float v = alpha * c[j] + (e.bias ? e.bias[j] : 0.f) + (e.residual ? e.residual[r * N + j] : 0.f);
      c[j] = te.relu && v < 0.f ? 0.f : v;
    }
  }
  if (te.mask) mask_rows(&mc, 0, M);
}

// C[b] = A[b] · B[b] for b in [0, batch) (A [M,K], B [K,N], C [M,N], all row-major, C contiguous);
// operands(b) gives A[b] and B[b]. Small GEMMs (under ~10 MFLOP) are split over the pool by batch
// element, each on one thread; bigger ones one after another, each split over the pool.
template <class F>
void batched_sgemm(int64_t batch, int64_t M, int64_t N, int64_t K, F operands, float* C) {
  if (batch > 1 && 2.0 * M * N * K < 1e7 && fast_gemm_available()) {
    parallel_for(batch, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const auto op = operands(b);
        sgemm_serial(false, false, M, N, K, op[0], K, op[1], N, C + b * M * N, N);
      }
    });
    return;
  }
  for (int64_t b = 0; b < batch; ++b) {
    const auto op = operands(b);
    sgemm(false, false, M, N, K, op[0], K, op[1], N, C + b * M * N, N);
  }
}

template <class T, class Acc>
void dot_general_t(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  Tensor& c = out[0];
  const Tensor &a = in[0], &b = in[1];
  if constexpr (std::is_same_v<T, float>) {
    // [training] 2-D operands in GEMM layout or its transpose (the backward pass emits x^T.g and
    // g.W^T) go to our packed GEMM with transpose flags instead of being permuted into copies.
    // Read straight from the attrs: this path allocates nothing.
    const auto &lb0 = attr_ints(n, "lhs_batch"), &rb0 = attr_ints(n, "rhs_batch");
    const auto &lc0 = attr_ints(n, "lhs_contract"), &rc0 = attr_ints(n, "rhs_contract");
    if (lb0.empty() && rb0.empty() && a.rank() == 2 && b.rank() == 2 && lc0.size() == 1 && rc0.size() == 1) {
      const int64_t l = lc0[0] < 0 ? lc0[0] + 2 : lc0[0], r = rc0[0] < 0 ? rc0[0] + 2 : rc0[0];
      const bool ta = l == 0, tb = r == 1;
      const int64_t M = a.shape()[ta ? 1 : 0], K = a.shape()[l], N = b.shape()[tb ? 0 : 1];
      train_gemm(ta, tb, M, N, K, a.data<float>(), ta ? M : K, b.data<float>(), tb ? K : N, c.data<float>(),
                 train_epi(n, in, out));
      return;
    }
  }
  auto lb = norm(attr_ints(n, "lhs_batch"), a.rank()), rb = norm(attr_ints(n, "rhs_batch"), b.rank());
  auto lc = norm(attr_ints(n, "lhs_contract"), a.rank()), rc = norm(attr_ints(n, "rhs_contract"), b.rank());
  auto free_dims = [](int64_t r, const std::vector<int64_t>& x, const std::vector<int64_t>& y) {
    std::vector<int64_t> f;
    for (int64_t i = 0; i < r; ++i)
      if (std::find(x.begin(), x.end(), i) == x.end() && std::find(y.begin(), y.end(), i) == y.end()) f.push_back(i);
    return f;
  };
  auto lf = free_dims(a.rank(), lb, lc), rf = free_dims(b.rank(), rb, rc);
  int64_t B = 1, M = 1, K = 1, N = 1;
  for (auto d : lb) B *= a.shape()[d];
  for (auto d : lf) M *= a.shape()[d];
  for (auto d : lc) K *= a.shape()[d];
  for (auto d : rf) N *= b.shape()[d];
  std::vector<int64_t> ao = lb, bo = rb;
  ao.insert(ao.end(), lf.begin(), lf.end());
  ao.insert(ao.end(), lc.begin(), lc.end());
  bo.insert(bo.end(), rc.begin(), rc.end());
  bo.insert(bo.end(), rf.begin(), rf.end());
  auto A = permute<T>(a, ao);
  auto Bm = permute<T>(b, bo);
  T* C = c.data<T>();
  if constexpr (std::is_same_v<T, float>) {
    batched_sgemm(B, M, N, K, [&](int64_t i) {
      return std::array<const float*, 2>{A.data() + i * M * K, Bm.data() + i * K * N};
    }, C);
    return;
  }
  for (int64_t i = 0; i < B; ++i) gemm<T, Acc>(A.data() + i * M * K, Bm.data() + i * K * N, C + i * M * N, M, K, N);
}

}  // namespace

void dot_general(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  switch (in[0].dtype()) {
    case DType::f32: return dot_general_t<float, float>(n, in, out);
    case DType::f64: return dot_general_t<double, double>(n, in, out);
    case DType::i32: return dot_general_t<int32_t, int64_t>(n, in, out);
    case DType::i64: return dot_general_t<int64_t, int64_t>(n, in, out);
    case DType::c64: return dot_general_t<std::complex<float>, std::complex<float>>(n, in, out);
    default: return generic_kernel(n, in, out);
  }
}

namespace {

template <class T>
T activate(T v, const std::string& act) {
  if (act == "relu") return v > T(0) ? v : T(0);
  if (act == "gelu") return T(0.5) * v * (T(1) + std::erf(v / std::sqrt(T(2))));
  if (act == "gelu_tanh")
    return T(0.5) * v * (T(1) + std::tanh(std::sqrt(T(2) / T(M_PI)) * (v + T(0.044715) * v * v * v)));
  if (act == "silu") return v / (T(1) + std::exp(-v));
  return v;
}

template <class T>
void linear_t(const Node& n, const std::vector<Tensor>& in, Tensor& out) {
  const Tensor &x = in[0], &w = in[1];
  int64_t O = w.shape()[0], I = w.shape()[1], rows = x.numel() / std::max<int64_t>(I, 1);
  const T *X = x.data<T>(), *W = w.data<T>(), *Bv = in.size() > 2 ? in[2].data<T>() : nullptr;
  T* Y = out.data<T>();
  const std::string& act = attr_str(n, "activation");
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = X + r * I;
    for (int64_t o = 0; o < O; ++o) {
      const T* wr = W + o * I;
      T s = 0;
      for (int64_t k = 0; k < I; ++k) s += xr[k] * wr[k];
      if (Bv) s += Bv[o];
      Y[r * O + o] = activate(s, act);
    }
  }
}

template <class T>
void matmul_t(const Tensor& a0, const Tensor& b0, Tensor& c) {
  // Promote vectors, broadcast batch dims, then one GEMM per batch element.
  std::vector<int64_t> as = a0.shape(), bs = b0.shape();
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  size_t br = std::max(as.size(), bs.size()) - 2;
  std::vector<int64_t> ab(br, 1), bb(br, 1), ob(br, 1);
  for (size_t i = 0; i < as.size() - 2; ++i) ab[br - (as.size() - 2) + i] = as[i];
  for (size_t i = 0; i < bs.size() - 2; ++i) bb[br - (bs.size() - 2) + i] = bs[i];
  int64_t total = 1;
  for (size_t i = 0; i < br; ++i) total *= (ob[i] = std::max(ab[i], bb[i]));
  const T *A = a0.data<T>(), *B = b0.data<T>();
  T* C = c.data<T>();
  auto offsets = [&](int64_t t) {  // A's and B's batch element for output batch element t
    int64_t rem = t, ao = 0, bo = 0, as_ = 1, bs_ = 1;
    for (size_t i = br; i-- > 0;) {
      int64_t idx = rem % ob[i];
      rem /= ob[i];
      ao += (ab[i] == 1 ? 0 : idx) * as_;
      bo += (bb[i] == 1 ? 0 : idx) * bs_;
      as_ *= ab[i];
      bs_ *= bb[i];
    }
    return std::array<int64_t, 2>{ao, bo};
  };
  if constexpr (std::is_same_v<T, float>) {
    batched_sgemm(total, M, N, K, [&](int64_t t) {
      const auto o = offsets(t);
      return std::array<const float*, 2>{A + o[0] * M * K, B + o[1] * K * N};
    }, C);
  } else {
    for (int64_t t = 0; t < total; ++t) {
      const auto o = offsets(t);
      gemm<T, T>(A + o[0] * M * K, B + o[1] * K * N, C + t * M * N, M, K, N);
    }
  }
}

}  // namespace

namespace {

enum class Act { None, Relu, Gelu, GeluTanh, Silu };

struct LinearEpi {
  float* Y;
  const float* bias;
  int64_t ldy;
  Act act;
};

RLX_SIMD void linear_epilogue(void* ctx, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  auto* e = static_cast<LinearEpi*>(ctx);
  for (int64_t r = r0; r < r1; ++r) {
    float* y = e->Y + r * e->ldy;
    if (e->bias)
      for (int64_t c = c0; c < c1; ++c) y[c] += e->bias[c];
    switch (e->act) {
      case Act::None: break;
      case Act::Relu:
        for (int64_t c = c0; c < c1; ++c) y[c] = y[c] > 0.f ? y[c] : 0.f;
        break;
      case Act::Gelu:
        for (int64_t c = c0; c < c1; ++c) y[c] = vm::gelu(y[c]);
        break;
      case Act::GeluTanh:
        for (int64_t c = c0; c < c1; ++c) y[c] = vm::gelu_tanh(y[c]);
        break;
      case Act::Silu:
        for (int64_t c = c0; c < c1; ++c) y[c] = y[c] * vm::logistic(y[c]);
        break;
    }
  }
}

// Y[rows,O] = X[rows,I] · W[O,I]ᵀ (+ b), then the activation, as one sgemm with an epilogue.
void linear_f32(const Node& n, const std::vector<Tensor>& in, Tensor& out) {
  const Tensor &x = in[0], &w = in[1];
  int64_t O = w.shape()[0], I = w.shape()[1], rows = x.numel() / std::max<int64_t>(I, 1);
  const std::string& a = attr_str(n, "activation");
  LinearEpi e{out.data<float>(), in.size() > 2 ? in[2].data<float>() : nullptr, O, Act::None};
  if (a == "relu") e.act = Act::Relu;
  if (a == "gelu") e.act = Act::Gelu;
  if (a == "gelu_tanh") e.act = Act::GeluTanh;
  if (a == "silu") e.act = Act::Silu;
  bool epi = e.bias || e.act != Act::None;
  if (sgemm_on_rlx(rows, num_threads() == 1)) {  // bias and activation on the tiles in registers
    GemmEpi ge;
    ge.bias = e.bias;
    ge.act = e.act == Act::Relu ? GemmAct::Relu : e.act == Act::Gelu ? GemmAct::Gelu
             : e.act == Act::GeluTanh ? GemmAct::GeluTanh : e.act == Act::Silu ? GemmAct::Silu : GemmAct::None;
    return gemm_f32(false, true, rows, O, I, x.data<float>(), I, w.data<float>(), I, e.Y, O, 0.f, true, &ge);
  }
  sgemm(false, true, rows, O, I, x.data<float>(), I, w.data<float>(), I, e.Y, O, false, epi ? &linear_epilogue : nullptr,
        &e);
}

}  // namespace

namespace {

struct LnCtx {
  const float *X, *G, *B;
  float* Y;
  int64_t D;
  float eps;
};

void ln_rows(void* c, int64_t r0, int64_t r1) {
  auto* l = static_cast<LnCtx*>(c);
  layer_norm_rows_f32(l->X, l->G, l->B, l->Y, r0, r1, l->D, l->eps);
}

int64_t attr_or(const Node& n, const char* k, int64_t d) {
  auto it = n.attrs.find(k);
  return it == n.attrs.end() ? d : attr_int(n, k);
}

}  // namespace

bool linear_fast(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out, const float* packed) {
  if (!fast_gemm_available() || in[0].dtype() != DType::f32) return false;
  const std::string& a = attr_str(n, "activation");
  GemmEpi e;
  if (a == "relu") e.act = GemmAct::Relu;
  else if (a == "gelu") e.act = GemmAct::Gelu;
  else if (a == "gelu_tanh") e.act = GemmAct::GeluTanh;
  else if (a == "silu") e.act = GemmAct::Silu;
  else if (!(a.empty() || a == "none")) return false;
  const Tensor &x = in[0], &w = in[1];
  const int64_t O = w.shape()[0], I = w.shape()[1], rows = x.numel() / std::max<int64_t>(I, 1);
  const int64_t res = attr_or(n, "cpu_res", -1), lng = attr_or(n, "cpu_ln_g", -1), lnb = attr_or(n, "cpu_ln_b", -1);
  const bool has_bias = in.size() > 2 && res != 2 && lng != 2;
  if (has_bias) e.bias = in[2].data<float>();
  if (res >= 0) {
    e.residual = in[res].data<float>();
    e.ldr = O;
  }
  float* Y = out[0].data<float>();
  LnCtx ln{};
  if (lng >= 0) {  // fused LayerNorm over each finished row block, into out[1]
    ln = {Y, in[lng].data<float>(), lnb >= 0 ? in[lnb].data<float>() : nullptr, out[1].data<float>(), O,
          static_cast<float>(attr_float(n, "cpu_ln_eps"))};
    e.rows_done = &ln_rows;
    e.ctx = &ln;
  }
  if (packed)
    gemm_packed(rows, O, I, x.data<float>(), I, packed, Y, O, &e);
  else  // weight not packed ahead (not a constant): packed per call by the general entry
    gemm_f32(false, true, rows, O, I, x.data<float>(), I, w.data<float>(), I, Y, O, 0.f, true, &e);
  return true;
}

void linear(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  if (linear_fast(n, in, out, nullptr)) return;
  if (in[0].dtype() == DType::f32) {
    const std::string& a = attr_str(n, "activation");
    if (a == "none" || a == "relu" || a == "gelu" || a == "gelu_tanh" || a == "silu" || a.empty())
      return linear_f32(n, in, out[0]);
    return linear_t<float>(n, in, out[0]);
  }
  if (in[0].dtype() == DType::f64) return linear_t<double>(n, in, out[0]);
  generic_kernel(n, in, out);
}

void matmul(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  if (in[0].dtype() == DType::f32) return matmul_t<float>(in[0], in[1], out[0]);
  if (in[0].dtype() == DType::f64) return matmul_t<double>(in[0], in[1], out[0]);
  generic_kernel(n, in, out);
}

}  // namespace rlx::cpu
