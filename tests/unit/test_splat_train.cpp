// Fitting a synthetic scene: a known random Gaussian set rendered from a ring of cameras, re-fit
// from a random initialization with Adam + densification; held-out views must reach 30 dB. Also
// the generic train::Trainer (Adam) lowering the splat loss.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "splat/synthetic.h"
#include "splat/train.h"
#include "train/train.h"

using namespace rlx;
using namespace rlx::splat;

TEST(SplatTrain, SyntheticSceneRefitsAbove30dB) {
  const int64_t size = 48;
  Scene truth = random_scene(40, 0, 21, 0.7, 0.12);
  const double bg[3] = {0, 0, 0};
  RenderOptions ro;
  ro.sh_degree = 0;
  auto cams = ring_cameras(12, 3.5, 1.0, size, size);
  auto held = ring_cameras(3, 3.5, 0.6, size, size, 0.7);
  std::vector<View> views;
  for (auto& c : cams) views.push_back({c, render(truth, c, bg, ro)});
  Scene s = random_scene(40, 0, 99, 0.7, 0.08);
  for (int64_t i = 0; i < s.size(); ++i) s.opacity_logits.set(i, -1.0);
  FitOptions fo;
  fo.steps = 600;
  fo.sh_degree = 0;
  fo.lr_means = 2e-3;
  fo.lr_sh_dc = 1e-2;
  fo.densify.start = 100;
  fo.densify.every = 100;
  fo.densify.stop = 400;
  fo.densify.grad_threshold = 2e-4;
  double last = 0;
  fit(s, views, fo, [&](const StepStats& st) { last = st.psnr; });
  double worst = 1e9;
  for (auto& c : held) worst = std::min(worst, psnr(render(s, c, bg, ro), render(truth, c, bg, ro)));
  std::printf("held-out psnr (worst of %zu): %.2f dB, %lld Gaussians\n", held.size(), worst,
              static_cast<long long>(s.size()));
  EXPECT_GE(worst, 30.0) << "last training-view psnr " << last << ", " << s.size() << " Gaussians";
}

TEST(SplatTrain, TrainerAdamLowersTheLoss) {
  const int64_t size = 32, n = 20;
  Scene truth = random_scene(n, 0, 5, 0.6, 0.12);
  const double bg[3] = {0, 0, 0};
  RenderOptions ro;
  ro.sh_degree = 0;
  ro.width = ro.height = size;
  const double eye[3] = {0.5, 0.8, -3.2}, target[3] = {0, 0, 0};
  Camera c = look_at(eye, target, size, size);
  Tensor img = render(truth, c, bg, ro);
  Scene init = truth;
  init.means = truth.means.clone();
  for (int64_t i = 0; i < init.means.numel(); ++i) init.means.set(i, init.means.get(i) + 0.06 * std::sin(3.0 * i));
  init.sh = Tensor(DType::f32, truth.sh.shape());
  train::OptimizerConfig oc;
  oc.kind = "adam";
  oc.lr = 0.01;
  train::Trainer tr(loss_graph(n, 1, ro), init.params(), oc);
  std::vector<Tensor> data = {c.viewmat(DType::f32), c.intrinsics(DType::f32), c.center(DType::f32),
                              Tensor::from<double>(DType::f32, {3}, {0, 0, 0}), Tensor(DType::f32, {n, 2}), img};
  const double first = tr.step(data)[0].get(0);
  double last = first;
  for (int i = 0; i < 40; ++i) last = tr.step(data)[0].get(0);
  EXPECT_LT(last, 0.5 * first);
}
