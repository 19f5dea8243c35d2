// Optimizers as MIR graph ops, LR schedules, and the one-graph training step.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "autodiff/autodiff.h"
#include "passes/passes.h"
#include "rlx/builder.h"
#include "rlx/safetensors.h"
#include "runtime/backend.h"
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
                       AmpReport* report, const DataParallel& dp) {
  int S = state_per_param(c);
  Graph f = ad::decompose_for_ad(loss_fn);  // keeps stop_gradient for the VJP
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
  ValueId good = amp.loss_scaling() ? g.add_input("loss_scale_good_steps", DType::f32, {}) : -1;
  ValueId skipped = amp.loss_scaling() ? g.add_input("skipped_steps", DType::f32, {}) : -1;
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
  if (dp.ranks > 1) {  // gradients (and the reported outputs) over the data-parallel ranks
    b.set_origin("data-parallel");
    std::vector<ValueId> grads(r.begin() + static_cast<long>(f.outputs.size()), r.end());
    emit_gradient_all_reduce(b, grads, dp);
    std::copy(grads.begin(), grads.end(), r.begin() + static_cast<long>(f.outputs.size()));
    std::vector<int64_t> world;
    for (int i = 0; i < dp.ranks; ++i) world.push_back(i);
    for (size_t k = 0; k < outs.size(); ++k) {
      ValueId sum = b.op1(OpKind::AllReduce, {outs[k]}, {{"reduce", std::string("sum")}, {"groups", world}});
      outs[k] = k == 0 ? b.mul(sum, b.scalar(1.0 / dp.ranks, b.dtype(sum))) : sum;
    }
  }
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
  if (finite >= 0) {  // the dynamic loss scale, updated in-graph (no host read per step)
    b.set_origin("amp/loss_scale");
    auto k = [&](double v) { return b.scalar(v, DType::f32); };
    ValueId g1 = b.add(good, k(1));
    ValueId grow = b.op1(OpKind::Ge, {g1, k(static_cast<double>(amp.growth_interval))});
    ValueId up = b.select(grow, b.op1(OpKind::Min, {b.mul(scale, k(2)), k(16777216.0)}), scale);
    g.outputs.push_back(b.select(finite, up, b.max(b.mul(scale, k(0.5)), k(1))));  // halve on overflow
    g.outputs.push_back(b.select(finite, b.select(grow, k(0), g1), k(0)));
    g.outputs.push_back(b.add(skipped, b.select(finite, k(0), k(1))));
  }
  // Differentiated: stop_gradient has done its job; lower it to its input (the step is HIR-free).
  return eliminate_dead_code(decompose_all(g));
}

Trainer::Trainer(const Graph& loss_fn, std::vector<Tensor> init, OptimizerConfig opt, LrSchedule sched,
                 CompileOptions copts, AmpConfig amp, DataParallel dp)
    : opt_(std::move(opt)),
      sched_(std::move(sched)),
      amp_(amp),
      step_graph_(build_train_step(loss_fn, static_cast<int>(init.size()), opt_, amp_, &amp_report_, dp)),
      model_(step_graph_, copts),
      num_params_(static_cast<int>(init.size())),
      num_outs_(static_cast<int>(loss_fn.outputs.size())),
      lr_(DType::f32, {}),
      lr_hat_(DType::f32, {}),
      eps_hat_(DType::f32, {}) {
  const int S = state_per_param(opt_);
  num_state_ = num_params_ * S;
  const int extra_in = amp_.loss_scaling() ? 3 : 0;  // loss scale, its good-step count, skipped steps
  num_data_ = static_cast<int>(step_graph_.inputs.size()) - num_params_ - num_state_ - 3 - extra_in;
  // Initial inputs: params (copied), zero state, zero data placeholders, the scalars.
  std::vector<Tensor> in;
  for (int i = 0; i < static_cast<int>(step_graph_.inputs.size()); ++i) {
    const ValueType& t = step_graph_.type(step_graph_.inputs[i]);
    if (i < num_params_) {
      RLX_CHECK(init[i].dtype() == t.dtype && init[i].shape() == static_dims(t.shape), "[train] initial parameter ", i,
                " does not match the loss graph's input ", step_graph_.value_label(step_graph_.inputs[i]));
      in.push_back(init[i].clone());
    } else if (i < first_data() + num_data_) {
      in.push_back(Tensor(t.dtype, static_dims(t.shape)));
    }
  }
  in.push_back(lr_);
  in.push_back(lr_hat_);
  in.push_back(eps_hat_);
  if (extra_in) {
    in.push_back(Tensor::from(DType::f32, {}, std::vector<float>{static_cast<float>(amp_.init_scale)}));
    in.push_back(Tensor(DType::f32, {}));
    in.push_back(Tensor(DType::f32, {}));
  }
  // New params/state (outputs after loss_fn's) feed back into the param/state inputs; with f16 AMP
  // the updated loss scale, good-step count and skipped count (the last outputs) into theirs.
  std::vector<std::pair<int, int>> fb;
  for (int k = 0; k < num_params_ + num_state_; ++k) fb.push_back({num_outs_ + k, k});
  for (int k = 0; k < extra_in; ++k) fb.push_back({num_outs_ + num_params_ + num_state_ + k, amp_input() + k});
  exe_ = &model_.executable();
  exe_->resident_feedback(fb);
  exe_->resident_upload(in);
  outs_.resize(static_cast<size_t>(num_outs_));
  params_view_.resize(static_cast<size_t>(num_params_));
  state_view_.resize(static_cast<size_t>(num_state_));
}

void Trainer::advance(const std::vector<Tensor>& data) {
  RLX_CHECK(static_cast<int>(data.size()) == num_data_, "[train] step expects ", num_data_, " data inputs, got ",
            data.size());
  for (int i = 0; i < num_data_; ++i) {
    ValueId v = step_graph_.inputs[static_cast<size_t>(first_data() + i)];
    const ValueType& t = step_graph_.type(v);
    RLX_CHECK(data[i].dtype() == t.dtype && data[i].shape() == static_dims(t.shape), "[train] data input '",
              step_graph_.values[v].name, "' is ", dtype_name(data[i].dtype()), " with ", data[i].numel(),
              " elements, expected ", dtype_name(t.dtype), shape_str(t.shape));
    exe_->resident_write(first_data() + i, data[i]);
  }
  double lr = sched_.at(opt_.lr, step_);
  double t = static_cast<double>(step_ + 1);
  double c1 = 1 - std::pow(opt_.beta1, t), c2 = 1 - std::pow(opt_.beta2, t);
  lr_.data<float>()[0] = static_cast<float>(lr);
  lr_hat_.data<float>()[0] = static_cast<float>(opt_.kind == "sgd" ? lr : lr * std::sqrt(c2) / c1);
  eps_hat_.data<float>()[0] = static_cast<float>(opt_.eps * std::sqrt(c2));
  int at = first_data() + num_data_;
  exe_->resident_write(at, lr_);
  exe_->resident_write(at + 1, lr_hat_);
  exe_->resident_write(at + 2, eps_hat_);
  exe_->resident_run(1);  // f16 AMP: the loss scale is updated in the graph, nothing is read here
  ++step_;
}

double Trainer::amp_value(int k) const {
  return amp_.loss_scaling() ? exe_->resident_read_input(amp_input() + k).get(0) : (k == 0 ? 1.0 : 0.0);
}

const std::vector<Tensor>& Trainer::step(const std::vector<Tensor>& data) {
  advance(data);
  return outputs();
}

const std::vector<Tensor>& Trainer::outputs() {
  RLX_CHECK(step_ > 0, "[train] no step has run yet");
  for (int k = 0; k < num_outs_; ++k) outs_[k] = exe_->resident_read_output(k);
  return outs_;
}

const std::vector<Tensor>& Trainer::params() const {
  for (int i = 0; i < num_params_; ++i) params_view_[i] = exe_->resident_read_input(i);
  return params_view_;
}

const std::vector<Tensor>& Trainer::state() const {
  for (int i = 0; i < num_state_; ++i) state_view_[i] = exe_->resident_read_input(num_params_ + i);
  return state_view_;
}

namespace {
std::string exact(double v) {  // hex float: round-trips bit-exactly through strtod
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}
}  // namespace

void Trainer::save(const std::string& path, const std::map<std::string, std::string>& extra) const {
  std::vector<std::pair<std::string, Tensor>> ts;
  int S = state_per_param(opt_);
  const auto& P = params();
  const auto& St = state();
  for (int i = 0; i < num_params_; ++i) ts.push_back({"param." + std::to_string(i), P[i]});
  for (int i = 0; i < num_params_; ++i)
    for (int j = 0; j < S; ++j) ts.push_back({"state." + std::to_string(i) + "." + std::to_string(j), St[i * S + j]});
  std::map<std::string, std::string> meta = extra;
  meta["step"] = std::to_string(step_);
  meta["optimizer"] = opt_.kind;
  meta["format"] = "rlx-train-v1";
  if (amp_.loss_scaling()) {
    meta["amp"] = dtype_name(amp_.dtype);
    meta["loss_scale"] = exact(amp_value(0));
    meta["loss_scale_good_steps"] = std::to_string(static_cast<int64_t>(amp_value(1)));
    meta["skipped_steps"] = std::to_string(static_cast<int64_t>(amp_value(2)));
  }
  write_safetensors(path, ts, meta);
}

std::map<std::string, std::string> Trainer::load(const std::string& path) {
  SafeTensors file = SafeTensors::open(path);
  int S = state_per_param(opt_);
  auto meta = file.metadata();
  auto int_meta = [&](const std::string& key) -> int64_t {
    auto it = meta.find(key);
    RLX_CHECK(it != meta.end(), "[checkpoint] ", path, ": no '", key, "' in the metadata");
    try {
      size_t used = 0;
      int64_t v = std::stoll(it->second, &used);
      if (used == it->second.size()) return v;
    } catch (const std::exception&) {
    }
    fail("[checkpoint] ", path, ": ", key, " '", it->second, "' is not an integer");
  };
  auto opt = meta.find("optimizer");
  RLX_CHECK(opt == meta.end() || opt->second == opt_.kind, "[checkpoint] ", path, ": saved with optimizer '",
            opt->second, "', this trainer uses '", opt_.kind, "'");
  int64_t step = int_meta("step");
  double scale = 1;
  int64_t good = 0, skipped = 0;
  if (amp_.loss_scaling()) {
    auto it = meta.find("loss_scale");
    RLX_CHECK(it != meta.end(), "[checkpoint] ", path, ": no 'loss_scale' in the metadata (saved without f16 amp?)");
    char* end = nullptr;
    scale = std::strtod(it->second.c_str(), &end);
    RLX_CHECK(end && *end == 0 && scale >= 1, "[checkpoint] ", path, ": bad loss_scale '", it->second, "'");
    good = int_meta("loss_scale_good_steps");
    skipped = int_meta("skipped_steps");
  }
  auto find = [&](const std::string& name, int input) {
    RLX_CHECK(file.has(name), "[checkpoint] ", path, ": missing tensor '", name, "'");
    Tensor t = file.get(name);
    const ValueType& want = step_graph_.type(step_graph_.inputs[static_cast<size_t>(input)]);
    RLX_CHECK(t.dtype() == want.dtype && t.shape() == static_dims(want.shape), "[checkpoint] ", path, ": tensor '",
              name, "' has the wrong dtype/shape");
    return t;
  };
  std::vector<Tensor> ts;  // all checked before anything is written
  for (int i = 0; i < num_params_; ++i) ts.push_back(find("param." + std::to_string(i), i));
  for (int i = 0; i < num_params_; ++i)
    for (int j = 0; j < S; ++j)
      ts.push_back(find("state." + std::to_string(i) + "." + std::to_string(j), num_params_ + i * S + j));
  // Cloned: the file's tensors wrap a read-only mapping, and a resident input slot is written by
  // later steps (the host default swaps it with an output buffer).
  for (int k = 0; k < static_cast<int>(ts.size()); ++k) exe_->resident_write(k, ts[k].clone());
  step_ = step;
  if (amp_.loss_scaling()) {
    int at = amp_input();
    exe_->resident_write(at, Tensor::from(DType::f32, {}, std::vector<float>{static_cast<float>(scale)}));
    exe_->resident_write(at + 1, Tensor::from(DType::f32, {}, std::vector<float>{static_cast<float>(good)}));
    exe_->resident_write(at + 2, Tensor::from(DType::f32, {}, std::vector<float>{static_cast<float>(skipped)}));
  }
  return meta;
}

}  // namespace rlx::train
