// Gaussian splatting on cuda (docs/splatting.md, "Devices"): the four native splat ops in f32 as a
// step of the schedule that launches its own NVRTC kernels (render_splat.cpp holds their text).
//  splat_project / _grad: one thread per Gaussian (the math of src/splat/splat_math.h in f32);
//    the view-matrix gradient is summed per block, then one float atomicAdd per entry and block.
//  splat_rasterize / _grad: tile binning on the device (per-Gaussian tile counts, an exclusive scan,
//    keys (tile << 32) | depth bits, a stable 8-bit LSD radix sort, per-tile ranges), then one
//    tile x tile thread block per tile compositing front to back over shared-memory batches; the
//    VJP walks each pixel back to front and adds into per-Gaussian gradients with warp-reduced
//    float atomics (so results match the cpu to rounding, not bit for bit).
// The pair count is data-dependent: after the scan the step reads it back (one host
// synchronization) and grows its sort buffers, so an executable with a rasterize step is not
// captured as a CUDA graph.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_api.h"
#include "backends/cuda/memory.h"
#include "backends/cuda/render.h"
#include "rlx/graph.h"

namespace rlx::cuda {

// The ops SplatPlan implements (the cuda capability set claims exactly these, f32).
bool splat_has(OpKind op);
// Whether a step of `op` synchronizes with the host inside a run (no CUDA graph capture then).
bool splat_syncs(OpKind op);

// Every NVRTC kernel a step of `op` launches, named ("scan_u64.a", "rasterize", ...), rendered for
// the op's attributes and buffer types (`in`: inputs in kernel order). Needs no GPU: tests compile
// them with nvrtc_only().
std::vector<std::pair<std::string, KernelSource>> splat_kernels(OpKind op, const Attrs& attrs,
                                                                const std::vector<ValueType>& in);

class SplatPlan {
 public:
  // ptrs: device pointers, inputs then outputs (as the LIR kernel lists them).
  SplatPlan(OpKind op, const Attrs& attrs, const std::vector<ValueType>& in, std::vector<CUdeviceptr> ptrs);
  ~SplatPlan();
  // Enqueues the step on `stream` (rasterize: with one host synchronization for the pair count).
  void run(CUstream stream);
  std::string label() const;
  // Compiled kernels and the pair count of the last run (for summaries and tests).
  int kernels() const { return static_cast<int>(fn_.size()); }
  int64_t last_pairs() const { return pairs_; }

 private:
  CUfunction fn(const char* name) const;
  void launch(const char* name, unsigned grid, unsigned grid_y, unsigned block, std::vector<unsigned long long> args,
              CUstream s) const;
  void scan(bool wide, CUdeviceptr data, int64_t n, CUdeviceptr total, CUstream s);
  void bin(CUstream s);
  OpKind op_;
  std::vector<CUdeviceptr> ptrs_;
  int64_t n_ = 0, channels_ = 0, width_ = 0, height_ = 0, tile_ = 16, tiles_x_ = 0, tiles_y_ = 0;
  int64_t pairs_ = 0, capacity_ = 0;
  std::vector<std::pair<std::string, CUfunction>> fn_;
  // rasterize scratch: per-Gaussian counts/offsets (u64) + total, sort ping-pong (keys u64, ids u32),
  // radix histograms (u32), scan block sums, per-tile ranges, the pinned pair count
  DeviceBlock offs_, total_, keys_[2], ids_[2], hist_, bsum_, ranges_;
  PinnedBlock host_total_;
  int sorted_ = 0;  // which ping-pong half holds the sorted pairs
};

}  // namespace rlx::cuda
