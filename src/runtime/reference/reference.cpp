// The reference interpreter's entry points: per-op dispatch and whole-graph evaluation.
#include "rlx/reference.h"

#include "linalg/linalg.h"
#include "runtime/reference/common.h"
#include "splat/reference.h"

namespace rlx {

using namespace ref;

namespace {

// Every op of ops.def is listed (no default), so a new op without a reference fails to compile (-Wswitch).
Outs dispatch(const Node& n, const Ins& in, const Types& ot) {
  switch (n.op) {
    case OpKind::Constant: return eval_constant(n, in, ot);
    case OpKind::Iota: return eval_iota(n, in, ot);
    case OpKind::RngUniform: return eval_rng_uniform(n, in, ot);
    case OpKind::Neg:
    case OpKind::Abs:
    case OpKind::Exp:
    case OpKind::Log:
    case OpKind::Sqrt:
    case OpKind::Rsqrt:
    case OpKind::Tanh:
    case OpKind::Erf:
    case OpKind::Sin:
    case OpKind::Cos:
    case OpKind::Logistic:
    case OpKind::Floor:
    case OpKind::Ceil:
    case OpKind::Round:
    case OpKind::Sign:
    case OpKind::Not:
    case OpKind::IsNan:
    case OpKind::Real:
    case OpKind::Imag:
    case OpKind::Conj: return eval_unary(n, in, ot);
    case OpKind::Convert: return eval_convert(n, in, ot);
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div:
    case OpKind::Pow:
    case OpKind::Max:
    case OpKind::Min:
    case OpKind::Rem:
    case OpKind::And:
    case OpKind::Or:
    case OpKind::Xor: return eval_binary(n, in, ot);
    case OpKind::Eq:
    case OpKind::Ne:
    case OpKind::Lt:
    case OpKind::Le:
    case OpKind::Gt:
    case OpKind::Ge: return eval_compare(n, in, ot);
    case OpKind::Select: return eval_select(n, in, ot);
    case OpKind::ReduceSum:
    case OpKind::ReduceMax:
    case OpKind::ReduceMin:
    case OpKind::ReduceProd:
    case OpKind::ReduceMean: return eval_reduce(n, in, ot);
    case OpKind::ArgMax:
    case OpKind::ArgMin: return eval_arg_reduce(n, in, ot);
    case OpKind::DotGeneral: return eval_dot_general(n, in, ot);
    case OpKind::Conv:
    case OpKind::Convolution: return eval_conv(n, in, ot);
    case OpKind::ReduceWindow: return eval_reduce_window(n, in, ot);
    case OpKind::Cumsum: return eval_cumsum(n, in, ot);
    case OpKind::Sort: return eval_sort(n, in, ot);
    case OpKind::TopK: return eval_topk(n, in, ot);
    case OpKind::BroadcastInDim: return eval_broadcast_in_dim(n, in, ot);
    case OpKind::Reshape:
    case OpKind::Squeeze:
    case OpKind::Unsqueeze: return eval_reshape(n, in, ot);
    case OpKind::Transpose: return eval_transpose(n, in, ot);
    case OpKind::Slice: return eval_slice(n, in, ot);
    case OpKind::Pad: return eval_pad(n, in, ot);
    case OpKind::Concatenate: return eval_concatenate(n, in, ot);
    case OpKind::Gather:
    case OpKind::Embedding: return eval_gather(n, in, ot);
    case OpKind::ScatterAdd: return eval_scatter_add(n, in, ot);
    case OpKind::MatMul: return eval_matmul(n, in, ot);
    case OpKind::Linear: return eval_linear(n, in, ot);
    case OpKind::MaxPool:
    case OpKind::AvgPool:
    case OpKind::GlobalAvgPool: return eval_pool(n, in, ot);
    case OpKind::LayerNorm:
    case OpKind::RmsNorm: return eval_norm(n, in, ot);
    case OpKind::Softmax:
    case OpKind::LogSoftmax: return eval_softmax(n, in, ot);
    case OpKind::Gelu:
    case OpKind::Silu:
    case OpKind::Relu: return eval_activation(n, in, ot);
    case OpKind::Attention: return eval_attention(n, in, ot);
    case OpKind::Rope: return eval_rope(n, in, ot);
    case OpKind::Expand: return eval_expand(n, in, ot);
    // quantized weights (quant.cpp)
    case OpKind::Dequantize: return eval_dequantize(n, in, ot);
    case OpKind::DequantMatMul: return eval_dequant_matmul(n, in, ot);
    case OpKind::QuantizeAffine: return eval_quantize_affine(n, in, ot);
    case OpKind::DequantizeAffine: return eval_dequantize_affine(n, in, ot);
    case OpKind::QMatMul: return eval_qmatmul(n, in, ot);
    case OpKind::Requantize: return eval_requantize(n, in, ot);
    case OpKind::QLinear: return eval_qlinear(n, in, ot);
    case OpKind::QConv: return eval_qconv(n, in, ot);
    // dense linear algebra (src/linalg/reference.cpp)
    case OpKind::Cholesky:
    case OpKind::TriangularSolve:
    case OpKind::Lu:
    case OpKind::Qr:
    case OpKind::Eigh:
    case OpKind::Svd:
    case OpKind::Solve:
    case OpKind::Inv:
    case OpKind::Det:
    case OpKind::Slogdet:
    case OpKind::Lstsq:
    case OpKind::MatrixExp: return linalg::reference_eval(n, in, ot);
    // autodiff marker, identity in value
    case OpKind::StopGradient: return {in[0].clone()};
    // sparse CSR ops (src/sparse/reference_sparse.cpp)
    case OpKind::SparseMatVec:
    case OpKind::SparseMatMul:
    case OpKind::SparseAddDense:
    case OpKind::SparseTranspose:
    case OpKind::SparseSddmm:
    case OpKind::SparseSample:
    case OpKind::SparseCg:
    case OpKind::SparseBicgstab:
    case OpKind::SparseSolve: return eval_sparse(n, in, ot);
    // gaussian splatting (src/splat)
    case OpKind::SplatProject:
    case OpKind::SplatProjectGrad:
    case OpKind::SplatSh:
    case OpKind::SplatRasterize:
    case OpKind::SplatRasterizeGrad: return splat::reference_eval(n, in, ot);
    // collectives: through the current communicator (src/dist; simulated ranks: collective.cpp)
    case OpKind::AllReduce:
    case OpKind::AllGather:
    case OpKind::ReduceScatter:
    case OpKind::AllToAll:
    case OpKind::CollectiveBroadcast:
    case OpKind::Send:
    case OpKind::Recv: return eval_collective(n, in, ot);
  }
  fail("[reference] no reference for op ", static_cast<int>(n.op));
}

std::string where(const Node& n) {
  return "[reference] " + std::string(op_name(n.op)) + (n.name.empty() ? "" : " '" + n.name + "'");
}

}  // namespace

std::vector<Tensor> reference_eval(const Node& n, const std::vector<Tensor>& inputs,
                                   const std::vector<ValueType>& out_types) {
  const OpInfo& info = op_info(n.op);
  int ni = static_cast<int>(inputs.size());
  RLX_CHECK(ni >= info.min_inputs && (info.max_inputs < 0 || ni <= info.max_inputs), where(n), ": got ", ni,
            " inputs");
  for (int i = 0; i < ni; ++i) RLX_CHECK(inputs[i].defined(), where(n), ": input ", i, " is undefined");
  if (ni > 0)
    RLX_CHECK(info.dtypes.has(inputs[0].dtype()), where(n), ": dtype ", dtype_name(inputs[0].dtype()),
              " not accepted (accepts ", info.dtypes.str(), ")");
  std::vector<ValueType> ot = out_types;
  if (ot.empty()) {
    // No types given: run the shape rule on the concrete inputs.
    std::vector<ValueType> it;
    for (auto& t : inputs) it.push_back(ValueType{t.dtype(), to_shape(t.shape())});
    ot = infer_types(n.op, it, n.attrs, where(n));
  }
  RLX_CHECK(static_cast<int>(ot.size()) == info.num_outputs, where(n), ": expects ", info.num_outputs,
            " output types, got ", ot.size());
  Outs out = dispatch(n, inputs, ot);
  for (size_t i = 0; i < out.size(); ++i)
    RLX_CHECK(out[i].dtype() == ot[i].dtype && to_shape(out[i].shape()) == ot[i].shape, where(n), ": output ", i,
              " is ", dtype_name(out[i].dtype()), shape_str(to_shape(out[i].shape())), ", expected ",
              dtype_name(ot[i].dtype), shape_str(ot[i].shape));
  return out;
}

std::vector<Tensor> reference_run(const Graph& g, const std::vector<Tensor>& inputs) {
  RLX_CHECK(inputs.size() == g.inputs.size(), "[reference] graph '", g.name, "' takes ", g.inputs.size(),
            " inputs, got ", inputs.size());
  Bindings bind;
  std::vector<Tensor> env(g.values.size());
  std::vector<bool> have(g.values.size(), false);
  for (size_t i = 0; i < inputs.size(); ++i) {
    ValueId id = g.inputs[i];
    const ValueType& want = g.type(id);
    const Tensor& t = inputs[i];
    std::string label = "[reference] input '" + g.values[id].name + "'";
    RLX_CHECK(t.defined(), label, " is undefined");
    RLX_CHECK(t.dtype() == want.dtype, label, ": dtype ", dtype_name(t.dtype()), ", expected ",
              dtype_name(want.dtype));
    Shape got = to_shape(t.shape());
    RLX_CHECK(t.rank() == static_cast<int64_t>(want.shape.size()), label, ": shape ", shape_str(got),
              " does not match ", shape_str(want.shape));
    for (size_t d = 0; d < want.shape.size(); ++d) {
      const Dim& w = want.shape[d];
      int64_t v = t.shape()[d];
      if (w.is_static()) {
        RLX_CHECK(w.v == v, label, ": shape ", shape_str(got), " does not match ", shape_str(want.shape));
      } else if (w.sym != "?") {
        auto [it, fresh] = bind.emplace(w.sym, v);
        RLX_CHECK(fresh || it->second == v, label, ": dim '", w.sym, "' is ", v, " but was bound to ", it->second,
                  " by an earlier input");
      }
    }
    env[id] = t;
    have[id] = true;
  }
  for (const Node& n : g.nodes) {
    std::vector<Tensor> in;
    for (ValueId v : n.inputs) {
      RLX_CHECK(have.at(v), "[reference] ", g.node_label(n), ": input ", g.value_label(v), " has no value");
      in.push_back(env[v]);
    }
    std::vector<ValueType> ot;
    for (ValueId v : n.outputs) ot.push_back(ValueType{g.type(v).dtype, bind_shape(g.type(v).shape, bind)});
    std::vector<Tensor> out;
    try {
      out = reference_eval(n, in, ot);
    } catch (const Error& e) {
      fail(e.what(), " (at node ", g.node_label(n), ")");
    }
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      env[n.outputs[i]] = out[i];
      have[n.outputs[i]] = true;
    }
  }
  std::vector<Tensor> res;
  for (ValueId v : g.outputs) {
    RLX_CHECK(have.at(v), "[reference] graph output ", g.value_label(v), " has no value");
    res.push_back(env[v]);
  }
  return res;
}

}  // namespace rlx
