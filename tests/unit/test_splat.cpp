// Gaussian splatting ops: the cpu kernels against the float64 reference, the analytic VJPs against
// central finite differences in f64, binning order, and the shape rules' errors.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "autodiff/autodiff.h"
#include "rlx/builder.h"
#include "rlx/reference.h"
#include "rlx/session.h"
#include "splat/pipeline.h"
#include "splat/splat_math.h"
#include "splat/synthetic.h"

using namespace rlx;
using namespace rlx::splat;

namespace {

struct Case {
  Scene scene;
  Camera cam;
  RenderOptions opt;
  std::vector<Tensor> inputs(DType dt) const {
    auto cv = [&](const Tensor& t) {
      Tensor o(dt, t.shape());
      for (int64_t i = 0; i < t.numel(); ++i) o.set(i, t.get(i));
      return o;
    };
    return {cv(scene.means), cv(scene.log_scales), cv(scene.quats), cv(scene.opacity_logits), cv(scene.sh),
            cam.viewmat(dt), cam.intrinsics(dt), cam.center(dt), Tensor::from<double>(dt, {3}, {0.1, 0.2, 0.3})};
  }
};

Case small_case(int64_t n, int degree, int64_t w, int64_t h, uint64_t seed, DType dt = DType::f64) {
  Case c;
  c.scene = random_scene(n, degree, seed, 0.6, 0.12, DType::f64);
  const double eye[3] = {0.3, -0.4, -3.0}, target[3] = {0, 0, 0};
  c.cam = look_at(eye, target, w, h, 55);
  c.opt.width = w;
  c.opt.height = h;
  c.opt.sh_degree = degree;
  c.opt.dtype = dt;
  return c;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::abs(a.get(i) - b.get(i)));
  return m;
}

}  // namespace

TEST(Splat, CpuMatchesReference) {
  for (DType dt : {DType::f64, DType::f32}) {
    Case c = small_case(60, 3, 40, 33, 7, dt);
    Graph g = render_graph(60, 16, c.opt);
    auto in = c.inputs(dt);
    auto ref = reference_run(g, in);
    CompiledModel m(g, CompileOptions{});
    auto got = m.run(in);
    double mx = 0;
    for (int64_t i = 0; i < ref[0].numel(); ++i) mx = std::max(mx, std::abs(ref[0].get(i)));
    ASSERT_GT(mx, 0.2) << "scene renders something";
    double covered = 0;
    for (int64_t i = 0; i < ref[1].numel(); ++i) covered += ref[1].get(i) > 0.05;
    EXPECT_GT(covered / static_cast<double>(ref[1].numel()), 0.2);
    EXPECT_LE(max_abs_diff(ref[0], got[0]), dt == DType::f64 ? 1e-12 : 1e-5 * mx) << dtype_name(dt);
    EXPECT_LE(max_abs_diff(ref[1], got[1]), dt == DType::f64 ? 1e-12 : 1e-5) << dtype_name(dt);
  }
}

TEST(Splat, ReportSaysNativeOnCpu) {
  Case c = small_case(8, 0, 16, 16, 1, DType::f32);
  CompiledModel m(render_graph(8, 1, c.opt), CompileOptions{});
  std::string r = m.report().table();
  EXPECT_NE(r.find("splat_rasterize"), std::string::npos) << r;
  EXPECT_NE(r.find("splat_project"), std::string::npos) << r;
}

TEST(Splat, OtherDeviceFailsWithReport) {
  Case c = small_case(8, 0, 16, 16, 1, DType::f32);
  CompileOptions co;
  co.device = "vulkan";
  try {
    CompiledModel m(render_graph(8, 1, c.opt), co);
    m.report();
    FAIL() << "vulkan has no splat kernels";
  } catch (const Error& e) {
    std::string s = e.what();
    EXPECT_NE(s.find("splat_"), std::string::npos) << s;
    const size_t could = s.find("devices that could run it:");
    ASSERT_NE(could, std::string::npos) << s;
    EXPECT_NE(s.find("cpu", could), std::string::npos) << s;
    EXPECT_NE(s.find("cuda", could), std::string::npos) << s;  // the cuda splat kernels (f32)
  }
}

TEST(Splat, BinningIsDepthSortedPerTile) {
  Case c = small_case(80, 0, 48, 40, 3, DType::f64);
  const int64_t n = 80;
  std::vector<double> m2(2 * n), con(3 * n), dep(n);
  std::vector<int32_t> rad(2 * n);
  std::vector<double> op(n);
  for (int64_t i = 0; i < n; ++i) op[i] = 1 / (1 + std::exp(-c.scene.opacity_logits.get(i)));
  ProjectParams pp;
  pp.width = 48;
  pp.height = 40;
  double view[16], K[9] = {c.cam.fx, 0, c.cam.cx, 0, c.cam.fy, c.cam.cy, 0, 0, 1};
  for (int i = 0; i < 16; ++i) view[i] = c.cam.view[i];
  auto serial = [](int64_t cnt, auto&& fn) { fn(int64_t{0}, cnt); };
  project_forward<double>(n, c.scene.means.data<double>(), c.scene.log_scales.data<double>(),
                          c.scene.quats.data<double>(), op.data(), view, K, pp, m2.data(), con.data(), dep.data(),
                          rad.data(), serial);
  TileBins b = bin_tiles<double>(n, m2.data(), rad.data(), dep.data(), 48, 40, 16);
  ASSERT_EQ(b.offsets.size(), static_cast<size_t>(3 * 3 + 1));
  ASSERT_GT(b.ids.size(), 0u);
  for (size_t t = 0; t + 1 < b.offsets.size(); ++t)
    for (int64_t k = b.offsets[t] + 1; k < b.offsets[t + 1]; ++k)
      EXPECT_LE(dep[b.ids[k - 1]], dep[b.ids[k]]);
}

TEST(Splat, ShapeRuleErrors) {
  Graph g;
  Builder b(g);
  ValueId m = b.input("m", DType::f32, {4, 3}), s = b.input("s", DType::f32, {4, 2});
  ValueId q = b.input("q", DType::f32, {4, 4}), o = b.input("o", DType::f32, {4});
  ValueId v = b.input("v", DType::f32, {4, 4}), k = b.input("k", DType::f32, {3, 3});
  try {
    b.op(OpKind::SplatProject, {m, s, q, o, v, k}, {{"width", int64_t{8}}, {"height", int64_t{8}}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("log_scales must be [N,3]"), std::string::npos) << e.what();
  }
  ValueId d = b.input("d", DType::f32, {4, 3}), c = b.input("c", DType::f32, {4, 4, 3});
  try {
    b.op(OpKind::SplatSh, {d, c}, {{"degree", int64_t{2}}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs K >= 9"), std::string::npos) << e.what();
  }
}

// d/dx of sum(w_img * image) + sum(w_a * alpha) for every float input of the render graph (K
// excepted): analytic (autodiff through the splat VJPs, cpu, f64) against central differences.
TEST(Splat, GradientsMatchFiniteDifferences) {
  const int64_t n = 12, w = 20, h = 18;
  Case c = small_case(n, 3, w, h, 11, DType::f64);
  for (int64_t i = 0; i < n; ++i) c.scene.opacity_logits.set(i, 0.4 * std::sin(i + 1.0) - 0.5);
  Graph r = render_graph(n, 16, c.opt);
  Graph f;
  f.name = "splat_fd";
  Builder b(f);
  std::vector<ValueId> ins;
  for (ValueId v : r.inputs) ins.push_back(b.input(r.values[v].name, r.type(v).dtype, r.type(v).shape));
  auto outs = ad::inline_graph(b, r, ins);
  Tensor wi(DType::f64, {h, w, 3}), wa(DType::f64, {h, w});
  for (int64_t i = 0; i < wi.numel(); ++i) wi.set(i, std::sin(0.37 * i + 0.2));
  for (int64_t i = 0; i < wa.numel(); ++i) wa.set(i, std::cos(0.21 * i));
  ValueId l1 = b.reduce(OpKind::ReduceSum, b.mul(outs[0], b.constant(wi)), {0, 1, 2}, false);
  ValueId l2 = b.reduce(OpKind::ReduceSum, b.mul(outs[1], b.constant(wa)), {0, 1}, false);
  b.output(b.add(l1, l2));
  const std::vector<int> wrt = {0, 1, 2, 3, 4, 5, 7, 8};
  CompiledModel fm(f, CompileOptions{});
  CompiledModel gm(ad::grad(f, wrt), CompileOptions{});
  auto x = c.inputs(DType::f64);
  auto grads = gm.run(x);
  ASSERT_EQ(grads.size(), wrt.size());
  const double eps = 1e-6;
  for (size_t gi = 0; gi < wrt.size(); ++gi) {
    const int idx = wrt[gi];
    const Tensor& an = grads[gi];
    double scale = 0;
    for (int64_t j = 0; j < an.numel(); ++j) scale = std::max(scale, std::abs(an.get(j)));
    ASSERT_GT(scale, 0) << "input " << idx << " gets a gradient";
    const int64_t stride = an.numel() > 64 ? 7 : 1;  // the SH block: every 7th coefficient
    for (int64_t j = 0; j < an.numel(); j += stride) {
      if (idx == 5 && j >= 12) break;  // the view matrix's last row is constant
      auto xp = x, xm = x;
      xp[idx] = x[idx].clone();
      xm[idx] = x[idx].clone();
      xp[idx].set(j, x[idx].get(j) + eps);
      xm[idx].set(j, x[idx].get(j) - eps);
      const double fd = (fm.run(xp)[0].get(0) - fm.run(xm)[0].get(0)) / (2 * eps);
      EXPECT_NEAR(an.get(j), fd, 1e-5 * scale + 1e-7) << r.values[r.inputs[idx]].name << "[" << j << "]";
    }
  }
}

// The f32 gradient kernels (vectorized tile VJP) against the reference evaluation of the same
// gradient graph, on a scene with overlapping Gaussians and saturated pixels.
TEST(Splat, CpuGradientsMatchReferenceF32) {
  const int64_t n = 80;
  Case c = small_case(n, 2, 44, 36, 17, DType::f32);
  for (int64_t i = 0; i < n; ++i) c.scene.opacity_logits.set(i, 2.5 + std::sin(i * 1.0));
  Graph lg = loss_graph(n, 9, c.opt);
  Graph vg = ad::value_and_grad(lg, {0, 1, 2, 3, 4, 8, 9});
  auto in = c.inputs(DType::f32);
  in.push_back(Tensor(DType::f32, {n, 2}));
  Tensor target(DType::f32, {36, 44, 3});
  for (int64_t i = 0; i < target.numel(); ++i) target.set(i, 0.5 + 0.4 * std::sin(0.1 * i));
  in.push_back(target);
  auto ref = reference_run(vg, in);
  CompiledModel m(vg, CompileOptions{});
  auto got = m.run(in);
  ASSERT_EQ(ref.size(), got.size());
  for (size_t k = 2; k < ref.size(); ++k) {
    double scale = 0, err = 0;
    for (int64_t i = 0; i < ref[k].numel(); ++i) {
      scale = std::max(scale, std::abs(ref[k].get(i)));
      err = std::max(err, std::abs(ref[k].get(i) - got[k].get(i)));
    }
    EXPECT_GT(scale, 0) << "gradient " << k;
    EXPECT_LE(err, 2e-4 * scale) << "gradient " << k << " (scale " << scale << ")";
  }
}
