// Optimizers as MIR graph ops, LR schedules, and the one-graph training step.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "autodiff/autodiff.h"
#include "passes/passes.h"
#include "rlx/builder.h"
#include "rlx/safetensors.h"
#include "train/train.h"

namespace rlx::train {

int state_per_param(const OptimizerConfig& c) {
  if (c.kind == "sgd") return c.momentum != 0 ? 1 : 0;
  if (c.kind == "adam" || c.kind == "adamw") return 2;
  fail("[train] unknown optimizer '", c.kind, "' (sgd|adam|adamw)");
}

double LrSchedule::at(double base, int64_t step) const {
  if (warmup > 0 && step < warmup) return base * static_cast<double>(step + 1) / static_cast<double>(warmup);
  int64_t s = step - warmup;
  if (kind == "constant") return base;
  if (kind == "step") return base * std::pow(gamma, static_cast<double>(s / std::max<int64_t>(step_size, 1)));
  int64_t span = std::max<int64_t>(total - warmup, 1);
  double f = std::min(1.0, static_cast<double>(s) / static_cast<double>(span));
  if (kind == "cosine") return min_lr + (base - min_lr) * 0.5 * (1 + std::cos(M_PI * f));
  if (kind == "linear") return base + (min_lr - base) * f;
  fail("[train] unknown lr schedule '", kind, "' (constant|step|cosine|linear)");
}

std::vector<ValueId> emit_update(Builder& b, const OptimizerConfig& c, ValueId p, ValueId g,
                                 const std::vector<ValueId>& st, ValueId lr, ValueId lr_hat, ValueId eps_hat) {
  DType dt = b.dtype(p);
  auto k = [&](double v) { return b.scalar(v, dt); };
  if (c.kind == "sgd") {
    if (c.weight_decay != 0) g = b.add(g, b.mul(k(c.weight_decay), p));
    if (c.momentum == 0) return {b.sub(p, b.mul(lr, g))};
    ValueId buf = b.add(b.mul(k(c.momentum), st[0]), g);
    ValueId d = c.nesterov ? b.add(g, b.mul(k(c.momentum), buf)) : buf;
    return {b.sub(p, b.mul(lr, d)), buf};
  }
  bool decoupled = c.kind == "adamw";
  if (!decoupled && c.weight_decay != 0) g = b.add(g, b.mul(k(c.weight_decay), p));
  ValueId m = b.add(b.mul(k(c.beta1), st[0]), b.mul(k(1 - c.beta1), g));
  ValueId v = b.add(b.mul(k(c.beta2), st[1]), b.mul(k(1 - c.beta2), b.mul(g, g)));
  ValueId upd = b.div(b.mul(lr_hat, m), b.add(b.unary(OpKind::Sqrt, v), eps_hat));
  ValueId base = p;
  if (decoupled && c.weight_decay != 0) base = b.mul(p, b.sub(k(1), b.mul(lr, k(c.weight_decay))));
  return {b.sub(base, upd), m, v};
}

Graph build_train_step(const Graph& loss_fn, int num_params, const OptimizerConfig& c, const AmpConfig& amp,
                       AmpReport* report) {
  int S = state_per_param(c);
  Graph f = decompose_all(loss_fn);
  if (amp.dtype != DType::f32) f = amp_pass(f, amp.dtype, report);
  RLX_CHECK(num_params >= 1 && num_params <= static_cast<int>(f.inputs.size()), "[train] bad parameter count ",
            num_params);
  Graph g;
  g.name = loss_fn.name + "_train_step";
  Builder b(g);
  std::vector<ValueId> params, state, data;
  for (int i = 0; i < num_params; ++i) {
    ValueId v = f.inputs[i];
    RLX_CHECK(is_float(f.type(v).dtype), "[train] parameter ", i, " is not a float tensor");
    std::string nm = f.values[v].name.empty() ? "param_" + std::to_string(i) : f.values[v].name;
    params.push_back(g.add_input(nm, f.type(v).dtype, f.type(v).shape));
  }
  for (int i = 0; i < num_params; ++i)
    for (int j = 0; j < S; ++j) {
      ValueId v = f.inputs[i];
      state.push_back(g.add_input("state_" + std::to_string(i) + "_" + std::to_string(j), f.type(v).dtype,
                                  f.type(v).shape));
    }
  for (size_t i = num_params; i < f.inputs.size(); ++i) {
    ValueId v = f.inputs[i];
    data.push_back(g.add_input(f.values[v].name, f.type(v).dtype, f.type(v).shape));
  }
  ValueId lr = g.add_input("lr", DType::f32, {}), lr_hat = g.add_input("lr_hat", DType::f32, {}),
          eps_hat = g.add_input("eps_hat", DType::f32, {});
  ValueId scale = amp.loss_scaling() ? g.add_input("loss_scale", DType::f32, {}) : -1;
  std::vector<ValueId> ins = params;
  ins.insert(ins.end(), data.begin(), data.end());
  std::vector<ValueId> seeds(f.outputs.size(), -1);
  const ValueType& lt = f.type(f.outputs.at(0));
  RLX_CHECK(is_float(lt.dtype) && lt.shape.empty(), "[train] loss (output 0) must be a float scalar");
  seeds[0] = scale >= 0 ? (lt.dtype == DType::f32 ? scale : b.convert(scale, lt.dtype)) : b.scalar(1, lt.dtype);
  std::vector<int> wrt;
  for (int i = 0; i < num_params; ++i) wrt.push_back(i);
  auto r = ad::emit_vjp(b, f, ins, seeds, wrt);
  std::vector<ValueId> outs(r.begin(), r.begin() + static_cast<long>(f.outputs.size())), new_p, new_s;
  ValueId finite = -1;
  if (scale >= 0) {  // unscale; finite = no inf/nan in any gradient (x - x is NaN exactly then)
    b.set_origin("amp/loss_scale");
    ValueId total = -1;
    for (int i = 0; i < num_params; ++i) {
      ValueId& gr = r[f.outputs.size() + i];
      ValueId sc = b.dtype(gr) == DType::f32 ? scale : b.convert(scale, b.dtype(gr));
      gr = b.div(gr, sc);
      std::vector<int64_t> axes(b.shape(gr).size());
      for (size_t k = 0; k < axes.size(); ++k) axes[k] = static_cast<int64_t>(k);
      ValueId sum = axes.empty() ? gr : b.reduce(OpKind::ReduceSum, gr, axes, false);
      if (b.dtype(sum) != DType::f32) sum = b.convert(sum, DType::f32);
      total = total < 0 ? sum : b.add(total, sum);
    }
    finite = b.op1(OpKind::Not, {b.op1(OpKind::IsNan, {b.sub(total, total)})});
  }
  for (int i = 0; i < num_params; ++i) {
    ValueId gr = r[f.outputs.size() + i];
    auto cvt = [&](ValueId v) { return b.dtype(v) == b.dtype(params[i]) ? v : b.convert(v, b.dtype(params[i])); };
    std::vector<ValueId> st(state.begin() + i * S, state.begin() + (i + 1) * S);
    b.set_origin("optimizer/" + g.values[params[i]].name);
    auto u = emit_update(b, c, params[i], gr, st, cvt(lr), cvt(lr_hat), cvt(eps_hat));
    if (finite >= 0) {  // skip the update in-graph on overflow
      u[0] = b.select(finite, u[0], params[i]);
      for (int j = 0; j < S; ++j) u[1 + j] = b.select(finite, u[1 + j], st[j]);
    }
    new_p.push_back(u[0]);
    for (int j = 0; j < S; ++j) new_s.push_back(u[1 + j]);
  }
  for (auto v : outs) g.outputs.push_back(v);
  for (auto v : new_p) g.outputs.push_back(v);
  for (auto v : new_s) g.outputs.push_back(v);
  if (finite >= 0) g.outputs.push_back(b.convert(finite, DType::f32));
  return eliminate_dead_code(g);
}

Trainer::Trainer(const Graph& loss_fn, std::vector<Tensor> init, OptimizerConfig opt, LrSchedule sched,
                 CompileOptions copts, AmpConfig amp)
    : opt_(std::move(opt)),
      sched_(std::move(sched)),
      amp_(amp),
      step_graph_(build_train_step(loss_fn, static_cast<int>(init.size()), opt_, amp_, &amp_report_)),
      model_(step_graph_, copts),
      num_params_(static_cast<int>(init.size())),
      num_outs_(static_cast<int>(loss_fn.outputs.size())),
      lr_(DType::f32, {}),
      lr_hat_(DType::f32, {}),
      eps_hat_(DType::f32, {}),
      scale_in_(DType::f32, {}),
      finite_(DType::f32, {}) {
  int S = state_per_param(opt_);
  const int extra_in = amp_.loss_scaling() ? 1 : 0;
  scale_ = amp_.loss_scaling() ? amp_.init_scale : 1.0;
  for (int s = 0; s < 2; ++s) {
    for (int i = 0; i < num_params_; ++i) {
      const ValueType& t = step_graph_.type(step_graph_.inputs[i]);
      RLX_CHECK(init[i].dtype() == t.dtype && init[i].shape() == static_dims(t.shape), "[train] initial parameter ", i,
                " does not match the loss graph's input ", step_graph_.value_label(step_graph_.inputs[i]));
      sets_[s].params.push_back(s == 0 ? init[i].clone() : Tensor(t.dtype, static_dims(t.shape)));
      for (int j = 0; j < S; ++j) sets_[s].state.push_back(Tensor(t.dtype, static_dims(t.shape)));
    }
    for (int k = 0; k < num_outs_; ++k) {
      const ValueType& t = step_graph_.type(step_graph_.outputs[k]);
      sets_[s].outs.push_back(Tensor(t.dtype, static_dims(t.shape)));
    }
  }
  int ndata = static_cast<int>(step_graph_.inputs.size()) - num_params_ * (1 + S) - 3 - extra_in;
  for (int s = 0; s < 2; ++s) {
    auto& in = in_[s];
    in = sets_[s].params;
    in.insert(in.end(), sets_[s].state.begin(), sets_[s].state.end());
    for (int d = 0; d < ndata; ++d) in.push_back(Tensor());
    in.push_back(lr_);
    in.push_back(lr_hat_);
    in.push_back(eps_hat_);
    if (extra_in) in.push_back(scale_in_);
    auto& out = out_[s];
    out = sets_[s].outs;
    out.insert(out.end(), sets_[1 - s].params.begin(), sets_[1 - s].params.end());
    out.insert(out.end(), sets_[1 - s].state.begin(), sets_[1 - s].state.end());
    if (extra_in) out.push_back(finite_);
  }
}

const std::vector<Tensor>& Trainer::step(const std::vector<Tensor>& data) {
  int S = state_per_param(opt_);
  size_t first = static_cast<size_t>(num_params_ * (1 + S));
  size_t tail = amp_.loss_scaling() ? 4 : 3;
  auto& in = in_[cur_];
  RLX_CHECK(first + data.size() + tail == in.size(), "[train] step expects ", in.size() - first - tail,
            " data inputs, got ", data.size());
  if (amp_.loss_scaling()) scale_in_.data<float>()[0] = static_cast<float>(scale_);
  for (size_t i = 0; i < data.size(); ++i) in[first + i] = data[i];
  double lr = sched_.at(opt_.lr, step_);
  double t = static_cast<double>(step_ + 1);
  double c1 = 1 - std::pow(opt_.beta1, t), c2 = 1 - std::pow(opt_.beta2, t);
  lr_.data<float>()[0] = static_cast<float>(lr);
  lr_hat_.data<float>()[0] = static_cast<float>(opt_.kind == "sgd" ? lr : lr * std::sqrt(c2) / c1);
  eps_hat_.data<float>()[0] = static_cast<float>(opt_.eps * std::sqrt(c2));
  model_.run_into(in, out_[cur_]);
  for (size_t i = 0; i < data.size(); ++i) in[first + i] = Tensor();  // don't keep the batch alive
  if (amp_.loss_scaling()) {  // dynamic loss scale: halve on overflow (update skipped), grow when stable
    if (finite_.data<float>()[0] == 0.f) {
      scale_ = std::max(scale_ / 2, 1.0);
      good_ = 0;
      ++skipped_;
    } else if (++good_ >= amp_.growth_interval) {
      scale_ = std::min(scale_ * 2, 16777216.0);
      good_ = 0;
    }
  }
  int done = cur_;
  cur_ = 1 - cur_;
  ++step_;
  return sets_[done].outs;
}

void Trainer::save(const std::string& path) const {
  std::vector<std::pair<std::string, Tensor>> ts;
  int S = state_per_param(opt_);
  for (int i = 0; i < num_params_; ++i) ts.push_back({"param." + std::to_string(i), params()[i]});
  for (int i = 0; i < num_params_; ++i)
    for (int j = 0; j < S; ++j) ts.push_back({"state." + std::to_string(i) + "." + std::to_string(j), state()[i * S + j]});
  write_safetensors(path, ts, {{"step", std::to_string(step_)}, {"optimizer", opt_.kind}, {"format", "rlx-train-v1"}});
}

void Trainer::load(const std::string& path) {
  SafeTensors file = SafeTensors::open(path);
  int S = state_per_param(opt_);
  auto find = [&](const std::string& name, const Tensor& like) {
    RLX_CHECK(file.has(name), "[checkpoint] ", path, ": missing tensor '", name, "'");
    Tensor t = file.get(name);
    RLX_CHECK(t.dtype() == like.dtype() && t.shape() == like.shape(), "[checkpoint] ", path, ": tensor '", name,
              "' has the wrong dtype/shape");
    return t;
  };
  auto& set = sets_[cur_];
  for (int i = 0; i < num_params_; ++i) {
    Tensor t = find("param." + std::to_string(i), set.params[i]);
    std::memcpy(set.params[i].raw(), t.raw(), t.nbytes());
    for (int j = 0; j < S; ++j) {
      Tensor s = find("state." + std::to_string(i) + "." + std::to_string(j), set.state[i * S + j]);
      std::memcpy(set.state[i * S + j].raw(), s.raw(), s.nbytes());
    }
  }
  auto meta = file.metadata();
  auto step = meta.find("step");
  RLX_CHECK(step != meta.end(), "[checkpoint] ", path, ": no 'step' in the metadata");
  try {
    step_ = std::stoll(step->second);
  } catch (const std::exception&) {
    fail("[checkpoint] ", path, ": step '", step->second, "' is not an integer");
  }
}

}  // namespace rlx::train
