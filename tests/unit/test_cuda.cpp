// The cuda backend: the unavailable path and the renderer's output run everywhere; the rendered
// kernels are compile-checked with NVRTC wherever libnvrtc exists (no GPU needed); the execution
// checks run only where a GPU is present and skip with the reason otherwise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "backends/cuda/cuda_api.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/gemm.h"
#include "backends/cuda/render.h"
#include "rlx/builder.h"
#include "rlx/conformance.h"
#include "rlx/device.h"
#include "rlx/reference.h"
#include "models/mlp.h"
#include "passes/passes.h"
#include "rlx/lir.h"
#include "rlx/session.h"
#include "train/train.h"
#include "cuda_test_util.h"
#include "test_util.h"

namespace rlx {
namespace {

CompileOptions on_cuda() {
  CompileOptions o;
  o.device = "cuda";
  return o;
}

using cuda_test::have_gpu;

TEST(Cuda, StatusExplainsItself) {
  const DeviceInfo& d = device_info("cuda");
  EXPECT_FALSE(d.reason.empty());
  if (!d.can_execute()) {
    EXPECT_TRUE(d.status == DeviceStatus::NoDriver || d.status == DeviceStatus::NoHardware) << d.reason;
  } else {
    EXPECT_NE(d.reason.find("sm_"), std::string::npos) << d.reason;
  }
  // The capability set is the backend's real one: GEMM/attention in halves, conv (render_window.cpp),
  // no dequantize, no complex.
  EXPECT_TRUE(d.caps.has(OpKind::Linear, DType::f16));
  EXPECT_TRUE(d.caps.has(OpKind::Attention, DType::bf16));
  EXPECT_TRUE(d.caps.has(OpKind::Conv, DType::f32));
  EXPECT_FALSE(d.caps.has(OpKind::Dequantize, DType::i8));
  EXPECT_FALSE(d.caps.storage.has(DType::c64));
}

TEST(Cuda, UnavailablePathFailsWithReason) {
  std::string why;
  if (have_gpu(&why)) GTEST_SKIP() << "a GPU is present here: " << why;
  Graph g;
  Builder b(g);
  b.output(b.unary(OpKind::Exp, b.input("x", DType::f32, {4})));
  try {
    CompiledModel m(g, on_cuda());
    m.run({Tensor(DType::f32, {4})});
    FAIL() << "running on cuda without a GPU must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cannot execute"), std::string::npos) << e.what();
  }
  // Compile-only commands still work: legalization and LIR dump for cuda.
  CompiledModel m(g, on_cuda());
  EXPECT_NE(m.dump("lir").find("exp"), std::string::npos);
}

Graph fused_body(DType dt) {
  Graph body;
  Builder b(body);
  auto x = b.input("a0", dt, {3, 5});
  auto y = b.input("a1", dt, {5});
  body.outputs.push_back(b.unary(OpKind::Exp, b.add(x, y)));
  return body;
}

TEST(Cuda, RendersFusedKernel) {
  auto ks = cuda::render_fused(fused_body(DType::f32), ValueType{DType::f32, {3, 5}});
  EXPECT_NE(ks.code.find("extern \"C\" __global__ void rlx_kernel(const float* __restrict__ in0"), std::string::npos);
  EXPECT_NE(ks.code.find("expf("), std::string::npos) << ks.code;
  EXPECT_NE(ks.code.find("in1[c1]"), std::string::npos) << ks.code;  // broadcast [5] over [3,5]
  EXPECT_EQ(ks.num_params, 3);
  auto h = cuda::render_fused(fused_body(DType::f16), ValueType{DType::f16, {3, 5}});
  EXPECT_NE(h.code.find("h2f(in0[i])"), std::string::npos) << h.code;
  EXPECT_NE(h.code.find("rf16("), std::string::npos) << h.code;  // per-node rounding, like the reference
  EXPECT_NE(h.code.find("out0[i] = f2h("), std::string::npos) << h.code;
}

// One library kernel of each family, rendered from a one-node graph lowered to LIR.
std::vector<std::pair<std::string, cuda::KernelSource>> library_kernels(DType dt) {
  std::vector<std::pair<std::string, cuda::KernelSource>> r;
  auto add = [&](Graph& g) {
    LirProgram p = lower_to_lir(g, false);
    for (auto& k : p.kernels) {
      std::vector<ValueType> in, out;
      for (int b : k.in) in.push_back(p.buffers[b].type);
      for (int b : k.out) out.push_back(p.buffers[b].type);
      cuda::KernelSource ks;
      if (cuda::render_library(k, in, out, &ks)) r.push_back({k.label(), ks});
    }
  };
  {
    Graph g;
    Builder b(g);
    auto x = b.input("x", dt, {2, 3, 8});
    b.output(b.transpose(x, {2, 0, 1}));
    b.output(b.softmax(x));
    b.output(b.layer_norm(x, b.input("g", dt, {8}), b.input("b", dt, {8})));
    b.output(b.reduce(OpKind::ReduceMax, x, {1}, false));
    add(g);
  }
  {
    Graph g;
    Builder b(g);
    auto q = b.input("q", dt, {2, 4, 5, 32}), k = b.input("k", dt, {2, 2, 7, 32}), v = b.input("v", dt, {2, 2, 7, 32});
    b.output(b.attention(q, k, v, -1, "causal"));
    add(g);
  }
  {
    Graph g;
    Builder b(g);
    auto t = b.input("t", dt, {10, 4});
    auto i = b.input("i", DType::i64, {2, 3});
    b.output(b.op1(OpKind::Gather, {t, i}, {{"axis", int64_t{0}}}));
    add(g);
  }
  return r;
}

TEST(Cuda, RendersLibraryKernels) {
  auto ks = library_kernels(DType::f32);
  ASSERT_EQ(ks.size(), 6u);
  bool attn = false;
  for (auto& [label, k] : ks) {
    EXPECT_NE(k.code.find("rlx_kernel"), std::string::npos) << label;
    if (label == "attention") {
      attn = true;
      EXPECT_EQ(k.grid_y, 8u);  // B * H
      EXPECT_NE(k.code.find("j <= srow + (2)"), std::string::npos) << k.code;  // causal, T - S = 2
      EXPECT_NE(k.code.find("hh / 2"), std::string::npos) << k.code;               // GQA group of 2
    }
  }
  EXPECT_TRUE(attn);
}

// Every rendered kernel compiles for sm_90 with NVRTC; needs libnvrtc only, not a GPU.
TEST(Cuda, RenderedKernelsCompileWithNvrtc) {
  std::string why;
  cuda::Api* a = cuda::nvrtc_only(&why);
  if (!a) GTEST_SKIP() << "no NVRTC here: " << why;
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    auto ks = library_kernels(dt);
    {
      rlx_test::ScopedEnv vec("RLX_CUDA_ATTN_VEC", "1");  // the opt-in attention variant compiles too
      for (auto& [label, k] : library_kernels(dt))
        if (label == "attention") ks.push_back({"attention(vec)", k});
    }
    ks.push_back({"fused", cuda::render_fused(fused_body(dt), ValueType{dt, {3, 5}})});
    ks.push_back({"gelu(vector)", cuda::render_activation("gelu", ValueType{dt, {4, 16}})});
    ks.push_back({"silu(scalar)", cuda::render_activation("silu", ValueType{dt, {3, 5}})});
    for (auto& [label, k] : ks) {
      std::string bin;
      EXPECT_NO_THROW(bin = cuda::nvrtc_compile_for(*a, "sm_90", k.code)) << label << " " << dtype_name(dt);
      EXPECT_GT(bin.size(), 100u) << label;
    }
  }
}

// Attention graphs that take the tensor-core (mma.sync) path in halves: head dims 32..128, every
// mask kind, GQA, lengths that are not multiples of the 64-key tile.
struct AttnCase {
  int64_t B, H, Hkv, S, T, D;
  std::string mask;
};
const std::vector<AttnCase> kAttnCases = {
    {2, 4, 4, 77, 77, 64, "none"},   {1, 12, 12, 128, 128, 32, "none"}, {2, 4, 2, 50, 130, 128, "causal"},
    {2, 2, 2, 33, 100, 32, "padding"}, {1, 2, 1, 70, 70, 96, "causal_padding"}, {1, 3, 3, 40, 65, 16, "bias"}};

Graph attention_graph(DType dt, const AttnCase& c) {
  Graph g;
  Builder b(g);
  auto q = b.input("q", dt, {c.B, c.H, c.S, c.D}), k = b.input("k", dt, {c.B, c.Hkv, c.T, c.D}),
       v = b.input("v", dt, {c.B, c.Hkv, c.T, c.D});
  ValueId m = -1;
  if (c.mask == "padding" || c.mask == "causal_padding") m = b.input("m", DType::boolean, {c.B, c.T});
  if (c.mask == "bias") m = b.input("m", dt, {c.B, 1, c.S, c.T});
  b.output(b.attention(q, k, v, m, c.mask));
  return g;
}

TEST(Cuda, TensorCoreAttentionRendersAndCompiles) {
  std::string why;
  cuda::Api* a = cuda::nvrtc_only(&why);
  for (DType dt : {DType::f16, DType::bf16}) {
    for (auto& c : kAttnCases) {
      LirProgram p = lower_to_lir(attention_graph(dt, c), false);
      ASSERT_EQ(p.kernels.size(), 1u);
      std::vector<ValueType> in, out;
      for (int bi : p.kernels[0].in) in.push_back(p.buffers[bi].type);
      for (int bi : p.kernels[0].out) out.push_back(p.buffers[bi].type);
      cuda::KernelSource ks;
      ASSERT_TRUE(cuda::render_library(p.kernels[0], in, out, &ks));
      EXPECT_NE(ks.code.find(std::string("mma.sync.aligned.m16n8k16.row.col.f32.") + (dt == DType::f16 ? "f16" : "bf16")),
                std::string::npos) << c.D << " " << c.mask;
      EXPECT_EQ(ks.grid_y, static_cast<unsigned>(c.B * c.H));
      if (a) {
        EXPECT_NO_THROW(cuda::nvrtc_compile_for(*a, "sm_90", ks.code)) << dtype_name(dt) << " D" << c.D << " " << c.mask;
      }
    }
  }
  if (!a) GTEST_SKIP() << "rendered, not compiled: no NVRTC here: " << why;
}

// cumsum (forward/reverse, exclusive) and rng_uniform render and compile for every dtype cuda claims.
TEST(Cuda, CumsumAndRngRenderAndCompile) {
  std::string why;
  cuda::Api* a = cuda::nvrtc_only(&why);
  const DeviceInfo& d = device_info("cuda");
  int n = 0;
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i32, DType::i64, DType::u8}) {
    Graph g;
    Builder b(g);
    auto x = b.input("x", dt, {3, 5, 4});
    b.output(b.op1(OpKind::Cumsum, {x}, {{"axis", int64_t{1}}}));
    b.output(b.op1(OpKind::Cumsum, {x}, {{"axis", int64_t{2}}, {"reverse", int64_t{1}}, {"exclusive", int64_t{1}}}));
    if (is_float(dt))
      b.output(b.op1(OpKind::RngUniform, {}, {{"shape", Shape{2, 7}}, {"dtype", dt}, {"seed", int64_t{9}}, {"low", -1.0}}));
    EXPECT_TRUE(d.caps.has(OpKind::Cumsum, dt)) << dtype_name(dt);
    LirProgram p = lower_to_lir(g, false);
    for (auto& k : p.kernels) {
      std::vector<ValueType> in, out;
      for (int bi : k.in) in.push_back(p.buffers[bi].type);
      for (int bi : k.out) out.push_back(p.buffers[bi].type);
      cuda::KernelSource ks;
      ASSERT_TRUE(cuda::render_library(k, in, out, &ks)) << k.label() << " " << dtype_name(dt);
      ++n;
      if (k.op == OpKind::Cumsum && k.attrs.count("reverse")) {
        EXPECT_NE(ks.code.find("(3 - s)"), std::string::npos) << ks.code;  // reversed over an axis of 4
      }
      if (a) {
        EXPECT_NO_THROW(cuda::nvrtc_compile_for(*a, "sm_90", ks.code)) << k.label() << " " << dtype_name(dt);
      }
    }
  }
  EXPECT_EQ(n, 4 * 3 + 3 * 2);
}

// Reductions over many elements take the parallel (shared-memory) form, for rows and for columns.
Graph reductions_graph(DType dt) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", dt, {300, 2, 130});
  b.output(b.reduce(OpKind::ReduceSum, x, {2}, false));     // rows
  b.output(b.reduce(OpKind::ReduceSum, x, {0}, false));     // columns
  b.output(b.reduce(OpKind::ReduceMax, x, {0, 2}, false));  // both kinds of axes
  b.output(b.reduce(OpKind::ReduceMin, x, {0, 1, 2}, false));
  return g;
}

TEST(Cuda, ParallelReductionsRenderAndCompile) {
  std::string why;
  cuda::Api* a = cuda::nvrtc_only(&why);
  for (DType dt : {DType::f32, DType::f16, DType::i32}) {
    LirProgram p = lower_to_lir(reductions_graph(dt), false);
    ASSERT_EQ(p.kernels.size(), 4u);
    for (auto& k : p.kernels) {
      std::vector<ValueType> in, out;
      for (int bi : k.in) in.push_back(p.buffers[bi].type);
      for (int bi : k.out) out.push_back(p.buffers[bi].type);
      cuda::KernelSource ks;
      ASSERT_TRUE(cuda::render_library(k, in, out, &ks));
      EXPECT_NE(ks.code.find("__syncthreads"), std::string::npos) << k.label();  // the parallel form
      if (a) {
        EXPECT_NO_THROW(cuda::nvrtc_compile_for(*a, "sm_90", ks.code)) << k.label() << " " << dtype_name(dt);
      }
    }
  }
}

// Norms over 128-multiples take the vectorized register path (8/16-byte accesses).
Graph norms_graph(DType dt) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", dt, {7, 384}), r = b.input("r", dt, {7, 384});
  auto gm = b.input("g", dt, {384}), bt = b.input("b", dt, {384});
  b.output(b.layer_norm(b.add(x, r), gm, bt));  // residual folded into the norm on cuda
  b.output(b.op1(OpKind::RmsNorm, {x, gm}, {{"eps", 1e-6}}));
  b.output(b.layer_norm(x, gm, bt));
  return g;
}

TEST(Cuda, VectorNormsRenderAndCompile) {
  std::string why;
  cuda::Api* a = cuda::nvrtc_only(&why);
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    LirProgram p = lower_to_lir(norms_graph(dt), false);
    int norms = 0;
    for (auto& k : p.kernels) {
      if (k.op != OpKind::LayerNorm && k.op != OpKind::RmsNorm) continue;
      std::vector<ValueType> in, out;
      for (int bi : k.in) in.push_back(p.buffers[bi].type);
      for (int bi : k.out) out.push_back(p.buffers[bi].type);
      cuda::KernelSource ks;
      ASSERT_TRUE(cuda::render_library(k, in, out, &ks));
      EXPECT_NE(ks.code.find(dt == DType::f32 ? "float4" : "uint2"), std::string::npos) << k.label();
      ++norms;
      if (a) {
        EXPECT_NO_THROW(cuda::nvrtc_compile_for(*a, "sm_90", ks.code)) << k.label() << " " << dtype_name(dt);
      }
    }
    EXPECT_EQ(norms, 3);
  }
}

// The MNIST MLP SGD training step legalizes for cuda and every kernel of it has a cuda
// implementation (a cuBLASLt GEMM plan or a rendered kernel that NVRTC compiles): no GPU needed.
TEST(Cuda, MlpTrainStepHasCudaKernels) {
  std::string why;
  cuda::Api* a = cuda::nvrtc_only(&why);
  std::vector<int64_t> sizes{784, 128, 10};
  Graph step = train::build_train_step(models::mlp_loss_graph(sizes, 128), 4, train::OptimizerConfig{});
  LirProgram p = cuda_test::cuda_lir(step);
  int gemms = 0, rendered = 0;
  for (auto& k : p.kernels) {
    std::vector<ValueType> in, out;
    for (int b : k.in) in.push_back(p.buffers[b].type);
    for (int b : k.out) out.push_back(p.buffers[b].type);
    cuda::KernelSource ks;
    cuda::GemmShape g;
    std::string post;
    if (k.kind == KernelKind::Generated) {
      ks = cuda::render_fused(k.body, out[0]);
    } else if ((k.op == OpKind::Linear || k.op == OpKind::MatMul || k.op == OpKind::DotGeneral) &&
               cuda::plan_gemm(k, in, out[0], &g, &post)) {
      ++gemms;
      continue;
    } else if (k.op == OpKind::Reshape) {
      continue;  // a copy
    } else {
      ASSERT_TRUE(cuda::render_library(k, in, out, &ks)) << k.label();
    }
    ++rendered;
    if (a) {
      EXPECT_NO_THROW(cuda::nvrtc_compile_for(*a, "sm_90", ks.code)) << k.label();
    }
  }
  EXPECT_GE(gemms, 4);  // 2 forward + weight gradients at least
  EXPECT_GT(rendered, 0);
}

// merge-launches: the MNIST step's softmax-cross-entropy head (20 small kernels) runs as one row
// launch (per-row work over many blocks, the cross-row sums as its tail), so does the ReLU mask
// with its bias gradient (a column sum as the tail), bias+ReLU folds into the first GEMM and the
// four SGD updates run side by side; every merged kernel compiles (no GPU needed).
TEST(Cuda, MlpTrainStepMergesLaunches) {
  std::string why;
  cuda::Api* a = cuda::nvrtc_only(&why);
  Graph step = train::build_train_step(models::mlp_loss_graph({784, 128, 10}, 128), 4, train::OptimizerConfig{});
  LirProgram p = cuda_test::cuda_lir(step);
  rlx_test::ScopedEnv merged("RLX_CUDA_PERSISTENT", "0");  // the merged launches, not the persistent one
  auto launches = cuda::render_for_check(p);
  int gemms = 0, regions = 0, side = 0, rows = 0, mask = 0;
  for (auto& [label, ks] : launches) {
    gemms += label.find("cublasLt") != std::string::npos;
    regions += label.rfind("region(", 0) == 0;
    rows += label.rfind("rows(20)", 0) == 0;
    mask += label.rfind("rows(2)", 0) == 0;
    side += label.rfind("side-by-side(", 0) == 0;
    if (a && !ks.code.empty()) {
      EXPECT_NO_THROW(cuda::nvrtc_compile_for(*a, "sm_90", ks.code)) << label;
    }
  }
  EXPECT_EQ(gemms, 5);
  EXPECT_EQ(rows, 1);     // the loss head
  EXPECT_EQ(mask, 1);     // ReLU mask + bias gradient
  EXPECT_EQ(regions, 0);
  EXPECT_EQ(side, 1);     // the SGD updates
  EXPECT_EQ(launches.size(), 8u);
}

// ---- GPU-only: execution against the reference ------------------------------------------------

using cuda_test::rnd;

using rlx_test::max_abs_diff;  // NaN on one side only counts as a mismatch

TEST(Cuda, EncoderBlockMatchesReferenceAndGraphReplay) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << "no GPU here: " << why;
  for (DType dt : {DType::f32, DType::f16}) {
    Graph g;
    Builder b(g);
    auto x = b.input("x", dt, {2, 16, 64});
    auto w1 = b.input("w1", dt, {192, 64}), b1 = b.input("b1", dt, {192});
    auto w2 = b.input("w2", dt, {64, 64}), b2 = b.input("b2", dt, {64});
    auto gm = b.input("g", dt, {64}), bt = b.input("bt", dt, {64});
    auto qkv = b.linear(x, w1, b1);
    auto split = [&](int i) {
      auto s = b.op1(OpKind::Slice, {qkv}, {{"start", std::vector<int64_t>{0, 0, i * 64}},
                                            {"limit", std::vector<int64_t>{2, 16, (i + 1) * 64}}});
      return b.transpose(b.reshape(s, {2, 16, 2, 32}), {0, 2, 1, 3});
    };
    auto att = b.attention(split(0), split(1), split(2));
    auto merged = b.reshape(b.transpose(att, {0, 2, 1, 3}), {2, 16, 64});
    auto h = b.add(x, b.linear(merged, w2, b2, "gelu"));
    b.output(b.softmax(b.layer_norm(h, gm, bt)));
    std::mt19937 rng(5);
    std::vector<Tensor> in = {rnd(dt, {2, 16, 64}, rng), rnd(dt, {192, 64}, rng, 0.2), rnd(dt, {192}, rng),
                              rnd(dt, {64, 64}, rng, 0.2), rnd(dt, {64}, rng),        rnd(dt, {64}, rng),
                              rnd(dt, {64}, rng)};
    auto want = reference_run(g, in);
    CompiledModel m(g, on_cuda());
    auto eager = m.run(in);   // first run: eager launches
    auto replay = m.run(in);  // second run: captured CUDA graph
    double tol = dt == DType::f32 ? 2e-4 : 2e-2;
    EXPECT_LT(max_abs_diff(eager[0], want[0]), tol) << dtype_name(dt);
    EXPECT_EQ(max_abs_diff(eager[0], replay[0]), 0.0) << dtype_name(dt);
  }
}


TEST(Cuda, TensorCoreAttentionMatchesReference) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << "no GPU here: " << why;
  std::mt19937 rng(11);
  for (DType dt : {DType::f16, DType::bf16}) {
    for (auto& c : kAttnCases) {
      Graph g = attention_graph(dt, c);
      std::vector<Tensor> in = {rnd(dt, {c.B, c.H, c.S, c.D}, rng, 2.0), rnd(dt, {c.B, c.Hkv, c.T, c.D}, rng, 2.0),
                                rnd(dt, {c.B, c.Hkv, c.T, c.D}, rng)};
      if (c.mask == "padding" || c.mask == "causal_padding") {
        Tensor m(DType::boolean, {c.B, c.T});
        for (int64_t i = 0; i < m.numel(); ++i) m.set(i, (i % c.T) < c.T - 7 * (1 + i / c.T) ? 1.0 : 0.0);
        in.push_back(m);
      }
      if (c.mask == "bias") in.push_back(rnd(dt, {c.B, 1, c.S, c.T}, rng, 3.0));
      auto want = reference_run(g, in);
      CompiledModel m(g, on_cuda());
      auto got = m.run(in);
      // P is rounded to the input dtype before P.V (flash-attention style): a few ulps of a half.
      double tol = dt == DType::f16 ? 1e-2 : 4e-2;
      EXPECT_LT(max_abs_diff(got[0], want[0]), tol) << dtype_name(dt) << " D" << c.D << " " << c.mask << " S" << c.S << " T" << c.T;
    }
  }
}


// Q/K/V-style sibling linears (same input, constant weights) run as one batched cuBLASLt GEMM; the
// result matches the reference, with and without bias, also with erf-GELU after it.
TEST(Cuda, BatchedSiblingLinearsMatchReference) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << "no GPU here: " << why;
  std::mt19937 rng(7);
  for (DType dt : {DType::f32, DType::f16}) {
    for (const char* act : {"none", "gelu"}) {
      Graph g;
      Builder b(g);
      auto x = b.input("x", dt, {2, 9, 48});
      std::vector<ValueId> outs;
      for (int i = 0; i < 3; ++i)
        outs.push_back(b.linear(x, b.constant(rnd(dt, {40, 48}, rng, 0.3)), b.constant(rnd(dt, {40}, rng)), act));
      b.output(b.add(b.mul(outs[0], outs[1]), outs[2]));
      b.output(b.linear(x, b.constant(rnd(dt, {40, 48}, rng, 0.3)), -1, act));  // a sibling without bias: not grouped
      std::vector<Tensor> in = {rnd(dt, {2, 9, 48}, rng)};
      auto want = reference_run(g, in);
      CompiledModel m(g, on_cuda());
      auto got = m.run(in);
      double tol = dt == DType::f32 ? 2e-4 : 3e-2;
      EXPECT_LT(max_abs_diff(got[0], want[0]), tol) << dtype_name(dt) << " " << act;
      EXPECT_LT(max_abs_diff(got[1], want[1]), tol) << dtype_name(dt) << " " << act;
    }
  }
}


TEST(Cuda, ParallelReductionsMatchReference) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << "no GPU here: " << why;
  std::mt19937 rng(13);
  for (DType dt : {DType::f32, DType::f16, DType::i32}) {
    Graph g = reductions_graph(dt);
    std::vector<Tensor> in = {rnd(dt, {300, 2, 130}, rng, dt == DType::i32 ? 1000.0 : 1.0)};
    auto want = reference_run(g, in);
    CompiledModel m(g, on_cuda());
    auto got = m.run(in);
    for (size_t i = 0; i < want.size(); ++i) {
      Tolerance tol = tolerance(OpKind::ReduceSum, dt);
      for (int64_t e = 0; e < want[i].numel(); ++e)
        ASSERT_LE(std::abs(got[i].get(e) - want[i].get(e)), tol.atol + tol.rtol * std::abs(want[i].get(e)))
            << dtype_name(dt) << " output " << i << " element " << e;
    }
  }
}


// matmul + row-vector bias add runs as one cuBLASLt GEMM with a bias epilogue (fold-bias-into-gemm).
TEST(Cuda, GemmBiasFoldMatchesReference) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << "no GPU here: " << why;
  std::mt19937 rng(17);
  for (DType dt : {DType::f32, DType::f16}) {
    Graph g;
    Builder b(g);
    auto x = b.input("x", dt, {33, 70}), w = b.input("w", dt, {70, 24}), bias = b.input("b", dt, {24});
    auto h = b.add(b.matmul(x, w), bias);
    b.output(h);
    b.output(b.softmax(h));
    std::vector<Tensor> in = {rnd(dt, {33, 70}, rng), rnd(dt, {70, 24}, rng, 0.3), rnd(dt, {24}, rng)};
    auto want = reference_run(g, in);
    CompiledModel m(g, on_cuda());
    auto got = m.run(in);
    EXPECT_LT(max_abs_diff(got[0], want[0]), dt == DType::f32 ? 1e-4 : 5e-2) << dtype_name(dt);
    EXPECT_LT(max_abs_diff(got[1], want[1]), dt == DType::f32 ? 1e-5 : 1e-2) << dtype_name(dt);
  }
}


TEST(Cuda, VectorNormsMatchReference) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << "no GPU here: " << why;
  std::mt19937 rng(19);
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    Graph g = norms_graph(dt);
    std::vector<Tensor> in = {rnd(dt, {7, 384}, rng, 2.0), rnd(dt, {7, 384}, rng), rnd(dt, {384}, rng),
                              rnd(dt, {384}, rng)};
    auto want = reference_run(g, in);
    CompiledModel m(g, on_cuda());
    auto got = m.run(in);
    Tolerance tol = tolerance(OpKind::LayerNorm, dt);
    for (size_t i = 0; i < want.size(); ++i)
      for (int64_t e = 0; e < want[i].numel(); ++e)
        ASSERT_LE(std::abs(got[i].get(e) - want[i].get(e)), tol.atol + tol.rtol * std::abs(want[i].get(e)))
            << dtype_name(dt) << " output " << i << " element " << e;
  }
}


// A training step with parameters resident on the GPU (resident_feedback: new parameters written back
// into the parameter inputs, in place or by a copy) follows train::Trainer on the cpu step by step.
TEST(Cuda, ResidentTrainingMatchesCpuTrainer) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << "no GPU here: " << why;
  std::vector<int64_t> sizes{784, 32, 10};
  const int64_t B = 64;
  Graph loss = models::mlp_loss_graph(sizes, B);
  train::OptimizerConfig opt;
  Graph step = train::build_train_step(loss, 4, opt);
  LirProgram p = cuda_test::cuda_lir(step);
  auto exe = make_executable("cuda", p);
  std::mt19937 rng(23);
  Tensor x = rnd(DType::f32, {B, 784}, rng), y(DType::i64, {B});
  for (int64_t i = 0; i < B; ++i) y.data<int64_t>()[i] = static_cast<int64_t>(rng() % 10);
  Tensor lr(DType::f32, {}), lr_hat(DType::f32, {}), eps_hat(DType::f32, {});
  lr.data<float>()[0] = lr_hat.data<float>()[0] = 0.1f, eps_hat.data<float>()[0] = 0.0f;
  std::vector<Tensor> init = models::mlp_init(sizes, 3), in;
  for (auto& t : init) in.push_back(t.clone());
  in.insert(in.end(), {x, y, lr, lr_hat, eps_hat});
  exe->resident_feedback({{2, 0}, {3, 1}, {4, 2}, {5, 3}});
  exe->resident_upload(in);
  CompileOptions cpu;
  train::Trainer ref(loss, init, opt, {}, cpu);
  for (int s = 0; s < 4; ++s) {  // runs 1 and 2 eager, then the captured graph
    exe->resident_time(1);
    double want = ref.step({x, y})[0].get(0);
    EXPECT_NEAR(exe->resident_read_output(0).get(0), want, 1e-5) << "step " << s;
  }
  for (int i = 0; i < 4; ++i) EXPECT_LT(max_abs_diff(exe->resident_read_input(i), ref.params()[i]), 1e-5) << "param " << i;
}

// train::Trainer on cuda drives the resident API (parameters stay on the GPU; data and scalars
// written per step, read back on demand) and follows the cpu Trainer.
TEST(Cuda, TrainerResidentOnCudaMatchesCpu) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << "no GPU here: " << why;
  std::vector<int64_t> sizes{784, 32, 10};
  const int64_t B = 32;
  Graph loss = models::mlp_loss_graph(sizes, B);
  train::OptimizerConfig opt;
  std::vector<Tensor> init = models::mlp_init(sizes, 5);
  train::Trainer dev(loss, init, opt, {}, on_cuda()), ref(loss, init, opt, {}, CompileOptions{});
  std::mt19937 rng(29);
  for (int s = 0; s < 4; ++s) {  // a new batch every step (resident_write of the data inputs)
    Tensor x = rnd(DType::f32, {B, 784}, rng), y(DType::i64, {B});
    for (int64_t i = 0; i < B; ++i) y.data<int64_t>()[i] = static_cast<int64_t>(rng() % 10);
    double got = dev.step({x, y})[0].get(0), want = ref.step({x, y})[0].get(0);
    EXPECT_NEAR(got, want, 1e-5) << "step " << s;
  }
  for (int i = 0; i < 4; ++i) EXPECT_LT(max_abs_diff(dev.params()[i], ref.params()[i]), 1e-5) << "param " << i;
}

// A plain run() through the same executable overwrites the device inputs; a later resident_write
// of bytes equal to the last resident write must not be skipped as "unchanged" (last_small_).
TEST(Cuda, ResidentWriteAfterPlainRunIsNotSkipped) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << "no GPU here: " << why;
  Graph g;
  Builder b(g);
  ValueId a = b.input("a", DType::f32, {4}), s = b.input("s", DType::f32, {4});
  b.output(b.mul(a, s));
  CompiledModel m(g, on_cuda());
  Executable& e = m.executable();
  Tensor av = Tensor::from(DType::f32, {4}, std::vector<float>{1, 2, 3, 4});
  Tensor s1 = Tensor::from(DType::f32, {4}, std::vector<float>{2, 2, 2, 2});
  Tensor s2 = Tensor::from(DType::f32, {4}, std::vector<float>{5, 5, 5, 5});
  e.resident_upload({av, s1});
  e.resident_run(1);
  EXPECT_EQ(e.resident_read_output(0).get(3), 8.0);
  EXPECT_EQ(e.run({av, s2})[0].get(3), 20.0);  // the device input s now holds s2
  e.resident_write(1, s1);                        // same bytes as the last resident write
  e.resident_run(1);
  EXPECT_EQ(e.resident_read_output(0).get(3), 8.0);
}

}  // namespace
}  // namespace rlx
