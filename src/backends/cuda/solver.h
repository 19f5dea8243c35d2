// Dense linear algebra on cuda through cuSOLVER (libcusolver, dlopen'ed on first use like the other
// CUDA libraries). A SolverPlan is one step of the schedule: its cuSOLVER calls plus the small NVRTC
// kernels around them (symmetrize in, transpose/NaN-fill out). Ops: cholesky (potrfBatched for a
// batch, potrf for one matrix); the others stay on cpu (docs/linalg.md).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_api.h"
#include "backends/cuda/memory.h"
#include "backends/cuda/render.h"
#include "rlx/graph.h"

namespace rlx::cuda {

// Empty when libcusolver loads and has the entry points used; else why not.
std::string solver_probe();
// The ops SolverPlan implements (the cuda capability set claims exactly these).
bool solver_has(OpKind op);
// The NVRTC kernels launched before and after the cuSOLVER calls of `op` on inputs `in` (arguments:
// the kernel's buffers, inputs then outputs). Needs no GPU: tests compile them with nvrtc_only().
std::pair<KernelSource, KernelSource> solver_kernels(OpKind op, const std::vector<ValueType>& in);

class SolverPlan {
 public:
  // in/out: buffer types; ptrs: device pointers, inputs then outputs (as the LIR kernel lists them).
  SolverPlan(OpKind op, const std::vector<ValueType>& in, const std::vector<ValueType>& out,
             std::vector<CUdeviceptr> ptrs);
  ~SolverPlan();
  // The NVRTC kernels to launch before and after run() (same argument list: ptrs).
  const KernelSource& pre() const { return pre_; }
  const KernelSource& post() const { return post_; }
  // Enqueues the cuSOLVER calls on `stream`.
  void run(CUstream stream);
  std::string label() const;

 private:
  OpKind op_;
  DType dt_;
  int64_t n_ = 0, batch_ = 1;
  std::vector<CUdeviceptr> ptrs_;
  DeviceBlock ptr_array_, workspace_;
  int lwork_ = 0;
  KernelSource pre_, post_;
};

}  // namespace rlx::cuda
