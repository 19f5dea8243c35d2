// Persistent launches: a whole schedule of small kernels (a training step of an
// MLP: GEMMs, elementwise, reductions, argmax) as ONE launch of a grid that stays resident (at most
// the device's multiprocessors x kGridBlocksPerSm blocks), the kernels as device-function parts in
// schedule order, a grid-wide barrier wherever a part depends on (or overwrites) what an earlier
// part since the last barrier touched. GEMM parts are our own f32 kernels (plain FMA, no TF32),
// tiles handed out over the grid; reductions run one warp per output.
#pragma once
#include <vector>

#include "backends/cuda/gemm.h"
#include "backends/cuda/render.h"

namespace rlx::cuda {

constexpr int kGridThreads = 256;

struct GridPart {
  const LirKernel* k = nullptr;
  std::vector<ValueType> in, out;
  bool gemm = false;     // C = op(A)·op(B) (+ bias: the last input) (relu), from plan_gemm
  GemmShape g;
  bool relu = false;
  bool barrier = false;  // a grid barrier before this part
  // Row segment: consecutive parts with one seg id >= 0 map row r (leading dim `rows`) of their
  // output to row r of what the segment made (MergePlanner::row_local); the grid hands out row
  // blocks and each block runs all of the segment's parts on its rows, block barriers between.
  int seg = -1;
  int64_t rows = 0;
  int kernel = -1;       // index in the LIR schedule
};

// Whether kernel k can be a part of a persistent launch (fills `part` but not barrier/kernel).
bool grid_part_ok(const LirKernel& k, const std::vector<ValueType>& in, const std::vector<ValueType>& out,
                  GridPart* part);
// The launch: parameters are every part's inputs then its output, parts in order, then a scratch
// block (KernelSource::scratch_bytes, zero-filled once: the barrier's arrival count and the split-K
// tile counters return to zero, the barrier's generation word counts up; then the split-K partial
// tiles). `blocks`: the grid (all resident at once).
// `timed`: block 0 writes clock64() at the start, after each grid barrier and at the end into the
// scratch block after the barrier words (u64 at byte 16 + 8 i), for the per-phase profile.
KernelSource render_grid(const std::vector<GridPart>& parts, int64_t blocks, bool timed = false);
// Estimated cost (arbitrary units) of a GEMM part with square tiles of `tile` and K split `splits`
// ways over `blocks` blocks; render_grid picks the cheapest tile (16/32/64) and split (1..16).
double grid_gemm_cost(const GemmShape& g, int tile, int splits, int64_t blocks);

}  // namespace rlx::cuda
