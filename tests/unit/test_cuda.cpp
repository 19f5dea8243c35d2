// The cuda backend: the unavailable path and the renderer's output run everywhere; the rendered
// kernels are compile-checked with NVRTC wherever libnvrtc exists (no GPU needed); the execution
// checks run only where a GPU is present and skip with the reason otherwise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "backends/cuda/cuda_api.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/render.h"
#include "rlx/builder.h"
#include "rlx/device.h"
#include "rlx/reference.h"
#include "rlx/session.h"

namespace rlx {
namespace {

CompileOptions on_cuda() {
  CompileOptions o;
  o.device = "cuda";
  return o;
}

bool gpu(std::string* why) {
  const DeviceInfo& d = device_info("cuda");
  *why = d.reason;
  return d.can_execute();
}

TEST(Cuda, StatusExplainsItself) {
  const DeviceInfo& d = device_info("cuda");
  EXPECT_FALSE(d.reason.empty());
  if (!d.can_execute()) {
    EXPECT_TRUE(d.status == DeviceStatus::NoDriver || d.status == DeviceStatus::NoHardware) << d.reason;
  } else {
    EXPECT_NE(d.reason.find("sm_"), std::string::npos) << d.reason;
  }
  // The capability set is the backend's real one: GEMM/attention in halves, no complex, no conv.
  EXPECT_TRUE(d.caps.has(OpKind::Linear, DType::f16));
  EXPECT_TRUE(d.caps.has(OpKind::Attention, DType::bf16));
  EXPECT_FALSE(d.caps.has(OpKind::Conv, DType::f32));
  EXPECT_FALSE(d.caps.storage.has(DType::c64));
}

TEST(Cuda, UnavailablePathFailsWithReason) {
  std::string why;
  if (gpu(&why)) GTEST_SKIP() << "a GPU is present here: " << why;
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
    setenv("RLX_CUDA_ATTN_VEC", "1", 1);  // the opt-in attention variant compiles too
    for (auto& [label, k] : library_kernels(dt))
      if (label == "attention") ks.push_back({"attention(vec)", k});
    unsetenv("RLX_CUDA_ATTN_VEC");
    ks.push_back({"fused", cuda::render_fused(fused_body(dt), ValueType{dt, {3, 5}})});
    for (auto& [label, k] : ks) {
      std::string bin;
      EXPECT_NO_THROW(bin = cuda::nvrtc_compile_for(*a, "sm_90", k.code)) << label << " " << dtype_name(dt);
      EXPECT_GT(bin.size(), 100u) << label;
    }
  }
}

// ---- GPU-only: execution against the reference ------------------------------------------------

Tensor rand_t(DType dt, std::vector<int64_t> s, std::mt19937& rng, double scale = 1.0) {
  Tensor t(dt, std::move(s));
  std::uniform_real_distribution<double> u(-scale, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, u(rng));
  return t;
}

double max_err(const Tensor& a, const Tensor& b) {
  double e = 0;
  for (int64_t i = 0; i < a.numel(); ++i) e = std::max(e, std::abs(a.get(i) - b.get(i)));
  return e;
}

TEST(Cuda, EncoderBlockMatchesReferenceAndGraphReplay) {
  std::string why;
  if (!gpu(&why)) GTEST_SKIP() << "no GPU here: " << why;
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
    std::vector<Tensor> in = {rand_t(dt, {2, 16, 64}, rng), rand_t(dt, {192, 64}, rng, 0.2), rand_t(dt, {192}, rng),
                              rand_t(dt, {64, 64}, rng, 0.2), rand_t(dt, {64}, rng),        rand_t(dt, {64}, rng),
                              rand_t(dt, {64}, rng)};
    auto want = reference_run(g, in);
    CompiledModel m(g, on_cuda());
    auto eager = m.run(in);   // first run: eager launches
    auto replay = m.run(in);  // second run: captured CUDA graph
    double tol = dt == DType::f32 ? 2e-4 : 2e-2;
    EXPECT_LT(max_err(eager[0], want[0]), tol) << dtype_name(dt);
    EXPECT_EQ(max_err(eager[0], replay[0]), 0.0) << dtype_name(dt);
  }
}

}  // namespace
}  // namespace rlx
