// The cpu backend: every MIR primitive (f16/bf16 contractions promoted to f32: no half GEMM on
// x86 here), the library kernels of this folder, and the schedule of executable.cpp.
#include "backends/cpu/isa.h"
#include "backends/cpu/jit.h"
#include "rlx/device.h"
#include "runtime/backend.h"

namespace rlx {
namespace sparse {
bool is_sparse_op(OpKind k);  // src/sparse/reference_sparse.cpp
}
LirSchedule cpu_schedule();                                         // executable.cpp
std::unique_ptr<Executable> make_cpu_executable(const LirProgram& p);  // executable.cpp

namespace {

CapabilitySet cpu_caps() {
  using D = DType;
  const DTypeSet f32 = DTypeSet::of({D::f32});
  CapabilitySet c = mir_capabilities(DTypeSet::all());
  c.ops[OpKind::DotGeneral] = DTypeSet::of({D::f32, D::f64, D::i32, D::i64, D::c64,
                                            D::u16, D::u32, D::u64});  // u* via the generic kernel
  c.ops[OpKind::Conv] = DTypeSet::of({D::f32, D::f64});
  add_ops(c, {OpKind::MatMul, OpKind::Linear, OpKind::Softmax}, DTypeSet::of({D::f32, D::f64}));
  add_ops(c, {OpKind::LayerNorm, OpKind::Attention}, f32);
  add_ops(c, {OpKind::DequantMatMul}, f32);  // packed kernel, dequant_matmul.cpp
  add_ops(c, {OpKind::QLinear, OpKind::QMatMul}, DTypeSet::of({D::i8, D::u8}));  // int8 GEMM, qlinear.cpp
  add_ops(c, {OpKind::QConv}, DTypeSet::of({D::i8, D::u8}));  // im2col on the int8 GEMM, qlinear.cpp
  add_ops(c, {OpKind::QuantizeAffine}, f32);                                     // quant_affine.cpp
  add_ops(c, {OpKind::DequantizeAffine}, DTypeSet::of({D::i8, D::u8, D::i32}));
  for (int i = 0; i < num_ops(); ++i)  // CSR ops, sparse.cpp
    if (sparse::is_sparse_op(static_cast<OpKind>(i))) c.add(static_cast<OpKind>(i), DTypeSet::of({D::f32, D::f64}));
  add_ops(c, {OpKind::SplatProject, OpKind::SplatProjectGrad, OpKind::SplatSh, OpKind::SplatRasterize,
              OpKind::SplatRasterizeGrad}, DTypeSet::of({D::f32, D::f64}));  // splat.cpp
  for (int i = 0; i < num_ops(); ++i)  // LAPACKE + own small-matrix kernels, linalg*.cpp; c64 by the reference
    if (is_linalg(static_cast<OpKind>(i)))
      c.add(static_cast<OpKind>(i), op_info(static_cast<OpKind>(i)).dtypes & DTypeSet::of({D::f32, D::f64, D::c64}));
  // Collectives through the process's communicator (src/dist: in-process, Open MPI); the only
  // device that claims them: the others' buffers would need a device-side transport (NCCL on cuda).
  const DTypeSet coll = DTypeSet::of({D::f32, D::f64, D::i8, D::u8, D::i16, D::i32, D::i64, D::u16, D::u32, D::u64});
  for (int i = 0; i < num_ops(); ++i)
    if (is_collective(static_cast<OpKind>(i)))
      c.add(static_cast<OpKind>(i), static_cast<OpKind>(i) == OpKind::Recv ? DTypeSet::all() : coll);
  return c;
}

class CpuBackend : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  int rank() const override { return 0; }
  DeviceInfo info(bool probing) const override {
    return DeviceInfo{"cpu", "C++ kernels on the host CPU (library kernels + reference-derived generic kernels)",
                      DeviceStatus::Available,
                      "always available" + (probing ? "; " + cpu::isa_summary() + "; " + cpu::jit_probe() : ""),
                      cpu_caps()};
  }
  LirSchedule schedule() const override { return cpu_schedule(); }
  std::unique_ptr<Executable> compile(const LirProgram& p) const override { return make_cpu_executable(p); }
};

}  // namespace
}  // namespace rlx

RLX_REGISTER_BACKEND(cpu, rlx::CpuBackend)
