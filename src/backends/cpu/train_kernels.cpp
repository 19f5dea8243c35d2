// [issue 6 training] Kernels the training step needs that the inference kernels did not cover:
// (1) a typed evaluator for fused elementwise bodies mixing f32 with bool/i32/i64 (ReLU backward is
// ge+select, a loss's one-hot is eq+convert), chunked and parallel like fused.cpp's f32 evaluator;
// (2) f32 reductions over one contiguous run of axes (bias gradients, softmax sums), argmax/argmin,
// and broadcast_in_dim for any dtype. Everything else keeps the reference-based generic kernel.
#include "backends/cpu/train_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/parallel.h"
#include "backends/cpu/vmath.h"

namespace rlx::cpu {

namespace {

// ---------------------------------------------------------------------------------------------
// Mixed-dtype fused evaluator.

constexpr int64_t kChunk = 1024;

enum class Ty : uint8_t { F32, B8, I32, I64, None };

Ty ty_of(DType d) {
  switch (d) {
    case DType::f32: return Ty::F32;
    case DType::boolean: return Ty::B8;
    case DType::i32: return Ty::I32;
    case DType::i64: return Ty::I64;
    default: return Ty::None;
  }
}

// Bool registers hold uint32 0/1 (widened on load, narrowed on store) so that compare and select
// on f32 data are same-width loops that vectorize.
using Bool = uint32_t;

template <class F>
void with_ty(Ty t, F&& f) {
  switch (t) {
    case Ty::F32: f(float{}); break;
    case Ty::B8: f(Bool{}); break;
    case Ty::I32: f(int32_t{}); break;
    case Ty::I64: f(int64_t{}); break;
    case Ty::None: break;
  }
}

bool float_op(OpKind k) {
  switch (k) {
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: case OpKind::Max: case OpKind::Min:
    case OpKind::Neg: case OpKind::Abs: case OpKind::Exp: case OpKind::Sqrt: case OpKind::Rsqrt:
    case OpKind::Tanh: case OpKind::Erf: case OpKind::Logistic: case OpKind::Log:
      return true;
    default: return false;
  }
}

bool compare_op(OpKind k) {
  return k == OpKind::Eq || k == OpKind::Ne || k == OpKind::Lt || k == OpKind::Le || k == OpKind::Gt || k == OpKind::Ge;
}

RLX_SIMD void run_float(OpKind op, const float* a, const float* b, float* y, int64_t n) {
  switch (op) {
    case OpKind::Add: for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i]; break;
    case OpKind::Sub: for (int64_t i = 0; i < n; ++i) y[i] = a[i] - b[i]; break;
    case OpKind::Mul: for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i]; break;
    case OpKind::Div: for (int64_t i = 0; i < n; ++i) y[i] = a[i] / b[i]; break;
    case OpKind::Max: for (int64_t i = 0; i < n; ++i) y[i] = (a[i] != a[i] || a[i] > b[i]) ? a[i] : b[i]; break;
    case OpKind::Min: for (int64_t i = 0; i < n; ++i) y[i] = (a[i] != a[i] || a[i] < b[i]) ? a[i] : b[i]; break;
    case OpKind::Neg: for (int64_t i = 0; i < n; ++i) y[i] = -a[i]; break;
    case OpKind::Abs: for (int64_t i = 0; i < n; ++i) y[i] = __builtin_fabsf(a[i]); break;
    case OpKind::Exp: for (int64_t i = 0; i < n; ++i) y[i] = vm::exp(a[i]); break;
    case OpKind::Sqrt: for (int64_t i = 0; i < n; ++i) y[i] = __builtin_sqrtf(a[i]); break;
    case OpKind::Rsqrt: for (int64_t i = 0; i < n; ++i) y[i] = 1.f / __builtin_sqrtf(a[i]); break;
    case OpKind::Tanh: for (int64_t i = 0; i < n; ++i) y[i] = vm::tanh(a[i]); break;
    case OpKind::Erf: for (int64_t i = 0; i < n; ++i) y[i] = vm::erf(a[i]); break;
    case OpKind::Logistic: for (int64_t i = 0; i < n; ++i) y[i] = vm::logistic(a[i]); break;
    case OpKind::Log: for (int64_t i = 0; i < n; ++i) y[i] = std::log(a[i]); break;
    default: break;
  }
}

template <class X>
RLX_SIMD void run_compare(OpKind op, const X* a, const X* b, Bool* y, int64_t n) {
  switch (op) {
    case OpKind::Eq: for (int64_t i = 0; i < n; ++i) y[i] = a[i] == b[i]; break;
    case OpKind::Ne: for (int64_t i = 0; i < n; ++i) y[i] = a[i] != b[i]; break;
    case OpKind::Lt: for (int64_t i = 0; i < n; ++i) y[i] = a[i] < b[i]; break;
    case OpKind::Le: for (int64_t i = 0; i < n; ++i) y[i] = a[i] <= b[i]; break;
    case OpKind::Gt: for (int64_t i = 0; i < n; ++i) y[i] = a[i] > b[i]; break;
    case OpKind::Ge: for (int64_t i = 0; i < n; ++i) y[i] = a[i] >= b[i]; break;
    default: break;
  }
}

template <class X>
RLX_SIMD void run_select(const Bool* c, const X* a, const X* b, X* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = c[i] ? a[i] : b[i];
}

template <class S, class D>
void run_convert(const S* a, D* y, int64_t n) {
  if constexpr (std::is_same_v<D, Bool>) {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] != S(0);
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<D>(a[i]);
  }
}

// Supported: float ops on f32; compares on any of the four types; select; convert between the
// integer/bool types and to f32 (float->integer is left to the reference: its NaN/overflow rules);
// and/or/xor/not on bool.
bool node_ok(const Graph& body, const Node& n) {
  if (n.outputs.size() != 1) return false;
  Ty y = ty_of(body.type(n.outputs[0]).dtype);
  if (y == Ty::None || n.inputs.empty()) return false;
  std::vector<Ty> x;
  for (auto v : n.inputs) {
    x.push_back(ty_of(body.type(v).dtype));
    if (x.back() == Ty::None) return false;
  }
  if (float_op(n.op)) {
    if (y != Ty::F32) return false;
    for (Ty t : x)
      if (t != Ty::F32) return false;
    return true;
  }
  if (compare_op(n.op)) return x.size() == 2 && x[0] == x[1] && y == Ty::B8;
  if (n.op == OpKind::Select) return x.size() == 3 && x[0] == Ty::B8 && x[1] == y && x[2] == y;
  if (n.op == OpKind::Convert) return x.size() == 1 && (x[0] != Ty::F32 || y == Ty::F32 || y == Ty::B8);
  if (n.op == OpKind::And || n.op == OpKind::Or || n.op == OpKind::Xor)
    return x.size() == 2 && x[0] == Ty::B8 && x[1] == Ty::B8 && y == Ty::B8;
  if (n.op == OpKind::Not) return x.size() == 1 && x[0] == Ty::B8 && y == Ty::B8;
  return false;
}

enum class Src : uint8_t { Full, Scalar, Trailing, General };

struct Operand {
  Src src = Src::Full;
  const char* data = nullptr;
  size_t es = 4;
  int64_t inner = 1;
  std::vector<int64_t> stride;
};

struct Step {
  OpKind op;
  Ty ta, ty;  // type of input 0 (input 1 for select) and of the output
  int a = -1, b = -1, c = -1, y = -1;
};

template <class E>
void load_operand(const Operand& o, const std::vector<int64_t>& os, int64_t start, int64_t len, E* buf) {
  const E* d = reinterpret_cast<const E*>(o.data);
  int64_t r = static_cast<int64_t>(os.size());
  switch (o.src) {
    case Src::Full: break;
    case Src::Scalar: std::fill(buf, buf + len, d[0]); break;
    case Src::Trailing:
      for (int64_t k = 0, p = start % o.inner; k < len; ++k, p = p + 1 == o.inner ? 0 : p + 1) buf[k] = d[p];
      break;
    case Src::General:
      for (int64_t k = 0; k < len; ++k) {
        int64_t rem = start + k, off = 0;
        for (int64_t dd = r - 1; dd >= 0; --dd) {
          off += (rem % os[dd]) * o.stride[dd];
          rem /= os[dd];
        }
        buf[k] = d[off];
      }
      break;
  }
}

void exec_step(const Step& st, void* const* ptr, void* y, int64_t n) {
  if (float_op(st.op)) {
    run_float(st.op, static_cast<const float*>(ptr[st.a]), st.b >= 0 ? static_cast<const float*>(ptr[st.b]) : nullptr,
              static_cast<float*>(y), n);
    return;
  }
  if (compare_op(st.op)) {
    with_ty(st.ta, [&](auto tag) {
      using X = decltype(tag);
      run_compare<X>(st.op, static_cast<const X*>(ptr[st.a]), static_cast<const X*>(ptr[st.b]),
                     static_cast<Bool*>(y), n);
    });
    return;
  }
  switch (st.op) {
    case OpKind::Select:
      with_ty(st.ty, [&](auto tag) {
        using X = decltype(tag);
        run_select<X>(static_cast<const Bool*>(ptr[st.a]), static_cast<const X*>(ptr[st.b]),
                      static_cast<const X*>(ptr[st.c]), static_cast<X*>(y), n);
      });
      return;
    case OpKind::Convert:
      with_ty(st.ta, [&](auto stag) {
        using S = decltype(stag);
        with_ty(st.ty, [&](auto dtag) {
          using D = decltype(dtag);
          run_convert<S, D>(static_cast<const S*>(ptr[st.a]), static_cast<D*>(y), n);
        });
      });
      return;
    case OpKind::And:
    case OpKind::Or:
    case OpKind::Xor: {
      auto a = static_cast<const Bool*>(ptr[st.a]), b = static_cast<const Bool*>(ptr[st.b]);
      auto o = static_cast<Bool*>(y);
      for (int64_t i = 0; i < n; ++i)
        o[i] = st.op == OpKind::And ? (a[i] & b[i]) : st.op == OpKind::Or ? (a[i] | b[i]) : (a[i] ^ b[i]);
      return;
    }
    case OpKind::Not: {
      auto a = static_cast<const Bool*>(ptr[st.a]);
      auto o = static_cast<Bool*>(y);
      for (int64_t i = 0; i < n; ++i) o[i] = a[i] ^ 1u;
      return;
    }
    default: return;
  }
}

}  // namespace

bool fused_kernel_mixed(const Graph& body, const std::vector<Tensor>& in, Tensor& out) {
  if (ty_of(out.dtype()) == Ty::None || body.outputs.size() != 1 || in.size() != body.inputs.size()) return false;
  for (auto& n : body.nodes)
    if (!node_ok(body, n)) return false;
  for (size_t i = 0; i < in.size(); ++i)
    if (ty_of(in[i].dtype()) == Ty::None || in[i].dtype() != body.type(body.inputs[i]).dtype) return false;
  if (body.type(body.outputs[0]).dtype != out.dtype()) return false;

  const auto& os = out.shape();
  const int64_t total = out.numel(), r = out.rank();
  std::vector<int> reg(body.values.size(), -1);
  std::vector<Operand> ops(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& t = in[i];
    Operand& o = ops[i];
    o.data = static_cast<const char*>(t.raw());
    o.es = dtype_size(t.dtype());
    reg[body.inputs[i]] = static_cast<int>(i);
    if (t.shape() == os) continue;
    if (t.numel() == 1) {
      o.src = Src::Scalar;
      continue;
    }
    int64_t lead = 0;
    while (lead < t.rank() && t.shape()[lead] == 1) ++lead;
    int64_t tr = t.rank() - lead;
    bool trailing = tr <= r;
    for (int64_t d = 0; trailing && d < tr; ++d) trailing = t.shape()[lead + d] == os[r - tr + d];
    if (trailing) {
      o.src = Src::Trailing;
      o.inner = t.numel();
      continue;
    }
    o.src = Src::General;
    o.stride.assign(static_cast<size_t>(r), 0);
    int64_t s = 1;
    for (int64_t d = r - 1; d >= 0; --d) {
      int64_t td = d - (r - t.rank());
      if (td >= 0 && t.shape()[td] != 1) o.stride[d] = s;
      if (td >= 0) s *= t.shape()[td];
    }
  }
  const int nin = static_cast<int>(in.size());
  std::vector<Step> steps;
  int nscratch = 0;
  for (auto& n : body.nodes) {
    Step st{n.op, Ty::None, ty_of(body.type(n.outputs[0]).dtype)};
    st.a = reg[n.inputs[0]];
    if (n.inputs.size() > 1) st.b = reg[n.inputs[1]];
    if (n.inputs.size() > 2) st.c = reg[n.inputs[2]];
    if (st.a < 0 || (n.inputs.size() > 1 && st.b < 0) || (n.inputs.size() > 2 && st.c < 0)) return false;
    st.ta = ty_of(body.type(n.inputs[n.op == OpKind::Select ? 1 : 0]).dtype);
    st.y = reg[n.outputs[0]] = nin + nscratch++;
    steps.push_back(st);
  }
  const int out_reg = reg[body.outputs[0]];
  if (out_reg < 0) return false;
  const int nregs = nin + nscratch;
  const size_t oes = dtype_size(out.dtype());
  const bool out_bool = out.dtype() == DType::boolean;  // registers are wider: store through scratch
  char* Y = static_cast<char*>(out.raw());

  parallel_for((total + kChunk - 1) / kChunk, 16, [&](int64_t c0, int64_t c1) {
    thread_local std::vector<uint64_t> scratch;  // 8 bytes per element: enough for every type
    size_t need = static_cast<size_t>(nregs + 1) * kChunk;
    if (scratch.size() < need) scratch.resize(need);
    thread_local std::vector<void*> ptr;
    if (ptr.size() < static_cast<size_t>(nregs)) ptr.resize(static_cast<size_t>(nregs));
    for (int64_t c = c0; c < c1; ++c) {
      int64_t start = c * kChunk, len = std::min(kChunk, total - start);
      for (int i = 0; i < nin; ++i) {
        const Operand& o = ops[i];
        void* buf = scratch.data() + static_cast<size_t>(i) * kChunk;
        if (o.es == 1) {  // bool: widen to Bool registers
          auto* wb = static_cast<Bool*>(buf);
          const uint8_t* src = reinterpret_cast<const uint8_t*>(o.data) + start;
          if (o.src != Src::Full) {
            thread_local std::vector<uint8_t> tmp;
            if (tmp.size() < static_cast<size_t>(kChunk)) tmp.resize(static_cast<size_t>(kChunk));
            load_operand(o, os, start, len, tmp.data());
            src = tmp.data();
          }
          for (int64_t k = 0; k < len; ++k) wb[k] = src[k] != 0;
          ptr[i] = buf;
          continue;
        }
        if (o.src == Src::Full) {
          ptr[i] = const_cast<char*>(o.data) + start * static_cast<int64_t>(o.es);
          continue;
        }
        switch (o.es) {
          case 1: load_operand(o, os, start, len, static_cast<uint8_t*>(buf)); break;
          case 4: load_operand(o, os, start, len, static_cast<uint32_t*>(buf)); break;
          default: load_operand(o, os, start, len, static_cast<uint64_t*>(buf)); break;
        }
        ptr[i] = buf;
      }
      for (const Step& st : steps) {
        void* y = st.y == out_reg && !out_bool ? static_cast<void*>(Y + start * static_cast<int64_t>(oes))
                                  : static_cast<void*>(scratch.data() + static_cast<size_t>(st.y) * kChunk);
        exec_step(st, ptr.data(), y, len);
        ptr[st.y] = y;
      }
      if (out_bool) {
        const Bool* v = static_cast<const Bool*>(ptr[out_reg]);
        auto* yb = reinterpret_cast<uint8_t*>(Y) + start;
        for (int64_t k = 0; k < len; ++k) yb[k] = static_cast<uint8_t>(v[k] != 0);
      } else if (out_reg < nin) {
        std::memcpy(Y + start * static_cast<int64_t>(oes), ptr[out_reg], static_cast<size_t>(len) * oes);
      }
    }
  });
  return true;
}

namespace {

// ---------------------------------------------------------------------------------------------
// Reductions, arg-reductions, broadcast.

// Splits `shape` into [outer, red, inner] when `axes` (normalized) are one contiguous run.
bool split3(const std::vector<int64_t>& shape, std::vector<int64_t> axes, int64_t* outer, int64_t* red, int64_t* inner) {
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
    int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(R, 1));
    parallel_for(O, grain, [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) Y[o] = reduce_row(k, X + o * R, R);
    });
    return;
  }
  // Inner run contiguous: fold whole rows; split the inner run (columns) across threads.
  int64_t cgrain = std::max<int64_t>(64, 32768 / std::max<int64_t>(R, 1));
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
  std::vector<int64_t> idx(static_cast<size_t>(std::max<int64_t>(r - 1, 0)), 0);
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
  std::vector<int64_t> st(static_cast<size_t>(r), 0);
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

}  // namespace rlx::cpu
