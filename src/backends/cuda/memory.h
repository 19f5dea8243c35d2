// Device memory: a caching allocator (freed blocks are kept per rounded size and reused, so
// recompiles and repeated executables do not go back to the driver) and pinned host staging.
#pragma once
#include <cstddef>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_api.h"

namespace rlx::cuda {

class CachingAllocator {
 public:
  static CachingAllocator& get();
  CUdeviceptr alloc(size_t bytes);
  void free(CUdeviceptr p, size_t bytes);
  size_t cached_bytes() const { return cached_; }
  size_t live_bytes() const { return live_; }

 private:
  static size_t round(size_t b);
  std::mutex mu_;
  std::map<size_t, std::vector<CUdeviceptr>> free_;
  size_t cached_ = 0, live_ = 0;
};

// RAII device block from the caching allocator.
struct DeviceBlock {
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  DeviceBlock() = default;
  explicit DeviceBlock(size_t b) : ptr(CachingAllocator::get().alloc(b)), bytes(b) {}
  DeviceBlock(const DeviceBlock&) = delete;
  DeviceBlock& operator=(const DeviceBlock&) = delete;
  DeviceBlock(DeviceBlock&& o) noexcept : ptr(o.ptr), bytes(o.bytes) { o.ptr = 0; }
  DeviceBlock& operator=(DeviceBlock&& o) noexcept {
    std::swap(ptr, o.ptr);
    std::swap(bytes, o.bytes);
    return *this;
  }
  ~DeviceBlock() {
    if (ptr) CachingAllocator::get().free(ptr, bytes);
  }
};

// RAII pinned host buffer (page-locked, so copies are truly asynchronous DMA).
struct PinnedBlock {
  void* ptr = nullptr;
  size_t bytes = 0;
  PinnedBlock() = default;
  explicit PinnedBlock(size_t b);
  PinnedBlock(const PinnedBlock&) = delete;
  PinnedBlock(PinnedBlock&& o) noexcept : ptr(o.ptr), bytes(o.bytes) { o.ptr = nullptr; }
  PinnedBlock& operator=(PinnedBlock&& o) noexcept {
    std::swap(ptr, o.ptr);
    std::swap(bytes, o.bytes);
    return *this;
  }
  ~PinnedBlock();
};

}  // namespace rlx::cuda
