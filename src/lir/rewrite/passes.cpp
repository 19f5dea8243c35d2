// The table of LIR passes and the pipeline that runs a backend's list of them (pass.h).
#include <algorithm>

#include "lir/plan.h"
#include "lir/rewrite/pass.h"
#include "rlx/error.h"

namespace rlx {

namespace {
int reorder_row_regions(LirProgram& p, const LirAbsorbs& a) {
  return a.backend_pass ? a.backend_pass("reorder-row-regions", p) : 0;
}
int grid_layout(LirProgram& p, const LirAbsorbs& a) { return a.backend_pass ? a.backend_pass("grid-layout", p) : 0; }
}  // namespace

const std::vector<LirPass>& lir_passes() {
  static const std::vector<LirPass> t = {
      {"merge-qkv",
       "three Linears of one input split into heads for an Attention -> one Linear [3H,K]; the attention reads heads "
       "in place (cpu_qkv)",
       pass_merge_qkv},
      {"fold-attention-transposes",
       "Transpose(0,2,1,3) around an Attention -> attention reads/writes [B,S,H,D] (cuda_*_bshd)",
       pass_fold_attention_transposes},
      {"matmul-into-linear",
       "MatMul(x, constant W[K,N]) [-> Add(constant bias[N])] -> Linear(x, W^T [, bias]) (ONNX-exported Linears)",
       pass_matmul_into_linear},
      {"residual-into-linear", "Linear -> Add(y, r) -> one Linear whose epilogue adds r (cpu_res)",
       pass_residual_into_linear},
      {"layernorm-into-linear",
       "Linear+residual -> LayerNorm(last axis) -> the Linear normalizes each finished row block (cpu_ln_*)",
       pass_layernorm_into_linear},
      {"batch-sibling-linears",
       "Linears of one input with constant weights of one shape -> one batched GEMM (cuda_siblings)",
       pass_batch_sibling_linears},
      {"train-epilogues",
       "2-D f32 dot_general -> bias(+ReLU) / ReLU mask / SGD update -> the GEMM's epilogue (cpu_epi)",
       pass_train_epilogues},
      {"bias-grad-into-gemm",
       "reduce_sum(dH, axis 0) beside dW = h^T.dH -> the GEMM's second output (cpu_colsum)",
       pass_bias_grad_into_gemm},
      {"bias-into-gemm", "dot_general/matmul -> Add(bias row) [-> ReLU] -> the GEMM's bias epilogue (cuda_bias)",
       pass_bias_into_gemm},
      {"layernorm-into-gemm", "Linear -> residual LayerNorm -> one GEMM with a norm epilogue (cuda_ln)",
       pass_layernorm_into_gemm},
      {"residual-into-norm", "Add(a, b) -> LayerNorm/RmsNorm -> the norm reads a and b (cuda_residual)",
       pass_residual_into_norm},
      {"embedding-norm", "embedding -> add chain -> LayerNorm -> one LayerNorm kernel (cuda_embed)",
       pass_embedding_norm},
      {"row-regions",
       "row-wise kernels around a last-axis reduction over [R,C] -> one row kernel (cpu_rows)", pass_row_regions},
      {"conv-epilogue",
       "conv -> per-channel affine / residual / clamp region -> the conv's epilogue (cpu_epi)", pass_conv_epilogue},
      {"concat-in-place",
       "concatenate of contiguous, once-read operands -> the planner places them inside its output "
       "(lir_concat_in_place; nothing is copied)",
       pass_concat_in_place},
      {"pool-divide",
       "sum reduce_window -> div by a constant (AveragePool's count) -> one pool dividing each plane (cpu_pool_div)",
       pass_pool_divide},
      {"reorder-row-regions", "backend launch planning: row-local kernels of a run ahead of its cross-row tail",
       reorder_row_regions},
      {"grid-layout", "backend layout: every arena buffer its own bytes and sinks last, for one persistent launch",
       grid_layout, true},
  };
  return t;
}

const LirPass* find_lir_pass(const std::string& name) {
  for (auto& p : lir_passes())
    if (name == p.name) return &p;
  return nullptr;
}

void schedule_lir(LirProgram& p, const LirSchedule& s, const LirPassObserver& after) {
  std::vector<const LirPass*> before_plan, on_plan;
  for (auto& n : s.passes) {
    const LirPass* pass = find_lir_pass(n);
    if (!pass) {
      std::string known;
      for (auto& q : lir_passes()) known += (known.empty() ? "" : ", ") + std::string(q.name);
      fail("[lir] unknown pass '", n, "' (known: ", known, ")");
    }
    (pass->after_plan ? on_plan : before_plan).push_back(pass);
  }
  p.passes.clear();
  auto run = [&](const LirPass* pass) {
    int n = pass->run(p, s.absorbs);
    p.passes.emplace_back(pass->name, n);
    if (after) after(pass->name, n, p);
  };
  for (auto* pass : before_plan) run(pass);
  plan_memory(p);
  for (auto* pass : on_plan) run(pass);
  p.scheduled = true;
}

}  // namespace rlx
