// The fpga device's plan of an int8 MLP graph: fuse-qdq, then a walk from the output back to the
// input over qlinear nodes, checking every constant the datapath bakes into its ROMs.
#include <algorithm>

#include "codegen/fpga/fpga.h"
#include "passes/passes.h"

namespace rlx::fpga {

namespace {

const Node* producer(const Graph& g, ValueId v) {
  int p = g.values[static_cast<size_t>(v)].producer;
  return p < 0 ? nullptr : &g.nodes[static_cast<size_t>(p)];
}

const Tensor* const_of(const Graph& g, ValueId v) {
  const Node* n = producer(g, v);
  if (!n || n->op != OpKind::Constant) return nullptr;
  return &std::get<Tensor>(n->attrs.at("value").v);
}

std::string where(const Node& n) { return "node '" + n.name + "' (" + std::string(op_name(n.op)) + ")"; }

// One per-tensor (scale, zero point) pair of a quantize/dequantize node.
void per_tensor(const Graph& g, const Node& n, float* scale, int32_t* zp) {
  const Tensor* s = const_of(g, n.inputs[1]);
  const Tensor* z = const_of(g, n.inputs[2]);
  RLX_CHECK(s && z && s->numel() == 1 && z->numel() == 1, "[fpga] ", where(n),
            ": the datapath needs a constant per-tensor scale and zero point");
  *scale = static_cast<float>(s->get(0));
  *zp = static_cast<int32_t>(z->get_int(0));
}

int64_t pick(const std::vector<int64_t>& v, int64_t c, int64_t def = 0) {
  if (v.empty()) return def;
  return v.size() == 1 ? v[0] : v.at(static_cast<size_t>(c));
}

Layer layer_of(const Graph& g, const Node& n) {
  Layer L;
  L.name = n.name;
  const Tensor* w = const_of(g, n.inputs[1]);
  RLX_CHECK(w && w->dtype() == DType::i8 && w->rank() == 2, "[fpga] ", where(n), ": the weight is not a constant i8 [N, K]");
  L.N = w->shape()[0], L.K = w->shape()[1];
  DType xdt = g.type(n.inputs[0]).dtype;
  RLX_CHECK(xdt == DType::u8 || xdt == DType::i8, "[fpga] ", where(n), ": the activation is ", dtype_name(xdt), ", not i8/u8");
  L.x_signed = xdt == DType::i8;
  L.x_zp = static_cast<int32_t>(attr_int(n, "x_zero_point"));
  const auto& wzp = attr_ints(n, "w_zero_point");
  bool any_zp = false;
  L.wc.resize(static_cast<size_t>(L.N * L.K));
  for (int64_t j = 0; j < L.N; ++j)
    for (int64_t k = 0; k < L.K; ++k) {
      int64_t z = pick(wzp, j);
      any_zp |= z != 0;
      L.wc[static_cast<size_t>(j * L.K + k)] = static_cast<int32_t>(w->get_int(j * L.K + k) - z);
    }
  L.wbits = any_zp ? 9 : 8;
  L.bias.assign(static_cast<size_t>(L.N), 0);
  if (n.inputs.size() > 2) {
    const Tensor* b = const_of(g, n.inputs[2]);
    RLX_CHECK(b && b->numel() == L.N, "[fpga] ", where(n), ": the bias is not a constant i32 [N]");
    for (int64_t j = 0; j < L.N; ++j) L.bias[static_cast<size_t>(j)] = static_cast<int32_t>(b->get_int(j));
  }
  DType odt = attr_dtype(n, "dtype");
  L.int_out = odt != DType::f32;
  L.out_signed = odt == DType::i8;
  L.relu = attr_int(n, "relu") != 0;
  const std::string& r = attr_str(n, "rounding");
  RLX_CHECK(r == "half_even" || r == "half_away", "[fpga] ", where(n), ": rounding '", r, "'");
  L.half_even = r == "half_even";
  L.zp = static_cast<int32_t>(attr_int(n, "zero_point"));
  if (L.int_out) {
    const auto& m = attr_ints(n, "multiplier");
    const auto& s = attr_ints(n, "shift");
    RLX_CHECK(!m.empty() && !s.empty(), "[fpga] ", where(n), ": no requantize multiplier");
    for (int64_t j = 0; j < L.N; ++j) {
      L.mul.push_back(static_cast<int32_t>(pick(m, j)));
      L.shift.push_back(static_cast<int32_t>(pick(s, j)));
      RLX_CHECK(L.mul.back() >= 0 && L.shift.back() >= -30 && L.shift.back() <= 31, "[fpga] ", where(n),
                ": requantize multiplier/shift out of range");
    }
  } else {
    RLX_CHECK(!L.relu, "[fpga] ", where(n), ": a float-output qlinear with relu is not supported");
    const auto& sc = attr_floats(n, "scale");
    RLX_CHECK(!sc.empty(), "[fpga] ", where(n), ": no accumulator scale");
    for (int64_t j = 0; j < L.N; ++j) L.scale.push_back(static_cast<float>(sc.size() == 1 ? sc[0] : sc.at(static_cast<size_t>(j))));
  }
  return L;
}

}  // namespace

Model plan_mlp(const Graph& in) {
  Graph g = eliminate_dead_code(fuse_qdq(in));
  RLX_CHECK(g.inputs.size() == 1 && g.outputs.size() == 1, "[fpga] the datapath takes a graph of one input and one output (this one has ",
            g.inputs.size(), " and ", g.outputs.size(), ")");
  Model m;
  m.input = g.values[static_cast<size_t>(g.inputs[0])].name;
  m.output = g.values[static_cast<size_t>(g.outputs[0])].name;
  ValueId v = g.outputs[0];
  const Node* n = producer(g, v);
  RLX_CHECK(n, "[fpga] the graph's output is its input");
  // The epilogue: [f32-out qlinear] + constant bias, or dequantize_affine of an int8 qlinear.
  if (n->op == OpKind::Add) {
    ValueId a = n->inputs[0], b = n->inputs[1];
    const Tensor* c = const_of(g, b);
    if (!c) std::swap(a, b), c = const_of(g, b);
    const Node* q = producer(g, a);
    RLX_CHECK(c && c->dtype() == DType::f32 && q && q->op == OpKind::QLinear && attr_dtype(*q, "dtype") == DType::f32 &&
                  c->numel() == g.type(a).shape.back().v,
              "[fpga] ", where(*n), ": the output add is not a constant f32 bias after a float-output qlinear (a float model? "
              "quantize it first: rlx quantize MODEL.onnx --calib ... --out Q.onnx)");
    for (int64_t j = 0; j < c->numel(); ++j) m.post_bias.push_back(static_cast<float>(c->get(j)));
    n = q;
  } else if (n->op == OpKind::DequantizeAffine) {
    m.dequant = true;
    per_tensor(g, *n, &m.dq_scale, &m.dq_zp);
    n = producer(g, n->inputs[0]);
    RLX_CHECK(n && n->op == OpKind::QLinear, "[fpga] the output dequantize_affine does not read a qlinear");
  }
  RLX_CHECK(n->op == OpKind::QLinear, "[fpga] ", where(*n),
            ": the datapath implements chains of qlinear (an int8 MLP after fuse-qdq); "
            "quantize the model first (rlx quantize MODEL.onnx --calib ... --out Q.onnx)");
  std::vector<const Node*> chain;
  while (n && n->op == OpKind::QLinear) {
    chain.push_back(n);
    n = producer(g, n->inputs[0]);
  }
  RLX_CHECK(n && n->op == OpKind::QuantizeAffine && n->inputs[0] == g.inputs[0], "[fpga] ",
            n ? where(*n) : std::string("the graph input"),
            ": the first qlinear must read quantize_affine of the graph's input (", n ? "found this node" : "found none", ")");
  per_tensor(g, *n, &m.in_scale, &m.in_zp);
  m.in_signed = g.type(n->outputs[0]).dtype == DType::i8;
  std::reverse(chain.begin(), chain.end());
  for (const Node* q : chain) m.layers.push_back(layer_of(g, *q));
  for (size_t i = 0; i + 1 < m.layers.size(); ++i) {
    RLX_CHECK(m.layers[i].int_out, "[fpga] layer '", m.layers[i].name, "': only the last layer may have a float output");
    RLX_CHECK(m.layers[i].N == m.layers[i + 1].K, "[fpga] layer '", m.layers[i + 1].name, "': K ", m.layers[i + 1].K,
              " differs from the previous layer's N ", m.layers[i].N);
  }
  RLX_CHECK(m.dequant == m.layers.back().int_out, "[fpga] the last layer's output kind and the epilogue disagree");
  RLX_CHECK(m.post_bias.empty() || static_cast<int64_t>(m.post_bias.size()) == m.out_features(), "[fpga] output bias size");
  return m;
}

std::vector<int> layer_parallelism(const Model& m, const Options& o) {
  RLX_CHECK(o.parallel >= 1, "[fpga] --parallel must be at least 1");
  std::vector<int> p;
  for (auto& L : m.layers) {
    int64_t q = std::min<int64_t>(o.parallel, L.N);
    RLX_CHECK(q <= L.K, "[fpga] layer '", L.name, "': P ", q, " exceeds K ", L.K,
              " (the serial requantizer needs P <= K cycles per group)");
    p.push_back(static_cast<int>(q));
  }
  return p;
}

}  // namespace rlx::fpga
