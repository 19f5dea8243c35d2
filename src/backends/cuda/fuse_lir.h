// The cuda backend's LIR schedule (fuse_lir.cpp): the shared passes it runs (src/lir/rewrite) and
// its own launch-planning passes (reorder-row-regions, grid-layout); and the merge-launches planner
// that groups the schedule's kernels into merged launches (rendered by render_merged.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <set>
#include <vector>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/render.h"
#include "backends/cuda/render_grid.h"
#include "lir/rewrite/pass.h"
#include "rlx/lir.h"

namespace rlx::cuda {

// The backend's LIR schedule (src/lir/rewrite passes, in order; RLX_CUDA_NO_FOLD=1: none):
// fold-attention-transposes, residual-into-norm, batch-sibling-linears (RLX_CUDA_BATCH_LINEARS=0:
// off), bias-into-gemm, layernorm-into-gemm (both asking plan_gemm), embedding-norm
// (RLX_CUDA_EMBED_NORM=0: off), then the launch planning below: reorder-row-regions and, after
// plan_memory, grid-layout.
LirSchedule cuda_schedule();

// grid-layout (the last rewrite): when the schedule can run as one persistent
// launch (MergePlanner::grid_parts), every arena buffer gets its own bytes (no reuse) and sink
// kernels (output read by no kernel) move to the end of the schedule. Refused (program untouched,
// returns 0) when that arena would exceed `max_arena` bytes; then grid_parts() stays empty.
constexpr int64_t kMaxGridArena = int64_t{256} << 20;
int grid_layout(LirProgram& p, int64_t max_arena = kMaxGridArena);
// No two arena buffers of `p` overlap (grid_layout's layout, or a plan that happened to reuse nothing).
bool arena_disjoint(const LirProgram& p);

// merge-launches: consecutive kernels that the renderer can run as parts of one launch become one
// step: a run of small kernels (every buffer <= kSmallElems elements; reductions included) runs
// in one block, part after part (a loss head: ~20 launches -> 1); a run of independent
// elementwise kernels of any size runs side by side (the SGD updates: 4 -> 1); a run of row-wise
// kernels runs as a row launch over many blocks with the cross-row reductions as its tail.
// RLX_CUDA_MERGE=0 launches every kernel on its own. `addr(b)` is buffer b's device address (or
// any address with the same overlaps), for the independence test of side-by-side parts.
struct MergePlanner {
  static constexpr int64_t kSmallElems = 16384;
  static constexpr size_t kMaxParts = 64;
  static constexpr int64_t kRowElems = int64_t{1} << 22;  // a row launch spreads over blocks: larger runs
  // Sequential/rows: an arena buffer written and read only inside the launch lives in its shared
  // memory, up to this many bytes.
  static constexpr int64_t kSmemBudget = 200 << 10;
  const LirProgram& p;
  std::function<uint64_t(int)> addr;

  struct Launch {
    std::vector<size_t> ks;  // LIR kernels, in launch order
    MergeMode mode = MergeMode::Sequential;
    int64_t rows = 0;
    bool reordered = false;  // part of a row split (reorder-row-regions changed the schedule there)
    size_t tail = 0;         // rows: the last `tail` kernels are the launch's tail (MergePart::tail)
  };
  // The launches of the whole schedule, in order (one-kernel launches included).
  std::vector<Launch> plan(bool merge, bool rows) const;
  // The parts of a merged launch (shared-memory offsets planned by liveness inside the launch; a
  // row launch's blocks hold their own rows only); the rest stays global.
  std::vector<MergePart> parts(const std::vector<size_t>& ks, MergeMode mode, int64_t rows, size_t tail = 0) const;

  std::vector<ValueType> types(const std::vector<int>& ids) const;
  static bool is_reduction(const LirKernel& k);
  bool mergeable_at(size_t i, bool sequential, int64_t limit = kSmallElems) const;
  size_t row_run(size_t i) const;
  // A row launch with a tail starting at kernel i (row kernels L, then the cross-row tail X):
  // the number of kernels it covers, or 0.
  size_t row_launch_at(size_t i, std::vector<size_t>* L, std::vector<size_t>* X, int64_t* R, bool check_hazards) const;
  bool overlaps(int a, int b) const;
  size_t sequential_run(size_t i) const;
  size_t concurrent_run(size_t i) const;
  // row-split: a sequential run whose kernels mostly work row by row (leading dim R) runs as a row
  // launch over many blocks (L: every kernel that maps row r to row r and needs nothing cross-row)
  // followed by a sequential launch of the rest (X: the cross-row reductions and what follows
  // them). Refused when moving L ahead of X would overwrite a buffer X still reads (arena reuse).
  bool row_local(const LirKernel& k, int64_t R, const std::set<int>& made_in_l) const;
  bool split_rows(size_t i, size_t len, std::vector<size_t>* L, std::vector<size_t>* X, int64_t* R,
                  bool check_hazards = true, size_t min_l = 2) const;
  // persistent: the whole schedule as one resident-grid launch (render_grid.h)
  // when every kernel can be a part, there is a GEMM, the GEMMs' work is small (<= kGridMaxFlops,
  // RLX_CUDA_GRID_MAX_MFLOP overrides; measured on the H200: 784-128-10 b128, 52 MFLOP, 36 us vs
  // 43 us for cuBLASLt + merged launches; 784-128-10 b1024, 415 MFLOP, 70 vs 60 us and
  // 784-512-512-10 b128, 490 MFLOP, 100 vs 73 us: our f32 GEMM parts are slower than cuBLASLt's there)
  // and no buffer exceeds kGridMaxElems. A part gets a barrier before it when it reads what the
  // current phase wrote, or writes what it read or wrote. Empty when not taken (RLX_CUDA_PERSISTENT=0
  // or RLX_CUDA_MERGE=0: never). Only over grid_layout's arena (no two arena buffers share bytes:
  // arena_disjoint), unless `laid_out` is false (grid_layout's own question, before it lays out).
  static constexpr double kGridMaxFlops = 1.5e8;
  static constexpr int64_t kGridMaxElems = int64_t{1} << 22;
  std::vector<GridPart> grid_parts(bool laid_out = true) const;
  // X can ride on the row launch as its tail: its reductions are over the rows and read nothing X
  // makes; its other kernels are small and run in the last block.
  bool tailable(const std::vector<size_t>& X, int64_t R) const;
};

}  // namespace rlx::cuda
