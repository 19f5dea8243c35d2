// Pipeline-parallel training: a loss graph split into consecutive stages (one per rank, balanced by
// FLOPs at cuts where few bytes cross), each micro-batch's activations sent forward and their
// cotangents sent back with the communicator's send/recv, under the GPipe or the 1F1B schedule.
// Gradients are summed over the micro-batches and averaged, so a step equals one step of
// train::Trainer on the whole batch up to float summation order. docs/distributed.md has the
// schedules and what each rank holds.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/replica_groups.h"
#include "rlx/graph.h"
#include "rlx/session.h"
#include "rlx/tensor.h"
#include "train/train.h"

namespace rlx::train {

enum class PipelineSchedule { GPipe, OneFOneB };
PipelineSchedule parse_pipeline_schedule(const std::string& s);  // "gpipe" | "1f1b"
const char* pipeline_schedule_name(PipelineSchedule s);

// One stage of a split loss graph (MIR, as the autodiff sees it).
struct PipelineStage {
  Graph fwd;                 // inputs: params, then activations in, then data; outputs: activations out
                             // (the last stage: the loss graph's outputs)
  std::vector<int> params;   // indices of loss_fn's parameter inputs this stage owns
  std::vector<int> data;     // indices of loss_fn's data inputs this stage reads
  int acts_in = 0, acts_out = 0;
  int64_t nodes = 0;
  double flops = 0;          // estimated: 2·M·N·K per contraction, one per element elsewhere
  int64_t bytes_out = 0;     // activation bytes sent to the next stage per micro-batch
};

// Splits loss_fn (inputs: num_params parameters, then data; output 0 the scalar loss) into
// `stages` consecutive parts. A parameter used by two stages is an error (tied weights are not
// split); constants are copied into every stage that reads them. Values that skip a stage are
// passed through it.
std::vector<PipelineStage> split_pipeline(const Graph& loss_fn, int num_params, int stages);
std::string pipeline_table(const std::vector<PipelineStage>& stages);  // one row per stage

// A DP×PP mesh: `data_parallel` replicas of the pipeline; world rank = replica·stages + stage, so
// replica d's stages are ranks [d·S, (d+1)·S) and stage s's replicas (the data-parallel group that
// averages its gradients) are ranks s, S+s, 2S+s, ...
struct PipelineConfig {
  int microbatches = 4;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  int data_parallel = 1;
};

// One rank's stage of a pipeline over the current communicator (dist::current(): ranks / data_parallel
// stages, see PipelineConfig). `loss_fn` is built for ONE micro-batch; step() takes the whole batch
// (micro-batch × microbatches × data_parallel rows along axis 0 of every data input; replica d steps
// on rows [d·M·b, (d+1)·M·b)) on every rank and returns loss_fn's outputs on every rank: output 0
// averaged over the micro-batches and replicas, the others (counts) summed. Each stage's gradient
// is all-reduced over its replicas before the update, so every replica stays the same model.
// `init_params` are all of loss_fn's parameters (each rank keeps its stage's).
class PipelineTrainer {
 public:
  PipelineTrainer(const Graph& loss_fn, const std::vector<Tensor>& init_params, OptimizerConfig opt,
                  PipelineConfig cfg, LrSchedule sched = {}, CompileOptions copts = {});
  std::vector<Tensor> step(const std::vector<Tensor>& data);
  int stage() const { return stage_; }
  int replica() const { return replica_; }
  int stages() const { return static_cast<int>(plan_.size()); }
  const std::vector<PipelineStage>& plan() const { return plan_; }
  // This stage's parameters, in loss_fn order (their indices: plan()[stage()].params).
  const std::vector<Tensor>& params() const { return params_; }
  int64_t step_count() const { return step_; }
  // The order this rank ran its micro-batches in the last step: "F0 F1 B0 ...".
  const std::string& last_order() const { return order_; }

 private:
  void forward(int m, const std::vector<std::vector<Tensor>>& micro);
  void backward(int m, const std::vector<std::vector<Tensor>>& micro);
  void all_reduce_gradients();
  std::vector<Tensor> inputs_of(int m, const std::vector<std::vector<Tensor>>& micro) const;

  OptimizerConfig opt_;
  PipelineConfig cfg_;
  LrSchedule sched_;
  std::vector<PipelineStage> plan_;
  int stage_ = 0, replica_ = 0, num_outputs_ = 0, num_params_ = 0, num_data_ = 0;
  int peer(int stage) const { return replica_ * stages() + stage; }  // world rank of a stage of this replica
  std::vector<DType> out_dtypes_;
  std::vector<int> float_in_;             // which activations-in carry a gradient back
  std::vector<ValueType> out_types_;      // activations out (or loss_fn outputs on the last stage)
  std::vector<CompiledModel> fwd_, bwd_, update_;  // at most one each
  ReplicaGroups pipeline_groups_, replica_groups_;  // the mesh: ranks of one pipeline / of one stage
  std::vector<Tensor> params_, state_, grads_;
  std::vector<std::vector<Tensor>> stash_;  // activations in, per micro-batch
  std::vector<double> outs_sum_;
  int64_t step_ = 0;
  std::string order_;
};

}  // namespace rlx::train
