// Generated (fused elementwise) kernels: a typed f32 evaluator. The body is compiled once per
// kernel call into a tiny register program; chunks of the output index space run in parallel,
// each op a vectorized loop over a chunk held in per-thread scratch, so intermediates stay in L1.
// Bodies with other dtypes or ops fall back to the chunked reference evaluator (generic.cpp).
#include <cstring>

#include "backends/cpu/kernels.h"
#include "backends/cpu/train_kernels.h"  // issue 6
#include "backends/cpu/parallel.h"
#include "backends/cpu/vmath.h"

namespace rlx::cpu {

namespace {

constexpr int64_t kChunk = 1024;

enum class Src : uint8_t { Full, Scalar, Trailing, Leading, General };

struct Operand {
  Src src = Src::Full;
  const float* data = nullptr;
  int64_t inner = 1;                 // Trailing: the input repeats every `inner` elements;
                                     // Leading: each input element covers `inner` outputs
  std::vector<int64_t> stride;       // General: per output dim (0 where broadcast)
};

bool supported(OpKind k) {
  switch (k) {
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: case OpKind::Max: case OpKind::Min:
    case OpKind::Neg: case OpKind::Abs: case OpKind::Exp: case OpKind::Sqrt: case OpKind::Rsqrt:
    case OpKind::Tanh: case OpKind::Erf: case OpKind::Logistic: case OpKind::Log:
      return true;
    default: return false;
  }
}

RLX_SIMD void run_op(OpKind op, const float* a, const float* b, float* y, int64_t n) {
  switch (op) {
    case OpKind::Add: for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i]; break;
    case OpKind::Sub: for (int64_t i = 0; i < n; ++i) y[i] = a[i] - b[i]; break;
    case OpKind::Mul: for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i]; break;
    case OpKind::Div: for (int64_t i = 0; i < n; ++i) y[i] = a[i] / b[i]; break;
    // max/min propagate NaN like the reference (std::max would not).
    case OpKind::Max:
      for (int64_t i = 0; i < n; ++i) y[i] = (a[i] != a[i] || a[i] > b[i]) ? a[i] : b[i];
      break;
    case OpKind::Min:
      for (int64_t i = 0; i < n; ++i) y[i] = (a[i] != a[i] || a[i] < b[i]) ? a[i] : b[i];
      break;
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

struct Step {
  OpKind op;
  int a = -1, b = -1, y = -1;  // registers
};

}  // namespace

void fused_kernel(const Graph& body, const std::vector<Tensor>& in, Tensor& out) {
  bool typed = out.dtype() == DType::f32;
  for (auto& v : body.values) typed &= v.type.dtype == DType::f32;
  for (auto& n : body.nodes) typed &= supported(n.op) && n.outputs.size() == 1;
  for (auto& t : in) typed &= t.dtype() == DType::f32;
  if (!typed && fused_kernel_mixed(body, in, out)) return;  // issue 6: bool/int bodies (train_kernels.cpp)
  if (!typed) return fused_kernel_reference(body, in, out);

  const auto& os = out.shape();
  const int64_t total = out.numel(), r = out.rank();
  // Registers: one per body value; graph inputs map to operands, node outputs to chunk scratch.
  std::vector<int> reg(body.values.size(), -1);
  std::vector<Operand> ops(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& t = in[i];
    Operand& o = ops[i];
    o.data = t.data<float>();
    reg[body.inputs[i]] = static_cast<int>(i);
    if (t.shape() == os) continue;
    if (t.numel() == 1) {
      o.src = Src::Scalar;
      continue;
    }
    // Trailing broadcast: t's shape (leading 1s dropped) equals the output's last dims.
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
    // Leading: t's shape is the output's leading dims followed by 1s (e.g. a [B,S,1] mask times
    // [B,S,H] states): element i of the output reads t[i / inner].
    int64_t keep = t.rank() == r ? r : -1;
    while (keep > 0 && t.shape()[keep - 1] == 1) --keep;
    bool leading = keep >= 0 && keep < r;
    for (int64_t d = 0; leading && d < keep; ++d) leading = t.shape()[d] == os[d];
    if (leading) {
      o.src = Src::Leading;
      o.inner = 1;
      for (int64_t d = keep; d < r; ++d) o.inner *= os[d];
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
    Step st{n.op};
    st.a = reg[n.inputs[0]];
    if (n.inputs.size() > 1) st.b = reg[n.inputs[1]];
    st.y = reg[n.outputs[0]] = nin + nscratch++;
    steps.push_back(st);
  }
  const int out_reg = reg[body.outputs[0]];
  const int nregs = nin + nscratch;
  float* Y = out.data<float>();

  parallel_for((total + kChunk - 1) / kChunk, 16, [&](int64_t c0, int64_t c1) {  // >= 16K elements per thread
    // Per-thread scratch: one chunk per input that needs materializing and per node output.
    thread_local std::vector<float> scratch;
    size_t need = static_cast<size_t>(nregs + 1) * kChunk;
    if (scratch.size() < need) scratch.resize(need);
    thread_local std::vector<const float*> ptr;
    if (ptr.size() < static_cast<size_t>(nregs)) ptr.resize(static_cast<size_t>(nregs));
    for (int64_t c = c0; c < c1; ++c) {
      int64_t start = c * kChunk, len = std::min(kChunk, total - start);
      for (int i = 0; i < nin; ++i) {
        const Operand& o = ops[i];
        float* buf = scratch.data() + static_cast<size_t>(i) * kChunk;
        switch (o.src) {
          case Src::Full: ptr[i] = o.data + start; break;
          case Src::Scalar: std::fill(buf, buf + len, o.data[0]); ptr[i] = buf; break;
          case Src::Trailing:
            for (int64_t k = 0, p = start % o.inner; k < len; ++k, p = p + 1 == o.inner ? 0 : p + 1) buf[k] = o.data[p];
            ptr[i] = buf;
            break;
          case Src::Leading:
            for (int64_t k = 0, q = start / o.inner, p = start % o.inner; k < len; ++k) {
              buf[k] = o.data[q];
              if (++p == o.inner) p = 0, ++q;
            }
            ptr[i] = buf;
            break;
          case Src::General:
            for (int64_t k = 0; k < len; ++k) {
              int64_t rem = start + k, off = 0;
              for (int64_t d = r - 1; d >= 0; --d) {
                off += (rem % os[d]) * o.stride[d];
                rem /= os[d];
              }
              buf[k] = o.data[off];
            }
            ptr[i] = buf;
            break;
        }
      }
      for (const Step& st : steps) {
        // The last step writes straight into the output.
        float* y = st.y == out_reg ? Y + start : scratch.data() + static_cast<size_t>(st.y) * kChunk;
        run_op(st.op, ptr[st.a], st.b >= 0 ? ptr[st.b] : nullptr, y, len);
        ptr[st.y] = y;
      }
      if (out_reg < nin) std::memcpy(Y + start, ptr[out_reg], static_cast<size_t>(len) * sizeof(float));
    }
  });
}

}  // namespace rlx::cpu
