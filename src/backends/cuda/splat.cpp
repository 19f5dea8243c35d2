// SplatPlan (splat.h): the launches of one splat step. Projection is one kernel; rasterization (and
// its VJP) bins first: tile counts, their exclusive scan (u64), the pair count read back, keys
// emitted, sorted by stable 8-bit LSD passes (the depth's 4 bytes, then as many bytes as the tile
// ids need), per-tile ranges, then the compositing kernel.
#include "backends/cuda/splat.h"

#include <algorithm>
#include <cstring>

#include "backends/cuda/cuda_util.h"
#include "rlx/error.h"
#include "rlx/op.h"

namespace rlx::cuda {

namespace {

constexpr int64_t kScanChunk = 4096;  // elements per block of the scan and the sort kernels

unsigned blocks(int64_t n, int64_t per) { return static_cast<unsigned>(std::max<int64_t>(1, (n + per - 1) / per)); }

}  // namespace

SplatPlan::SplatPlan(OpKind op, const Attrs& attrs, const std::vector<ValueType>& in, std::vector<CUdeviceptr> ptrs)
    : op_(op), ptrs_(std::move(ptrs)) {
  RLX_CHECK(splat_has(op), "[cuda] no splat plan for ", op_name(op));
  const Node nd{op, {}, {}, attrs, ""};
  n_ = static_dims(in[0].shape)[0];
  width_ = attr_int(nd, "width"), height_ = attr_int(nd, "height");
  for (auto& [name, ks] : splat_kernels(op, attrs, in)) fn_.emplace_back(name, load_function(ks));
  if (!splat_syncs(op)) return;
  channels_ = static_dims(in[2].shape)[1];
  tile_ = attr_int(nd, "tile");
  tiles_x_ = (width_ + tile_ - 1) / tile_, tiles_y_ = (height_ + tile_ - 1) / tile_;
  offs_ = DeviceBlock(static_cast<size_t>(std::max<int64_t>(n_, 1)) * 8);
  total_ = DeviceBlock(64);
  ranges_ = DeviceBlock(static_cast<size_t>(tiles_x_ * tiles_y_) * 8);
  bsum_ = DeviceBlock(static_cast<size_t>(blocks(n_, kScanChunk)) * 8);
  host_total_ = PinnedBlock(8);
}

SplatPlan::~SplatPlan() = default;

CUfunction SplatPlan::fn(const char* name) const {
  for (auto& [n, f] : fn_)
    if (n == name) return f;
  fail("[cuda] splat plan has no kernel ", name);
}

// Every kernel parameter is 8 bytes: a device pointer or a long long.
void SplatPlan::launch(const char* name, unsigned grid, unsigned grid_y, unsigned block,
                       std::vector<unsigned long long> args, CUstream s) const {
  std::vector<void*> params;
  for (auto& a : args) params.push_back(&a);
  check(api().cuLaunchKernel(fn(name), grid, grid_y, 1, block, 1, 1, 0, s, params.data(), nullptr), name);
}

// Exclusive scan of n values in place (u64 when `wide`, else u32); *total (device) gets the sum.
void SplatPlan::scan(bool wide, CUdeviceptr data, int64_t n, CUdeviceptr total, CUstream s) {
  const unsigned nb = blocks(n, kScanChunk);
  if (bsum_.bytes < static_cast<size_t>(nb) * 8) bsum_ = DeviceBlock(static_cast<size_t>(nb) * 8);
  const std::string p = wide ? "scan_u64." : "scan_u32.";
  const auto ll = [](int64_t v) { return static_cast<unsigned long long>(v); };
  launch((p + "a").c_str(), nb, 1, 1024, {data, bsum_.ptr, ll(n)}, s);
  launch((p + "b").c_str(), 1, 1, 1024, {bsum_.ptr, total, ll(nb)}, s);
  launch((p + "c").c_str(), nb, 1, 1024, {data, bsum_.ptr, ll(n)}, s);
}

// Tile binning: leaves the sorted Gaussian ids in ids_[sorted_] and the per-tile ranges in ranges_.
void SplatPlan::bin(CUstream s) {
  Api& a = api();
  const CUdeviceptr m2 = ptrs_[0], depth = ptrs_[4], rad = ptrs_[5];
  const auto ll = [](int64_t v) { return static_cast<unsigned long long>(v); };
  launch("tile_count", blocks(n_, 256), 1, 256, {m2, rad, offs_.ptr}, s);
  scan(true, offs_.ptr, n_, total_.ptr, s);
  check(a.cuMemcpyDtoHAsync(host_total_.ptr, total_.ptr, 8, s), "splat pair count");
  check(a.cuStreamSynchronize(s), "splat pair count");
  uint64_t m = 0;
  std::memcpy(&m, host_total_.ptr, 8);
  RLX_CHECK(m < (1ull << 31), "[cuda] ", op_name(op_), ": ", m, " (Gaussian, tile) pairs; at most 2^31 on cuda");
  pairs_ = static_cast<int64_t>(m);
  const int64_t nblocks = std::max<int64_t>(1, (pairs_ + kScanChunk - 1) / kScanChunk);
  if (pairs_ > capacity_) {  // grow-only, with headroom for the next runs
    capacity_ = pairs_ + pairs_ / 4 + 1024;
    for (int i = 0; i < 2; ++i) {
      keys_[i] = DeviceBlock(static_cast<size_t>(capacity_) * 8);
      ids_[i] = DeviceBlock(static_cast<size_t>(capacity_) * 4);
    }
    hist_ = DeviceBlock(static_cast<size_t>(256 * ((capacity_ + kScanChunk - 1) / kScanChunk + 1)) * 4);
  }
  check(a.cuMemsetD8Async(ranges_.ptr, 0, ranges_.bytes, s), "splat ranges");
  sorted_ = 0;
  if (pairs_ == 0) return;
  launch("emit_keys", blocks(n_, 256), 1, 256, {m2, rad, depth, offs_.ptr, keys_[0].ptr, ids_[0].ptr}, s);
  int tile_bytes = 0;
  for (uint64_t t = static_cast<uint64_t>(tiles_x_ * tiles_y_ - 1); t; t >>= 8) ++tile_bytes;
  for (int pass = 0; pass < 4 + tile_bytes; ++pass) {
    const int64_t shift = pass < 4 ? 8 * pass : 32 + 8 * (pass - 4);
    const int from = sorted_, to = 1 - sorted_;
    launch("radix_hist", static_cast<unsigned>(nblocks), 1, 256, {keys_[from].ptr, hist_.ptr, ll(pairs_), ll(shift), ll(nblocks)},
           s);
    scan(false, hist_.ptr, 256 * nblocks, total_.ptr + 8, s);
    launch("radix_scatter", static_cast<unsigned>(nblocks), 1, 256,
           {keys_[from].ptr, ids_[from].ptr, keys_[to].ptr, ids_[to].ptr, hist_.ptr, ll(pairs_), ll(shift), ll(nblocks)}, s);
    sorted_ = to;
  }
  launch("tile_ranges", blocks(pairs_, 256), 1, 256, {keys_[sorted_].ptr, ranges_.ptr, ll(pairs_)}, s);
}

void SplatPlan::run(CUstream s) {
  Api& a = api();
  const unsigned gx = static_cast<unsigned>(tiles_x_), gy = static_cast<unsigned>(tiles_y_),
                 block = static_cast<unsigned>(tile_ * tile_);
  const auto& p = ptrs_;
  switch (op_) {
    case OpKind::SplatProject:
      if (n_ > 0) launch("project", blocks(n_, 128), 1, 128, {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9]}, s);
      return;
    case OpKind::SplatProjectGrad:
      check(a.cuMemsetD8Async(p[13], 0, 16 * sizeof(float), s), "splat v_view");
      if (n_ > 0)
        launch("project_grad", blocks(n_, 128), 1, 128,
               {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13]}, s);
      return;
    case OpKind::SplatRasterize:
      bin(s);
      launch("rasterize", gx, gy, block,
             {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], ids_[sorted_].ptr, ranges_.ptr}, s);
      return;
    case OpKind::SplatRasterizeGrad: {
      const size_t f = sizeof(float);
      check(a.cuMemsetD8Async(p[9], 0, static_cast<size_t>(n_) * 2 * f, s), "splat grad");
      check(a.cuMemsetD8Async(p[10], 0, static_cast<size_t>(n_) * 3 * f, s), "splat grad");
      check(a.cuMemsetD8Async(p[11], 0, static_cast<size_t>(n_ * channels_) * f, s), "splat grad");
      check(a.cuMemsetD8Async(p[12], 0, static_cast<size_t>(n_) * f, s), "splat grad");
      check(a.cuMemsetD8Async(p[13], 0, static_cast<size_t>(channels_) * f, s), "splat grad");
      bin(s);
      launch("rasterize_grad", gx, gy, block,
             {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13], ids_[sorted_].ptr,
              ranges_.ptr},
             s);
      return;
    }
    default: fail("[cuda] no splat plan for ", op_name(op_));
  }
}

std::string SplatPlan::label() const {
  return "[splat " + std::to_string(n_) + " Gaussians" +
         (splat_syncs(op_) ? ", " + std::to_string(width_) + "x" + std::to_string(height_) + ", " +
                                 std::to_string(pairs_) + " pairs last run"
                           : std::string()) +
         "]";
}

}  // namespace rlx::cuda
