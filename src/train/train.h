// Training: optimizers and LR schedules as graph ops, a whole training step (forward + backward +
// update) compiled into ONE graph, state kept in fixed buffers across steps, safetensors checkpoints.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "rlx/graph.h"
#include "rlx/session.h"
#include "rlx/tensor.h"

namespace rlx::train {

struct OptimizerConfig {
  std::string kind = "sgd";  // sgd | adam | adamw
  double lr = 0.1;
  double momentum = 0;       // sgd
  bool nesterov = false;     // sgd
  double weight_decay = 0;   // sgd/adam: L2 added to the gradient; adamw: decoupled
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam/adamw
};
int state_per_param(const OptimizerConfig& c);  // 0 (plain sgd), 1 (momentum), 2 (adam/adamw)

struct LrSchedule {
  std::string kind = "constant";  // constant | step | cosine | linear
  int64_t warmup = 0;             // linear warm-up steps (all kinds)
  int64_t total = 0;              // cosine/linear: steps to reach min_lr
  int64_t step_size = 1000;       // step: decay every step_size steps by gamma
  double gamma = 0.1;
  double min_lr = 0;
  double at(double base, int64_t step) const;  // lr used by step `step` (0-based)
};

// Emits the update of one parameter into b's graph. `lr`, `lr_hat`, `eps_hat` are f32 scalars
// (adam bias correction is folded into lr_hat/eps_hat by the host). Returns new param, new state.
std::vector<ValueId> emit_update(Builder& b, const OptimizerConfig& c, ValueId p, ValueId g,
                                 const std::vector<ValueId>& state, ValueId lr, ValueId lr_hat, ValueId eps_hat);

// Mixed precision (amp.cpp). `dtype` f32 = off; bf16/f16: contractions run in that dtype with f32
// master weights. f16 adds dynamic loss scaling in the step graph: the loss cotangent is seeded with
// the scale (a graph input), gradients are unscaled, and when any gradient is not finite the update
// is skipped in-graph (params/state pass through) and the step reports it; the Trainer halves the
// scale then, and doubles it after `growth_interval` finite steps.
struct AmpConfig {
  DType dtype = DType::f32;
  bool loss_scaling() const { return dtype == DType::f16; }
  double init_scale = 65536.0;
  int64_t growth_interval = 200;
};
struct AmpChoice {
  std::string op, node;
  DType dtype;  // the dtype the op computes in
  std::string why;
};
struct AmpReport {
  DType low = DType::f32;
  std::vector<AmpChoice> choices;
  std::string table() const;  // grouped by op and dtype
};
bool amp_runs_low(OpKind op);  // the policy: dot_general and conv
// The "amp" pass over a HIR-free graph (see AmpConfig); records each node's choice in `report`.
Graph amp_pass(const Graph& f, DType low, AmpReport* report = nullptr);

// The step graph of `loss_fn` (inputs: num_params parameters, then data; output 0: the scalar loss,
// further outputs carried through, e.g. a correct-count). Step inputs: params, optimizer state
// (state_per_param per parameter, parameter-major), data, lr, lr_hat, eps_hat. Step outputs: the
// loss_fn outputs, new params, new state.
// With amp.loss_scaling(): one more input "loss_scale" (after eps_hat) and one more output (last):
// 1 when every gradient was finite and the update was applied, else 0.
Graph build_train_step(const Graph& loss_fn, int num_params, const OptimizerConfig& c, const AmpConfig& amp = {},
                       AmpReport* report = nullptr);

// Runs compiled training steps. Parameters and optimizer state live in two preallocated sets of
// tensors; each step reads one set and writes the other in place (CompiledModel::run_into), so a
// step allocates no state memory and nothing crosses the host except what the caller reads.
class Trainer {
 public:
  Trainer(const Graph& loss_fn, std::vector<Tensor> init_params, OptimizerConfig opt, LrSchedule sched = {},
          CompileOptions copts = {}, AmpConfig amp = {});
  // One step on a batch (data inputs of loss_fn in order). Returns loss_fn's outputs (views of
  // buffers reused by the next step: copy what you keep).
  const std::vector<Tensor>& step(const std::vector<Tensor>& data);
  const std::vector<Tensor>& params() const { return sets_[cur_].params; }
  const std::vector<Tensor>& state() const { return sets_[cur_].state; }
  int64_t step_count() const { return step_; }
  double current_lr() const { return sched_.at(opt_.lr, step_); }
  const Graph& step_graph() const { return step_graph_; }
  CompiledModel& compiled() { return model_; }
  const AmpReport& amp_report() const { return amp_report_; }
  double loss_scale() const { return scale_; }
  int64_t skipped_steps() const { return skipped_; }
  // Checkpoints: params "param.<i>", state "state.<i>.<j>", metadata step/optimizer. Loading
  // restores everything, so training continues bit-identically.
  void save(const std::string& path) const;
  void load(const std::string& path);

 private:
  struct Set {
    std::vector<Tensor> params, state, outs;  // outs: loss_fn outputs
  };
  OptimizerConfig opt_;
  LrSchedule sched_;
  AmpConfig amp_;
  AmpReport amp_report_;
  Graph step_graph_;
  CompiledModel model_;
  int num_params_, num_outs_;
  Set sets_[2];
  int cur_ = 0;
  int64_t step_ = 0;
  Tensor lr_, lr_hat_, eps_hat_;
  Tensor scale_in_, finite_;  // amp f16: loss-scale input, finite-gradients flag output
  double scale_ = 1;
  int64_t good_ = 0, skipped_ = 0;
  std::vector<Tensor> in_[2], out_[2];
};

}  // namespace rlx::train
