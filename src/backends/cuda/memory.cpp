#include "backends/cuda/memory.h"

namespace rlx::cuda {

CachingAllocator& CachingAllocator::get() {
  static CachingAllocator* a = new CachingAllocator();  // never destroyed: outlives executables at exit
  return *a;
}

// Sizes round up to 512 B below 1 MiB and to 2 MiB above, so near sizes share blocks.
size_t CachingAllocator::round(size_t b) {
  if (b == 0) b = 1;
  size_t q = b < (size_t{1} << 20) ? 512 : (size_t{2} << 20);
  return (b + q - 1) / q * q;
}

CUdeviceptr CachingAllocator::alloc(size_t bytes) {
  size_t r = round(bytes);
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = free_.find(r);
    if (it != free_.end() && !it->second.empty()) {
      CUdeviceptr p = it->second.back();
      it->second.pop_back();
      cached_ -= r;
      live_ += r;
      return p;
    }
  }
  Api& a = api();
  CUdeviceptr p = 0;
  CUresult res = a.cuMemAlloc(&p, r);
  if (res != 0) {  // out of memory: give the cache back to the driver and retry once
    std::lock_guard<std::mutex> g(mu_);
    for (auto& [sz, v] : free_)
      for (auto q : v) a.cuMemFree(q);
    free_.clear();
    cached_ = 0;
    res = a.cuMemAlloc(&p, r);
  }
  check(res, "cuMemAlloc");
  std::lock_guard<std::mutex> g(mu_);
  live_ += r;
  return p;
}

void CachingAllocator::free(CUdeviceptr p, size_t bytes) {
  size_t r = round(bytes);
  std::lock_guard<std::mutex> g(mu_);
  free_[r].push_back(p);
  cached_ += r;
  live_ -= r;
}

PinnedBlock::PinnedBlock(size_t b) : bytes(b) { check(api().cuMemAllocHost(&ptr, b ? b : 1), "cuMemAllocHost"); }
PinnedBlock::~PinnedBlock() {
  if (ptr) api().cuMemFreeHost(ptr);
}

}  // namespace rlx::cuda
