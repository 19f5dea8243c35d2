// Gaussian splatting on cuda (src/backends/cuda/splat.h): legalization claims the four splat ops
// natively, every kernel a render and a gradient graph launch compiles with NVRTC for sm_90 (no GPU
// needed, only libnvrtc), and on a GPU the image, alpha and every gradient match the cpu backend on
// a small seeded scene (float atomics: equal to rounding, not bit for bit).
// scripts/device/h200_splatcuda.sh runs these on the H200.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "autodiff/autodiff.h"
#include "backends/cuda/cuda_api.h"
#include "backends/cuda/cuda_backend.h"
#include "cuda_test_util.h"
#include "rlx/session.h"
#include "splat/pipeline.h"
#include "splat/synthetic.h"

using namespace rlx;
using namespace rlx::splat;

namespace {

struct SplatCase {
  int64_t n = 0, w = 0, h = 0;
  RenderOptions opt;
  std::vector<Tensor> inputs;  // the loss graph's: render inputs, offset2d, target
};

// Overlapping Gaussians, some nearly opaque (saturated pixels), SH degree 3, a partial edge tile.
SplatCase make_case(int64_t n, int64_t w, int64_t h) {
  SplatCase c;
  c.n = n, c.w = w, c.h = h;
  Scene s = random_scene(n, 3, 11, 0.6, 0.12, DType::f32);
  for (int64_t i = 0; i < n; ++i) s.opacity_logits.set(i, 2.0 + 2.5 * std::sin(static_cast<double>(i)));
  const double eye[3] = {0.3, -0.4, -3.0}, target[3] = {0, 0, 0};
  Camera cam = look_at(eye, target, w, h, 55);
  c.opt.width = w, c.opt.height = h, c.opt.sh_degree = 3, c.opt.dtype = DType::f32;
  c.inputs = {s.means, s.log_scales, s.quats, s.opacity_logits, s.sh, cam.viewmat(DType::f32), cam.intrinsics(DType::f32),
              cam.center(DType::f32), Tensor::from<double>(DType::f32, {3}, {0.1, 0.2, 0.3}), Tensor(DType::f32, {n, 2})};
  Tensor tgt(DType::f32, {h, w, 3});
  for (int64_t i = 0; i < tgt.numel(); ++i) tgt.set(i, 0.5 + 0.4 * std::sin(0.1 * static_cast<double>(i)));
  c.inputs.push_back(tgt);
  return c;
}

// max |a - b| over max |b|, and that scale.
std::pair<double, double> rel_err(const Tensor& a, const Tensor& b) {
  double scale = 0, err = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    scale = std::max(scale, std::abs(b.get(i)));
    err = std::max(err, std::abs(a.get(i) - b.get(i)));
  }
  return {scale > 0 ? err / scale : err, scale};
}

Graph grad_graph(const SplatCase& c) {
  // d loss / d means, log_scales, quats, opacity logits, SH, viewmat, background, offset2d
  return ad::value_and_grad(loss_graph(c.n, 16, c.opt), {0, 1, 2, 3, 4, 5, 8, 9});
}

std::vector<Tensor> render_inputs(const SplatCase& c) { return {c.inputs.begin(), c.inputs.begin() + 9}; }

}  // namespace

TEST(SplatCuda, NativeAndKernelsCompileForSm90) {
  std::string why;
  cuda::Api* a = cuda::nvrtc_only(&why);
  SplatCase c = make_case(40, 50, 37);
  int splat_kernels = 0, raster = 0, raster_grad = 0, project = 0, project_grad = 0;
  for (const Graph& g : {render_graph(c.n, 16, c.opt), grad_graph(c)}) {
    LirProgram p = cuda_test::cuda_lir(g);  // legalization for cuda succeeds: the splat ops are claimed
    for (auto& [label, ks] : cuda::render_for_check(p)) {
      if (label.rfind("splat_", 0) != 0) continue;
      ++splat_kernels;
      raster += label.find("[rasterize]") != std::string::npos;
      raster_grad += label.find("[rasterize_grad]") != std::string::npos;
      project += label.find("[project]") != std::string::npos;
      project_grad += label.find("[project_grad]") != std::string::npos;
      ASSERT_FALSE(ks.code.empty()) << label;
      if (a) {
        EXPECT_NO_THROW(cuda::nvrtc_compile_for(*a, "sm_90", ks.code)) << label;
      }
    }
  }
  // the gradient graph renders forward too (the loss needs the image)
  EXPECT_EQ(raster, 2);
  EXPECT_EQ(raster_grad, 1);
  EXPECT_EQ(project, 2);
  EXPECT_EQ(project_grad, 1);
  EXPECT_GE(splat_kernels, 3 * 12 + 2);
  if (!a) GTEST_SKIP() << "rendered, not compiled: no NVRTC here: " << why;
}

TEST(SplatCuda, ImageAndGradientsMatchCpuOnGpu) {
  std::string why;
  if (!cuda_test::have_gpu(&why)) GTEST_SKIP() << "no GPU here: " << why;
  for (auto [n, w, h] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{60, 50, 37}, {400, 130, 97}}) {
    SplatCase c = make_case(n, w, h);
    CompileOptions co;
    co.device = "cuda";
    Graph rg = render_graph(n, 16, c.opt);
    CompiledModel cpu_r(rg, CompileOptions{}), cuda_r(rg, co);
    auto want = cpu_r.run(render_inputs(c));
    auto got = cuda_r.run(render_inputs(c));
    got = cuda_r.run(render_inputs(c));  // a second run reuses the sort buffers
    double covered = 0;
    for (int64_t i = 0; i < want[1].numel(); ++i) covered += want[1].get(i) > 0.05;
    ASSERT_GT(covered / static_cast<double>(want[1].numel()), 0.2) << "the scene covers the image";
    for (int k = 0; k < 2; ++k) {
      auto [e, s] = rel_err(got[k], want[k]);
      std::printf("  %lldx%lld N=%lld %s: max rel err %.3g (scale %.3g)\n", (long long)w, (long long)h, (long long)n,
                  k == 0 ? "image" : "alpha", e, s);
      EXPECT_LE(e, 1e-4) << (k == 0 ? "image" : "alpha");
    }
    Graph vg = grad_graph(c);
    CompiledModel cpu_g(vg, CompileOptions{}), cuda_g(vg, co);
    auto gw = cpu_g.run(c.inputs);
    auto gg = cuda_g.run(c.inputs);
    ASSERT_EQ(gw.size(), gg.size());
    const char* names[] = {"loss", "image", "means", "log_scales", "quats", "opacity_logits", "sh", "viewmat",
                           "background", "offset2d"};
    for (size_t k = 0; k < gw.size(); ++k) {
      auto [e, s] = rel_err(gg[k], gw[k]);
      std::printf("  %lldx%lld N=%lld d %s: max rel err %.3g (scale %.3g)\n", (long long)w, (long long)h, (long long)n,
                  k < 10 ? names[k] : "?", e, s);
      EXPECT_GT(s, 0) << names[k];
      EXPECT_LE(e, 1e-4) << names[k];
    }
  }
}
