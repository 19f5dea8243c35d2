// gelu-into-linear: the erf GELU an exporter writes out op by op, x · 0.5 · (1 + erf(x / sqrt 2))
// (any association of the products; the erf argument as Div by sqrt 2 or Mul by 1/sqrt 2), becomes
// the Gelu op; when x is MatMul(h, constant W [K, N]) + constant bias [N] (an exported Linear) and
// nothing else reads those values, the whole becomes Linear(h, Wᵀ, bias, activation=gelu) -- what
// the model builders emit, so the GEMM applies the GELU in its epilogue.
#include <cmath>
#include <string>

#include "passes/passes.h"
#include "passes/pattern.h"
#include "rlx/op.h"

namespace rlx {

namespace {

bool near(double a, double b) { return std::fabs(a - b) <= 1e-6 * std::fabs(b); }

// The factors of a product tree rooted at v (v itself when it is not a Mul); inner products must
// have this one reader.
void factors(const Graph& g, const GraphUses& u, ValueId v, bool root, std::vector<ValueId>* out,
             std::vector<ValueId>* inner) {
  const Node* n = producer_of(g, v, OpKind::Mul);
  if (n && (root || u.once(v)) && out->size() < 4) {
    if (!root) inner->push_back(v);
    factors(g, u, n->inputs[0], false, out, inner);
    factors(g, u, n->inputs[1], false, out, inner);
    return;
  }
  out->push_back(v);
}

// erf(x / sqrt 2) + 1 -> x (the erf's argument's source), or -1; the inner values go to *inner.
ValueId one_plus_erf(const Graph& g, const GraphUses& u, ValueId t, std::vector<ValueId>* inner) {
  const Node* add = producer_of(g, t, OpKind::Add);
  if (!add || !u.once(t)) return -1;
  for (int i = 0; i < 2; ++i) {
    auto one = scalar_of(g, add->inputs[1 - i]);
    const Node* erf = producer_of(g, add->inputs[i], OpKind::Erf);
    if (!one || *one != 1 || !erf || !u.once(add->inputs[i])) continue;
    ValueId z = erf->inputs[0];
    const Node* d = producer_of(g, z);
    if (!d || !u.once(z) || (d->op != OpKind::Div && d->op != OpKind::Mul)) continue;
    for (int j = 0; j < (d->op == OpKind::Mul ? 2 : 1); ++j) {
      auto c = scalar_of(g, d->inputs[1 - j]);
      if (!c) continue;
      double k = d->op == OpKind::Div ? 1.0 / *c : *c;
      if (!near(k, 1.0 / std::sqrt(2.0))) continue;
      inner->insert(inner->end(), {t, add->inputs[i], z});
      return d->inputs[j];
    }
  }
  return -1;
}

struct Gelu {
  ValueId x = -1;
  // x = MatMul(h, w) + bias, folded into a Linear (else -1).
  ValueId h = -1, w = -1, bias = -1;
};

std::optional<Gelu> plan_gelu(const Graph& g, const GraphUses& u, const Node& n) {
  if (n.op != OpKind::Mul || !is_float(g.type(n.outputs[0]).dtype)) return std::nullopt;
  std::vector<ValueId> fs, inner;
  factors(g, u, n.outputs[0], true, &fs, &inner);
  if (fs.size() != 3) return std::nullopt;
  // One factor 0.5, one 1 + erf(x / sqrt 2), one x.
  int half = -1, erf = -1;
  ValueId x = -1;
  for (int i = 0; i < 3; ++i) {
    if (half < 0) {
      auto c = scalar_of(g, fs[static_cast<size_t>(i)]);
      if (c && *c == 0.5) {
        half = i;
        continue;
      }
    }
    std::vector<ValueId> in2;
    ValueId src = erf < 0 ? one_plus_erf(g, u, fs[static_cast<size_t>(i)], &in2) : -1;
    if (src >= 0) {
      erf = i;
      x = src;
      inner.insert(inner.end(), in2.begin(), in2.end());
    }
  }
  if (half < 0 || erf < 0) return std::nullopt;
  const int xi = 3 - half - erf;
  if (fs[static_cast<size_t>(xi)] != x || g.type(x).shape != g.type(n.outputs[0]).shape) return std::nullopt;
  Gelu r;
  r.x = x;
  // x read by the erf's Div/Mul and one Mul of the product only.
  if (u.is_output[x] || u.readers[x].size() != 2) return r;
  const Node* add = producer_of(g, x, OpKind::Add);
  if (!add) return r;
  for (int i = 0; i < 2; ++i) {
    ValueId y = add->inputs[i], b = add->inputs[1 - i];
    const Node* mm = producer_of(g, y, OpKind::MatMul);
    const Tensor* bt = constant_of(g, b);
    const Tensor* wt = mm ? constant_of(g, mm->inputs[1]) : nullptr;
    if (!mm || !u.once(y) || !bt || !wt || wt->dtype() != DType::f32 || bt->dtype() != DType::f32) continue;
    const Shape& hs = g.type(mm->inputs[0]).shape;
    if (wt->shape().size() != 2 || bt->shape() != std::vector<int64_t>{wt->shape()[1]} || hs.size() < 2 ||
        !hs.back().is_static() || hs.back().v != wt->shape()[0] ||
        g.type(mm->inputs[0]).dtype != DType::f32 || g.type(y).shape != g.type(x).shape)
      continue;
    r.h = mm->inputs[0];
    r.w = mm->inputs[1];
    r.bias = b;
    break;
  }
  return r;
}

Tensor transposed(const Tensor& w) {  // [K, N] -> [N, K]
  const int64_t K = w.shape()[0], N = w.shape()[1];
  Tensor t(DType::f32, {N, K});
  const float* s = w.data<float>();
  float* d = t.data<float>();
  for (int64_t i = 0; i < K; ++i)
    for (int64_t j = 0; j < N; ++j) d[j * K + i] = s[i * N + j];
  return t;
}

}  // namespace

Graph gelu_into_linear(const Graph& g, int* changed) {
  auto emit = [&g](GraphRebuild& r, const Node& nd, const Gelu& p) {
    if (p.h < 0) {
      r.bind(nd, r.dst.add_node(OpKind::Gelu, {r.map.at(p.x)}, {{"approximate", std::string("none")}}, nd.name));
      return;
    }
    ValueId wt = r.dst.add_node(OpKind::Constant, {}, {{"value", transposed(*constant_of(g, p.w))}}, nd.name)[0];
    r.bind(nd, r.dst.add_node(OpKind::Linear, {r.map.at(p.h), wt, r.map.at(p.bias)},
                              {{"activation", std::string("gelu")}}, nd.name));
  };
  return rewrite_matches(g, g, plan_gelu, emit, changed);
}

}  // namespace rlx
