// Pattern-matching helpers (pattern.h).
#include "passes/pattern.h"

#include <cmath>

#include "rlx/op.h"

namespace rlx {

GraphUses::GraphUses(const Graph& g) : readers(g.values.size()), is_output(g.values.size(), false) {
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (auto v : g.nodes[i].inputs)
      if (readers[v].empty() || readers[v].back() != static_cast<int>(i))
        readers[v].push_back(static_cast<int>(i));
  for (auto o : g.outputs) is_output[o] = true;
}

const Node* producer_of(const Graph& g, ValueId v) {
  int p = g.values[static_cast<size_t>(v)].producer;
  return p < 0 ? nullptr : &g.nodes[static_cast<size_t>(p)];
}

const Node* producer_of(const Graph& g, ValueId v, OpKind k) {
  const Node* n = producer_of(g, v);
  return n && n->op == k ? n : nullptr;
}

const Tensor* constant_of(const Graph& g, ValueId v) {
  const Node* n = producer_of(g, v, OpKind::Constant);
  return n ? &attr_tensor(*n, "value") : nullptr;
}

std::optional<double> scalar_of(const Graph& g, ValueId v) {
  const Node* n = producer_of(g, v);
  if (!n) return std::nullopt;
  if (n->op == OpKind::Constant) {
    const Tensor& t = attr_tensor(*n, "value");
    if (t.numel() < 1) return std::nullopt;
    double x = t.get(0);
    for (int64_t i = 1; i < t.numel(); ++i)
      if (t.get(i) != x) return std::nullopt;
    return x;
  }
  auto in = [&](size_t i) { return i < n->inputs.size() ? scalar_of(g, n->inputs[i]) : std::nullopt; };
  switch (n->op) {
    case OpKind::Convert: {
      auto x = in(0);
      if (!x) return x;
      DType to = g.type(n->outputs[0]).dtype;
      if (to == DType::boolean) return *x != 0 ? 1.0 : 0.0;
      if (!is_float(to) && std::trunc(*x) != *x) return std::nullopt;
      return x;
    }
    case OpKind::Reshape:
    case OpKind::Unsqueeze:
    case OpKind::Squeeze:
    case OpKind::Expand:
    case OpKind::BroadcastInDim:
      return in(0);
    case OpKind::Sqrt: {
      auto x = in(0);
      return x && *x >= 0 ? std::optional<double>(std::sqrt(*x)) : std::nullopt;
    }
    case OpKind::Neg: {
      auto x = in(0);
      return x ? std::optional<double>(-*x) : std::nullopt;
    }
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div: {
      auto a = in(0), b = in(1);
      if (!a || !b) return std::nullopt;
      if (n->op == OpKind::Add) return *a + *b;
      if (n->op == OpKind::Sub) return *a - *b;
      if (n->op == OpKind::Mul) return *a * *b;
      return *b == 0 ? std::nullopt : std::optional<double>(*a / *b);
    }
    default:
      return std::nullopt;
  }
}

}  // namespace rlx
