// The cuda backend: status probed at run time (libcuda.so.1 + a device, NVRTC, cuBLASLt); the
// capability set is what this folder's kernels really run; the schedule is fuse_lir.cpp's.
#include <set>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/fuse_lir.h"

namespace rlx::cuda {

CapabilitySet cuda_kernel_caps() {
  using D = DType;
  const DTypeSet cu_types = DTypeSet::of({D::f32, D::f16, D::bf16, D::f64, D::i8, D::u8, D::i16, D::i32, D::i64, D::boolean});
  CapabilitySet caps = mir_capabilities(cu_types);
  // An allow-list, so MIR primitives added later are not claimed before a cuda kernel exists
  // (dequantize has none yet; conv/reduce_window/sort/topk/scatter_add are claimed below).
  const std::set<OpKind> cu_mir = {OpKind::Constant,   OpKind::Iota,       OpKind::ReduceSum,      OpKind::ReduceMax,
                                   OpKind::ReduceMin,  OpKind::ReduceProd, OpKind::ArgMax,         OpKind::ArgMin,
                                   OpKind::DotGeneral, OpKind::Reshape,    OpKind::BroadcastInDim, OpKind::Transpose,
                                   OpKind::Slice,      OpKind::Pad,        OpKind::Concatenate,    OpKind::Gather};
  for (auto it = caps.ops.begin(); it != caps.ops.end();)
    it = is_elementwise(it->first) || cu_mir.count(it->first) ? std::next(it) : caps.ops.erase(it);
  add_ops(caps, {OpKind::MatMul, OpKind::Linear, OpKind::Softmax, OpKind::LayerNorm, OpKind::RmsNorm, OpKind::Attention},
          DTypeSet::of({D::f32, D::f16, D::bf16}));
  add_ops(caps, {OpKind::Embedding}, cu_types);
  // cumsum (sequential per line) and rng_uniform (splitmix64, float outputs) kernels
  caps.ops[OpKind::Cumsum] = DTypeSet::of({D::f32, D::f16, D::bf16, D::f64, D::i8, D::u8, D::i16, D::i32, D::i64});
  caps.ops[OpKind::RngUniform] = DTypeSet::of({D::f32, D::f16, D::bf16, D::f64});
  // conv, reduce_window, sort/topk, scatter_add through the shared codegen
  // kernels (render_window.cpp); halves computed in f32, i8/u8/i16 in int.
  for (auto k : {OpKind::Conv, OpKind::ReduceWindow, OpKind::Sort, OpKind::TopK, OpKind::ScatterAdd})
    caps.ops[k] = op_info(k).dtypes & cu_types.minus(DTypeSet::of({D::boolean}));
  // dense linear algebra through cuSOLVER (solver.cpp)
  caps.ops[OpKind::Cholesky] = DTypeSet::of({D::f32, D::f64});
  return caps;
}

namespace {

// cuda's own set: the kernel set plus the gaussian-splatting steps (splat.h: projection, tile
// binning + compositing and their VJPs, f32), which are not in cuda_kernel_caps() because rocm
// starts from that set and has no splat step.
CapabilitySet cuda_caps() {
  CapabilitySet caps = cuda_kernel_caps();
  for (auto k : {OpKind::SplatProject, OpKind::SplatProjectGrad, OpKind::SplatRasterize, OpKind::SplatRasterizeGrad})
    caps.ops[k] = DTypeSet::of({DType::f32});
  return caps;
}

class CudaBackend : public Backend {
 public:
  std::string name() const override { return "cuda"; }
  int rank() const override { return 4; }
  DeviceInfo info(bool probing) const override {
    std::string why;
    int st = probing ? runtime_probe(&why) : 1;
    return DeviceInfo{"cuda", "NVRTC kernels, cuBLASLt, fused attention, CUDA graphs",
                      st == 0 ? DeviceStatus::Available : (st == 1 ? DeviceStatus::NoDriver : DeviceStatus::NoHardware),
                      why, cuda_caps()};
  }
  LirSchedule schedule() const override { return cuda_schedule(); }
  std::unique_ptr<Executable> compile(const LirProgram& p) const override { return make_cuda_executable(p); }
};

}  // namespace
}  // namespace rlx::cuda

RLX_REGISTER_BACKEND(cuda, rlx::cuda::CudaBackend)
