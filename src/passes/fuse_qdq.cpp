// fuse-qdq: reads QDQ models the way ONNX Runtime and TensorRT do. A contraction (matmul [.., K] x
// [K, N], or linear with w [N, K]) whose activation is dequantize_affine of a per-tensor i8/u8 value
// and whose weight is dequantize_affine of a constant i8/u8 tensor (per tensor or per output
// channel) becomes qlinear: i8/u8 output when its only use is quantize_affine (optionally through a
// constant bias add, folded into an i32 bias, then a ReLU, qlinear's relu), f32 output (scale
// sx * sw[n]) otherwise. A convolution (x [N, C, H, W], w [O, C/g, kh, kw] per tensor or per
// output channel, a constant bias folded into i32) becomes qconv the same way, its ReLU (and a
// ReLU6's min with a constant) into relu / max_q. Before that, dequantize_affine sinks below data
// movement (reshape, transpose) and max/min windows (dequantize is monotone for a positive scale),
// and quantize_affine of dequantize_affine with equal per-tensor parameters is the identity: so a
// QDQ max-pool or flatten runs on the integers. Left-over dequantize_affine nodes of constants are
// folded. Each contraction gets one report line.
#include <algorithm>
#include <cmath>
#include <set>

#include "passes/passes.h"
#include "quant/fixed_point.h"
#include "rlx/reference.h"

namespace rlx {

namespace {

// The i32 bias of an int8 contraction: bias / (x_scale · w_scale) rounded, saturated (a zero weight
// scale or a huge bias must not become an out-of-range cast).
int32_t saturate_i32(double v) {
  if (std::isnan(v)) return 0;
  return static_cast<int32_t>(std::clamp(v, -2147483648.0, 2147483647.0));
}

const Tensor* const_of(const Graph& g, ValueId v) {
  int p = g.values[static_cast<size_t>(v)].producer;
  if (p < 0 || g.nodes[static_cast<size_t>(p)].op != OpKind::Constant) return nullptr;
  return &std::get<Tensor>(g.nodes[static_cast<size_t>(p)].attrs.at("value").v);
}

const Node* producer(const Graph& g, ValueId v, OpKind k) {
  int p = g.values[static_cast<size_t>(v)].producer;
  if (p < 0 || g.nodes[static_cast<size_t>(p)].op != k) return nullptr;
  return &g.nodes[static_cast<size_t>(p)];
}

struct Plan {
  bool ok = false;
  std::string why;                // when not ok
  ValueId xq = -1;                // the activation's quantized value
  int64_t xzp = 0;
  Tensor w;                       // i8 [N, K] (qconv: [O, C/g, kh, kw])
  std::vector<int64_t> wzp;
  std::vector<double> acc_scale;  // sx * sw[n]
  ValueId bias = -1;              // f32 bias value (linear's third input), or -1
};

// Values of a rank-0 or [n] f32 scale / integer zero point constant.
bool params(const Graph& g, const Node& dq, std::vector<double>* s, std::vector<int64_t>* z) {
  const Tensor* st = const_of(g, dq.inputs[1]);
  const Tensor* zt = const_of(g, dq.inputs[2]);
  if (!st || !zt) return false;
  for (int64_t i = 0; i < st->numel(); ++i) s->push_back(st->get(i));
  for (int64_t i = 0; i < zt->numel(); ++i) z->push_back(static_cast<int64_t>(zt->get(i)));
  return true;
}

// A constant f32 value: a constant, or dequantize_affine of constants (evaluated here).
bool const_f32(const Graph& g, ValueId v, Tensor* out) {
  if (const Tensor* t = const_of(g, v)) {
    if (t->dtype() != DType::f32) return false;
    *out = *t;
    return true;
  }
  const Node* dq = producer(g, v, OpKind::DequantizeAffine);
  if (!dq) return false;
  std::vector<Tensor> vals;
  for (ValueId i : dq->inputs) {
    const Tensor* t = const_of(g, i);
    if (!t) return false;
    vals.push_back(*t);
  }
  *out = reference_eval(*dq, vals, {g.type(v)})[0];
  return true;
}

Plan plan_conv(const Graph& g, const Node& n) {
  Plan p;
  const Node* dx = producer(g, n.inputs[0], OpKind::DequantizeAffine);
  const Node* dw = producer(g, n.inputs[1], OpKind::DequantizeAffine);
  if (!dx) return p.why = "activation is not dequantized", p;
  if (!dw) return p.why = "weight is not dequantized", p;
  DType xdt = g.type(dx->inputs[0]).dtype;
  if (xdt != DType::i8 && xdt != DType::u8) return p.why = "activation is not i8/u8", p;
  if (g.type(n.inputs[0]).shape.size() != 4) return p.why = "not a 2-d convolution", p;
  std::vector<double> sx, sw;
  std::vector<int64_t> zx, zw;
  if (!params(g, *dx, &sx, &zx) || sx.size() != 1) return p.why = "activation scale is not a per-tensor constant", p;
  const Tensor* wq = const_of(g, dw->inputs[0]);
  if (!wq || wq->rank() != 4 || (wq->dtype() != DType::i8 && wq->dtype() != DType::u8))
    return p.why = "weight is not a constant i8/u8 [O, C/g, kh, kw] tensor", p;
  if (!params(g, *dw, &sw, &zw)) return p.why = "weight scale is not constant", p;
  int64_t axis = attr_int(*dw, "axis");
  if (axis != -1 && axis != 0) return p.why = "weight is not quantized per output channel", p;
  bool flip = wq->dtype() == DType::u8;
  p.w = Tensor(DType::i8, wq->shape());
  for (int64_t i = 0; i < wq->numel(); ++i) {
    int64_t v = static_cast<int64_t>(wq->get(i));
    p.w.data<int8_t>()[i] = static_cast<int8_t>(flip ? v - 128 : v);
  }
  for (int64_t z : zw) p.wzp.push_back(flip ? z - 128 : z);
  int64_t O = wq->shape()[0];
  for (size_t j = 0; j < static_cast<size_t>(O); ++j) p.acc_scale.push_back(sx[0] * (sw.size() == 1 ? sw[0] : sw[j]));
  p.xq = dx->inputs[0];
  p.xzp = zx[0];
  if (n.inputs.size() > 2) p.bias = n.inputs[2];
  p.ok = true;
  return p;
}

Plan plan_contraction(const Graph& g, const Node& n) {
  if (n.op == OpKind::Convolution) return plan_conv(g, n);
  Plan p;
  bool lin = n.op == OpKind::Linear;
  const Node* dx = producer(g, n.inputs[0], OpKind::DequantizeAffine);
  const Node* dw = producer(g, n.inputs[1], OpKind::DequantizeAffine);
  if (!dx) return p.why = "activation is not dequantized", p;
  if (!dw) return p.why = "weight is not dequantized", p;
  DType xdt = g.type(dx->inputs[0]).dtype;
  if (xdt != DType::i8 && xdt != DType::u8) return p.why = "activation is not i8/u8", p;
  std::vector<double> sx, sw;
  std::vector<int64_t> zx, zw;
  if (!params(g, *dx, &sx, &zx) || sx.size() != 1) return p.why = "activation scale is not a per-tensor constant", p;
  const Tensor* wq = const_of(g, dw->inputs[0]);
  if (!wq || wq->rank() != 2 || (wq->dtype() != DType::i8 && wq->dtype() != DType::u8))
    return p.why = "weight is not a constant i8/u8 matrix", p;
  if (!params(g, *dw, &sw, &zw)) return p.why = "weight scale is not constant", p;
  int64_t axis = attr_int(*dw, "axis");
  int64_t N = lin ? wq->shape()[0] : wq->shape()[1], K = lin ? wq->shape()[1] : wq->shape()[0];
  int64_t out_axis = lin ? 0 : 1;
  if (axis != -1 && axis != out_axis) return p.why = "weight is quantized along the contraction axis", p;
  if (!lin && g.type(n.inputs[0]).shape.size() < 2) return p.why = "rank-1 activation", p;
  bool flip = wq->dtype() == DType::u8;
  p.w = Tensor(DType::i8, {N, K});
  for (int64_t j = 0; j < N; ++j)
    for (int64_t k = 0; k < K; ++k) {
      int64_t v = static_cast<int64_t>(wq->get(lin ? j * K + k : k * N + j));
      p.w.data<int8_t>()[j * K + k] = static_cast<int8_t>(flip ? v - 128 : v);
    }
  for (int64_t z : zw) p.wzp.push_back(flip ? z - 128 : z);
  for (size_t j = 0; j < static_cast<size_t>(N); ++j) p.acc_scale.push_back(sx[0] * (sw.size() == 1 ? sw[0] : sw[j]));
  p.xq = dx->inputs[0];
  p.xzp = zx[0];
  if (lin && n.inputs.size() > 2) p.bias = n.inputs[2];
  p.ok = true;
  return p;
}

// Folds dequantize_affine nodes whose inputs are all constants.
Graph fold_dequantize(const Graph& g) {
  GraphRebuild rb(g);
  for (const Node& n : g.nodes) {
    std::vector<ValueId> ins = rb.inputs_of(n);
    bool fold = n.op == OpKind::DequantizeAffine;
    std::vector<Tensor> vals;
    for (ValueId v : n.inputs) {
      const Tensor* t = fold ? const_of(g, v) : nullptr;
      if (!t) fold = false;
      else vals.push_back(*t);
    }
    if (!fold) {
      rb.copy(n, ins, n.attrs);
      continue;
    }
    std::vector<ValueType> ot{g.type(n.outputs[0])};
    Tensor r = reference_eval(n, vals, ot)[0];
    rb.bind(n, rb.dst.add_node(OpKind::Constant, {}, {{"value", r}}, n.name));
  }
  return rb.finish();
}

// Per-tensor constant parameters of a dequantize_affine in `g` with a positive scale.
bool per_tensor(const Graph& g, const Node& dq, double* s, int64_t* z) {
  std::vector<double> sv;
  std::vector<int64_t> zv;
  if (attr_int(dq, "axis") != -1 || !params(g, dq, &sv, &zv) || sv.size() != 1 || zv.size() != 1 || !(sv[0] > 0)) return false;
  *s = sv[0], *z = zv[0];
  return true;
}

// dequantize_affine sunk below reshape / transpose / max|min windows; quantize_affine(dequantize_affine(q))
// with equal per-tensor parameters and dtype replaced by q.
Graph sink_dequantize(const Graph& g) {
  GraphRebuild rb(g);
  for (const Node& n : g.nodes) {
    std::vector<ValueId> ins = rb.inputs_of(n);
    Graph& d = rb.dst;
    const Node* dq = ins.empty() ? nullptr : producer(d, ins[0], OpKind::DequantizeAffine);
    double s = 0;
    int64_t z = 0;
    if (!dq || !per_tensor(d, *dq, &s, &z)) {
      rb.copy(n, ins, n.attrs);
      continue;
    }
    ValueId q = dq->inputs[0], ds = dq->inputs[1], dz = dq->inputs[2];
    Attrs dqa = dq->attrs;
    bool window = n.op == OpKind::ReduceWindow && attr_str(n, "kind") != "sum";
    if (ins.size() == 1 && (n.op == OpKind::Reshape || n.op == OpKind::Transpose || window)) {
      ValueId y = d.add_node(n.op, {q}, n.attrs, n.name)[0];
      rb.bind(n, d.add_node(OpKind::DequantizeAffine, {y, ds, dz}, dqa, n.name));
      continue;
    }
    if (n.op == OpKind::QuantizeAffine && attr_int(n, "axis") == -1) {
      const Tensor *qs = const_of(d, ins[1]), *qz = const_of(d, ins[2]);
      if (qs && qz && qs->numel() == 1 && qz->numel() == 1 && qz->dtype() == d.type(q).dtype && qs->get(0) == s &&
          static_cast<int64_t>(qz->get(0)) == z) {
        rb.bind(n, {q});
        continue;
      }
    }
    rb.copy(n, ins, n.attrs);
  }
  return eliminate_dead_code(rb.finish());
}

Graph fuse_contractions(const Graph& g, std::vector<std::string>* report);

}  // namespace

Graph fuse_qdq(const Graph& g, std::vector<std::string>* report) {
  bool any_q = false;
  for (const Node& n : g.nodes) any_q |= n.op == OpKind::DequantizeAffine;
  if (!any_q) return g;
  return fuse_contractions(sink_dequantize(g), report);
}

namespace {

Graph fuse_contractions(const Graph& g, std::vector<std::string>* report) {
  std::vector<int> uses(g.values.size(), 0);
  for (const Node& n : g.nodes)
    for (ValueId v : n.inputs) ++uses[static_cast<size_t>(v)];
  for (ValueId v : g.outputs) ++uses[static_cast<size_t>(v)];
  auto only_user = [&](ValueId v) -> const Node* {
    if (uses[static_cast<size_t>(v)] != 1) return nullptr;
    for (const Node& n : g.nodes)
      for (ValueId i : n.inputs)
        if (i == v) return &n;
    return nullptr;
  };
  GraphRebuild rb(g);
  std::map<const Node*, ValueId> absorbed;  // later nodes replaced by a fused qlinear's output
  for (const Node& n : g.nodes) {
    if (auto it = absorbed.find(&n); it != absorbed.end()) {
      rb.bind(n, {it->second});
      continue;
    }
    std::vector<ValueId> ins = rb.inputs_of(n);
    const bool conv = n.op == OpKind::Convolution;
    if (n.op != OpKind::MatMul && n.op != OpKind::Linear && !conv) {
      rb.copy(n, ins, n.attrs);
      continue;
    }
    std::string label = "'" + n.name + "' (" + std::string(op_name(n.op)) + ")";
    Plan p = plan_contraction(g, n);
    Tensor conv_bias;  // qconv: the constant f32 bias [O]
    if (p.ok && conv && p.bias >= 0 && (!const_f32(g, p.bias, &conv_bias) || conv_bias.numel() != p.w.shape()[0]))
      p.ok = false, p.why = "bias is not a constant [O]";
    if (!p.ok) {
      if (report) report->push_back("fuse-qdq: float " + label + ": " + p.why);
      rb.copy(n, ins, n.attrs);
      continue;
    }
    const OpKind fused = conv ? OpKind::QConv : OpKind::QLinear;
    const std::string fname(op_name(fused));
    int64_t N = p.w.shape()[0];
    Graph& d = rb.dst;
    ValueId w = d.add_node(OpKind::Constant, {}, {{"value", p.w}}, n.name)[0];
    Attrs a{{"x_zero_point", p.xzp}, {"w_zero_point", p.wzp}};
    if (conv)
      for (const char* k : {"strides", "pads", "dilations", "groups"}) a[k] = *find_attr(n.op, n.attrs, k);
    // int8 output: [add of a constant f32 bias [N] ->] quantize_affine (per tensor, constants).
    const Node* add = p.bias < 0 && !conv ? only_user(n.outputs[0]) : nullptr;
    const Tensor* bconst = conv && p.bias >= 0 ? &conv_bias : nullptr;
    if (add && add->op == OpKind::Add) {
      ValueId other = add->inputs[0] == n.outputs[0] ? add->inputs[1] : add->inputs[0];
      bconst = const_of(g, other);
      if (!bconst || bconst->numel() != N || bconst->dtype() != DType::f32 || !(g.type(add->outputs[0]).shape == g.type(n.outputs[0]).shape)) bconst = nullptr;
    }
    if (!bconst) add = nullptr;
    // ... and a ReLU (max with a constant zero) before the quantize_affine becomes the relu attribute.
    ValueId cur = add ? add->outputs[0] : n.outputs[0];
    auto const_operand = [&](const Node* m, ValueId x) -> const Tensor* {
      if (!m || !(g.type(m->outputs[0]).shape == g.type(x).shape)) return nullptr;
      const Tensor* z = const_of(g, m->inputs[0] == x ? m->inputs[1] : m->inputs[0]);
      return z && z->dtype() == DType::f32 ? z : nullptr;
    };
    const Node* relu = only_user(cur);
    if (relu && relu->op == OpKind::Max) {
      const Tensor* z = const_operand(relu, cur);
      bool zero = z != nullptr;
      for (int64_t i = 0; zero && i < z->numel(); ++i) zero = z->get(i) == 0.0;
      relu = zero ? relu : nullptr;
    } else {
      relu = nullptr;
    }
    if (relu) cur = relu->outputs[0];
    // ... and a ReLU6's min with a constant (qconv's max_q).
    const Node* cap = conv && relu ? only_user(cur) : nullptr;
    const Tensor* capv = cap && cap->op == OpKind::Min ? const_operand(cap, cur) : nullptr;
    if (!capv || capv->numel() != 1) cap = nullptr;
    if (cap) cur = cap->outputs[0];
    const Node* q = only_user(cur);
    std::vector<double> qs;
    std::vector<int64_t> qz;
    bool int_out = (p.bias < 0 || conv) && q && q->op == OpKind::QuantizeAffine && params(g, *q, &qs, &qz) && qs.size() == 1;
    std::vector<int64_t> mul, sh;
    if (int_out) {
      for (int64_t j = 0; j < N && int_out; ++j) {
        int32_t m = 0, s = 0;
        int_out = quant::quantize_multiplier(p.acc_scale[static_cast<size_t>(j)] / qs[0], &m, &s);
        mul.push_back(m), sh.push_back(s);
      }
    }
    std::vector<ValueId> qin{rb.map.at(p.xq), w};
    auto i32_bias = [&]() {
      Tensor bi(DType::i32, {N});
      for (int64_t j = 0; j < N; ++j)
        bi.data<int32_t>()[j] = saturate_i32(std::nearbyint(bconst->get(j) / p.acc_scale[static_cast<size_t>(j)]));
      qin.push_back(d.add_node(OpKind::Constant, {}, {{"value", bi}}, n.name)[0]);
    };
    if (int_out) {
      DType odt = g.type(q->outputs[0]).dtype;
      a["dtype"] = odt;
      a["multiplier"] = mul;
      a["shift"] = sh;
      a["zero_point"] = qz[0];
      if (relu) a["relu"] = int64_t{1};
      if (cap) a["max_q"] = qz[0] + static_cast<int64_t>(std::nearbyint(capv->get(0) / qs[0]));
      if (bconst) i32_bias();
      ValueId y = d.add_node(fused, qin, a, n.name)[0];
      if (add) absorbed[add] = y;  // the add's (and relu's) output is never used but by q
      if (relu) absorbed[relu] = y;
      if (cap) absorbed[cap] = y;
      absorbed[q] = y;
      rb.bind(n, {y});  // n's own output feeds only absorbed nodes
      if (report) report->push_back("fuse-qdq: int8 " + label + " -> " + fname + " (" + std::string(dtype_name(odt)) + " out" + (bconst ? ", i32 bias" : "") + (relu ? ", relu" : "") + (cap ? ", max_q" : "") + ")");
      continue;
    }
    a["dtype"] = DType::f32;
    a["scale"] = p.acc_scale;
    if (conv && bconst) i32_bias();
    ValueId y = d.add_node(fused, qin, a, n.name)[0];
    if (p.bias >= 0 && !conv) y = d.add_node(OpKind::Add, {y, rb.map.at(p.bias)}, {}, n.name)[0];
    rb.bind(n, {y});
    if (report) report->push_back("fuse-qdq: int8 " + label + " -> " + fname + " (f32 out" + (conv && bconst ? ", i32 bias" : "") + ")");
  }
  return fold_dequantize(eliminate_dead_code(rb.finish()));
}

}  // namespace

}  // namespace rlx
