// attention-from-matmuls: the attention an exporter writes out op by op --
//   MatMul(q [·scale], kᵀ [·scale]) [/ or · scale] [+ mask] -> Softmax(last axis) -> MatMul(·, v)
// (torch.onnx's scaled_dot_product_attention symbolic, or transformers' eager BERT attention) --
// becomes one Attention(q, k, v [, mask]), the op the model builders emit, so the backends' attention
// kernel and the LIR passes around it (merge-qkv) apply to imported graphs too.
//   q, v are the [B, H, S, D] / [B, H, T, Dv] operands as they are; k is recovered from kᵀ by
//   composing the transposes that only feed it (an exporter's Transpose(0,2,3,1) of the head split
//   becomes Transpose(0,2,1,3), the builder's form). Scalar factors on q, kᵀ or the scores multiply
//   into the attention's scale (0, the default 1/sqrt(D), when they equal it).
//   The additive mask is traced back to its [B, T] source: when the chain (unsqueeze / expand /
//   reshape / convert / arithmetic / compare / and / or / where) gives 0 where the source is 1 and a large
//   negative number (<= -1e4) where it is 0, and keeps batch and key axes in place, the Attention takes the
//   source as a padding mask (mask=padding; the kernels read any dtype, nonzero = attend). Any
//   other additive mask of the scores' dtype that broadcasts to [B, H, S, T] is kept as mask=bias.
//   The source is assumed to hold 0/1 (an attention_mask); a fully masked row, uniform in the export,
//   is whatever the attention kernel gives for no kept key.
#include <algorithm>
#include <cmath>

#include "passes/passes.h"
#include "passes/pattern.h"
#include "rlx/op.h"

namespace rlx {

namespace {

bool static_rank(const Graph& g, ValueId v, size_t r) {
  const Shape& s = g.type(v).shape;
  return s.size() == r && is_static(s);
}
std::vector<int64_t> dims(const Graph& g, ValueId v) { return static_dims(g.type(v).shape); }

// The value a chain of scalar Mul/Div starts from; the factors multiply into *scale.
ValueId strip_scale(const Graph& g, const GraphUses& u, ValueId v, double* scale) {
  for (;;) {
    const Node* n = producer_of(g, v);
    if (!n || !u.once(v) || (n->op != OpKind::Mul && n->op != OpKind::Div)) return v;
    auto b = scalar_of(g, n->inputs[1]);
    auto a = n->op == OpKind::Mul ? scalar_of(g, n->inputs[0]) : std::nullopt;
    if (b && *b != 0 && dims(g, n->inputs[0]) == dims(g, v)) {
      *scale = n->op == OpKind::Mul ? *scale * *b : *scale / *b;
      v = n->inputs[0];
    } else if (a && dims(g, n->inputs[1]) == dims(g, v)) {
      *scale *= *a;
      v = n->inputs[1];
    } else {
      return v;
    }
  }
}

struct Scores {
  const Node* qk = nullptr;  // the MatMul(q, kᵀ)
  ValueId mask = -1;         // the additive mask, if any
  double scale = 1;
};

// Walks the scores from the softmax input back to MatMul(q, kᵀ) through scalar Mul/Div and one Add
// of a mask; every value on the way has that one reader.
bool walk_scores(const Graph& g, const GraphUses& u, ValueId v, Scores* s) {
  const Node* n = producer_of(g, v);
  if (!n || !u.once(v) || !static_rank(g, v, 4)) return false;
  if (n->op == OpKind::MatMul) {
    s->qk = n;
    return true;
  }
  if (n->op == OpKind::Mul || n->op == OpKind::Div) {
    double f = 1;
    ValueId x = strip_scale(g, u, v, &f);
    if (x == v) return false;
    s->scale *= f;
    return walk_scores(g, u, x, s);
  }
  if (n->op == OpKind::Add && s->mask < 0) {
    for (int i = 0; i < 2; ++i) {
      Scores t = *s;
      t.mask = n->inputs[1 - i];
      if (dims(g, n->inputs[i]) == dims(g, v) && walk_scores(g, u, n->inputs[i], &t)) {
        *s = t;
        return true;
      }
    }
  }
  return false;
}

// A mask value when its source is 1 (`on`) and when it is 0 (`off`); pos: where the source's
// batch and key axes are in it (-1: size 1 there, so any place broadcasts alike).
struct MaskVal {
  double on = 0, off = 0;
  bool constant = true;
  std::vector<int> pos;  // [batch axis, key axis] when !constant
};

struct MaskTrace {
  const Graph& g;
  int64_t B, T;
  ValueId root = -1;

  // pos of an operand of rank r read by a broadcasting op of output rank ro (numpy: right-aligned).
  static std::vector<int> shifted(const MaskVal& m, int r, int ro) {
    std::vector<int> p = m.pos;
    for (auto& x : p)
      if (x >= 0) x += ro - r;
    return p;
  }
  static bool merge(std::vector<int>* into, const std::vector<int>& p) {
    if (into->empty()) {
      *into = p;
      return true;
    }
    for (size_t i = 0; i < 2; ++i) {
      if ((*into)[i] < 0)
        (*into)[i] = p[i];
      else if (p[i] >= 0 && p[i] != (*into)[i])
        return false;
    }
    return true;
  }

  std::optional<MaskVal> eval(ValueId v) {
    if (auto c = scalar_of(g, v)) return MaskVal{*c, *c, true, {}};
    const Node* n = producer_of(g, v);
    const Shape& vs = g.type(v).shape;
    if (!is_static(vs)) return std::nullopt;
    const int rank = static_cast<int>(vs.size());
    auto leaf = [&]() -> std::optional<MaskVal> {
      if (rank != 2 || vs[0].v != B || vs[1].v != T || (root >= 0 && root != v)) return std::nullopt;
      root = v;
      return MaskVal{1, 0, false, {B == 1 ? -1 : 0, T == 1 ? -1 : 1}};
    };
    if (!n) return leaf();
    auto in = [&](size_t i) { return eval(n->inputs[i]); };
    auto in_rank = [&](size_t i) { return static_cast<int>(g.type(n->inputs[i]).shape.size()); };
    switch (n->op) {
      case OpKind::Convert: {
        auto x = in(0);
        DType to = g.type(v).dtype;
        if (!x) return x;
        if (to == DType::boolean)
          x->on = x->on != 0, x->off = x->off != 0;
        else if (!is_float(to) && (std::trunc(x->on) != x->on || std::trunc(x->off) != x->off))
          return std::nullopt;
        return x;
      }
      case OpKind::Unsqueeze:
      case OpKind::Squeeze: {
        auto x = in(0);
        if (!x || x->constant) return x;
        const int ri = in_rank(0);
        std::vector<int64_t> axes = attr_ints(*n, "axes");
        const int big = n->op == OpKind::Unsqueeze ? rank : ri;
        std::vector<bool> listed(static_cast<size_t>(big), false);
        for (auto a : axes) {
          int64_t k = a < 0 ? a + big : a;
          if (k < 0 || k >= big) return std::nullopt;
          listed[static_cast<size_t>(k)] = true;
        }
        // The axes of the bigger shape that are not listed, in order, are the smaller shape's axes.
        std::vector<int> kept;
        for (int k = 0; k < big; ++k)
          if (!listed[static_cast<size_t>(k)]) kept.push_back(k);
        for (auto& p : x->pos) {
          if (p < 0) continue;
          if (n->op == OpKind::Unsqueeze) {
            p = kept[static_cast<size_t>(p)];
          } else {
            if (listed[static_cast<size_t>(p)]) return std::nullopt;  // a squeezed axis has size 1
            p = static_cast<int>(std::find(kept.begin(), kept.end(), p) - kept.begin());
          }
        }
        return x;
      }
      case OpKind::Reshape: {  // only inserting or dropping size-1 axes
        auto x = in(0);
        if (!x || x->constant) return x;
        std::vector<int64_t> si = dims(g, n->inputs[0]), so = dims(g, v);
        std::vector<int> ni, no;
        for (int k = 0; k < static_cast<int>(si.size()); ++k)
          if (si[static_cast<size_t>(k)] != 1) ni.push_back(k);
        for (int k = 0; k < rank; ++k)
          if (so[static_cast<size_t>(k)] != 1) no.push_back(k);
        if (ni.size() != no.size()) return std::nullopt;
        for (size_t k = 0; k < ni.size(); ++k)
          if (si[static_cast<size_t>(ni[k])] != so[static_cast<size_t>(no[k])]) return std::nullopt;
        for (auto& p : x->pos) {
          if (p < 0) continue;
          auto it = std::find(ni.begin(), ni.end(), p);
          if (it == ni.end()) return std::nullopt;
          p = no[static_cast<size_t>(it - ni.begin())];
        }
        return x;
      }
      case OpKind::Expand: {
        auto x = in(0);
        if (x && !x->constant) x->pos = shifted(*x, in_rank(0), rank);
        return x;
      }
      case OpKind::BroadcastInDim: {
        auto x = in(0);
        if (!x || x->constant) return x;
        const auto& d = attr_ints(*n, "dims");
        for (auto& p : x->pos)
          if (p >= 0) p = static_cast<int>(d[static_cast<size_t>(p)]);
        return x;
      }
      case OpKind::Slice: {  // the whole tensor (an exporter's [:, ...])
        if (dims(g, n->inputs[0]) != dims(g, v)) return std::nullopt;
        return in(0);
      }
      case OpKind::Neg:
      case OpKind::Not: {
        auto x = in(0);
        if (!x) return x;
        if (n->op == OpKind::Neg)
          x->on = -x->on, x->off = -x->off;
        else
          x->on = x->on == 0, x->off = x->off == 0;
        return x;
      }
      case OpKind::Add:
      case OpKind::Sub:
      case OpKind::Mul:
      case OpKind::Div:
      case OpKind::Max:
      case OpKind::Min:
      case OpKind::Eq:
      case OpKind::Ne:
      case OpKind::Lt:
      case OpKind::Gt:
      case OpKind::And:
      case OpKind::Or:
      case OpKind::Select: {
        if ((n->op == OpKind::And || n->op == OpKind::Or) && g.type(v).dtype != DType::boolean)
          return std::nullopt;
        std::vector<MaskVal> a;
        MaskVal r;
        for (size_t i = 0; i < n->inputs.size(); ++i) {
          auto x = in(i);
          if (!x) return std::nullopt;
          if (!x->constant && !merge(&r.pos, shifted(*x, in_rank(i), rank))) return std::nullopt;
          r.constant = r.constant && x->constant;
          a.push_back(*x);
        }
        auto f = [&](double MaskVal::*m) -> std::optional<double> {
          double x = a[0].*m, y = a.size() > 1 ? a[1].*m : 0;
          switch (n->op) {
            case OpKind::Add:
              return x + y;
            case OpKind::Sub:
              return x - y;
            case OpKind::Mul:
              return x * y;
            case OpKind::Div:
              return y == 0 ? std::nullopt : std::optional<double>(x / y);
            case OpKind::Max:
              return std::max(x, y);
            case OpKind::Min:
              return std::min(x, y);
            case OpKind::Eq:
              return x == y ? 1.0 : 0.0;
            case OpKind::Ne:
              return x != y ? 1.0 : 0.0;
            case OpKind::Lt:
              return x < y ? 1.0 : 0.0;
            case OpKind::Gt:
              return x > y ? 1.0 : 0.0;
            case OpKind::And:
              return x != 0 && y != 0 ? 1.0 : 0.0;
            case OpKind::Or:
              return x != 0 || y != 0 ? 1.0 : 0.0;
            default:
              return x != 0 ? y : a[2].*m;  // select
          }
        };
        auto on = f(&MaskVal::on), off = f(&MaskVal::off);
        if (!on || !off) return std::nullopt;
        r.on = *on;
        r.off = *off;
        return r;
      }
      default:
        return leaf();
    }
  }
};

// The [B, T] padding-mask source behind an additive mask of the [B, H, S, T] scores, or -1.
ValueId padding_source(const Graph& g, ValueId mask, int64_t B, int64_t T) {
  MaskTrace t{g, B, T};
  auto m = t.eval(mask);
  const int r = static_cast<int>(g.type(mask).shape.size());
  if (!m || m->constant || t.root < 0 || r > 4) return -1;
  std::vector<int> p = MaskTrace::shifted(*m, r, 4);
  if ((p[0] >= 0 && p[0] != 0) || (p[1] >= 0 && p[1] != 3)) return -1;
  if (m->on != 0 || !(m->off <= -1e4)) return -1;
  return t.root;
}

bool broadcasts_to(const std::vector<int64_t>& s, const std::vector<int64_t>& full) {
  if (s.size() > full.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    int64_t a = s[s.size() - 1 - i], b = full[full.size() - 1 - i];
    if (a != 1 && a != b) return false;
  }
  return true;
}

struct Plan {
  ValueId q = -1, k_src = -1, v = -1, mask = -1;
  std::vector<int64_t> k_perm;  // K = transpose(k_src, k_perm); empty: K = k_src
  std::string kind = "none";
  double scale = 0;
};

std::optional<Plan> plan_attention(const Graph& g, const GraphUses& u, const Node& pv) {
  if (pv.op != OpKind::MatMul || !static_rank(g, pv.outputs[0], 4)) return std::nullopt;
  const Node* sm = producer_of(g, pv.inputs[0], OpKind::Softmax);
  if (!sm || !u.once(pv.inputs[0]) || !is_float(g.type(pv.outputs[0]).dtype)) return std::nullopt;
  int64_t ax = attr_int(*sm, "axis");
  if (ax != -1 && ax != 3) return std::nullopt;
  Scores s;
  if (!walk_scores(g, u, sm->inputs[0], &s)) return std::nullopt;
  Plan p;
  double f = s.scale;
  p.q = strip_scale(g, u, s.qk->inputs[0], &f);
  ValueId kt = strip_scale(g, u, s.qk->inputs[1], &f);
  p.v = pv.inputs[1];
  if (!static_rank(g, p.q, 4) || !static_rank(g, kt, 4) || !static_rank(g, p.v, 4) || f <= 0 ||
      !std::isfinite(f))
    return std::nullopt;
  // K [B, Hk, T, D] = transpose(kᵀ, 0,1,3,2), pushed through the transposes that only make kᵀ.
  std::vector<int64_t> c = {0, 1, 3, 2};
  ValueId x = kt;
  for (const Node* t; (t = producer_of(g, x, OpKind::Transpose)) && u.once(x);) {
    const auto& perm = attr_ints(*t, "perm");
    for (auto& ci : c) ci = perm[static_cast<size_t>(ci)];
    x = t->inputs[0];
  }
  p.k_src = x;
  if (c != std::vector<int64_t>{0, 1, 2, 3}) p.k_perm = c;
  const std::vector<int64_t> qd = dims(g, p.q), vd = dims(g, p.v), xd = dims(g, x);
  std::vector<int64_t> kd(4);
  for (size_t i = 0; i < 4; ++i) kd[i] = xd[static_cast<size_t>(c[i])];
  const DType dt = g.type(p.q).dtype;
  if (g.type(x).dtype != dt || g.type(p.v).dtype != dt || qd[0] != kd[0] || kd[0] != vd[0] ||
      qd[3] != kd[3] || kd[1] != vd[1] || kd[2] != vd[2] || kd[1] <= 0 || qd[1] % kd[1] != 0)
    return std::nullopt;
  const int64_t B = qd[0], H = qd[1], S = qd[2], T = kd[2], D = qd[3];
  p.scale = std::fabs(f * std::sqrt(static_cast<double>(D)) - 1) < 1e-6 ? 0.0 : f;
  if (s.mask >= 0) {
    ValueId src = padding_source(g, s.mask, B, T);
    if (src >= 0) {
      p.kind = "padding";
      p.mask = src;
    } else if (g.type(s.mask).dtype == dt && is_static(g.type(s.mask).shape) &&
               broadcasts_to(dims(g, s.mask), {B, H, S, T})) {
      p.kind = "bias";
      p.mask = s.mask;
    } else {
      return std::nullopt;
    }
  }
  return p;
}

}  // namespace

Graph attention_from_matmuls(const Graph& g0, int* changed) {
  Graph g = fold_constants(g0);  // the scale chains (Sqrt of a folded Shape entry, ...) become constants
  auto emit = [](GraphRebuild& r, const Node& nd, const Plan& p) {
    ValueId k = r.map.at(p.k_src);
    if (!p.k_perm.empty()) k = r.dst.add_node(OpKind::Transpose, {k}, {{"perm", p.k_perm}}, nd.name)[0];
    std::vector<ValueId> ins = {r.map.at(p.q), k, r.map.at(p.v)};
    if (p.mask >= 0) ins.push_back(r.map.at(p.mask));
    r.bind(nd, r.dst.add_node(OpKind::Attention, ins, {{"mask", p.kind}, {"scale", p.scale}}, nd.name));
  };
  return rewrite_matches(g, g0, plan_attention, emit, changed);
}

}  // namespace rlx
