// LIR rewrites as named passes, and the pipeline that runs a backend's list of them.
// Every rewrite of a lowered schedule lives in this folder (one table, passes.cpp); a backend only
// says which passes it wants, in which order (LirSchedule), and answers the questions a pass asks
// about what its library kernels can absorb (LirAbsorbs). The session runs
//   lower_to_lir -> the backend's passes -> plan_memory (once) -> the backend's after-plan passes
// so the schedule `rlx compile --dump=lir` prints is the one the executable runs.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "rlx/lir.h"

namespace rlx {

// Questions a pass asks the backend; an unset hook answers "no" (the pass leaves such kernels).
struct LirAbsorbs {
  // conv-epilogue: does the conv kernel run on the backend's fused conv at all, and does `body`
  // (conv output as input slot -1, other inputs the kernel's input slots) fit its epilogue form?
  // Returns the epilogue's profile label.
  std::function<bool(const LirKernel& conv, const LirProgram& p)> conv;
  std::function<std::optional<std::string>(const Graph& body, const std::vector<int>& slots, const Shape& y)>
      conv_epilogue;
  // row-regions: does the backend's row kernel cover this body over [R, C]?
  std::function<bool(const Graph& body, int64_t R, int64_t C)> row_region;
  // bias-into-gemm: can the GEMM kernel `g` (input types `in`, output `out`) add a row bias of
  // length out's last dim in its epilogue?
  std::function<bool(const LirKernel& g, const std::vector<ValueType>& in, const ValueType& out)> gemm_bias;
  // layernorm-into-gemm: can Linear `g` finish with residual add + LayerNorm (eps) over its rows?
  std::function<bool(const LirKernel& g, const std::vector<ValueType>& in, const ValueType& out, double eps)>
      gemm_layernorm;
  // Backend passes that are launch planning rather than pattern rewrites (cuda: reorder-row-regions,
  // grid-layout): named here so they run, print and report like the shared ones.
  std::function<int(const std::string& pass, LirProgram& p)> backend_pass;
};

// A pass returns how many rewrites it made (0: the program is unchanged). Passes mark the kernels
// they fold away and drop them (lir_drop); none plans memory.
using LirPassFn = int (*)(LirProgram& p, const LirAbsorbs& a);
struct LirPass {
  const char* name;
  const char* summary;  // one line: what it turns into what
  LirPassFn run;
  bool after_plan = false;  // runs on the planned arena (a layout pass)
};
// Every pass, in no particular order (passes.cpp).
const std::vector<LirPass>& lir_passes();
const LirPass* find_lir_pass(const std::string& name);

// What a backend runs on a lowered program.
struct LirSchedule {
  std::vector<std::string> passes;  // in order; after_plan passes run after plan_memory
  LirAbsorbs absorbs;
  // A backend that runs kernels on more than one engine (oneapi: oneDNN or the cpu kernels) says
  // where each kernel of a scheduled program runs, as one line of the compile report.
  std::function<std::string(const LirProgram& p)> placement;
};

// Runs the schedule on a program lowered without a plan (lower_to_lir(g, fuse, false)): its
// passes, then plan_memory, then its after-plan passes. Records every pass and its count in
// p.passes and sets p.scheduled. `after(pass, changes, p)` is called after each pass (for
// --dump-after); the program it sees is not planned before plan_memory.
using LirPassObserver = std::function<void(const std::string& pass, int changes, const LirProgram& p)>;
void schedule_lir(LirProgram& p, const LirSchedule& s, const LirPassObserver& after = {});

// The passes (registered by name in passes.cpp's table) -- one function per pass. Each comment is
// the pass's summary; see the file named for the details.
int pass_merge_qkv(LirProgram& p, const LirAbsorbs& a);                // attention.cpp
int pass_fold_attention_transposes(LirProgram& p, const LirAbsorbs& a);  // attention.cpp
int pass_matmul_into_linear(LirProgram& p, const LirAbsorbs& a);       // linear.cpp
int pass_residual_into_linear(LirProgram& p, const LirAbsorbs& a);     // linear.cpp
int pass_layernorm_into_linear(LirProgram& p, const LirAbsorbs& a);    // linear.cpp
int pass_batch_sibling_linears(LirProgram& p, const LirAbsorbs& a);    // linear.cpp
int pass_train_epilogues(LirProgram& p, const LirAbsorbs& a);          // gemm_epilogue.cpp
int pass_bias_grad_into_gemm(LirProgram& p, const LirAbsorbs& a);      // gemm_epilogue.cpp
int pass_bias_into_gemm(LirProgram& p, const LirAbsorbs& a);           // gemm_epilogue.cpp
int pass_layernorm_into_gemm(LirProgram& p, const LirAbsorbs& a);      // gemm_epilogue.cpp
int pass_residual_into_norm(LirProgram& p, const LirAbsorbs& a);       // norm.cpp
int pass_embedding_norm(LirProgram& p, const LirAbsorbs& a);           // norm.cpp
int pass_concat_in_place(LirProgram& p, const LirAbsorbs& a);         // concat.cpp
int pass_pool_divide(LirProgram& p, const LirAbsorbs& a);             // pool.cpp
int pass_row_regions(LirProgram& p, const LirAbsorbs& a);              // rows.cpp
int pass_conv_epilogue(LirProgram& p, const LirAbsorbs& a);            // conv.cpp

}  // namespace rlx
