// Generic kernels (reference semantics into preallocated buffers) and the generated-kernel
// evaluator for fused elementwise regions.
#include <algorithm>
#include <cstring>

#include "backends/cpu/kernels.h"
#include "backends/cpu/train_kernels.h"
#include "dist/execute.h"
#include "rlx/reference.h"

namespace rlx::cpu {

KernelFn find_sparse_kernel(OpKind op);  // sparse.cpp: the sparse_* ops

KernelFn find_kernel(OpKind op, DType dt) {
  switch (op) {
    case OpKind::DotGeneral: return &dot_general;
    case OpKind::Linear: return &linear;
    case OpKind::MatMul: return &matmul;
    case OpKind::Softmax: return &softmax;
    case OpKind::LayerNorm: return &layer_norm;
    case OpKind::Attention: return &attention;
    case OpKind::Gather: return dt == DType::f32 ? &gather : nullptr;
    case OpKind::Transpose: return &transpose;
    case OpKind::Concatenate: return &concatenate;
    case OpKind::Slice: return &slice;
    case OpKind::Pad: return &pad;
    case OpKind::DequantMatMul: return dt == DType::f32 ? &dequant_matmul : nullptr;  // dequant_matmul.cpp
    case OpKind::Dequantize: return &dequantize;
    case OpKind::QLinear: return dt == DType::i8 || dt == DType::u8 ? &qlinear : nullptr;  // qlinear.cpp
    case OpKind::QConv: return dt == DType::i8 || dt == DType::u8 ? &qconv : nullptr;      // qlinear.cpp
    case OpKind::QuantizeAffine: return dt == DType::f32 ? &quantize_affine : nullptr;  // quant_affine.cpp
    case OpKind::DequantizeAffine: return &dequantize_affine;
    case OpKind::QMatMul: return dt == DType::i8 || dt == DType::u8 ? &qmatmul : nullptr;
    case OpKind::Conv: return dt == DType::f32 ? &conv : nullptr;                      // conv.cpp
    case OpKind::ReduceWindow: return dt == DType::f32 ? &reduce_window : nullptr;     // pool.cpp
    case OpKind::SplatProject:
    case OpKind::SplatProjectGrad:
    case OpKind::SplatSh:
    case OpKind::SplatRasterize:
    case OpKind::SplatRasterizeGrad: return splat_kernel_for(dt);                      // splat.cpp
    case OpKind::AllReduce:
    case OpKind::AllGather:
    case OpKind::ReduceScatter:
    case OpKind::AllToAll:
    case OpKind::CollectiveBroadcast:
    case OpKind::Send:
    case OpKind::Recv: return &dist::execute_collective;  // native buffers through the communicator (src/dist)
    default:
      if (is_linalg(op)) return find_linalg_kernel(op, dt);  // linalg.cpp
      if (KernelFn f = find_sparse_kernel(op)) return f;  // sparse.cpp
      return find_train_kernel(op, dt);  // reductions, broadcast, argmax (train_kernels.cpp)
  }
}

void generic_kernel(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  std::vector<ValueType> ot;
  for (auto& o : out) ot.push_back(ValueType{o.dtype(), to_shape(o.shape())});
  auto res = reference_eval(n, in, ot);
  for (size_t i = 0; i < out.size(); ++i) {
    RLX_CHECK(res[i].nbytes() == out[i].nbytes(), "[cpu] ", op_name(n.op), ": kernel produced ", res[i].nbytes(),
              " bytes for a ", out[i].nbytes(), "-byte buffer");
    if (out[i].nbytes()) std::memcpy(out[i].raw(), res[i].raw(), out[i].nbytes());
  }
}

namespace {

// Gathers elements [start, start+len) of the output index space from `t`, which broadcasts to
// `oshape` (numpy rules), into a contiguous chunk.
Tensor gather_chunk(const Tensor& t, const std::vector<int64_t>& oshape, int64_t start, int64_t len) {
  Tensor c(t.dtype(), {len});
  size_t es = dtype_size(t.dtype());
  int64_t r = static_cast<int64_t>(oshape.size()), tr = t.rank();
  std::vector<int64_t> st(r, 0);
  int64_t s = 1;
  for (int64_t d = r - 1; d >= 0; --d) {
    int64_t td = d - (r - tr);
    if (td >= 0 && t.shape()[td] != 1) st[d] = s;
    if (td >= 0) s *= t.shape()[td];
  }
  const char* src = static_cast<const char*>(t.raw());
  char* dst = static_cast<char*>(c.raw());
  for (int64_t i = 0; i < len; ++i) {
    int64_t rem = start + i, off = 0;
    for (int64_t d = r - 1; d >= 0; --d) {
      off += (rem % oshape[d]) * st[d];
      rem /= oshape[d];
    }
    std::memcpy(dst + i * es, src + off * es, es);
  }
  return c;
}

}  // namespace

void fused_kernel_reference(const Graph& body, const std::vector<Tensor>& in, Tensor& out) {
  constexpr int64_t kChunk = 4096;
  const int64_t total = out.numel();
  size_t oes = dtype_size(out.dtype());
  for (int64_t start = 0; start < total; start += kChunk) {
    int64_t len = std::min(kChunk, total - start);
    std::vector<Tensor> vals(body.values.size());
    for (size_t i = 0; i < in.size(); ++i) {
      const Tensor& t = in[i];
      if (t.shape() == out.shape()) {  // same shape: read the chunk in place
        char* p = static_cast<char*>(const_cast<void*>(t.raw())) + start * dtype_size(t.dtype());
        vals[body.inputs[i]] = Tensor::wrap(t.dtype(), {len}, nullptr, p);
      } else {
        vals[body.inputs[i]] = gather_chunk(t, out.shape(), start, len);
      }
    }
    for (auto& n : body.nodes) {
      std::vector<Tensor> args;
      for (auto v : n.inputs) args.push_back(vals[v]);
      std::vector<ValueType> ot{ValueType{body.type(n.outputs[0]).dtype, Shape{Dim(len)}}};
      vals[n.outputs[0]] = reference_eval(n, args, ot)[0];
    }
    const Tensor& res = vals[body.outputs[0]];
    std::memcpy(static_cast<char*>(out.raw()) + start * oes, res.raw(), static_cast<size_t>(len) * oes);
  }
}

}  // namespace rlx::cpu
