// Generated (fused elementwise) kernels: ONE typed evaluator for bodies over f32, bool, i32 and i64
// (f32 math, compare, select, convert, logic: inference's GELU/bias chains and training's ReLU
// backward ge+select or a loss's one-hot eq+convert alike). The body is turned into a tiny
// register program per call (in per-thread storage reused across calls, so a warm run allocates
// nothing); chunks of the output index space run in parallel, each op a vectorized loop over a
// chunk held in per-thread scratch, so intermediates stay in L1. Bodies with other dtypes or ops
// fall back to the chunked reference evaluator (generic.cpp). When the cpu JIT (jit.h) compiled a
// body, the executable runs that instead; this evaluator is what runs without a host compiler.
// The same loops also run row regions (rows_kernel, at the end of this file): a
// multi-output body with row reductions, argmax and broadcasts over one [R, C] shape, block by block.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/simd_avx2.h"
#include "backends/cpu/train_kernels.h"  // rows_kernel, reduce_rows_f32
#include "rlx/reference.h"
#include "backends/cpu/vmath.h"

namespace rlx::cpu {

namespace {

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
    case OpKind::Tanh: case OpKind::Erf: case OpKind::Logistic: case OpKind::Log: case OpKind::Pow:
      return true;
    default: return false;
  }
}

bool compare_op(OpKind k) {
  return k == OpKind::Eq || k == OpKind::Ne || k == OpKind::Lt || k == OpKind::Le || k == OpKind::Gt || k == OpKind::Ge;
}

#if defined(RLX_SIMD_AVX2)
// a^b = e^(b ln a) on 8 lanes for positive normal finite a, finite b and |b ln a| <= 1 (LRN's
// x^beta, x in [1, 2)); chunks with any other lane take std::pow. ln a = e ln2 + ln m, m in
// [sqrt(1/2), sqrt(2)), ln m = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.172, by its odd series to
// s^9 (3e-9 relative).
RLX_AVX2_FN void pow_avx2(const float* a, const float* b, float* y, int64_t n) {
  const __m256 tiny = _mm256_set1_ps(1.17549435e-38f), inf = _mm256_set1_ps(__builtin_inff());
  const __m256 one = _mm256_set1_ps(1.f), sqrt2 = _mm256_set1_ps(1.41421356f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(a + i), e = _mm256_loadu_ps(b + i);
    const __m256 ok = _mm256_and_ps(_mm256_and_ps(_mm256_cmp_ps(x, tiny, _CMP_GE_OQ), _mm256_cmp_ps(x, inf, _CMP_LT_OQ)),
                                    _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.f), e), inf, _CMP_LT_OQ));
    if (_mm256_movemask_ps(ok) != 0xFF) {
      for (int64_t j = i; j < i + 8; ++j) y[j] = std::pow(a[j], b[j]);
      continue;
    }
    const __m256i xi = _mm256_castps_si256(x);
    __m256 m = _mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(xi, _mm256_set1_epi32(0x007FFFFF)),
                                                   _mm256_set1_epi32(0x3F800000)));
    __m256 ex = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(xi, 23), _mm256_set1_epi32(127)));
    const __m256 big = _mm256_cmp_ps(m, sqrt2, _CMP_GT_OQ);
    m = _mm256_blendv_ps(m, _mm256_mul_ps(m, _mm256_set1_ps(0.5f)), big);
    ex = _mm256_add_ps(ex, _mm256_and_ps(big, one));
    const __m256 sv = _mm256_div_ps(_mm256_sub_ps(m, one), _mm256_add_ps(m, one)), s2 = _mm256_mul_ps(sv, sv);
    __m256 p = _mm256_set1_ps(1.f / 9.f);
    p = _mm256_fmadd_ps(p, s2, _mm256_set1_ps(1.f / 7.f));
    p = _mm256_fmadd_ps(p, s2, _mm256_set1_ps(1.f / 5.f));
    p = _mm256_fmadd_ps(p, s2, _mm256_set1_ps(1.f / 3.f));
    const __m256 s2x = _mm256_add_ps(sv, sv);
    const __m256 lnm = _mm256_fmadd_ps(_mm256_mul_ps(s2x, s2), p, s2x);
    // e ln2 in two parts (the high part has 10 bits, so e * hi is exact).
    const __m256 ln = _mm256_add_ps(_mm256_fmadd_ps(ex, _mm256_set1_ps(-2.12194440e-4f), lnm),
                                    _mm256_mul_ps(ex, _mm256_set1_ps(0.693359375f)));
    const __m256 t = _mm256_mul_ps(e, ln);
    // |b ln a| <= 1 keeps the float rounding of b ln a within an ulp of the result; else std::pow.
    if (_mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.f), t), one, _CMP_LE_OQ)) != 0xFF) {
      for (int64_t j = i; j < i + 8; ++j) y[j] = std::pow(a[j], b[j]);
      continue;
    }
    _mm256_storeu_ps(y + i, simd::exp8(t));
  }
  for (; i < n; ++i) y[i] = std::pow(a[i], b[i]);
}
#endif

RLX_SIMD void run_float(OpKind op, const float* a, const float* b, float* y, int64_t n) {
  switch (op) {
    case OpKind::Add: for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i]; break;
    case OpKind::Sub: for (int64_t i = 0; i < n; ++i) y[i] = a[i] - b[i]; break;
    case OpKind::Mul: for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i]; break;
    case OpKind::Div: for (int64_t i = 0; i < n; ++i) y[i] = a[i] / b[i]; break;
    // max/min propagate NaN like the reference (std::max would not).
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
    case OpKind::Pow: for (int64_t i = 0; i < n; ++i) y[i] = std::pow(a[i], b[i]); break;  // LRN's x^beta
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
RLX_SIMD void run_convert(const S* a, D* y, int64_t n) {
  if constexpr (std::is_same_v<D, Bool>) {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] != S(0);
  } else if constexpr (std::is_same_v<S, Bool>) {
    // 0/1 through int32: AVX2 has no uint32 -> float (that loop ran scalar).
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<D>(static_cast<int32_t>(a[i]));
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<D>(a[i]);
  }
}

// Supported: float ops on f32; compares on any of the four types; select; convert between the
// integer/bool types and to f32 (float->integer is left to the reference: its NaN/overflow rules);
// and/or/xor/not on bool.
bool node_ok(const Graph& body, const Node& n) {
  if (n.outputs.size() != 1 || n.inputs.empty() || n.inputs.size() > 3) return false;
  Ty y = ty_of(body.type(n.outputs[0]).dtype);
  if (y == Ty::None) return false;
  Ty x[3] = {Ty::None, Ty::None, Ty::None};
  for (size_t i = 0; i < n.inputs.size(); ++i)
    if ((x[i] = ty_of(body.type(n.inputs[i]).dtype)) == Ty::None) return false;
  const size_t ni = n.inputs.size();
  if (float_op(n.op)) {
    if (y != Ty::F32 || ni > 2) return false;
    for (size_t i = 0; i < ni; ++i)
      if (x[i] != Ty::F32) return false;
    return true;
  }
  if (compare_op(n.op)) return ni == 2 && x[0] == x[1] && y == Ty::B8;
  if (n.op == OpKind::Select) return ni == 3 && x[0] == Ty::B8 && x[1] == y && x[2] == y;
  if (n.op == OpKind::Convert) return ni == 1 && (x[0] != Ty::F32 || y == Ty::F32 || y == Ty::B8);
  if (n.op == OpKind::And || n.op == OpKind::Or || n.op == OpKind::Xor)
    return ni == 2 && x[0] == Ty::B8 && x[1] == Ty::B8 && y == Ty::B8;
  if (n.op == OpKind::Not) return ni == 1 && x[0] == Ty::B8 && y == Ty::B8;
  return false;
}

enum class Src : uint8_t { Full, Scalar, Trailing, Leading, General };

struct Operand {
  Src src = Src::Full;
  const char* data = nullptr;
  size_t es = 4;
  int64_t inner = 1;             // Trailing: the input repeats every `inner` elements;
                                 // Leading: each input element covers `inner` outputs
  std::vector<int64_t> stride;   // General: per output dim (0 where broadcast)
};

struct Step {
  OpKind op;
  Ty ta, ty;  // type of input 0 (input 1 for select) and of the output
  int a = -1, b = -1, c = -1, y = -1;
};

// The register program of one call; kept per thread and reused, so only the first calls allocate.
struct Plan {
  std::vector<int> reg;
  std::vector<Operand> ops;
  std::vector<Step> steps;
};

template <class E>
void load_operand(const Operand& o, const std::vector<int64_t>& os, int64_t start, int64_t len, E* buf) {
  const E* d = reinterpret_cast<const E*>(o.data);
  int64_t r = static_cast<int64_t>(os.size());
  switch (o.src) {
    case Src::Full: std::memcpy(buf, d + start, static_cast<size_t>(len) * sizeof(E)); break;
    case Src::Scalar: std::fill(buf, buf + len, d[0]); break;
    case Src::Trailing:
      for (int64_t k = 0, p = start % o.inner; k < len; ++k, p = p + 1 == o.inner ? 0 : p + 1) buf[k] = d[p];
      break;
    case Src::Leading:
      for (int64_t k = 0, q = start / o.inner, p = start % o.inner; k < len; ++k) {
        buf[k] = d[q];
        if (++p == o.inner) p = 0, ++q;
      }
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
#if defined(RLX_SIMD_AVX2)
    if (st.op == OpKind::Pow && simd::cpu_has_avx2_fma())
      return pow_avx2(static_cast<const float*>(ptr[st.a]), static_cast<const float*>(ptr[st.b]), static_cast<float*>(y), n);
#endif
    run_float(st.op, static_cast<const float*>(ptr[st.a]), st.b >= 0 ? static_cast<const float*>(ptr[st.b]) : nullptr,
              static_cast<float*>(y), n);
    return;
  }
  if (compare_op(st.op)) {
    with_ty(st.ta, [&](auto tag) {
      using X = decltype(tag);
      run_compare<X>(st.op, static_cast<const X*>(ptr[st.a]), static_cast<const X*>(ptr[st.b]), static_cast<Bool*>(y), n);
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
      if (st.op == OpKind::And)
        for (int64_t i = 0; i < n; ++i) o[i] = a[i] & b[i];
      else if (st.op == OpKind::Or)
        for (int64_t i = 0; i < n; ++i) o[i] = a[i] | b[i];
      else
        for (int64_t i = 0; i < n; ++i) o[i] = a[i] ^ b[i];
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

// Classifies how input t broadcasts to the output shape os.
void classify(const Tensor& t, const std::vector<int64_t>& os, Operand& o) {
  const int64_t r = static_cast<int64_t>(os.size());
  o.src = Src::Full;
  o.inner = 1;
  if (t.shape() == os) return;
  if (t.numel() == 1) {
    o.src = Src::Scalar;
    return;
  }
  // Trailing broadcast: t's shape (leading 1s dropped) equals the output's last dims (a bias).
  int64_t lead = 0;
  while (lead < t.rank() && t.shape()[lead] == 1) ++lead;
  int64_t tr = t.rank() - lead;
  bool trailing = tr <= r;
  for (int64_t d = 0; trailing && d < tr; ++d) trailing = t.shape()[lead + d] == os[r - tr + d];
  if (trailing) {
    o.src = Src::Trailing;
    o.inner = t.numel();
    return;
  }
  // Leading: t's shape is the output's leading dims followed by 1s (e.g. a [B,S,1] mask times
  // [B,S,H] states): element i of the output reads t[i / inner].
  int64_t keep = t.rank() == r ? r : -1;
  while (keep > 0 && t.shape()[keep - 1] == 1) --keep;
  bool leading = keep >= 0 && keep < r;
  for (int64_t d = 0; leading && d < keep; ++d) leading = t.shape()[d] == os[d];
  if (leading) {
    o.src = Src::Leading;
    for (int64_t d = keep; d < r; ++d) o.inner *= os[d];
    return;
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

}  // namespace

bool fused_kernel_typed(const Graph& body, const std::vector<Tensor>& in, Tensor& out) {
  if (ty_of(out.dtype()) == Ty::None || body.outputs.size() != 1 || in.size() != body.inputs.size()) return false;
  if (body.type(body.outputs[0]).dtype != out.dtype()) return false;
  for (size_t i = 0; i < in.size(); ++i)
    if (ty_of(in[i].dtype()) == Ty::None || in[i].dtype() != body.type(body.inputs[i]).dtype) return false;
  bool wide = false;  // an 8-byte type anywhere: registers need 8 bytes per element
  for (auto& n : body.nodes) {
    if (!node_ok(body, n)) return false;
    wide |= body.type(n.outputs[0]).dtype == DType::i64;
  }
  for (auto& t : in) wide |= t.dtype() == DType::i64;

  thread_local Plan plan;
  Plan& P = plan;
  const auto& os = out.shape();
  const int64_t total = out.numel();
  const int nin = static_cast<int>(in.size());
  P.reg.assign(body.values.size(), -1);
  if (P.ops.size() < in.size()) P.ops.resize(in.size());
  for (int i = 0; i < nin; ++i) {
    Operand& o = P.ops[static_cast<size_t>(i)];
    o.data = static_cast<const char*>(in[i].raw());
    o.es = dtype_size(in[i].dtype());
    classify(in[i], os, o);
    P.reg[body.inputs[i]] = i;
  }
  P.steps.clear();
  int nscratch = 0;
  for (auto& n : body.nodes) {
    Step st{n.op, Ty::None, ty_of(body.type(n.outputs[0]).dtype)};
    st.a = P.reg[n.inputs[0]];
    if (n.inputs.size() > 1) st.b = P.reg[n.inputs[1]];
    if (n.inputs.size() > 2) st.c = P.reg[n.inputs[2]];
    if (st.a < 0 || (n.inputs.size() > 1 && st.b < 0) || (n.inputs.size() > 2 && st.c < 0)) return false;
    st.ta = ty_of(body.type(n.inputs[n.op == OpKind::Select ? 1 : 0]).dtype);
    st.y = P.reg[n.outputs[0]] = nin + nscratch++;
    P.steps.push_back(st);
  }
  const int out_reg = P.reg[body.outputs[0]];
  if (out_reg < 0) return false;
  const int nregs = nin + nscratch;
  const size_t oes = dtype_size(out.dtype());
  const bool out_bool = out.dtype() == DType::boolean;  // registers are wider: store through scratch
  const size_t slot = static_cast<size_t>(kChunk) * (wide ? 8 : 4);  // bytes per register
  char* Y = static_cast<char*>(out.raw());
  const std::vector<Operand>& ops = P.ops;
  const std::vector<Step>& steps = P.steps;

  parallel_for((total + kChunk - 1) / kChunk, 16, [&](int64_t c0, int64_t c1) {  // >= 16K elements per thread
    thread_local std::vector<uint64_t> scratch;  // one register slot per input and per node output
    size_t need = (static_cast<size_t>(nregs + 1) * slot + 7) / 8;
    if (scratch.size() < need) scratch.resize(need);
    char* base = reinterpret_cast<char*>(scratch.data());
    thread_local std::vector<void*> ptr;
    if (ptr.size() < static_cast<size_t>(nregs)) ptr.resize(static_cast<size_t>(nregs));
    thread_local std::vector<uint8_t> tmp;
    for (int64_t c = c0; c < c1; ++c) {
      int64_t start = c * kChunk, len = std::min(kChunk, total - start);
      for (int i = 0; i < nin; ++i) {
        const Operand& o = ops[static_cast<size_t>(i)];
        void* buf = base + static_cast<size_t>(i) * slot;
        if (o.es == 1) {  // bool: widen to Bool registers
          auto* wb = static_cast<Bool*>(buf);
          const uint8_t* src = reinterpret_cast<const uint8_t*>(o.data) + start;
          if (o.src != Src::Full) {
            if (tmp.size() < static_cast<size_t>(kChunk)) tmp.resize(static_cast<size_t>(kChunk));
            load_operand(o, os, start, len, tmp.data());
            src = tmp.data();
          }
          for (int64_t k = 0; k < len; ++k) wb[k] = src[k] != 0;
          ptr[i] = buf;
          continue;
        }
        if (o.src == Src::Full) {  // same shape: read in place
          ptr[i] = const_cast<char*>(o.data) + start * static_cast<int64_t>(o.es);
          continue;
        }
        if (o.es == 4) load_operand(o, os, start, len, static_cast<uint32_t*>(buf));
        else load_operand(o, os, start, len, static_cast<uint64_t*>(buf));
        ptr[i] = buf;
      }
      for (const Step& st : steps) {
        // The last step writes straight into the output.
        void* y = st.y == out_reg && !out_bool ? static_cast<void*>(Y + start * static_cast<int64_t>(oes))
                                               : static_cast<void*>(base + static_cast<size_t>(st.y) * slot);
        exec_step(st, ptr.data(), y, len);
        ptr[st.y] = y;
      }
      if (out_bool) {
        const Bool* v = static_cast<const Bool*>(ptr[out_reg]);
        auto* yb = reinterpret_cast<uint8_t*>(Y) + start;
        for (int64_t k = 0; k < len; ++k) yb[k] = static_cast<uint8_t>(v[k] != 0);
      } else if (out_reg < nin) {  // the body returns an input (memmove: it may be that input, in place)
        std::memmove(Y + start * static_cast<int64_t>(oes), ptr[out_reg], static_cast<size_t>(len) * oes);
      }
    }
  });
  return true;
}

void fused_kernel(const Graph& body, const std::vector<Tensor>& in, Tensor& out) {
  if (!fused_kernel_typed(body, in, out)) fused_kernel_reference(body, in, out);
}

// ---------------------------------------------------------------------------------------------
// Row-fused kernels (see train_kernels.h). A body over one [R, C] row shape runs
// on blocks of whole rows. Values are Full ([R, C]), Row ([R] / [R, 1]), Col ([C] / [1, C], inputs
// only) or Scalar; within a block a Full value is len*C contiguous elements (the block's rows, row
// major, so Full inputs and outputs are read and written in place) and a Row value len elements.
// Elementwise steps are the evaluator's loops above (same bits); a Row operand of a Full step is
// expanded into scratch first, Col and Scalar inputs are tiled once per chunk.

namespace {

using RK = RowShape;  // train_kernels.h: the classes the rewrite uses too

bool row_kind(const Shape& s, int64_t R, int64_t C, RK* k) { return (*k = row_shape(s, R, C)) != RK::None; }

size_t ty_width(Ty t) { return t == Ty::I64 ? 8 : 4; }

enum class RS : uint8_t { Elem, Reduce, Arg, Bcast, Alias };

struct RVal {
  RK kind = RK::Full;
  Ty ty = Ty::None;
  int input = -1;    // body input index
  int output = -1;   // body output index (first one when repeated)
  size_t off = 0;    // scratch byte offset (computed values, tiled inputs, bool inputs)
  int alias = -1;    // Alias step: the value this one shares storage with
};

struct RStep {
  RS kind;
  OpKind op;
  Ty ta = Ty::None, ty = Ty::None;
  int red = 0;       // Reduce: 0 sum 1 max 2 min; Arg: 1 max 0 min
  int v[3] = {-1, -1, -1};
  int y = -1;
  size_t tmp[3] = {0, 0, 0};  // Elem with a Full output: scratch for expanding a Row operand
};

}  // namespace

struct RowPlan {  // declared in train_kernels.h; built once per kernel (rows_prepare)
  std::vector<RVal> vals;
  std::vector<RStep> steps;
  int64_t rb = 1;       // rows per block
  size_t scratch = 0;   // bytes per thread
};

namespace {

// Builds the plan for `body` (false: not covered). Scratch is laid out for blocks of rb rows.
bool rows_build(const Graph& body, int64_t R, int64_t C, RowPlan& P) {
  if (R < 2 || C < 1 || R == C || body.outputs.empty()) return false;
  P.vals.assign(body.values.size(), RVal{});
  P.steps.clear();
  std::vector<bool> known(body.values.size(), false);
  // ~2K elements per block (a Full f32 value: 8 KB): 512 to 8K measured within 5% on the MNIST head.
  P.rb = std::max<int64_t>(1, std::min<int64_t>(R, 2048 / C));
  const size_t full = static_cast<size_t>(P.rb * C), row = static_cast<size_t>(P.rb);
  size_t off = 0;
  auto take = [&](size_t elems, Ty t) {
    size_t o = off;
    off += (elems * ty_width(t) + 63) / 64 * 64;
    return o;
  };
  for (size_t i = 0; i < body.inputs.size(); ++i) {
    ValueId v = body.inputs[i];
    RVal& r = P.vals[v];
    if (!row_kind(body.type(v).shape, R, C, &r.kind) || (r.ty = ty_of(body.type(v).dtype)) == Ty::None) return false;
    r.input = static_cast<int>(i);
    // Col and Scalar inputs are tiled to a full block; bool inputs are widened.
    if (r.kind == RK::Col || r.kind == RK::Scalar || r.kind == RK::Full) {
      if (r.kind != RK::Full || r.ty == Ty::B8) r.off = take(full, r.ty);
    } else if (r.ty == Ty::B8) {
      r.off = take(row, r.ty);
    }
    known[v] = true;
  }
  for (const Node& n : body.nodes) {
    if (n.outputs.size() != 1 || n.inputs.empty()) return false;
    for (ValueId a : n.inputs)
      if (!known[a]) return false;
    ValueId yv = n.outputs[0];
    RVal& y = P.vals[yv];
    if (!row_kind(body.type(yv).shape, R, C, &y.kind) || (y.ty = ty_of(body.type(yv).dtype)) == Ty::None) return false;
    if (y.kind == RK::Col || y.kind == RK::Scalar) return false;  // computed values are Full or Row
    const RVal& a = P.vals[n.inputs[0]];
    RStep st{RS::Elem, n.op};
    st.ty = y.ty;
    st.ta = a.ty;
    st.y = yv;
    for (size_t i = 0; i < n.inputs.size() && i < 3; ++i) st.v[i] = n.inputs[i];
    Node q{n.op, {}, {}, n.attrs, ""};
    switch (n.op) {
      case OpKind::Reshape:
        if (n.inputs.size() != 1 || a.kind != y.kind || a.ty != y.ty) return false;
        st.kind = RS::Alias;
        y.alias = n.inputs[0];
        while (P.vals[y.alias].alias >= 0) y.alias = P.vals[y.alias].alias;
        break;
      case OpKind::BroadcastInDim:
        if (n.inputs.size() != 1 || a.ty != y.ty || a.kind == RK::Full || (y.kind == RK::Row && a.kind == RK::Col))
          return false;
        st.kind = RS::Bcast;
        break;
      case OpKind::ReduceSum:
      case OpKind::ReduceMax:
      case OpKind::ReduceMin: {
        const auto& ax = attr_ints(q, "axes");
        if (a.kind != RK::Full || a.ty != Ty::F32 || y.kind != RK::Row || y.ty != Ty::F32 || ax.size() != 1 ||
            (ax[0] != 1 && ax[0] != -1) || body.type(n.inputs[0]).shape.size() != 2)
          return false;
        st.kind = RS::Reduce;
        st.red = n.op == OpKind::ReduceSum ? 0 : n.op == OpKind::ReduceMax ? 1 : 2;
        break;
      }
      case OpKind::ArgMax:
      case OpKind::ArgMin: {
        int64_t ax = attr_int(q, "axis");
        if (a.kind != RK::Full || a.ty != Ty::F32 || y.kind != RK::Row || y.ty != Ty::I64 || (ax != 1 && ax != -1) ||
            body.type(n.inputs[0]).shape.size() != 2)
          return false;
        st.kind = RS::Arg;
        st.red = n.op == OpKind::ArgMax;
        break;
      }
      default: {
        if (!is_elementwise(n.op) || !node_ok(body, n)) return false;
        st.ta = ty_of(body.type(n.inputs[n.op == OpKind::Select ? 1 : 0]).dtype);
        for (size_t i = 0; i < n.inputs.size(); ++i) {
          const RVal& o = P.vals[n.inputs[i]];
          if (y.kind == RK::Row && (o.kind == RK::Full || o.kind == RK::Col)) return false;
          if (y.kind == RK::Full && o.kind == RK::Row) st.tmp[i] = take(full, o.ty) + 1;  // +1: "set"
        }
        break;
      }
    }
    if (st.kind != RS::Alias) y.off = take(y.kind == RK::Full ? full : row, y.ty);
    known[yv] = true;
    P.steps.push_back(st);
  }
  for (size_t i = 0; i < body.outputs.size(); ++i) {
    RVal& o = P.vals[body.outputs[i]];
    if (o.kind == RK::Col || o.kind == RK::Scalar || o.input >= 0) return false;
    if (o.output < 0) o.output = static_cast<int>(i);
  }
  P.scratch = off + 64;
  return true;
}

template <class E>
void tile(const E* src, RK kind, int64_t rb, int64_t C, E* dst) {
  if (kind == RK::Scalar) {
    std::fill(dst, dst + rb * C, src[0]);
    return;
  }
  for (int64_t r = 0; r < rb; ++r) std::memcpy(dst + r * C, src, static_cast<size_t>(C) * sizeof(E));
}

template <class E>
void expand_rows(const E* x, int64_t len, int64_t C, E* y) {
  for (int64_t r = 0; r < len; ++r) std::fill(y + r * C, y + (r + 1) * C, x[r]);
}

}  // namespace

std::shared_ptr<const RowPlan> rows_prepare(const Graph& body, int64_t R, int64_t C) {
  auto P = std::make_shared<RowPlan>();
  if (!rows_build(body, R, C, *P)) return nullptr;
  return P;
}

bool rows_plan_ok(const Graph& body, int64_t R, int64_t C) { return rows_prepare(body, R, C) != nullptr; }

void rows_kernel(const RowPlan* plan, const Graph& body, int64_t R, int64_t C, const std::vector<Tensor>& in,
                 std::vector<Tensor>& out) {
  bool ok = in.size() == body.inputs.size() && out.size() == body.outputs.size() && plan != nullptr;
  for (size_t i = 0; ok && i < in.size(); ++i) ok = in[i].dtype() == body.type(body.inputs[i]).dtype;
  for (size_t i = 0; ok && i < out.size(); ++i) ok = out[i].dtype() == body.type(body.outputs[i]).dtype;
  if (!ok) {  // not covered (the rewrite checks first, so this is a safety net): the reference
    auto res = reference_run(body, in);
    for (size_t i = 0; i < out.size(); ++i)
      std::memcpy(out[i].raw(), res[i].raw(), static_cast<size_t>(res[i].numel()) * dtype_size(res[i].dtype()));
    return;
  }
  // An output whose bytes are also an input's (the planner's in-place reuse) is written at the end
  // of each block, after every step of the block has read that input; the others directly.
  const size_t nout = out.size();
  thread_local std::vector<char> direct;
  direct.assign(nout, 1);
  for (size_t o = 0; o < nout; ++o) {
    const char* a = static_cast<const char*>(out[o].raw());
    const char* ae = a + out[o].numel() * static_cast<int64_t>(dtype_size(out[o].dtype()));
    if (out[o].dtype() == DType::boolean) direct[o] = 0;
    for (auto& t : in) {
      const char* b = static_cast<const char*>(t.raw());
      const char* be = b + t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
      if (a < be && b < ae) direct[o] = 0;
    }
  }
  const RowPlan& P = *plan;
  const RowPlan& Pc = P;
  const std::vector<char>& dir = direct;  // the caller's (thread_local names are per thread)
  const int64_t rb = P.rb, nblocks = (R + rb - 1) / rb;
  // ~32K element-steps per chunk before a second thread is worth waking (MNIST head: batch 1024 splits
  // into 6 blocks of 204 rows, batch 128 is one block).
  const int64_t work = rb * C * static_cast<int64_t>(std::max<size_t>(P.steps.size(), 1));
  const int64_t grain = std::max<int64_t>(1, (32768 + work - 1) / work);
  parallel_for(nblocks, grain, [&](int64_t b0, int64_t b1) {
    thread_local std::vector<uint64_t> scratch;
    if (scratch.size() * 8 < Pc.scratch) scratch.resize(Pc.scratch / 8 + 1);
    char* S = reinterpret_cast<char*>(scratch.data());
    thread_local std::vector<void*> ptr;
    ptr.assign(Pc.vals.size(), nullptr);
    // Col / Scalar inputs: tiled once per chunk.
    for (size_t v = 0; v < Pc.vals.size(); ++v) {
      const RVal& r = Pc.vals[v];
      if (r.input < 0 || (r.kind != RK::Col && r.kind != RK::Scalar)) continue;
      const Tensor& t = in[static_cast<size_t>(r.input)];
      if (r.ty == Ty::B8) {
        const uint8_t* src = static_cast<const uint8_t*>(t.raw());
        Bool* d = reinterpret_cast<Bool*>(S + r.off);
        int64_t n = r.kind == RK::Scalar ? 1 : C;
        for (int64_t rr = 0; rr < rb; ++rr)
          for (int64_t c = 0; c < C; ++c) d[rr * C + c] = src[n == 1 ? 0 : c] != 0;
      } else if (ty_width(r.ty) == 8) {
        tile(static_cast<const uint64_t*>(t.raw()), r.kind, rb, C, reinterpret_cast<uint64_t*>(S + r.off));
      } else {
        tile(static_cast<const uint32_t*>(t.raw()), r.kind, rb, C, reinterpret_cast<uint32_t*>(S + r.off));
      }
      ptr[v] = S + r.off;
    }
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t r0 = blk * rb, len = std::min(rb, R - r0), nf = len * C;
      // Full / Row inputs: in place (bool: widened).
      for (size_t v = 0; v < Pc.vals.size(); ++v) {
        const RVal& r = Pc.vals[v];
        if (r.input < 0 || r.kind == RK::Col || r.kind == RK::Scalar) continue;
        const Tensor& t = in[static_cast<size_t>(r.input)];
        const int64_t first = r.kind == RK::Full ? r0 * C : r0, n = r.kind == RK::Full ? nf : len;
        if (r.ty == Ty::B8) {
          const uint8_t* src = static_cast<const uint8_t*>(t.raw()) + first;
          Bool* d = reinterpret_cast<Bool*>(S + r.off);
          for (int64_t k = 0; k < n; ++k) d[k] = src[k] != 0;
          ptr[v] = d;
        } else {
          ptr[v] = const_cast<char*>(static_cast<const char*>(t.raw())) + first * static_cast<int64_t>(ty_width(r.ty));
        }
      }
      for (const RStep& st : Pc.steps) {
        const RVal& y = Pc.vals[static_cast<size_t>(st.y)];
        if (st.kind == RS::Alias) {
          ptr[st.y] = ptr[y.alias];
          continue;
        }
        const int64_t ny = y.kind == RK::Full ? nf : len;
        void* yp = S + y.off;
        if (y.output >= 0 && dir[static_cast<size_t>(y.output)])
          yp = static_cast<char*>(out[static_cast<size_t>(y.output)].raw()) +
               (y.kind == RK::Full ? r0 * C : r0) * static_cast<int64_t>(ty_width(y.ty));
        const void* a = ptr[st.v[0]];
        switch (st.kind) {
          case RS::Reduce:
            reduce_rows_f32(st.red, static_cast<const float*>(a), len, C, static_cast<float*>(yp));
            break;
          case RS::Arg:
            argreduce_rows_f32(st.red != 0, static_cast<const float*>(a), len, C, static_cast<int64_t*>(yp));
            break;
          case RS::Bcast: {
            const RVal& x = Pc.vals[static_cast<size_t>(st.v[0])];
            const size_t w = ty_width(y.ty);
            if (x.kind == RK::Row && y.kind == RK::Full) {
              if (w == 8) expand_rows(static_cast<const uint64_t*>(a), len, C, static_cast<uint64_t*>(yp));
              else expand_rows(static_cast<const uint32_t*>(a), len, C, static_cast<uint32_t*>(yp));
            } else if (x.kind == RK::Scalar && y.kind == RK::Row) {  // tiled scalars are constant
              std::memcpy(yp, a, static_cast<size_t>(len) * w);
            } else {  // Row -> Row, Col/Scalar -> Full (tiled)
              std::memcpy(yp, a, static_cast<size_t>(ny) * w);
            }
            break;
          }
          case RS::Elem: {
            void* args[3] = {nullptr, nullptr, nullptr};
            for (int i = 0; i < 3 && st.v[i] >= 0; ++i) {
              args[i] = ptr[st.v[i]];
              if (st.tmp[i]) {  // a Row operand of a Full step
                void* e = S + (st.tmp[i] - 1);
                if (ty_width(Pc.vals[st.v[i]].ty) == 8)
                  expand_rows(static_cast<const uint64_t*>(args[i]), len, C, static_cast<uint64_t*>(e));
                else
                  expand_rows(static_cast<const uint32_t*>(args[i]), len, C, static_cast<uint32_t*>(e));
                args[i] = e;
              }
            }
            Step es{st.op, st.ta, st.ty, 0, st.v[1] >= 0 ? 1 : -1, st.v[2] >= 0 ? 2 : -1, -1};
            exec_step(es, args, yp, ny);
            break;
          }
          case RS::Alias: break;
        }
        ptr[st.y] = yp;
      }
      // Outputs not written in place.
      for (size_t o = 0; o < nout; ++o) {
        const RVal& r = Pc.vals[static_cast<size_t>(body.outputs[o])];
        const int64_t first = r.kind == RK::Full ? r0 * C : r0, n = r.kind == RK::Full ? nf : len;
        const size_t es = dtype_size(out[o].dtype());
        char* d = static_cast<char*>(out[o].raw()) + first * static_cast<int64_t>(es);
        const void* src = ptr[body.outputs[o]];
        if (src == d) continue;
        if (out[o].dtype() == DType::boolean) {
          const Bool* b = static_cast<const Bool*>(src);
          for (int64_t k = 0; k < n; ++k) reinterpret_cast<uint8_t*>(d)[k] = static_cast<uint8_t>(b[k] != 0);
        } else {
          std::memcpy(d, src, static_cast<size_t>(n) * es);
        }
      }
    }
  });
}

}  // namespace rlx::cpu
