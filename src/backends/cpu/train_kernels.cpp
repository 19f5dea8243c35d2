// Kernels the training step needs that the inference kernels did not cover:
// (1) f32 reductions over one contiguous run of axes (bias gradients, softmax sums), argmax/argmin,
// and broadcast_in_dim for any dtype (everything else keeps the reference-based generic kernel);
// (2) fuse_train_lir, the schedule rewrite that moves bias/ReLU, ReLU's backward mask and the SGD
// update into the epilogues of the step's GEMMs (run by train_gemm in gemm.cpp). Fused bodies that
// mix f32 with bool/i32/i64 run on fused.cpp's one typed evaluator.
// (3) fuse_rows_lir: row-wise chains around a last-axis reduction (the loss head)
// become one row kernel (fused.cpp rows_kernel); short-row reductions 8 rows per AVX2 vector.
#include "backends/cpu/train_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include "backends/cpu/gemm_avx2.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/vmath.h"
#include "lir/plan.h"
#include "runtime/env.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "backends/cpu/simd_avx2.h"
#define RLX_ROWS_AVX2 1  // short rows, 8 per vector
#endif

namespace rlx::cpu {

namespace {

// ---------------------------------------------------------------------------------------------
// Reductions, arg-reductions, broadcast.

// Splits `shape` into [outer, red, inner] when `axes` (normalized) are one contiguous run.
bool split3(const std::vector<int64_t>& shape, const std::vector<int64_t>& axes_in, int64_t* outer, int64_t* red,
            int64_t* inner) {
  thread_local std::vector<int64_t> axes;  // reused: a warm run allocates nothing
  axes.assign(axes_in.begin(), axes_in.end());
  int64_t r = static_cast<int64_t>(shape.size());
  for (auto& a : axes) {
    if (a < 0) a += r;
    if (a < 0 || a >= r) return false;
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  if (axes.empty()) return false;
  for (size_t i = 1; i < axes.size(); ++i)
    if (axes[i] != axes[0] + static_cast<int64_t>(i)) return false;
  *outer = *red = *inner = 1;
  for (int64_t d = 0; d < r; ++d) {
    if (d < axes.front()) *outer *= shape[d];
    else if (d <= axes.back()) *red *= shape[d];
    else *inner *= shape[d];
  }
  return true;
}

enum class Red { Sum, Max, Min };

constexpr int64_t kReduceGrain = 131072;  // elements per parallel chunk of a reduction

inline float fold(Red k, float acc, float x) {
  if (k == Red::Sum) return acc + x;
  if (k == Red::Max) return (x > acc || x != x) ? x : acc;  // NaN sticks (acc NaN compares false)
  return (x < acc || x != x) ? x : acc;
}

// One row in the fixed order every f32 reduction here uses: 8 lanes strided by 8, lanes folded in
// order, then the tail (n < 8: left to right). Inlined into the RLX_SIMD loops below.
inline __attribute__((always_inline)) float reduce_row(Red k, const float* x, int64_t n) {
  float acc[8];
  int64_t i = 0;
  if (n >= 8) {
    for (int l = 0; l < 8; ++l) acc[l] = x[l];
    for (i = 8; i + 8 <= n; i += 8)
      for (int l = 0; l < 8; ++l) acc[l] = fold(k, acc[l], x[i + l]);
    float v = acc[0];
    for (int l = 1; l < 8; ++l) v = fold(k, v, acc[l]);
    for (; i < n; ++i) v = fold(k, v, x[i]);
    return v;
  }
  float v = x[0];
  for (i = 1; i < n; ++i) v = fold(k, v, x[i]);
  return v;
}

// The index of the first maximum (max) / minimum of p[0], p[stride], ... p[(n-1) stride]: first
// extreme wins; a NaN is the extreme (the first NaN wins and stops the scan), like the reference.
inline int64_t arg_scan(const float* p, int64_t n, int64_t stride, bool max) {
  int64_t best = 0;
  float b = p[0];
  for (int64_t j = 1; j < n && b == b; ++j) {
    float v = p[j * stride];
    if (v != v || (max ? v > b : v < b)) {
      b = v;
      best = j;
    }
  }
  return best;
}

#ifdef RLX_ROWS_AVX2
// Rows shorter than 16 fold left to right (reduce_row's order for n < 16), so 8
// rows at a time in the lanes of one vector, one strided gather per column, give the same bits as
// reduce_row without its branchy scalar max (a mispredicted branch per new maximum on real data).
__attribute__((target("avx2"))) int64_t reduce_short_rows_avx2(Red k, const float* x, int64_t rows, int64_t n,
                                                                  float* y) {
  const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(static_cast<int>(n)));
  int64_t r = 0;
  for (; r + 8 <= rows; r += 8) {
    const float* p = x + r * n;
    __m256 acc = _mm256_i32gather_ps(p, idx, 4);
    for (int64_t j = 1; j < n; ++j) {
      __m256 v = _mm256_i32gather_ps(p + j, idx, 4);
      if (k == Red::Sum) {
        acc = _mm256_add_ps(acc, v);
      } else {
        __m256 ext = k == Red::Max ? _mm256_cmp_ps(v, acc, _CMP_GT_OQ) : _mm256_cmp_ps(v, acc, _CMP_LT_OQ);
        __m256 take = _mm256_or_ps(ext, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        acc = _mm256_blendv_ps(acc, v, take);
      }
    }
    _mm256_storeu_ps(y + r, acc);
  }
  return r;
}

// Arg-reduce of 8 short rows per vector; the sequential scan's rule per lane (the first extreme
// wins, a NaN wins and stops the scan).
__attribute__((target("avx2"))) int64_t argreduce_short_rows_avx2(bool max, const float* x, int64_t rows, int64_t n,
                                                                     int64_t* y) {
  const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(static_cast<int>(n)));
  int64_t r = 0;
  for (; r + 8 <= rows; r += 8) {
    const float* p = x + r * n;
    __m256 b = _mm256_i32gather_ps(p, idx, 4);
    __m256i best = _mm256_setzero_si256();
    for (int64_t j = 1; j < n; ++j) {
      __m256 v = _mm256_i32gather_ps(p + j, idx, 4);
      __m256 ext = max ? _mm256_cmp_ps(v, b, _CMP_GT_OQ) : _mm256_cmp_ps(v, b, _CMP_LT_OQ);
      __m256 better = _mm256_or_ps(ext, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
      __m256 take = _mm256_and_ps(better, _mm256_cmp_ps(b, b, _CMP_ORD_Q));
      b = _mm256_blendv_ps(b, v, take);
      best = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(best),
                                                  _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(j))), take));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + r), _mm256_cvtepi32_epi64(_mm256_castsi256_si128(best)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + r + 4), _mm256_cvtepi32_epi64(_mm256_extracti128_si256(best, 1)));
  }
  return r;
}

#endif

// all rows in one call: the per-row RLX_SIMD dispatch cost more than a 10-wide row.
RLX_SIMD void reduce_rows(Red k, const float* x, int64_t rows, int64_t n, float* y) {
  int64_t r = 0;
#ifdef RLX_ROWS_AVX2
  if (n > 1 && n < 16 && rows >= 8 && n * 8 < (int64_t{1} << 31) && simd::cpu_has_avx2()) r = reduce_short_rows_avx2(k, x, rows, n, y);
#endif
  for (; r < rows; ++r) y[r] = reduce_row(k, x + r * n, n);
}

// y[c0..c1) = fold over rows 0..R of x[r * I + c] (row order), all rows in one call.
RLX_SIMD void fold_columns(Red k, const float* x, int64_t R, int64_t I, float* y, int64_t c0, int64_t c1) {
  const int64_t n = c1 - c0;
  std::memcpy(y + c0, x + c0, static_cast<size_t>(n) * sizeof(float));
  for (int64_t rr = 1; rr < R; ++rr) {
    const float* xr = x + rr * I + c0;
    float* yy = y + c0;
    switch (k) {
      case Red::Sum: for (int64_t i = 0; i < n; ++i) yy[i] += xr[i]; break;
      case Red::Max: for (int64_t i = 0; i < n; ++i) yy[i] = (xr[i] > yy[i] || xr[i] != xr[i]) ? xr[i] : yy[i]; break;
      case Red::Min: for (int64_t i = 0; i < n; ++i) yy[i] = (xr[i] < yy[i] || xr[i] != xr[i]) ? xr[i] : yy[i]; break;
    }
  }
}

void reduce_block(Red k, const float* X, int64_t O, int64_t R, int64_t I, float* Y);

// Axes in several runs (a conv's bias gradient: axes 0, 2, 3 of [N, C, H, W]): one pass per run of
// adjacent axes, the last run first, through per-thread scratch. False for other cases.
bool reduce_runs(Red k, const float* X, const std::vector<int64_t>& shape, const std::vector<int64_t>& axes_in, float* Y) {
  const int64_t r = static_cast<int64_t>(shape.size());
  thread_local std::vector<int64_t> axes, dims;  // reused: a warm run allocates nothing
  axes.assign(axes_in.begin(), axes_in.end());
  dims.assign(shape.begin(), shape.end());
  for (auto& a : axes) {
    if (a < 0) a += r;
    if (a < 0 || a >= r) return false;
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  for (auto d : dims)
    if (d == 0) return false;
  thread_local std::vector<float> buf[2];
  const float* cur = X;
  for (int pass = 0; !axes.empty(); ++pass) {
    size_t b = axes.size() - 1;
    while (b > 0 && axes[b - 1] + 1 == axes[b]) --b;  // [axes[b], axes.back()] is the last run
    int64_t O = 1, R = 1, I = 1;
    for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d)
      (d < axes[b] ? O : d <= axes.back() ? R : I) *= dims[d];
    float* dst = Y;
    if (b > 0) {
      std::vector<float>& t = buf[pass % 2];
      if (t.size() < static_cast<size_t>(O * I)) t.resize(static_cast<size_t>(O * I));
      dst = t.data();
    }
    reduce_block(k, cur, O, R, I, dst);
    dims.erase(dims.begin() + axes[b], dims.begin() + axes.back() + 1);
    axes.resize(b);
    cur = dst;
  }
  return true;
}

void reduce_f32(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  int64_t O, R, I;
  if (in[0].dtype() != DType::f32 || out[0].dtype() != DType::f32) return generic_kernel(n, in, out);
  Red k = n.op == OpKind::ReduceSum ? Red::Sum : n.op == OpKind::ReduceMax ? Red::Max : Red::Min;
  const float* X = in[0].data<float>();
  float* Y = out[0].data<float>();
  if (!split3(in[0].shape(), attr_ints(n, "axes"), &O, &R, &I) || R == 0) {
    if (!reduce_runs(k, X, in[0].shape(), attr_ints(n, "axes"), Y)) generic_kernel(n, in, out);
    return;
  }
  reduce_block(k, X, O, R, I, Y);
}

// Y[o, i] = (+) over r of X[o, r, i].
void reduce_block(Red k, const float* X, int64_t O, int64_t R, int64_t I, float* Y) {
  if (I == 1) {
    // >= 128K elements per chunk: a bias gradient at batch 128 ([128, 512]) is ~10 us of adds, less
    // than waking a second thread costs on a busy machine.
    int64_t grain = std::max<int64_t>(1, kReduceGrain / std::max<int64_t>(R, 1));
    parallel_for(O, grain, [&](int64_t o0, int64_t o1) { reduce_rows(k, X + o0 * R, o1 - o0, R, Y + o0); });
    return;
  }
  // Inner run contiguous: fold whole rows; split the inner run (columns) across threads.
  // >= 32K elements (and 16 columns) per chunk: a bias gradient over batch 1024
  // ([1024, 128] -> [128], 0.5 MB read) now splits over both cores; each column keeps its row order.
  // Below 100K elements (batch 128's [128, 512]: ~10 us) one thread: less than a wake-up costs.
  int64_t cgrain = R * I < 100000 ? std::max<int64_t>(I, 1) : std::max<int64_t>(16, 32768 / std::max<int64_t>(R, 1));
  for (int64_t o = 0; o < O; ++o) {
    const float* x = X + o * R * I;
    float* y = Y + o * I;
    parallel_for(I, cgrain, [&](int64_t c0, int64_t c1) { fold_columns(k, x, R, I, y, c0, c1); });
  }
}

void arg_reduce_f32(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  int64_t r = x.rank(), ax = attr_int(n, "axis");
  if (ax < 0) ax += r;
  if (x.dtype() != DType::f32 || out[0].dtype() != DType::i64 || ax < 0 || ax >= r || x.shape()[ax] == 0)
    return generic_kernel(n, in, out);
  int64_t O = 1, R = x.shape()[ax], I = 1;
  for (int64_t d = 0; d < ax; ++d) O *= x.shape()[d];
  for (int64_t d = ax + 1; d < r; ++d) I *= x.shape()[d];
  bool is_max = n.op == OpKind::ArgMax;
  const float* X = x.data<float>();
  int64_t* Y = out[0].data<int64_t>();
  if (I == 1) return argreduce_rows_f32(is_max, X, O, R, Y);  // shared with rows_kernel
  for (int64_t o = 0; o < O; ++o)
    for (int64_t i = 0; i < I; ++i) Y[o * I + i] = arg_scan(X + o * R * I + i, R, I, is_max);
}

template <class E>
void broadcast_rows(const char* src, char* dst, const std::vector<int64_t>& os, const std::vector<int64_t>& st) {
  const E* s = reinterpret_cast<const E*>(src);
  E* d = reinterpret_cast<E*>(dst);
  int64_t r = static_cast<int64_t>(os.size());
  int64_t inner = os[r - 1], is = st[r - 1], rows = 1;
  for (int64_t k = 0; k + 1 < r; ++k) rows *= os[k];
  thread_local std::vector<int64_t> idx;  // reused: a warm run allocates nothing
  idx.assign(static_cast<size_t>(std::max<int64_t>(r - 1, 0)), 0);
  int64_t off = 0;
  for (int64_t row = 0; row < rows; ++row) {
    E* y = d + row * inner;
    if (is == 0) std::fill(y, y + inner, s[off]);
    else if (is == 1) std::memcpy(y, s + off, static_cast<size_t>(inner) * sizeof(E));
    else
      for (int64_t j = 0; j < inner; ++j) y[j] = s[off + j * is];
    for (int64_t k = r - 2; k >= 0; --k) {  // odometer over the outer dims
      off += st[k];
      if (++idx[k] < os[k]) break;
      off -= st[k] * os[k];
      idx[k] = 0;
    }
  }
}

void broadcast_in_dim(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  Tensor& y = out[0];
  const auto& os = y.shape();
  const auto& dims = attr_ints(n, "dims");
  size_t es = dtype_size(x.dtype());
  if (y.numel() == 0) return;
  if (os.empty() || x.dtype() != y.dtype() || dims.size() != static_cast<size_t>(x.rank()) ||
      (es != 1 && es != 2 && es != 4 && es != 8))
    return generic_kernel(n, in, out);
  int64_t r = static_cast<int64_t>(os.size());
  thread_local std::vector<int64_t> st;  // reused: a warm run allocates nothing
  st.assign(static_cast<size_t>(r), 0);
  int64_t s = 1;
  for (int64_t i = x.rank() - 1; i >= 0; --i) {
    int64_t d = dims[i];
    if (d < 0 || d >= r) return generic_kernel(n, in, out);
    if (x.shape()[i] != 1) {
      if (x.shape()[i] != os[d]) return generic_kernel(n, in, out);
      st[d] = s;
    }
    s *= x.shape()[i];
  }
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(y.raw());
  switch (es) {
    case 1: broadcast_rows<uint8_t>(src, dst, os, st); break;
    case 2: broadcast_rows<uint16_t>(src, dst, os, st); break;
    case 4: broadcast_rows<uint32_t>(src, dst, os, st); break;
    default: broadcast_rows<uint64_t>(src, dst, os, st); break;
  }
}

}  // namespace

void reduce_rows_f32(int kind, const float* x, int64_t rows, int64_t n, float* y) {
  reduce_rows(kind == 0 ? Red::Sum : kind == 1 ? Red::Max : Red::Min, x, rows, n, y);
}

void argreduce_rows_f32(bool max, const float* x, int64_t rows, int64_t n, int64_t* y) {
  int64_t r0 = 0;
#ifdef RLX_ROWS_AVX2
  if (n > 1 && n < 1024 && rows >= 8 && simd::cpu_has_avx2()) r0 = argreduce_short_rows_avx2(max, x, rows, n, y);
#endif
  for (int64_t r = r0; r < rows; ++r) y[r] = arg_scan(x + r * n, n, 1, max);
}

KernelFn find_train_kernel(OpKind op, DType dt) {
  switch (op) {
    case OpKind::ReduceSum:
    case OpKind::ReduceMax:
    case OpKind::ReduceMin: return dt == DType::f32 ? &reduce_f32 : nullptr;
    case OpKind::ArgMax:
    case OpKind::ArgMin: return dt == DType::f32 ? &arg_reduce_f32 : nullptr;
    case OpKind::BroadcastInDim: return &broadcast_in_dim;
    default: return nullptr;
  }
}

// ---------------------------------------------------------------------------------------------
// Training epilogues into the GEMM (fuse_train_lir).

namespace {

bool f32_shape(const LirBuffer& b, const Shape& s) { return b.type.dtype == DType::f32 && b.type.shape == s; }

bool const_zero(const LirProgram& p, int b) {
  const LirBuffer& lb = p.buffers[b];
  return lb.kind == BufferKind::Const && lb.type.dtype == DType::f32 && lb.value.numel() == 1 && lb.value.get(0) == 0.0;
}

// A dot_general train_gemm runs: f32, 2-D operands, one contracting dim each, no batch dims.
bool train_dot(const LirProgram& p, const LirKernel& k) {
  if (k.kind != KernelKind::Library || k.op != OpKind::DotGeneral || k.in.size() != 2 || k.out.size() != 1) return false;
  if (k.attrs.count("cpu_epi")) return false;
  for (int b : {k.in[0], k.in[1], k.out[0]})
    if (p.buffers[b].type.dtype != DType::f32 || p.buffers[b].type.shape.size() != 2) return false;
  Node n{k.op, {}, {}, k.attrs, ""};
  return attr_ints(n, "lhs_batch").empty() && attr_ints(n, "rhs_batch").empty() &&
         attr_ints(n, "lhs_contract").size() == 1 && attr_ints(n, "rhs_contract").size() == 1;
}

// The kernel input slot that body value v is, or -1 (an intermediate).
int slot_of(const Graph& body, ValueId v) {
  for (size_t i = 0; i < body.inputs.size(); ++i)
    if (body.inputs[i] == v) return static_cast<int>(i);
  return -1;
}

// Matches reader kernel `r` (the only reader of z, the GEMM's output) against the three epilogues;
// on success appends the extra inputs to `d` and sets its attrs.
bool absorb(const LirProgram& p, LirKernel& d, const LirKernel& r, int z) {
  const Shape& zs = p.buffers[z].type.shape;
  const int64_t N = zs[1].v;
  if (r.out.size() != 1 || !f32_shape(p.buffers[r.out[0]], zs)) return false;
  auto add_in = [&](const char* attr, int b) {
    d.attrs[attr] = static_cast<int64_t>(d.in.size());
    d.in.push_back(b);
  };
  // Library add(z, bias) (a last layer without activation).
  if (r.kind == KernelKind::Library && r.op == OpKind::Add && r.in.size() == 2) {
    int other = r.in[0] == z ? r.in[1] : r.in[1] == z ? r.in[0] : -1;
    if (other < 0 || other == z || !f32_shape(p.buffers[other], Shape{Dim(N)})) return false;
    add_in("cpu_bias", other);
    d.attrs["cpu_epi"] = std::string("bias");
    return true;
  }
  if (r.kind != KernelKind::Generated || r.body.outputs.size() != 1) return false;
  const Graph& g = r.body;
  auto buf = [&](ValueId v) {  // kernel buffer of a body input, or -1
    int s = slot_of(g, v);
    return s < 0 ? -1 : r.in[static_cast<size_t>(s)];
  };
  const auto& ns = g.nodes;
  // add(z, bias) [, max(., 0)]
  if ((ns.size() == 1 || ns.size() == 2) && ns[0].op == OpKind::Add && ns[0].inputs.size() == 2) {
    int a0 = buf(ns[0].inputs[0]), a1 = buf(ns[0].inputs[1]);
    int bias = a0 == z ? a1 : a1 == z ? a0 : -1;
    if (bias < 0 || bias == z || !f32_shape(p.buffers[bias], Shape{Dim(N)})) return false;
    bool relu = false;
    if (ns.size() == 2) {
      const Node& m = ns[1];
      if (m.op != OpKind::Max || m.inputs.size() != 2 || m.inputs[0] != ns[0].outputs[0] || !const_zero(p, buf(m.inputs[1])))
        return false;
      relu = true;
    }
    if (g.outputs[0] != ns.back().outputs[0]) return false;
    add_in("cpu_bias", bias);
    if (relu) d.attrs["activation"] = std::string("relu");
    d.attrs["cpu_epi"] = std::string(relu ? "bias+relu" : "bias");
    return true;
  }
  if (ns.size() != 2 || g.outputs[0] != ns[1].outputs[0]) return false;
  // gt(h, 0) ; select(., z, 0): ReLU's backward.
  if (ns[0].op == OpKind::Gt && ns[1].op == OpKind::Select && ns[0].inputs.size() == 2 && ns[1].inputs.size() == 3) {
    int h = buf(ns[0].inputs[0]);
    if (h < 0 || h == z || !f32_shape(p.buffers[h], zs) || !const_zero(p, buf(ns[0].inputs[1]))) return false;
    if (ns[1].inputs[0] != ns[0].outputs[0] || buf(ns[1].inputs[1]) != z || !const_zero(p, buf(ns[1].inputs[2])))
      return false;
    add_in("cpu_mask", h);
    d.attrs["cpu_epi"] = std::string("relu_mask");
    return true;
  }
  // mul(lr, z) ; sub(W, .): plain SGD.
  if (ns[0].op == OpKind::Mul && ns[1].op == OpKind::Sub && ns[0].inputs.size() == 2 && ns[1].inputs.size() == 2) {
    int m0 = buf(ns[0].inputs[0]), m1 = buf(ns[0].inputs[1]);
    int lr = m0 == z ? m1 : m1 == z ? m0 : -1;
    if (lr < 0 || lr == z || p.buffers[lr].type.dtype != DType::f32 || !p.buffers[lr].type.shape.empty()) return false;
    if (ns[1].inputs[1] != ns[0].outputs[0]) return false;
    int w = buf(ns[1].inputs[0]);
    if (w < 0 || w == z || !f32_shape(p.buffers[w], zs) || w == r.out[0]) return false;
    add_in("cpu_sgd_w", w);
    add_in("cpu_sgd_lr", lr);
    d.attrs["cpu_epi"] = std::string("sgd");
    return true;
  }
  return false;
}

// reduce_sum(dH, axis 0) where dH [K,N] is also the B operand (contracted over its
// rows) of a 2-D f32 dot_general in the schedule (the weight gradient hᵀ·dH): the GEMM writes the sums
// as a second output (attr cpu_colsum = its output slot), taken while it packs dH (gemm_f32's
// GemmEpi::colsum, rows in order: the reduce_sum kernel's bits), and the reduce kernel goes.
// RLX_CPU_BIASGRAD=0 turns it off. Returns whether it changed anything.
bool fold_bias_grads(LirProgram& p) {
  if (!env_on("RLX_CPU_BIASGRAD", true)) return false;
  const size_t nk = p.kernels.size();
  auto root = [&](int b) {
    while (p.buffers[b].kind == BufferKind::View) b = p.buffers[b].view_of;
    return b;
  };
  std::vector<bool> dead(nk, false);
  bool changed = false;
  for (size_t r = 0; r < nk; ++r) {
    const LirKernel& rk = p.kernels[r];
    if (rk.kind != KernelKind::Library || rk.op != OpKind::ReduceSum || rk.in.size() != 1 || rk.out.size() != 1) continue;
    const int x = rk.in[0], y = rk.out[0];
    const LirBuffer &xb = p.buffers[x], &yb = p.buffers[y];
    if (xb.type.dtype != DType::f32 || yb.type.dtype != DType::f32 || xb.type.shape.size() != 2) continue;
    if (!xb.type.shape[0].is_static() || !xb.type.shape[1].is_static()) continue;
    if (yb.kind == BufferKind::View || yb.kind == BufferKind::Const) continue;
    const Node rn{rk.op, {}, {}, rk.attrs, ""};
    const auto& ax = attr_ints(rn, "axes");
    if (ax.size() != 1 || !(ax[0] == 0 || ax[0] == -2)) continue;
    const int64_t K = xb.type.shape[0].v, N = xb.type.shape[1].v;
    const Shape& ys = yb.type.shape;
    if (K < 1 || !(ys == Shape{Dim(N)} || ys == Shape{Dim(1), Dim(N)})) continue;
    // The GEMM: reads x as its B operand, contracted over dim 0 (op(B) = B, not transposed).
    int d = -1;
    for (size_t j = 0; j < nk && d < 0; ++j) {
      const LirKernel& g = p.kernels[j];
      if (dead[j] || g.kind != KernelKind::Library || g.op != OpKind::DotGeneral || g.in.size() < 2 || g.in[1] != x ||
          g.attrs.count("cpu_colsum"))
        continue;
      if (p.buffers[g.in[0]].type.dtype != DType::f32 || p.buffers[g.in[0]].type.shape.size() != 2) continue;
      if (p.buffers[g.out[0]].type.dtype != DType::f32 || p.buffers[g.out[0]].type.shape.size() != 2) continue;
      Node n{g.op, {}, {}, g.attrs, ""};
      const auto &lc = attr_ints(n, "lhs_contract"), &rc = attr_ints(n, "rhs_contract");
      if (!attr_ints(n, "lhs_batch").empty() || !attr_ints(n, "rhs_batch").empty() || lc.size() != 1 || rc.size() != 1)
        continue;
      if (!(rc[0] == 0 || rc[0] == -2)) continue;
      d = static_cast<int>(j);
    }
    if (d < 0) continue;
    // The sums now appear when the GEMM runs: nothing between the reduce and a later GEMM may read them.
    bool ok = true;
    for (size_t j = r + 1; j < static_cast<size_t>(d) && ok; ++j)
      for (int b : p.kernels[j].in) ok &= root(b) != y;
    if (!ok) continue;
    LirKernel& g = p.kernels[static_cast<size_t>(d)];
    g.attrs["cpu_colsum"] = static_cast<int64_t>(g.out.size());
    g.out.push_back(y);
    std::string epi;  // (built with +=: GCC 12 warns -Wrestrict on string + literal here)
    if (g.attrs.count("cpu_epi")) {
      epi = attr_str(Node{g.op, {}, {}, g.attrs, ""}, "cpu_epi");
      epi += '+';
    }
    epi += "colsum";
    g.attrs["cpu_epi"] = epi;
    g.origin += " +colsum";
    dead[r] = true;
    changed = true;
  }
  if (changed) erase_kernels(p, dead);
  return changed;
}

}  // namespace

void fuse_train_lir(LirProgram& p) {
  if (!fast_gemm_available()) return fuse_rows_lir(p);
  const size_t nb = p.buffers.size();
  std::vector<std::vector<int>> readers(nb);
  std::vector<int> views(nb, 0);
  for (size_t k = 0; k < p.kernels.size(); ++k)
    for (int b : p.kernels[k].in) readers[b].push_back(static_cast<int>(k));
  for (auto& b : p.buffers)
    if (b.kind == BufferKind::View) ++views[b.view_of];
  std::vector<bool> dead(p.kernels.size(), false);
  bool changed = false;
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    LirKernel& d = p.kernels[k];
    if (dead[k] || !train_dot(p, d)) continue;
    const int z = d.out[0];
    if (p.buffers[z].kind != BufferKind::Arena || views[z] != 0 || readers[z].size() != 1) continue;
    const int rk = readers[z][0];
    if (rk <= static_cast<int>(k) || dead[rk]) continue;
    LirKernel& r = p.kernels[rk];
    // The reader's other inputs must exist when the GEMM runs: produced before it (or never).
    bool ready = true;
    for (int b : r.in)
      for (size_t j = k + 1; j < static_cast<size_t>(rk) && ready; ++j)
        for (int o : p.kernels[j].out) ready &= o != b;
    if (!ready || !absorb(p, d, r, z)) continue;
    // absorb's extra inputs were read by r; they are now read by d too.
    for (size_t i = 2; i < d.in.size(); ++i) readers[d.in[i]].push_back(static_cast<int>(k));
    d.out = {r.out[0]};
    d.origin += " +" + attr_str(Node{d.op, {}, {}, d.attrs, ""}, "cpu_epi");
    dead[rk] = true;
    changed = true;
  }
  if (changed) erase_kernels(p, dead);
  changed |= fold_bias_grads(p);
  if (changed) plan_memory(p);
  fuse_rows_lir(p);
}

// ---------------------------------------------------------------------------------------------
// Row regions (fuse_rows_lir): see train_kernels.h.

namespace {


bool last_axis_reduce(const LirProgram& p, const LirKernel& k) {
  if (k.kind != KernelKind::Library || k.in.size() != 1 || k.out.size() != 1) return false;
  if (p.buffers[k.in[0]].type.shape.size() != 2 || p.buffers[k.in[0]].type.dtype != DType::f32) return false;
  Node n{k.op, {}, {}, k.attrs, ""};
  switch (k.op) {
    case OpKind::ReduceSum:
    case OpKind::ReduceMax:
    case OpKind::ReduceMin: {
      const auto& ax = attr_ints(n, "axes");
      return ax.size() == 1 && (ax[0] == 1 || ax[0] == -1);
    }
    case OpKind::ArgMax:
    case OpKind::ArgMin: {
      int64_t ax = attr_int(n, "axis");
      return ax == 1 || ax == -1;
    }
    default: return false;
  }
}

// A kernel that can join a region over [R, C] (the body check, rows_plan_ok, comes last).
bool row_member(const LirProgram& p, const LirKernel& k, int64_t R, int64_t C) {
  if (k.out.size() != 1 || k.attrs.count("cpu_epi") || k.attrs.count("cpu_rows")) return false;
  RowShape y = row_shape(p.buffers[k.out[0]].type.shape, R, C);
  if (y != RowShape::Full && y != RowShape::Row) return false;
  for (int b : k.in)
    if (row_shape(p.buffers[b].type.shape, R, C) == RowShape::None) return false;
  if (k.kind == KernelKind::Generated) {
    if (k.body.outputs.size() != 1) return false;
    for (auto& n : k.body.nodes)
      if (!is_elementwise(n.op)) return false;
    return true;
  }
  if (last_axis_reduce(p, k)) return row_shape(p.buffers[k.in[0]].type.shape, R, C) == RowShape::Full;
  return k.op == OpKind::BroadcastInDim || k.op == OpKind::Reshape || is_elementwise(k.op);
}

}  // namespace

RowShape row_shape(const Shape& s, int64_t R, int64_t C) {
  int64_t n = 1;
  for (auto& d : s) n *= d.v;
  if (n == 1) return RowShape::Scalar;
  if (s.size() == 2 && s[0].v == R && s[1].v == C) return RowShape::Full;
  if ((s.size() == 1 && s[0].v == R) || (s.size() == 2 && s[0].v == R && s[1].v == 1)) return RowShape::Row;
  if ((s.size() == 1 && s[0].v == C) || (s.size() == 2 && s[0].v == 1 && s[1].v == C)) return RowShape::Col;
  return RowShape::None;
}

void fuse_rows_lir(LirProgram& p) {
  if (!env_on("RLX_CPU_ROWS", true)) return;
  const size_t nb = p.buffers.size(), nk = p.kernels.size();
  auto root = [&](int b) {
    while (p.buffers[b].kind == BufferKind::View) b = p.buffers[b].view_of;
    return b;
  };
  std::vector<int> prod(nb, -1);
  for (size_t k = 0; k < nk; ++k)
    for (int b : p.kernels[k].out) prod[b] = static_cast<int>(k);
  std::vector<bool> dead(nk, false), in_region(nk, false);
  bool changed = false;
  for (size_t s = 0; s < nk; ++s) {
    if (dead[s] || in_region[s] || !last_axis_reduce(p, p.kernels[s])) continue;
    const Shape& xs = p.buffers[p.kernels[s].in[0]].type.shape;
    const int64_t R = xs[0].v, C = xs[1].v;
    if (R < 2 || R == C || !row_member(p, p.kernels[s], R, C)) continue;
    // The region runs where s runs. Grow forward: a later kernel joins when it reads only buffers made
    // before s or by members; kernels skipped in between keep their order after it.
    std::vector<bool> mem(nk, false);
    std::vector<size_t> members{s};
    mem[s] = true;
    // Back: a row kernel before s joins when nothing between it and s but members reads its result
    // (e.g. a bias add, or a residual sum before a LayerNorm-style row); it then runs at s.
    for (size_t j = s; j-- > 0 && j + 64 > s;) {
      if (dead[j] || in_region[j] || !row_member(p, p.kernels[j], R, C)) continue;
      const int ob = p.kernels[j].out[0];
      bool ok = p.buffers[ob].kind != BufferKind::Output;
      for (size_t q = j + 1; q < s && ok; ++q)
        if (!mem[q])
          for (int b : p.kernels[q].in) ok &= root(b) != ob;
      if (!ok) continue;
      mem[j] = true;
      members.insert(members.begin(), j);
    }
    for (size_t j = s + 1; j < nk && j < s + 256; ++j) {
      if (dead[j] || in_region[j] || !row_member(p, p.kernels[j], R, C)) continue;
      bool ok = true;
      for (int b : p.kernels[j].in) {
        int pb = prod[root(b)];
        ok &= pb < static_cast<int>(s) || mem[static_cast<size_t>(pb)];
      }
      if (!ok) continue;
      mem[j] = true;
      members.push_back(j);
    }
    if (members.size() < 2) continue;
    // The body: external buffers become inputs, views of member outputs become reshapes.
    Graph body;
    std::vector<int> ext;
    std::vector<ValueId> val(nb, -1);
    std::function<ValueId(int)> get = [&](int b) -> ValueId {
      if (val[b] >= 0) return val[b];
      const LirBuffer& lb = p.buffers[b];
      int pb = prod[root(b)];
      if (lb.kind == BufferKind::View && pb >= 0 && mem[static_cast<size_t>(pb)]) {
        ValueId src = get(lb.view_of);
        return val[b] = body.add_node(OpKind::Reshape, {src}, {{"shape", lb.type.shape}})[0];
      }
      ext.push_back(b);
      std::string name = "x";  // (not "x" + to_string: GCC 12 warns -Wrestrict on that)
      name += std::to_string(ext.size() - 1);
      return val[b] = body.add_input(name, lb.type.dtype, lb.type.shape);
    };
    bool built = true;
    try {
      for (size_t m : members) {
        const LirKernel& k = p.kernels[m];
        std::vector<ValueId> args;
        for (int b : k.in) args.push_back(get(b));
        if (k.kind == KernelKind::Library) {
          val[k.out[0]] = body.add_node(k.op, args, k.attrs, k.origin)[0];
          continue;
        }
        std::vector<ValueId> map(k.body.values.size(), -1);
        for (size_t i = 0; i < k.body.inputs.size(); ++i) map[k.body.inputs[i]] = args[i];
        for (const Node& n : k.body.nodes) {
          std::vector<ValueId> a;
          for (ValueId v : n.inputs) a.push_back(map[v]);
          map[n.outputs[0]] = body.add_node(n.op, a, n.attrs, n.name)[0];
        }
        val[k.out[0]] = map[k.body.outputs[0]];
      }
    } catch (const std::exception&) {
      built = false;  // a shape rule disagreed with the buffers: leave the kernels as they are
    }
    if (!built) continue;
    // Outputs: member results read after the region (directly or through a view) or returned.
    std::vector<int> outs;
    for (size_t m : members) {
      int ob = p.kernels[m].out[0];
      bool needed = p.buffers[ob].kind == BufferKind::Output;
      for (size_t j = 0; j < nk && !needed; ++j) {
        if (mem[j] || dead[j]) continue;
        for (int b : p.kernels[j].in) needed |= root(b) == ob;
      }
      for (int o : p.outputs) needed |= root(o) == ob;
      if (!needed) continue;
      if (body.type(val[ob]).shape != p.buffers[ob].type.shape) {
        built = false;
        break;
      }
      outs.push_back(ob);
      body.outputs.push_back(val[ob]);
    }
    if (!built || outs.empty() || !rows_plan_ok(body, R, C)) continue;
    LirKernel nkr;
    nkr.kind = KernelKind::Generated;
    nkr.body = std::move(body);
    nkr.in = ext;
    nkr.out = outs;
    nkr.attrs["cpu_rows"] = R;
    nkr.attrs["cpu_cols"] = C;
    nkr.origin = "rows";
    for (size_t m : members) {
      in_region[m] = true;
      if (m != s) dead[m] = true;
    }
    for (int o : outs) prod[o] = static_cast<int>(s);
    p.kernels[s] = std::move(nkr);
    changed = true;
  }
  if (!changed) return;
  erase_kernels(p, dead);
  plan_memory(p);
}

}  // namespace rlx::cpu
