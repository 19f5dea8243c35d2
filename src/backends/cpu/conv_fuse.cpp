// The conv epilogue plan: whether a region body is a conv epilogue (the conv-epilogue LIR pass,
// src/lir/rewrite/conv.cpp, asks), and at run time the per-channel scale, shift and residual factor
// worked out from the region's inputs on every run (so they may be run-time values).
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "backends/cpu/conv.h"
#include "lir/plan.h"

namespace rlx::cpu {

struct ConvEpiPlan {
  enum class Src : uint8_t { Y, R, C };
  struct Val {
    Src src = Src::C;
    int input = -1;          // conv kernel input (R, C)
    bool per_channel = false;  // C: element c (else element 0)
  };
  struct Step {
    OpKind op;
    int a, b;  // operand values (b = -1: unary)
  };
  std::vector<Val> vals;    // body inputs first, then one per affine step
  std::vector<Step> steps;  // the affine part, in body order
  int out = -1;             // the value the clamps apply to
  int res_input = -1;
  std::vector<std::pair<bool, int>> clamps;  // (max?, scalar input), in order
  int64_t channels = 0;
  std::string label;
  Graph body;  // the region, for runs the plan cannot express
  mutable std::vector<float> scale, shift, rscale;  // filled per run (runs of one executable take turns)
};

namespace {

// Affine value a*Y + e*R + b of one channel.
struct Aff {
  double a = 0, e = 0, b = 0;
  bool lin() const { return a != 0 || e != 0; }
};

bool is_f32(const ValueType& t) { return t.dtype == DType::f32; }

}  // namespace

std::shared_ptr<const ConvEpiPlan> conv_epi_plan(const Graph& body, const std::vector<int>& slots,
                                                 const Shape& yshape) {
  if (body.outputs.size() != 1 || slots.size() != body.inputs.size() || yshape.size() < 3) return nullptr;
  auto plan = std::make_shared<ConvEpiPlan>();
  const int64_t R = static_cast<int64_t>(yshape.size());
  if (!yshape[1].is_static()) return nullptr;
  plan->channels = yshape[1].v;
  std::vector<int> id(body.values.size(), -1);  // body value -> plan value
  // Structural kinds: 0 constant (per channel or scalar), 1 linear in Y/R, 2 clamped (linear then max/min).
  std::vector<int> kind;
  std::vector<bool> scalar;
  bool has_y = false;
  for (size_t s = 0; s < body.inputs.size(); ++s) {
    const ValueType& t = body.type(body.inputs[s]);
    if (!is_f32(t)) return nullptr;
    ConvEpiPlan::Val v;
    bool sc = false;
    if (slots[s] < 0) {
      if (t.shape != yshape) return nullptr;
      v.src = ConvEpiPlan::Src::Y, has_y = true;
    } else if (t.shape == yshape) {
      if (plan->res_input >= 0 && plan->res_input != slots[s]) return nullptr;  // one residual
      v.src = ConvEpiPlan::Src::R, v.input = plan->res_input = slots[s];
    } else {
      // Per channel: right-aligned against the output, the dim under its axis 1 is O, the rest 1.
      int64_t n = 1;
      for (auto& d : t.shape) {
        if (!d.is_static()) return nullptr;
        n *= d.v;
      }
      const int64_t q = static_cast<int64_t>(t.shape.size()), ax = 1 - (R - q);
      if (n == 1) {
        sc = true;
      } else {
        if (q > R || ax < 0 || t.shape[ax].v != plan->channels) return nullptr;
        for (int64_t i = 0; i < q; ++i)
          if (i != ax && t.shape[i].v != 1) return nullptr;
        v.per_channel = true;
      }
      v.input = slots[s];
    }
    id[body.inputs[s]] = static_cast<int>(plan->vals.size());
    plan->vals.push_back(v);
    kind.push_back(v.src == ConvEpiPlan::Src::C ? 0 : 1);
    scalar.push_back(sc);
  }
  if (!has_y) return nullptr;
  for (const Node& n : body.nodes) {
    if (n.outputs.size() != 1 || n.inputs.empty() || n.inputs.size() > 2 || !is_f32(body.type(n.outputs[0]))) return nullptr;
    const int a = id[n.inputs[0]], b = n.inputs.size() > 1 ? id[n.inputs[1]] : -1;
    if (a < 0 || (n.inputs.size() > 1 && b < 0)) return nullptr;
    const int ka = kind[a], kb = b >= 0 ? kind[b] : 0;
    int k = -1;
    switch (n.op) {
      case OpKind::Add:
      case OpKind::Sub: k = (ka == 2 || kb == 2) ? -1 : std::max(ka, kb); break;
      case OpKind::Mul: k = (ka == 2 || kb == 2 || (ka && kb)) ? -1 : std::max(ka, kb); break;
      case OpKind::Div: k = (ka == 2 || kb != 0) ? -1 : ka; break;
      case OpKind::Neg: k = n.inputs.size() == 1 && ka != 2 ? ka : -1; break;
      case OpKind::Max:
      case OpKind::Min: {
        // Only as the tail: (clamped) linear value against a scalar constant.
        const int lin = ka ? a : b, cst = ka ? b : a;
        if (!(ka == 0) == !(kb == 0) || !scalar[cst] || plan->vals[cst].src != ConvEpiPlan::Src::C ||
            cst >= static_cast<int>(body.inputs.size()))
          return nullptr;
        if (kind[lin] == 1) {
          if (!plan->clamps.empty()) return nullptr;
          plan->out = lin;
        } else if (lin + 1 != static_cast<int>(plan->vals.size())) {
          return nullptr;  // a clamp of an earlier clamp only
        }
        plan->clamps.push_back({n.op == OpKind::Max, plan->vals[cst].input});
        id[n.outputs[0]] = static_cast<int>(plan->vals.size());
        plan->vals.push_back({});
        kind.push_back(2);
        scalar.push_back(false);
        continue;
      }
      default: return nullptr;
    }
    if (k < 0) return nullptr;
    id[n.outputs[0]] = static_cast<int>(plan->vals.size());
    plan->steps.push_back({n.op, a, b});
    plan->vals.push_back({});
    kind.push_back(k);
    scalar.push_back(k == 0 && scalar[a] && (b < 0 || scalar[b]));
  }
  const int last = id[body.outputs[0]];
  if (last < 0 || kind[last] == 0 || plan->clamps.size() > 2) return nullptr;
  if (kind[last] == 1) plan->out = last, plan->clamps.clear();
  // A clamped value must be the output, reached through the clamps only.
  if (kind[last] == 2 && static_cast<size_t>(last) + 1 != plan->vals.size()) return nullptr;
  if (plan->out < 0) return nullptr;
  bool relu = plan->clamps.size() == 1 && plan->clamps[0].first;
  plan->body = body;
  plan->label = std::string("affine") + (plan->res_input >= 0 ? "+residual" : "") +
                (plan->clamps.empty() ? "" : relu ? "+max" : "+clamp");
  return plan;
}

bool conv_epi_fill(const ConvEpiPlan& p, const std::vector<Tensor>& in, ChannelEpi& e) {
  const int64_t O = p.channels;
  p.scale.resize(static_cast<size_t>(O)), p.shift.resize(static_cast<size_t>(O)), p.rscale.resize(static_cast<size_t>(O));
  std::vector<Aff> v(p.vals.size());
  const size_t ninputs = p.vals.size() - p.steps.size() - p.clamps.size();
  bool unit_r = true;
  for (int64_t c = 0; c < O; ++c) {
    for (size_t i = 0; i < ninputs; ++i) {
      const ConvEpiPlan::Val& s = p.vals[i];
      v[i] = {};
      if (s.src == ConvEpiPlan::Src::Y) v[i].a = 1;
      else if (s.src == ConvEpiPlan::Src::R) v[i].e = 1;
      else v[i].b = in[static_cast<size_t>(s.input)].data<float>()[s.per_channel ? c : 0];
    }
    for (size_t k = 0; k < p.steps.size(); ++k) {
      const ConvEpiPlan::Step& st = p.steps[k];
      const Aff x = v[static_cast<size_t>(st.a)], y = st.b >= 0 ? v[static_cast<size_t>(st.b)] : Aff{};
      Aff& r = v[ninputs + k];
      switch (st.op) {
        case OpKind::Add: r = {x.a + y.a, x.e + y.e, x.b + y.b}; break;
        case OpKind::Sub: r = {x.a - y.a, x.e - y.e, x.b - y.b}; break;
        case OpKind::Neg: r = {-x.a, -x.e, -x.b}; break;
        case OpKind::Mul: r = x.lin() ? Aff{x.a * y.b, x.e * y.b, x.b * y.b} : Aff{y.a * x.b, y.e * x.b, y.b * x.b}; break;
        default: r = {x.a / y.b, x.e / y.b, x.b / y.b}; break;  // Div by a constant
      }
    }
    const Aff& o = v[static_cast<size_t>(p.out)];
    p.scale[c] = static_cast<float>(o.a), p.shift[c] = static_cast<float>(o.b), p.rscale[c] = static_cast<float>(o.e);
    unit_r &= o.e == 1.0;
  }
  e = ChannelEpi{};
  e.scale = p.scale.data();
  e.shift = p.shift.data();
  if (p.res_input >= 0) {
    e.res = in[static_cast<size_t>(p.res_input)].data<float>();
    e.res_scale = unit_r ? nullptr : p.rscale.data();
  }
  bool seen_min = false;
  for (auto [is_max, input] : p.clamps) {
    const float s = in[static_cast<size_t>(input)].data<float>()[0];
    if (std::isnan(s)) return false;
    if (is_max) {
      e.lo = std::max(e.lo, s);
      if (seen_min) e.min_first = true;
    } else {
      e.hi = std::min(e.hi, s);
      seen_min = true;
    }
  }
  return true;
}

void conv_epi_region(const ConvEpiPlan& p, const std::vector<Tensor>& body_in, Tensor& out) {
  fused_kernel(p.body, body_in, out);
}

std::string conv_epi_label(const ConvEpiPlan& p) { return p.label; }

std::shared_ptr<const ConvEpiPlan> conv_epi_prepare(const LirKernel& k, const LirProgram& p) {
  if (k.op != OpKind::Conv || !k.attrs.count("cpu_conv_slots")) return nullptr;
  const Node n{k.op, {}, {}, k.attrs, k.origin};
  const auto& s = attr_ints(n, "cpu_conv_slots");
  auto plan = conv_epi_plan(k.body, std::vector<int>(s.begin(), s.end()), p.buffers[k.out[0]].type.shape);
  RLX_CHECK(plan, "[cpu] conv ", k.origin, ": its fused epilogue no longer matches the conv epilogue form");
  return plan;
}

}  // namespace rlx::cpu
