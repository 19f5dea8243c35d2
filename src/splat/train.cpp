// The scene-fitting loop (see train.h): one compiled value_and_grad graph per scene size, host Adam
// per parameter group, densification every `densify.every` steps (which recompiles for the new size).
#include "splat/train.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "autodiff/autodiff.h"
#include "rlx/session.h"

namespace rlx::splat {

namespace {

struct Adam {
  std::vector<std::vector<double>> m, v;
  void init(const std::vector<Tensor>& p) {
    m.clear();
    v.clear();
    for (auto& t : p) {
      m.emplace_back(static_cast<size_t>(t.numel()), 0.0);
      v.emplace_back(static_cast<size_t>(t.numel()), 0.0);
    }
  }
  // Carries moments along a densification: new row r takes old row source[r] (zeros where fresh).
  void remap(const std::vector<Tensor>& np, const DensifyResult& d) {
    for (size_t p = 0; p < np.size(); ++p) {
      const int64_t nrows = np[p].shape()[0], row = np[p].numel() / std::max<int64_t>(nrows, 1);
      std::vector<double> nm(static_cast<size_t>(np[p].numel()), 0.0), nv(nm.size(), 0.0);
      for (int64_t r = 0; r < nrows; ++r) {
        if (d.fresh[static_cast<size_t>(r)]) continue;
        const int64_t s = d.source[static_cast<size_t>(r)];
        for (int64_t j = 0; j < row; ++j) {
          nm[static_cast<size_t>(r * row + j)] = m[p][static_cast<size_t>(s * row + j)];
          nv[static_cast<size_t>(r * row + j)] = v[p][static_cast<size_t>(s * row + j)];
        }
      }
      m[p] = std::move(nm);
      v[p] = std::move(nv);
    }
  }
};

double camera_extent(const std::vector<View>& views) {
  double c[3] = {0, 0, 0};
  std::vector<Tensor> centers;
  for (auto& v : views) centers.push_back(v.cam.center(DType::f64));
  for (auto& t : centers)
    for (int j = 0; j < 3; ++j) c[j] += t.get(j) / static_cast<double>(centers.size());
  double r = 0;
  for (auto& t : centers) {
    double d = 0;
    for (int j = 0; j < 3; ++j) d += (t.get(j) - c[j]) * (t.get(j) - c[j]);
    r = std::max(r, std::sqrt(d));
  }
  return r > 0 ? 1.1 * r : 1.0;
}

}  // namespace

void fit(Scene& s, const std::vector<View>& views, const FitOptions& opt,
         const std::function<void(const StepStats&)>& on_step) {
  RLX_CHECK(!views.empty(), "[splat] fit: no training views");
  RLX_CHECK(s.size() > 0, "[splat] fit: the scene has no Gaussians");
  const DType dt = s.means.dtype();
  const int64_t W = views[0].cam.width, H = views[0].cam.height, k = s.sh.shape()[1];
  for (auto& v : views) {
    RLX_CHECK(v.cam.width == W && v.cam.height == H, "[splat] fit: every view must be ", W, "x", H, " (", v.cam.name,
              " is ", v.cam.width, "x", v.cam.height, ")");
    RLX_CHECK(v.image.rank() == 3 && v.image.shape()[0] == H && v.image.shape()[1] == W && v.image.shape()[2] == 3,
              "[splat] fit: image of ", v.cam.name, " does not match its camera's ", W, "x", H);
  }
  RenderOptions ro;
  ro.width = W;
  ro.height = H;
  ro.sh_degree = opt.sh_degree;
  ro.dtype = dt;
  const double extent = camera_extent(views);
  CompileOptions co;
  co.device = opt.device;
  auto compile = [&](int64_t n) {
    Graph lg = loss_graph(n, k, ro);
    return CompiledModel(ad::value_and_grad(lg, {0, 1, 2, 3, 4, 9}), co);
  };
  CompiledModel model = compile(s.size());
  Adam adam;
  adam.init(s.params());
  GradStats stats;
  stats.reset(s.size());
  std::vector<Tensor> targets, vms, Ks, cps;
  auto conv = [&](const Tensor& t) {
    if (t.dtype() == dt) return t;
    Tensor o(dt, t.shape());
    for (int64_t i = 0; i < t.numel(); ++i) o.set(i, t.get(i));
    return o;
  };
  for (auto& v : views) {
    targets.push_back(conv(v.image));
    vms.push_back(v.cam.viewmat(dt));
    Ks.push_back(v.cam.intrinsics(dt));
    cps.push_back(v.cam.center(dt));
  }
  Tensor bg = Tensor::from<double>(dt, {3}, {opt.background[0], opt.background[1], opt.background[2]});
  std::mt19937_64 rng(opt.seed);
  std::vector<size_t> order(views.size());
  std::iota(order.begin(), order.end(), 0);
  size_t pos = order.size();
  for (int64_t step = 0; step < opt.steps; ++step) {
    if (pos == order.size()) {
      std::shuffle(order.begin(), order.end(), rng);
      pos = 0;
    }
    const size_t vi = order[pos++];
    const int64_t n = s.size();
    Tensor off(dt, {n, 2});
    auto out = model.run({s.means, s.log_scales, s.quats, s.opacity_logits, s.sh, vms[vi], Ks[vi], cps[vi], bg, off,
                          targets[vi]});
    // out: loss, image, then gradients of means, log_scales, quats, opacity_logits, sh, offset2d
    stats.add(out[7], W, H);
    const double frac = opt.steps > 1 ? static_cast<double>(step) / static_cast<double>(opt.steps - 1) : 0.0;
    const double lr_means = opt.lr_means * extent * std::pow(opt.lr_means_final, frac);
    const double lrs[4] = {lr_means, opt.lr_log_scales, opt.lr_quats, opt.lr_opacity};
    const double t = static_cast<double>(step + 1);
    const double bc1 = 1 - std::pow(opt.beta1, t), bc2 = 1 - std::pow(opt.beta2, t);
    std::vector<Tensor*> params = {&s.means, &s.log_scales, &s.quats, &s.opacity_logits, &s.sh};
    for (size_t p = 0; p < params.size(); ++p) {
      Tensor& x = *params[p];
      const Tensor& g = out[2 + p];
      auto& m = adam.m[p];
      auto& v = adam.v[p];
      for (int64_t i = 0; i < x.numel(); ++i) {
        double lr = p < 4 ? lrs[p] : ((i / 3) % k == 0 ? opt.lr_sh_dc : opt.lr_sh_rest);
        const double gi = g.get(i);
        const size_t ui = static_cast<size_t>(i);
        m[ui] = opt.beta1 * m[ui] + (1 - opt.beta1) * gi;
        v[ui] = opt.beta2 * v[ui] + (1 - opt.beta2) * gi * gi;
        x.set(i, x.get(i) - lr * (m[ui] / bc1) / (std::sqrt(v[ui] / bc2) + opt.eps));
      }
    }
    if (on_step) on_step({step, out[0].get(0), psnr(out[1], targets[vi]), n});
    const auto& d = opt.densify;
    const int64_t done = step + 1;
    if (opt.densify_enabled && done >= d.start && done < d.stop && done % d.every == 0) {
      DensifyResult r = densify(s, stats, d, extent, d.reset_every > 0 && done > d.reset_every, opt.seed + static_cast<uint64_t>(done));
      adam.remap(s.params(), r);
      if (d.reset_every > 0 && done % d.reset_every == 0) reset_opacity(s);
      model = compile(s.size());
      stats.reset(s.size());
    }
  }
}

}  // namespace rlx::splat
