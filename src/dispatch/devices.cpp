// The 16 targets: what each runs on, whether it can execute here, and its capability set.
// Capability sets describe what the target's API and kernels support (e.g. WGSL has no f64/i64),
// so legalization for a target is meaningful even where its executor is not built yet.

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>  // cuda capability allow-list

#include "rlx/device.h"
#include "backends/portable/api.h"  // portable_gpu_device_info

namespace rlx {
namespace sparse {
bool is_sparse_op(OpKind k);  // src/sparse/reference_sparse.cpp
}

std::string_view device_status_name(DeviceStatus s) {
  switch (s) {
    case DeviceStatus::Available: return "available";
    case DeviceStatus::CompiledOut: return "compiled-out";
    case DeviceStatus::NoDriver: return "no driver";
    case DeviceStatus::NoHardware: return "no hardware";
    case DeviceStatus::CodegenOnly: return "codegen only";
  }
  return "?";
}

const std::vector<std::string>& device_names() {
  static const std::vector<std::string> n = {"cpu",     "metal", "mlx",    "ane",    "cuda",     "rocm",
                                             "oneapi",  "tpu",   "hexagon", "gpu",   "vulkan",   "opengl",
                                             "directx", "webgpu", "cortexm", "fpga"};
  return n;
}

namespace {

// Every MIR primitive for the dtypes it accepts, restricted to `dtypes`.
CapabilitySet all_mir(DTypeSet dtypes) {
  CapabilitySet c;
  for (int i = 0; i < num_ops(); ++i) {
    auto k = static_cast<OpKind>(i);
    const auto& info = op_info(k);
    if (info.level != Level::Mir || sparse::is_sparse_op(k) || is_linalg(k) || is_collective(k))
      continue;  // sparse, linalg, collectives: claimed per device
    DTypeSet s = info.min_inputs == 0 ? dtypes : (info.dtypes & dtypes);
    if (k == OpKind::Select) s = DTypeSet::of({DType::boolean});  // predicate; branches checked by dtypes
    if (!s.empty()) c.add(k, s);
  }
  c.storage = dtypes;
  return c;
}

void add_hir(CapabilitySet& c, std::initializer_list<OpKind> ops, DTypeSet s) {
  for (auto k : ops) c.add(k, s);
}

// tpu and mlx hand the whole graph to a graph runtime; these are the MIR primitives and dtypes
// their lowerings emit (src/backends/tpu/stablehlo*.cpp, src/backends/mlx/lower.cpp), each checked
// by `rlx ops --device`. Everything else decomposes or fails at dispatch. `pjrt` picks the StableHLO
// set (which differs where MLX's CPU kernels do: MLX has no integer matmul).
CapabilitySet graph_api_caps(bool pjrt) {
  using D = DType;
  using K = OpKind;
  // XLA runs f16/bf16/f64 (the PJRT CPU and CUDA plugins); MLX's are not claimed.
  const DTypeSet wide = pjrt ? DTypeSet::of({D::f64, D::f16, D::bf16}) : DTypeSet{};
  const DTypeSet f = DTypeSet::of({D::f32}) | wide, num = DTypeSet::of({D::f32, D::i32, D::i64}) | wide,
                 logic = DTypeSet::of({D::boolean, D::i32, D::i64}),
                 any = DTypeSet::of({D::f32, D::i32, D::i64, D::boolean}) | wide;
  CapabilitySet c;
  for (auto k : {K::Exp, K::Log, K::Sqrt, K::Rsqrt, K::Tanh, K::Erf, K::Sin, K::Cos, K::Logistic, K::Floor, K::Ceil,
                 K::Round, K::IsNan, K::Div, K::Pow})
    c.add(k, f);
  for (auto k : {K::Neg, K::Abs, K::Sign, K::Add, K::Sub, K::Mul, K::Max, K::Min, K::Lt, K::Le, K::Gt, K::Ge,
                 K::ReduceSum, K::ReduceMax, K::ReduceMin, K::ReduceProd, K::ArgMax, K::ArgMin, K::Iota})
    c.add(k, num);
  for (auto k : {K::Not, K::And, K::Or, K::Xor}) c.add(k, logic);
  for (auto k : {K::Constant, K::Convert, K::Eq, K::Ne, K::BroadcastInDim, K::Reshape, K::Transpose, K::Slice, K::Pad,
                 K::Concatenate, K::Gather})
    c.add(k, any);
  c.add(K::Select, DTypeSet::of({D::boolean}));
  c.add(K::DotGeneral, pjrt ? num : DTypeSet::of({D::f32}));
  c.storage = any;
  return c;
}

}  // namespace
int cuda_runtime_probe(std::string* why);  // src/backends/cuda/cuda_api.cpp
int pjrt_probe(std::string* why);          // src/backends/tpu/pjrt.cpp: 0 runs, 1 no plugin, 2 no device
int mlx_probe(std::string* why);           // src/backends/mlx/executable.cpp: 0 runs, 1 compiled out, 2 fails
namespace oneapi {
std::string probe(bool* ok);  // src/backends/oneapi/executable.cpp
}
DeviceInfo hexagon_device_info(bool probing);  // src/backends/hexagon/device.cpp
DeviceInfo rocm_device_info(bool probing, CapabilitySet caps);  // src/backends/rocm/device.cpp
namespace cpu {
std::string jit_probe();    // src/backends/cpu/jit.cpp
std::string isa_summary();  // src/backends/cpu/isa.cpp
}  // namespace cpu
namespace {

// Builds the entry of device `only` alone: probing a device loads its
// driver (Mesa's vulkan/opengl and PoCL's OpenCL bring a second LLVM into the process, which breaks
// a later `import triton`), so a process that compiles for cpu must never probe the others.
// probing=false: the capability set from the static tables only
// (status/reason left unprobed, no library loaded): device_caps() below.
std::vector<DeviceInfo> build(const std::string& only, bool probing) {
  auto want = [&](const char* n) { return only == n; };
  using D = DType;
  const DTypeSet f32 = DTypeSet::of({D::f32}), f16x = DTypeSet::of({D::f32, D::f16});
  const auto nn_ops = {OpKind::MatMul, OpKind::Linear, OpKind::Softmax, OpKind::LayerNorm, OpKind::RmsNorm,
                       OpKind::Attention, OpKind::Gelu};
  std::vector<DeviceInfo> v;

  // cpu: every MIR primitive; f16/bf16 contractions are promoted to f32 (no half GEMM on x86 here).
  if (want("cpu")) {
    DeviceInfo cpu{"cpu", "C++ kernels on the host CPU (library kernels + reference-derived generic kernels)",
                   DeviceStatus::Available, "always available" + (probing ? "; " + cpu::isa_summary() + "; " + cpu::jit_probe() : ""),
                   all_mir(DTypeSet::all())};
    cpu.caps.ops[OpKind::DotGeneral] = DTypeSet::of({D::f32, D::f64, D::i32, D::i64, D::c64,
                                                     D::u16, D::u32, D::u64});  // u* via the generic kernel
    cpu.caps.ops[OpKind::Conv] = DTypeSet::of({D::f32, D::f64});
    add_hir(cpu.caps, {OpKind::MatMul, OpKind::Linear, OpKind::Softmax}, DTypeSet::of({D::f32, D::f64}));
    add_hir(cpu.caps, {OpKind::LayerNorm, OpKind::Attention}, f32);
    add_hir(cpu.caps, {OpKind::DequantMatMul}, f32);  // packed kernel, backends/cpu/dequant_matmul.cpp
    add_hir(cpu.caps, {OpKind::QLinear, OpKind::QMatMul}, DTypeSet::of({D::i8, D::u8}));  // int8 GEMM, backends/cpu/qlinear.cpp
    add_hir(cpu.caps, {OpKind::QuantizeAffine}, f32);                                     // backends/cpu/quant_affine.cpp
    add_hir(cpu.caps, {OpKind::DequantizeAffine}, DTypeSet::of({D::i8, D::u8, D::i32}));
    for (int i = 0; i < num_ops(); ++i)  // CSR ops, backends/cpu/sparse.cpp
      if (sparse::is_sparse_op(static_cast<OpKind>(i))) cpu.caps.add(static_cast<OpKind>(i), DTypeSet::of({D::f32, D::f64}));
    add_hir(cpu.caps, {OpKind::SplatProject, OpKind::SplatProjectGrad, OpKind::SplatSh, OpKind::SplatRasterize,
                       OpKind::SplatRasterizeGrad}, DTypeSet::of({D::f32, D::f64}));  // backends/cpu/splat.cpp
    for (int i = 0; i < num_ops(); ++i)  // LAPACKE + own small-matrix kernels, backends/cpu/linalg*.cpp
      if (is_linalg(static_cast<OpKind>(i))) cpu.caps.add(static_cast<OpKind>(i), DTypeSet::of({D::f32, D::f64}));
    // Collectives through the process's communicator (src/dist: in-process, Open MPI); the only
    // device that claims them: the others' buffers would need a device-side transport (NCCL on cuda).
    const DTypeSet coll = DTypeSet::of({D::f32, D::f64, D::i8, D::u8, D::i16, D::i32, D::i64, D::u16, D::u32, D::u64});
    for (int i = 0; i < num_ops(); ++i)
      if (is_collective(static_cast<OpKind>(i)))
        cpu.caps.add(static_cast<OpKind>(i), static_cast<OpKind>(i) == OpKind::Recv ? DTypeSet::all() : coll);
    v.push_back(cpu);
  }

  if (want("metal")) v.push_back(portable_gpu_device_info("metal", probing));  // MSL: src/backends/portable/device_info.cpp
  // ---- mlx (src/backends/mlx): linked when CMake found MLX; status from running one op.
  if (want("mlx")) {
    std::string why;
    int st = probing ? mlx_probe(&why) : 0;
    v.push_back(DeviceInfo{"mlx", "lowering onto the MLX C++ API (mlx::core ops, mlx::core::compile)",
                           st == 0 ? DeviceStatus::Available : (st == 1 ? DeviceStatus::CompiledOut : DeviceStatus::NoDriver),
                           why, graph_api_caps(false)});
  }
  if (want("ane")) {
    DeviceInfo ane{"ane", "Core ML program for the Apple Neural Engine", DeviceStatus::NoHardware,
                   "needs an Apple Neural Engine; artifact-only target", all_mir(f16x)};
    add_hir(ane.caps, nn_ops, f16x);
    v.push_back(ane);
  }
  // ---- cuda (src/backends/cuda): status probed at run time (libcuda.so.1 + a device,
  // NVRTC, cuBLASLt); the capability set is what that backend's kernels really run.
  // The kernels of src/backends/cuda's renderer (also the rocm device's, in the HIP dialect).
  auto cuda_caps = [&]() {
    const DTypeSet cu_types = DTypeSet::of({D::f32, D::f16, D::bf16, D::f64, D::i8, D::u8, D::i16, D::i32, D::i64, D::boolean});
    DeviceInfo cu{"cuda", "", DeviceStatus::NoDriver, "", all_mir(cu_types)};
    // An allow-list, so MIR primitives added later are not claimed before a cuda kernel exists
    // (dequantize has none yet; conv/reduce_window/sort/topk/scatter_add are claimed below).
    const std::set<OpKind> cu_mir = {OpKind::Constant,   OpKind::Iota,       OpKind::ReduceSum,      OpKind::ReduceMax,
                                     OpKind::ReduceMin,  OpKind::ReduceProd, OpKind::ArgMax,         OpKind::ArgMin,
                                     OpKind::DotGeneral, OpKind::Reshape,    OpKind::BroadcastInDim, OpKind::Transpose,
                                     OpKind::Slice,      OpKind::Pad,        OpKind::Concatenate,    OpKind::Gather};
    for (auto it = cu.caps.ops.begin(); it != cu.caps.ops.end();)
      it = is_elementwise(it->first) || cu_mir.count(it->first) ? std::next(it) : cu.caps.ops.erase(it);
    add_hir(cu.caps, {OpKind::MatMul, OpKind::Linear, OpKind::Softmax, OpKind::LayerNorm, OpKind::RmsNorm,
                      OpKind::Attention}, DTypeSet::of({D::f32, D::f16, D::bf16}));
    add_hir(cu.caps, {OpKind::Embedding}, cu_types);
    // cumsum (sequential per line) and rng_uniform (splitmix64, float outputs) kernels
    cu.caps.ops[OpKind::Cumsum] = DTypeSet::of({D::f32, D::f16, D::bf16, D::f64, D::i8, D::u8, D::i16, D::i32, D::i64});
    cu.caps.ops[OpKind::RngUniform] = DTypeSet::of({D::f32, D::f16, D::bf16, D::f64});
    // conv, reduce_window, sort/topk, scatter_add through the shared codegen
    // kernels (src/backends/cuda/render_window.cpp); halves computed in f32, i8/u8/i16 in int.
    for (auto k : {OpKind::Conv, OpKind::ReduceWindow, OpKind::Sort, OpKind::TopK, OpKind::ScatterAdd})
      cu.caps.ops[k] = op_info(k).dtypes & cu_types.minus(DTypeSet::of({D::boolean}));
    // dense linear algebra through cuSOLVER (src/backends/cuda/solver.cpp)
    cu.caps.ops[OpKind::Cholesky] = DTypeSet::of({D::f32, D::f64});
    return cu.caps;
  };
  if (want("cuda")) {
    std::string why;
    int st = probing ? cuda_runtime_probe(&why) : 1;
    v.push_back(DeviceInfo{"cuda", "NVRTC kernels, cuBLASLt, fused attention, CUDA graphs",
                           st == 0 ? DeviceStatus::Available : (st == 1 ? DeviceStatus::NoDriver : DeviceStatus::NoHardware),
                           why, cuda_caps()});
  }
  // ---- end cuda
  // rocm (src/backends/rocm): the CUDA renderer's kernels without cuBLASLt, cuSOLVER and the
  // tensor-core (PTX) kernels: contractions run as dot_general's plain kernel.
  if (want("rocm")) {
    CapabilitySet c = cuda_caps();
    for (auto k : {OpKind::MatMul, OpKind::Linear, OpKind::Attention, OpKind::Cholesky}) c.ops.erase(k);
    v.push_back(rocm_device_info(probing, c));
  }
  // ---- oneapi (src/backends/oneapi): oneDNN primitives on the CPU engine, over host memory, and
  // the cpu backend's kernels for every kernel oneDNN has no primitive for; so the set is the cpu
  // device's dense set (no sparse, linear-algebra, splatting or GGML kernels) plus the HIR ops it
  // runs as primitives: linear/matmul (matmul + post-ops), softmax, layer norm.
  if (want("oneapi")) {
    bool ok = false;
    std::string why = oneapi::probe(&ok);
    DeviceInfo one{"oneapi", "oneDNN primitives (CPU engine here) + the cpu kernels for the rest",
                   ok ? DeviceStatus::Available : DeviceStatus::CompiledOut, why, all_mir(DTypeSet::all())};
    one.caps.ops[OpKind::DotGeneral] = DTypeSet::of({D::f32, D::f64, D::i32, D::i64, D::c64, D::u16, D::u32, D::u64});
    one.caps.ops[OpKind::Conv] = DTypeSet::of({D::f32, D::f64});
    add_hir(one.caps, {OpKind::MatMul, OpKind::Linear, OpKind::Softmax, OpKind::LayerNorm}, f32);
    v.push_back(one);
  }
  // ---- end oneapi
  // ---- tpu (src/backends/tpu): a PJRT plugin dlopened and a client created; status from that.
  if (want("tpu")) {
    std::string why;
    int st = probing ? pjrt_probe(&why) : 0;
    v.push_back(DeviceInfo{"tpu", "StableHLO through the PJRT C API (any PJRT plugin: XLA CPU, CUDA, libtpu)",
                           st == 0 ? DeviceStatus::Available : (st == 1 ? DeviceStatus::NoDriver : DeviceStatus::NoHardware),
                           why, graph_api_caps(true)});
  }
  // hexagon (src/backends/hexagon): probed toolchain; capabilities from the Hexagon renderer
  if (want("hexagon")) v.push_back(hexagon_device_info(probing));
  // gpu/vulkan/opengl: status probed at run time (loader + device), capabilities = what the
  // GLSL / OpenCL C renderers have kernels for. See src/backends/portable/device_info.cpp.
  // webgpu (WGSL through wgpu-native) and directx (HLSL, run as SPIR-V on Vulkan) share that
  // executor and derive their sets from their renderers the same way.
  for (const char* pg : {"gpu", "vulkan", "opengl", "webgpu", "directx"})
    if (want(pg)) v.push_back(portable_gpu_device_info(pg, probing));
  if (want("cortexm")) {
    DeviceInfo m{"cortexm", "INT8 C kernels + firmware for Cortex-M (qemu-system-arm)", DeviceStatus::CompiledOut,
                 "specialty code-generation target; code generator not built yet", CapabilitySet{}};
    const DTypeSet q = DTypeSet::of({D::i8, D::i32, D::f32});
    for (auto k : {OpKind::Constant, OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Max, OpKind::Min, OpKind::Convert,
                   OpKind::DotGeneral, OpKind::Conv, OpKind::Reshape, OpKind::Transpose, OpKind::ReduceWindow,
                   OpKind::ReduceSum, OpKind::ReduceMax, OpKind::ArgMax, OpKind::Exp, OpKind::Div, OpKind::BroadcastInDim,
                   OpKind::Select, OpKind::Gt, OpKind::Ge, OpKind::Lt, OpKind::Le, OpKind::Eq, OpKind::Iota, OpKind::Pad,
                   OpKind::Slice, OpKind::Concatenate, OpKind::Gather, OpKind::Neg, OpKind::Rsqrt, OpKind::Tanh,
                   OpKind::Logistic, OpKind::Erf})
      m.caps.add(k, q);
    m.caps.storage = q | DTypeSet::of({D::boolean});
    m.caps.ops[OpKind::Select] = DTypeSet::of({D::boolean});
    v.push_back(m);
  }
  if (want("fpga")) {
    // Not a dispatch backend: src/codegen/fpga turns an int8 MLP (fuse-qdq's qlinear chain) into
    // SystemVerilog; `rlx compile/run --device fpga` write it and simulate it with Verilator.
    bool sim = probing && std::system("verilator --version >/dev/null 2>&1") == 0;
    DeviceInfo f{"fpga", "SystemVerilog INT8 datapath (Verilator simulation)", DeviceStatus::CodegenOnly,
                 std::string("int8 MLP graphs only (quantize_affine -> qlinear chain), through `rlx compile/run --device "
                             "fpga`; ") +
                     (sim ? "Verilator found: simulated, cycle-accurate, not hardware"
                          : (probing ? "verilator not found (Debian package verilator): RTL is written, not simulated"
                                     : "not probed")),
                 CapabilitySet{}};
    const DTypeSet q = DTypeSet::of({D::i8, D::i32});
    for (auto k : {OpKind::Constant, OpKind::Add, OpKind::Mul, OpKind::Max, OpKind::Convert, OpKind::DotGeneral,
                   OpKind::Reshape, OpKind::Transpose, OpKind::BroadcastInDim})
      f.caps.add(k, q);
    f.caps.storage = q;
    v.push_back(f);
  }
  return v;
}

// The entry of `name` (probed or from the static tables alone); throws for an unknown name.
DeviceInfo build_one(const std::string& name, bool probing) {
  bool known = false;
  std::string names;
  for (auto& n : device_names()) {
    known = known || n == name;
    names += (names.empty() ? "" : ", ") + n;
  }
  if (!known) fail("[device] unknown device '", name, "' (known: ", names, ")");
  std::vector<DeviceInfo> one = build(name, probing);
  RLX_CHECK(one.size() == 1 && one[0].name == name, "[device] no entry built for '", name, "'");
  return std::move(one[0]);
}

}  // namespace

// Each entry is built (its driver probed) on its first request only;
// `rlx devices` and rlx.devices() ask for all of them. Entries never move once built.
// The mutex guards the map only; each entry is built under its own
// once_flag, so a thread asking for "cpu" does not wait behind another thread's multi-second
// vulkan/PoCL probe. A build that throws (unknown name) leaves the flag unset: the next call retries.
const DeviceInfo& device_info(const std::string& name) {
  struct Entry {
    std::once_flag once;
    std::unique_ptr<const DeviceInfo> info;
  };
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Entry>> built;
  Entry* e;
  {
    std::lock_guard<std::mutex> g(mu);
    std::unique_ptr<Entry>& slot = built[name];
    if (!slot) slot = std::make_unique<Entry>();
    e = slot.get();
  }
  std::call_once(e->once, [&] { e->info = std::make_unique<const DeviceInfo>(build_one(name, true)); });
  return *e->info;
}

// The static capability tables, for callers that must not load
// drivers (legalize.cpp's "devices that could run it" hint): see device.h.
const CapabilitySet& device_caps(const std::string& name, DTypeSet* driver_decides) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<const CapabilitySet>> built;
  std::lock_guard<std::mutex> g(mu);
  if (driver_decides)
    *driver_decides = name == "gpu" || name == "vulkan" || name == "opengl" || name == "webgpu" || name == "directx" ||
                                  name == "metal"
                          ? portable_gpu_driver_dtypes(name)
                          : DTypeSet{};
  if (auto it = built.find(name); it != built.end()) return *it->second;
  return *(built[name] = std::make_unique<const CapabilitySet>(build_one(name, false).caps));
}

}  // namespace rlx
