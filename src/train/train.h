// Training: optimizers and LR schedules as graph ops, a whole training step (forward + backward +
// update) compiled into ONE graph, state kept in fixed buffers across steps, safetensors checkpoints.
#pragma once
#include <cstdint>
#include <map>
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
// is skipped in-graph (params/state pass through); the scale halves then and doubles after
// `growth_interval` finite steps, also in-graph (build_train_step).
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
// With amp.loss_scaling(): three more f32 scalar inputs after eps_hat, "loss_scale",
// "loss_scale_good_steps", "skipped_steps", and their updated values as the last three outputs:
// when a gradient is not finite the update is skipped (params/state pass through), the scale halves
// (not below 1), the good count resets and skipped grows by 1; after growth_interval finite steps
// in a row the scale doubles (at most 2^24).
// Data parallelism: each of `ranks` processes (the current communicator's world) steps on its own
// share of the batch, and the step graph averages the gradients over the ranks with all_reduce(sum)
// in buckets: the gradients, last layer first (the order the backward pass produces them), are
// flattened and concatenated up to about `bucket_bytes` per collective, so a model with many small
// parameters pays a few collectives, not one per tensor. loss_fn's output 0 is averaged over the
// ranks and the other outputs (counts) summed, so every rank reports the global batch's values and
// applies the same update.
struct DataParallel {
  int ranks = 1;
  int64_t bucket_bytes = int64_t{4} << 20;
};
// Emits the bucketed all-reduce of `grads` (replaced by their rank means) into b's graph; returns
// the number of collectives (buckets). Used by build_train_step when dp.ranks > 1.
int emit_gradient_all_reduce(Builder& b, std::vector<ValueId>& grads, const DataParallel& dp);

Graph build_train_step(const Graph& loss_fn, int num_params, const OptimizerConfig& c, const AmpConfig& amp = {},
                       AmpReport* report = nullptr, const DataParallel& dp = {});

// Runs compiled training steps. Parameters and optimizer state stay resident in the step's
// executable (Executable's resident API, src/runtime/backend.h): after each step the new
// parameters/state become the next step's inputs inside the executable (on the host: two sets of
// buffers swapped, no copy; on a GPU backend that implements the API: device memory, nothing
// crosses the host). Per step only the data batch and the lr scalars go in; nothing comes back
// unless asked (outputs(), params(), state(), loss_scale(), save()); with f16 AMP the dynamic loss
// scale is updated inside the step graph too.
class Trainer {
 public:
  Trainer(const Graph& loss_fn, std::vector<Tensor> init_params, OptimizerConfig opt, LrSchedule sched = {},
          CompileOptions copts = {}, AmpConfig amp = {}, DataParallel dp = {});
  // One step on a batch (data inputs of loss_fn in order), then outputs().
  const std::vector<Tensor>& step(const std::vector<Tensor>& data);
  // One step, reading nothing back (read the loss every k steps with outputs()).
  void advance(const std::vector<Tensor>& data);
  // loss_fn's outputs of the last step (read on call; on the host views of buffers the next step
  // reuses: copy what you keep).
  const std::vector<Tensor>& outputs();
  // The current parameters / optimizer state (read on call; same lifetime as outputs()).
  const std::vector<Tensor>& params() const;
  const std::vector<Tensor>& state() const;
  int64_t step_count() const { return step_; }
  double current_lr() const { return sched_.at(opt_.lr, step_); }
  const Graph& step_graph() const { return step_graph_; }
  CompiledModel& compiled() { return model_; }
  const AmpReport& amp_report() const { return amp_report_; }
  // f16 AMP: the dynamic loss scale and the number of skipped (overflowing) steps, read from the
  // executable on call (they live in the step graph); 1 and 0 without loss scaling.
  double loss_scale() const { return amp_value(0); }
  int64_t skipped_steps() const { return static_cast<int64_t>(amp_value(2)); }
  // Checkpoints: params "param.<i>", state "state.<i>.<j>", metadata: step, optimizer, and with f16
  // loss scaling the scale, its growth counter and the skipped-step count. Loading restores all
  // of it, so training continues bit-identically (params, state, lr schedule, Adam bias
  // correction, loss scale). `extra` adds metadata entries of the caller's (a training loop's
  // epoch, data position and shuffle RNG: tools/train_mnist.cpp); load returns all metadata.
  void save(const std::string& path, const std::map<std::string, std::string>& extra = {}) const;
  std::map<std::string, std::string> load(const std::string& path);

 private:
  OptimizerConfig opt_;
  LrSchedule sched_;
  AmpConfig amp_;
  AmpReport amp_report_;
  Graph step_graph_;
  CompiledModel model_;
  Executable* exe_ = nullptr;
  int num_params_, num_outs_, num_state_, num_data_;
  int64_t step_ = 0;
  Tensor lr_, lr_hat_, eps_hat_;
  std::vector<Tensor> outs_;
  mutable std::vector<Tensor> params_view_, state_view_;
  int first_data() const { return num_params_ + num_state_; }
  int amp_input() const { return first_data() + num_data_ + 3; }  // f16: scale, good steps, skipped
  double amp_value(int k) const;
};

}  // namespace rlx::train
