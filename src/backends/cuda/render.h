// The CUDA C renderer: turns LIR kernels into self-contained CUDA C translation units (no headers,
// so NVRTC needs no include path) specialized on their shapes, and says how to launch them.
// Kept self-contained here because src/codegen's shared C-like base did not exist yet when this
// backend was written; the expression rules (c_type, load/store, op_expr) are the parts to lift.
#pragma once
#include <string>
#include <vector>

#include "rlx/lir.h"

namespace rlx::cuda {

struct KernelSource {
  std::string code;               // full translation unit; entry point `rlx_kernel`
  unsigned grid = 1, block = 256;  // 1-D launch
  unsigned grid_y = 1;
  unsigned smem = 0;               // dynamic shared memory bytes
  int num_params = 0;              // pointer parameters: inputs in order, then outputs
  size_t scratch_bytes = 0;        // > 0: one more parameter, a zero-filled device scratch block of
                                   // this size that the kernel leaves zero-filled again
};

// Generated (fused elementwise) kernel: body's inputs broadcast (numpy rules) to `out`.
KernelSource render_fused(const Graph& body, const ValueType& out);
// A library kernel other than GEMM; `in`/`out` are the buffer types in kernel order.
// Returns false (leaving `ks` untouched) when this renderer has no kernel for it. `sm_count` (the
// device's multiprocessors) picks launch shapes that fill the GPU.
bool render_library(const LirKernel& k, const std::vector<ValueType>& in, const std::vector<ValueType>& out,
                    KernelSource* ks, int64_t sm_count = 132);
// In-place activation ("gelu" = erf form, "silu") over a GEMM output that cuBLASLt's epilogues
// cannot compute exactly; f32 math, rounded once, 16-byte accesses when the size allows.
KernelSource render_activation(const std::string& act, const ValueType& t);
// Merged launches (executable.cpp's merge-launches): several LIR kernels in one launch.
//  sequential: one block of kSequentialThreads threads runs the parts in schedule order with a block
//    barrier between them (a region of small kernels, e.g. a softmax-cross-entropy loss head with
//    its row/column reductions); reductions are rendered for the whole block.
//  concurrent: independent elementwise/index kernels (no part reads what another writes), each on
//    its own range of blocks (e.g. the SGD updates of every parameter).
// Parameters: each part's inputs then its output, parts in order.
//  rows: every part maps row r of its output (leading dim `rows`) to row r of its arena inputs
//    (row-wise reductions, elementwise, broadcasts along the row): blocks of kRowThreads threads
//    each run all parts, in order, on rows_per_block rows (a loss head's per-row work spread
//    over the GPU; the cross-row reductions follow in a sequential launch).
constexpr int kSequentialThreads = 1024, kRowThreads = 256;
enum class MergeMode { Sequential, Concurrent, Rows };
// The launch kind in labels and profiles: "region", "side-by-side" or "rows".
inline const char* merge_mode_name(MergeMode m) {
  return m == MergeMode::Rows ? "rows" : m == MergeMode::Sequential ? "region" : "side-by-side";
}
// Rows per block of a row launch whose widest part has `max_row_elems` output elements per row
// (with a tail: at most kMaxTailBlocks blocks, so few partials are combined).
constexpr int64_t kMaxTailBlocks = 64;
int64_t rows_per_block(int64_t max_row_elems, int64_t rows, bool tail);
struct MergePart {
  const LirKernel* k = nullptr;
  std::vector<ValueType> in, out;
  // sequential/rows: per argument (inputs, then the output), a byte offset in the launch's shared
  // memory where that buffer lives instead of its global pointer (a buffer made and used only
  // inside the launch; in a row launch each block holds its own rows), or -1. Empty = all global.
  std::vector<int64_t> smem;
  // rows: a part after the row parts (the cross-row kernels). A reduction over the rows becomes
  // per-block partials in the scratch block, finished by the block that ends last, which then runs
  // the other tail parts (small) on its own and re-arms the scratch counter.
  bool tail = false;
};
// Whether a kernel can be a row launch's tail reduction (float sum/max/min over the leading dim
// `rows` of a 1-D/2-D input: all axes, or axis 0 only with at most kRowThreads columns).
bool tail_reduction(const LirKernel& k, const ValueType& in, int64_t rows);
bool mergeable(const LirKernel& k, const std::vector<ValueType>& in, const std::vector<ValueType>& out, bool sequential);
KernelSource render_merged(const std::vector<MergePart>& parts, MergeMode mode, int64_t rows = 0, int64_t sm_count = 132);
// The CUDA C spelling of a dtype's storage.
std::string c_type(DType t);

}  // namespace rlx::cuda
