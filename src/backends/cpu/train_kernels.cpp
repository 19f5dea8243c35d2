// [issue 6 training] Kernels the training step needs that the inference kernels did not cover:
// (1) f32 reductions over one contiguous run of axes (bias gradients, softmax sums), argmax/argmin,
// and broadcast_in_dim for any dtype (everything else keeps the reference-based generic kernel);
// (2) fuse_train_lir, the schedule rewrite that moves bias/ReLU, ReLU's backward mask and the SGD
// update into the epilogues of the step's GEMMs (run by train_gemm in gemm.cpp). Fused bodies that
// mix f32 with bool/i32/i64 run on fused.cpp's one typed evaluator.
#include "backends/cpu/train_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/gemm_avx2.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/vmath.h"
#include "lir/plan.h"

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

RLX_SIMD float reduce_row(Red k, const float* x, int64_t n) {
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

RLX_SIMD void fold_rows(Red k, const float* x, float* y, int64_t n) {
  switch (k) {
    case Red::Sum: for (int64_t i = 0; i < n; ++i) y[i] += x[i]; break;
    case Red::Max: for (int64_t i = 0; i < n; ++i) y[i] = (x[i] > y[i] || x[i] != x[i]) ? x[i] : y[i]; break;
    case Red::Min: for (int64_t i = 0; i < n; ++i) y[i] = (x[i] < y[i] || x[i] != x[i]) ? x[i] : y[i]; break;
  }
}

void reduce_f32(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  int64_t O, R, I;
  if (in[0].dtype() != DType::f32 || out[0].dtype() != DType::f32 ||
      !split3(in[0].shape(), attr_ints(n, "axes"), &O, &R, &I) || R == 0)
    return generic_kernel(n, in, out);
  Red k = n.op == OpKind::ReduceSum ? Red::Sum : n.op == OpKind::ReduceMax ? Red::Max : Red::Min;
  const float* X = in[0].data<float>();
  float* Y = out[0].data<float>();
  if (I == 1) {
    // >= 128K elements per chunk: a bias gradient at batch 128 ([128, 512]) is ~10 us of adds, less
    // than waking a second thread costs on a busy machine.
    int64_t grain = std::max<int64_t>(1, kReduceGrain / std::max<int64_t>(R, 1));
    parallel_for(O, grain, [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) Y[o] = reduce_row(k, X + o * R, R);
    });
    return;
  }
  // Inner run contiguous: fold whole rows; split the inner run (columns) across threads.
  int64_t cgrain = std::max<int64_t>(64, kReduceGrain / std::max<int64_t>(R, 1));
  for (int64_t o = 0; o < O; ++o) {
    const float* x = X + o * R * I;
    float* y = Y + o * I;
    parallel_for(I, cgrain, [&](int64_t c0, int64_t c1) {
      std::memcpy(y + c0, x + c0, static_cast<size_t>(c1 - c0) * sizeof(float));
      for (int64_t rr = 1; rr < R; ++rr) fold_rows(k, x + rr * I + c0, y + c0, c1 - c0);
    });
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
  // First extreme wins; a NaN is the extreme (the first NaN wins), like the reference.
  for (int64_t o = 0; o < O; ++o)
    for (int64_t i = 0; i < I; ++i) {
      const float* p = X + o * R * I + i;
      int64_t best = 0;
      float b = p[0];
      for (int64_t j = 1; j < R && b == b; ++j) {
        float v = p[j * I];
        if (v != v || (is_max ? v > b : v < b)) {
          b = v;
          best = j;
        }
      }
      Y[o * I + i] = best;
    }
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

}  // namespace

void fuse_train_lir(LirProgram& p) {
  if (!fast_gemm_available()) return;
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
  if (!changed) return;
  erase_kernels(p, dead);
  plan_memory(p);
}

}  // namespace rlx::cpu
