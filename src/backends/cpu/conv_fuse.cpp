// fuse_conv_lir: a conv whose only reader is an elementwise region that is, per output channel,
// affine in the conv's output (a bias, an inference BatchNorm: sub/mul/add/div by [1,O,1,1] or
// scalar operands) plus at most one tensor of the output's shape (a residual), then max/min by
// scalars (ReLU, ReLU6), takes that region as its epilogue: the conv writes the region's output
// while each block is in cache, and the region's pass over memory goes. The per-channel scale,
// shift and residual factor are worked out from the region's inputs on every run, so they may be
// run-time values.
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

namespace {

// The region a kernel runs as a body: its own, or a one-node body for a lone elementwise op (a bare
// ReLU). False for other kernels.
bool region_body(const LirProgram& p, const LirKernel& r, Graph& body) {
  if (r.kind == KernelKind::Generated) {
    body = r.body;
    return true;
  }
  if (r.kind != KernelKind::Library || !is_elementwise(r.op) || r.out.size() != 1) return false;
  body = Graph{};
  std::vector<ValueId> ins;
  for (size_t i = 0; i < r.in.size(); ++i) {
    const ValueType& t = p.buffers[r.in[i]].type;
    ins.push_back(body.add_input("a" + std::to_string(i), t.dtype, t.shape));
  }
  body.outputs = body.add_node(r.op, ins, r.attrs, r.origin);
  return true;
}

// `second` (reading first's output where second_in is y) after `first`: one body whose inputs are
// first's, then second's other inputs. Slots: kernel input per body input (-1: the conv's output),
// second's extra buffers appended to `kin` (the conv kernel's inputs) unless already there.
Graph chain(const Graph& first, std::vector<int>& slots, const Graph& second, const std::vector<int>& second_in, int y,
            std::vector<int>& kin) {
  Graph g;
  std::vector<ValueId> m1(first.values.size(), -1), m2(second.values.size(), -1);
  for (size_t s = 0; s < first.inputs.size(); ++s) {
    const ValueType& t = first.type(first.inputs[s]);
    m1[first.inputs[s]] = g.add_input("a" + std::to_string(s), t.dtype, t.shape);
  }
  auto copy = [&](const Graph& src, std::vector<ValueId>& m) {
    for (const Node& n : src.nodes) {
      std::vector<ValueId> ins;
      for (ValueId v : n.inputs) ins.push_back(m[v]);
      auto outs = g.add_node(n.op, ins, n.attrs, n.name);
      for (size_t i = 0; i < outs.size(); ++i) m[n.outputs[i]] = outs[i];
    }
  };
  copy(first, m1);
  for (size_t s = 0; s < second.inputs.size(); ++s) {
    if (second_in[s] == y) {
      m2[second.inputs[s]] = m1[first.outputs[0]];
      continue;
    }
    const ValueType& t = second.type(second.inputs[s]);
    m2[second.inputs[s]] = g.add_input("a" + std::to_string(g.inputs.size()), t.dtype, t.shape);
    int slot = -1;
    for (size_t i = 2; i < kin.size(); ++i)
      if (kin[i] == second_in[s]) slot = static_cast<int>(i);
    if (slot < 0) {
      slot = static_cast<int>(kin.size());
      kin.push_back(second_in[s]);
    }
    slots.push_back(slot);
  }
  copy(second, m2);
  g.outputs = {m2[second.outputs[0]]};
  return g;
}

}  // namespace

void fuse_conv_lir(LirProgram& p) {
  const size_t nb = p.buffers.size(), nk = p.kernels.size();
  std::vector<std::vector<int>> readers(nb);
  std::vector<int> views(nb, 0), def(nb, -1);
  for (size_t k = 0; k < nk; ++k) {
    for (int b : p.kernels[k].in) readers[b].push_back(static_cast<int>(k));
    for (int b : p.kernels[k].out) def[b] = static_cast<int>(k);
  }
  for (auto& b : p.buffers)
    if (b.kind == BufferKind::View) ++views[b.view_of];
  auto root = [&](int b) {
    while (p.buffers[b].kind == BufferKind::View) b = p.buffers[b].view_of;
    return b;
  };
  std::vector<bool> dead(nk, false);
  bool changed = false;
  for (size_t k = 0; k < nk; ++k) {
    LirKernel& d = p.kernels[k];
    if (dead[k] || d.kind != KernelKind::Library || d.op != OpKind::Conv || d.in.size() != 2 || d.out.size() != 1)
      continue;
    const LirBuffer &xb = p.buffers[d.in[0]], &wb = p.buffers[d.in[1]], &yb0 = p.buffers[d.out[0]];
    if (!conv_f32_supported(Node{d.op, {}, {}, d.attrs, ""}, xb.type, wb.type, yb0.type)) continue;
    // Absorb the reader, then the reader of what that wrote, while each is an epilogue form.
    Graph body;  // the epilogue so far (empty: none yet)
    std::vector<int> slots;
    for (;;) {
      const int y = d.out[0];
      const LirBuffer& yb = p.buffers[y];
      if (yb.kind != BufferKind::Arena || views[y] != 0 || readers[y].size() != 1) break;
      const int rk = readers[y][0];
      if (rk <= static_cast<int>(k) || dead[rk]) break;
      const LirKernel& r = p.kernels[rk];
      Graph rb;
      if (!region_body(p, r, rb) || r.out.size() != 1 || p.buffers[r.out[0]].kind == BufferKind::View ||
          p.buffers[r.out[0]].type.dtype != yb.type.dtype || p.buffers[r.out[0]].type.shape != yb.type.shape)
        break;
      // The region's other inputs must exist when the conv runs.
      bool ready = true;
      for (int b : r.in) ready &= b == y || def[root(b)] < static_cast<int>(k);
      if (!ready) break;
      std::vector<int> kin = d.in, s2 = slots;
      Graph g;
      if (body.nodes.empty() && body.inputs.empty()) {
        g = rb;
        for (int b : r.in) {
          if (b == y) {
            s2.push_back(-1);
            continue;
          }
          int slot = -1;
          for (size_t i = 2; i < kin.size(); ++i)
            if (kin[i] == b) slot = static_cast<int>(i);
          if (slot < 0) {
            slot = static_cast<int>(kin.size());
            kin.push_back(b);
          }
          s2.push_back(slot);
        }
      } else {
        g = chain(body, s2, rb, r.in, y, kin);
      }
      auto plan = conv_epi_plan(g, s2, yb.type.shape);
      if (!plan) break;
      for (size_t i = d.in.size(); i < kin.size(); ++i) readers[kin[i]].push_back(static_cast<int>(k));
      d.in = kin;
      d.out = {r.out[0]};
      def[r.out[0]] = static_cast<int>(k);
      body = std::move(g);
      slots = std::move(s2);
      d.attrs["cpu_epi"] = plan->label;
      dead[rk] = true;
      changed = true;
    }
    if (body.inputs.empty()) continue;
    d.body = std::move(body);
    d.attrs["cpu_conv_slots"] = std::vector<int64_t>(slots.begin(), slots.end());
    d.origin += " +" + attr_str(Node{d.op, {}, {}, d.attrs, ""}, "cpu_epi");
  }
  if (!changed) return;
  erase_kernels(p, dead);
  plan_memory(p);
}

std::shared_ptr<const ConvEpiPlan> conv_epi_prepare(const LirKernel& k, const LirProgram& p) {
  if (k.op != OpKind::Conv || !k.attrs.count("cpu_conv_slots")) return nullptr;
  const Node n{k.op, {}, {}, k.attrs, k.origin};
  const auto& s = attr_ints(n, "cpu_conv_slots");
  auto plan = conv_epi_plan(k.body, std::vector<int>(s.begin(), s.end()), p.buffers[k.out[0]].type.shape);
  RLX_CHECK(plan, "[cpu] conv ", k.origin, ": its fused epilogue no longer matches the conv epilogue form");
  return plan;
}

}  // namespace rlx::cpu
