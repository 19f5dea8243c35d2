// Our f16/bf16 tensor-core GEMM with fused epilogues (render_gemm.h) and the
// GemmPlan candidates around it: every configuration NVRTC-compiles for sm_90 (no GPU needed); on a
// GPU every candidate of a plan (cuBLASLt ones with their separate epilogue kernel, and ours) is
// run on odd shapes against a float64 host reference, output poisoned before each run; and models
// with linear+GELU and linear+residual+LayerNorm match the reference interpreter end to end.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backends/cuda/cuda_api.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/fuse_embed.h"
#include "backends/cuda/gemm.h"
#include "backends/cuda/memory.h"
#include "backends/cuda/render_gemm.h"
#include "passes/passes.h"
#include "rlx/builder.h"
#include "rlx/lir.h"
#include "rlx/device.h"
#include "rlx/reference.h"
#include "rlx/session.h"
#include "cuda_test_util.h"
#include "test_util.h"

namespace rlx {
namespace {

using cuda_test::rnd;

using cuda_test::have_gpu;

cuda::GemmShape shape(DType dt, int64_t M, int64_t N, int64_t K, const std::string& epi, bool bias = true,
                      int64_t batch = 1) {
  cuda::GemmShape s;
  s.dtype = dt, s.M = M, s.N = N, s.K = K, s.b_trans = true, s.bias = bias, s.epilogue = epi, s.batch = batch;
  if (epi == "layernorm") s.eps = 1e-5;
  if (batch > 1) s.stride_a = 0, s.stride_b = N * K, s.stride_c = M * N, s.bias_stride = bias ? N : 0;  // siblings
  return s;
}

std::vector<cuda::GemmShape> cases(DType dt) {
  return {shape(dt, 77, 200, 72, "none"),       shape(dt, 77, 200, 72, "none", false), shape(dt, 77, 200, 72, "relu"),
          shape(dt, 77, 200, 72, "gelu"),       shape(dt, 130, 136, 40, "silu"),       shape(dt, 50, 64, 40, "none", true, 3),
          shape(dt, 77, 96, 72, "layernorm"),   shape(dt, 77, 384, 136, "layernorm"),  shape(dt, 128, 384, 1536, "layernorm"),
          shape(dt, 300, 1536, 384, "gelu")};
}

TEST(CudaGemm, OwnKernelsCompileWithNvrtc) {
  std::string why;
  cuda::Api* a = cuda::nvrtc_only(&why);
  if (!a) GTEST_SKIP() << "no NVRTC here: " << why;
  int n = 0;
  for (DType dt : {DType::f16, DType::bf16})
    for (const auto& s : cases(dt)) {
      auto cfgs = cuda::own_gemm_configs(s);
      EXPECT_FALSE(cfgs.empty()) << s.epilogue << " N" << s.N;
      for (const auto& c : cfgs) {
        if (dt == DType::bf16 && &c != &cfgs.front()) break;  // bf16 differs only in two spellings: one config each
        cuda::KernelSource ks = cuda::render_own_gemm(s, c);
        std::string bin;
        EXPECT_NO_THROW(bin = cuda::nvrtc_compile_for(*a, "sm_90", ks.code)) << c.name() << " " << s.epilogue;
        EXPECT_GT(bin.size(), 100u);
        ++n;
      }
    }
  EXPECT_GE(n, 20);
  // Layernorm rows split over a cluster where N allows (N = 384: 2 or 4 blocks per row).
  bool clustered = false;
  for (const auto& c : cuda::own_gemm_configs(shape(DType::f16, 128, 384, 384, "layernorm"))) clustered |= c.cluster > 1;
  EXPECT_TRUE(clustered);
  // Not ours: f32, K not a multiple of 8, B not transposed.
  EXPECT_FALSE(cuda::own_gemm_supported(shape(DType::f32, 8, 8, 8, "none")));
  EXPECT_FALSE(cuda::own_gemm_supported(shape(DType::f16, 8, 8, 12, "none")));
  auto nt = shape(DType::f16, 8, 8, 8, "none");
  nt.b_trans = false;
  EXPECT_FALSE(cuda::own_gemm_supported(nt));
}

// float64 reference of the plan's function on the (already rounded) inputs.
std::vector<double> reference(const cuda::GemmShape& s, const Tensor& A, const Tensor& W, const Tensor& bias,
                              const Tensor& res, const Tensor& g, const Tensor& be) {
  std::vector<double> out(static_cast<size_t>(s.batch * s.M * s.N));
  for (int64_t z = 0; z < s.batch; ++z)
    for (int64_t m = 0; m < s.M; ++m) {
      std::vector<double> row(s.N);
      for (int64_t n = 0; n < s.N; ++n) {
        double acc = s.bias ? bias.get(z * s.N + n) : 0.0;
        for (int64_t k = 0; k < s.K; ++k) acc += A.get(m * s.K + k) * W.get((z * s.N + n) * s.K + k);
        if (s.epilogue == "relu") acc = std::max(acc, 0.0);
        if (s.epilogue == "gelu") acc = 0.5 * acc * (1.0 + std::erf(acc / std::sqrt(2.0)));
        if (s.epilogue == "silu") acc = acc / (1.0 + std::exp(-acc));
        if (s.epilogue == "layernorm") acc += res.get(m * s.N + n);
        row[n] = acc;
      }
      if (s.epilogue == "layernorm") {
        double mean = 0, var = 0;
        for (double v : row) mean += v;
        mean /= static_cast<double>(s.N);
        for (double v : row) var += (v - mean) * (v - mean);
        double inv = 1.0 / std::sqrt(var / static_cast<double>(s.N) + s.eps);
        for (int64_t n = 0; n < s.N; ++n) row[n] = (row[n] - mean) * inv * g.get(n) + be.get(n);
      }
      for (int64_t n = 0; n < s.N; ++n) out[(z * s.M + m) * s.N + n] = row[n];
    }
  return out;
}

struct Dev {
  cuda::DeviceBlock b;
  explicit Dev(const Tensor& t) : b(std::max<size_t>(t.nbytes(), 16)) {
    cuda::check(cuda::api().cuMemcpyHtoDAsync(b.ptr, t.raw(), t.nbytes(), nullptr), "upload");
  }
};

TEST(CudaGemm, EveryCandidateMatchesFloat64OnOddShapes) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << "no GPU here: " << why;
  cuda::Api& a = cuda::api();
  std::mt19937 rng(23);
  for (DType dt : {DType::f16, DType::bf16}) {
    for (const auto& s : cases(dt)) {
      Tensor A = rnd(dt, {s.M, s.K}, rng), W = rnd(dt, {s.batch * s.N, s.K}, rng, 1.0 / std::sqrt(double(s.K)) * 1.7),
             bias = rnd(dt, {s.batch * s.N}, rng), res = rnd(dt, {s.M, s.N}, rng, 2.0), g = rnd(dt, {s.N}, rng, 1.5),
             be = rnd(dt, {s.N}, rng);
      auto want = reference(s, A, W, bias, res, g, be);
      Dev dA(A), dW(W), dB(bias), dR(res), dG(g), dBe(be);
      cuda::DeviceBlock C(static_cast<size_t>(s.batch * s.M * s.N * 2)), ws(32u << 20);
      cuda::GemmPlan plan(s, 32u << 20);
      if (s.epilogue == "layernorm") plan.set_norm_args(dR.b.ptr, dG.b.ptr, dBe.b.ptr);
      int own = 0;
      for (int c = 0; c < plan.candidates(); ++c) {
        plan.select(c);
        cuda::check(a.cuMemsetD8Async(C.ptr, 0xff, C.bytes, nullptr), "poison");  // NaN halves
        try {
          plan.run(dA.b.ptr, dW.b.ptr, s.bias ? dB.b.ptr : 0, C.ptr, ws.ptr, nullptr);
          cuda::check(a.cuStreamSynchronize(nullptr), "run");
        } catch (const Error& e) {
          if (plan.choice().rfind("own", 0) == 0) ADD_FAILURE() << plan.choice() << ": " << e.what();
          continue;  // a cuBLASLt candidate that cannot run (the autotuner skips it the same way)
        }
        own += plan.choice().rfind("own", 0) == 0;
        Tensor got(dt, {s.batch * s.M * s.N});
        cuda::check(a.cuMemcpyDtoHAsync(got.raw(), C.ptr, got.nbytes(), nullptr), "download");
        cuda::check(a.cuStreamSynchronize(nullptr), "sync");
        double atol = dt == DType::f16 ? 1.5e-2 : 6e-2, rtol = dt == DType::f16 ? 4e-3 : 2e-2;
        double worst = 0;
        int64_t bad = -1;
        for (int64_t i = 0; i < got.numel(); ++i) {
          double e = std::abs(got.get(i) - want[i]) - rtol * std::abs(want[i]);
          if (!(e <= atol) && bad < 0) bad = i;  // NaN (unwritten) fails too
          worst = std::max(worst, e);
        }
        EXPECT_LT(bad, 0) << dtype_name(dt) << " " << s.epilogue << " " << s.batch << "x" << s.M << "x" << s.N << "x" << s.K
                          << " " << plan.choice() << ": element " << bad << " = " << (bad >= 0 ? got.get(bad) : 0.0)
                          << ", want " << (bad >= 0 ? want[bad] : 0.0);
      }
      EXPECT_EQ(own, static_cast<int>(cuda::own_gemm_configs(s, a.sm_count).size())) << s.epilogue;
    }
  }
}

// A BERT FFN half-block: h = LN(x + linear(x)), out = LN(h + linear(gelu(linear(h)))).
Graph ffn_graph(DType dt, std::mt19937& rng) {
  Graph gr;
  Builder b(gr);
  const int64_t B = 3, S = 37, H = 128, F = 512;
  auto x = b.input("x", dt, {B, S, H});
  auto c = [&](std::vector<int64_t> s, double sc) { return b.constant(rnd(dt, std::move(s), rng, sc)); };
  auto h = b.layer_norm(b.add(x, b.linear(x, c({H, H}, 0.15), c({H}, 0.5))), c({H}, 1.0), c({H}, 0.5), 1e-12);
  auto f = b.linear(b.linear(h, c({F, H}, 0.15), c({F}, 0.5), "gelu"), c({H, F}, 0.08), c({H}, 0.5));
  b.output(b.layer_norm(b.add(h, f), c({H}, 1.0), c({H}, 0.5), 1e-12));
  return gr;
}

// The launch plan (no GPU needed): both residual LayerNorms fold into their GEMMs and the erf-GELU
// into the FFN-up GEMM: 3 GEMM steps, nothing else.
TEST(CudaGemm, FfnBlockLaunchPlanFoldsEpilogues) {
  std::mt19937 rng(3);
  for (DType dt : {DType::f16, DType::bf16}) {
    Graph g = ffn_graph(dt, rng);
    LirProgram p = cuda_test::cuda_lir(g);
    auto launches = cuda::render_for_check(p);
    int gemms = 0;
    for (auto& [label, ks] : launches) gemms += label.find("cublasLt") != std::string::npos;
    EXPECT_EQ(gemms, 3) << dtype_name(dt);
    EXPECT_EQ(launches.size(), 3u) << dtype_name(dt);
  }
  {  // the linear's output is also a graph output: no fold (the norm would hide it)
    Graph g2;
    Builder b(g2);
    auto x = b.input("x", DType::f16, {4, 64});
    auto y = b.linear(x, b.constant(rnd(DType::f16, {64, 64}, rng)), b.constant(rnd(DType::f16, {64}, rng)));
    b.output(b.layer_norm(b.add(x, y), b.constant(rnd(DType::f16, {64}, rng)), b.constant(rnd(DType::f16, {64}, rng))));
    b.output(y);
    Legalized l2 = legalize(g2, "cuda", {});
    LirProgram p2 = lower_to_lir(eliminate_dead_code(fold_constants(l2.graph)), true);
    EXPECT_EQ(cuda::render_for_check(p2).size(), 2u);
  }
  // f32 keeps cuBLASLt with the separate GELU and norm kernels.
  Graph g = ffn_graph(DType::f32, rng);
  LirProgram p = cuda_test::cuda_lir(g);
  EXPECT_EQ(cuda::render_for_check(p).size(), 6u);
}

// Through the whole backend: linear+erf-GELU and linear+residual+LayerNorm (a BERT FFN) in halves;
// the fold removes the separate norm launches; result vs the reference interpreter, also with
// autotuning off (cuBLASLt's first candidate plus the separate epilogue kernels).
TEST(CudaGemm, FfnBlockMatchesReference) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << "no GPU here: " << why;
  std::mt19937 rng(29);
  for (DType dt : {DType::f16, DType::bf16}) {
    for (const char* tune : {"1", "0"}) {
      rlx_test::ScopedEnv autotune("RLX_CUDA_GEMM_AUTOTUNE", tune);
      Graph gr = ffn_graph(dt, rng);
      std::vector<Tensor> in = {rnd(dt, {3, 37, 128}, rng, 2.0)};
      auto want = reference_run(gr, in);
      CompileOptions o;
      o.device = "cuda";
      CompiledModel m(gr, o);
      auto got = m.run(in);
      auto replay = m.run(in);
      double e = 0;
      for (int64_t i = 0; i < want[0].numel(); ++i) e = std::max(e, std::abs(got[0].get(i) - want[0].get(i)));
      EXPECT_LT(e, dt == DType::f16 ? 3e-2 : 1.5e-1) << dtype_name(dt) << " autotune " << tune;
      for (int64_t i = 0; i < want[0].numel(); ++i) ASSERT_EQ(got[0].get(i), replay[0].get(i));
    }
  }
}

// fold-embedding-norm (fuse_embed.h): a BERT input block, embedding + position + token type adds +
// LayerNorm, is one launch; it NVRTC-compiles (no GPU needed) and matches the reference on a GPU.
Graph embed_graph(DType dt, int64_t H, std::mt19937& rng) {
  Graph g;
  Builder b(g);
  const int64_t B = 3, S = 21, V = 50;
  auto c = [&](std::vector<int64_t> s, double sc) { return b.constant(rnd(dt, std::move(s), rng, sc)); };
  auto ids = b.input("ids", DType::i64, {B, S});
  auto x = b.op1(OpKind::Embedding, {c({V, H}, 1.0), ids});
  x = b.add(b.add(x, c({S, H}, 0.5)), c({H}, 0.5));
  b.output(b.layer_norm(x, c({H}, 1.0), c({H}, 0.5), 1e-12));
  return g;
}

TEST(CudaGemm, EmbeddingNormIsOneLaunch) {
  std::string why;
  cuda::Api* a = cuda::nvrtc_only(&why);
  std::mt19937 rng(31);
  for (DType dt : {DType::f16, DType::bf16, DType::f32})
    for (int64_t H : {384, 100}) {
      Graph g = embed_graph(dt, H, rng);
      LirProgram p = cuda_test::cuda_lir(g);
      auto launches = cuda::render_for_check(p);
      ASSERT_EQ(launches.size(), 1u) << dtype_name(dt) << " H" << H;
      if (a) {
        EXPECT_NO_THROW(cuda::nvrtc_compile_for(*a, "sm_90", launches[0].second.code)) << dtype_name(dt);
      }
    }
  // The embedding's sum is also a graph output: no fold.
  Graph g;
  Builder b(g);
  auto ids = b.input("ids", DType::i64, {2, 5});
  auto x = b.add(b.op1(OpKind::Embedding, {b.constant(rnd(DType::f16, {9, 32}, rng)), ids}),
                 b.constant(rnd(DType::f16, {32}, rng)));
  b.output(b.layer_norm(x, b.constant(rnd(DType::f16, {32}, rng)), b.constant(rnd(DType::f16, {32}, rng))));
  b.output(x);
  LirProgram p = cuda_test::cuda_lir(g);
  EXPECT_GE(cuda::render_for_check(p).size(), 2u);
}

TEST(CudaGemm, EmbeddingNormMatchesReference) {
  std::string why;
  if (!have_gpu(&why)) GTEST_SKIP() << "no GPU here: " << why;
  std::mt19937 rng(37);
  for (DType dt : {DType::f16, DType::bf16, DType::f32})
    for (int64_t H : {384, 100}) {
      Graph g = embed_graph(dt, H, rng);
      Tensor ids(DType::i64, {3, 21});
      for (int64_t i = 0; i < ids.numel(); ++i) ids.set(i, static_cast<double>((i * 7 + 3) % 50));
      auto want = reference_run(g, {ids});
      CompileOptions o;
      o.device = "cuda";
      CompiledModel m(g, o);
      auto got = m.run({ids});
      double e = 0;
      for (int64_t i = 0; i < want[0].numel(); ++i) e = std::max(e, std::abs(got[0].get(i) - want[0].get(i)));
      EXPECT_LT(e, dt == DType::f32 ? 1e-4 : (dt == DType::f16 ? 2e-2 : 1e-1)) << dtype_name(dt) << " H" << H;
    }
}

}  // namespace
}  // namespace rlx
