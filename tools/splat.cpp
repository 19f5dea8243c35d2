// `rlx splat`: render a 3DGS .ply from a camera, fit a scene to posed images, or write a synthetic
// dataset (images + cameras.json + the true scene) to try both on.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "splat/cameras.h"
#include "splat/image_io.h"
#include "splat/ply.h"
#include "splat/synthetic.h"
#include "splat/train.h"

namespace rlx::cli {

namespace {

namespace fs = std::filesystem;
using namespace rlx::splat;

void background(const Args& a, double bg[3]) {
  auto v = a.items("background");
  if (v.size() != 3) usage_fail("splat --background takes 3 numbers r,g,b");
  for (int i = 0; i < 3; ++i) {
    auto x = to_number(v[static_cast<size_t>(i)]);
    if (!x) usage_fail("splat --background: '", v[static_cast<size_t>(i)], "' is not a number");
    bg[i] = *x;
  }
}

int splat_render(const Args& a) {
  if (a.positional.size() < 2) usage_fail("splat render needs SCENE.ply");
  if (!a.has("camera")) usage_fail("splat render needs --camera FILE (.json or COLMAP text)");
  if (!a.has("out") || a.get("out").size() < 5 || a.get("out").substr(a.get("out").size() - 4) != ".png")
    usage_fail("splat render needs --out IMG.png");
  Scene s = read_ply(a.positional[1]);
  auto cams = read_cameras(a.get("camera"));
  const int64_t idx = a.integer("camera-index");
  if (idx >= static_cast<int64_t>(cams.size()))
    fail("[splat] ", a.get("camera"), " holds ", cams.size(), " cameras; --camera-index ", idx, " is out of range");
  double bg[3];
  background(a, bg);
  RenderOptions ro;
  ro.sh_degree = static_cast<int>(a.integer("sh-degree"));
  auto t0 = std::chrono::steady_clock::now();
  Tensor img = render(s, cams[static_cast<size_t>(idx)], bg, ro, a.get("device"));
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  write_png(a.get("out"), img);
  std::printf("rendered %lld Gaussians at %lldx%lld on %s in %.1f ms (compile included) -> %s\n",
              static_cast<long long>(s.size()), static_cast<long long>(img.shape()[1]),
              static_cast<long long>(img.shape()[0]), a.get("device").c_str(), ms, a.get("out").c_str());
  return 0;
}

// Random initial Gaussians around the point the cameras look at (their ring's center).
Scene init_scene(const std::vector<View>& views, int64_t n, int degree, uint64_t seed) {
  double c[3] = {0, 0, 0}, r = 0;
  std::vector<Tensor> cs;
  for (auto& v : views) cs.push_back(v.cam.center(DType::f64));
  for (auto& t : cs)
    for (int j = 0; j < 3; ++j) c[j] += t.get(j) / static_cast<double>(cs.size());
  for (auto& t : cs) {
    double d = 0;
    for (int j = 0; j < 3; ++j) d += (t.get(j) - c[j]) * (t.get(j) - c[j]);
    r = std::max(r, std::sqrt(d));
  }
  const double ext = r > 0 ? 0.35 * r : 1.0;
  Scene s = random_scene(n, degree, seed, ext, 0.03 * ext / 0.35);
  for (int64_t i = 0; i < n; ++i) {
    for (int j = 0; j < 3; ++j) s.means.set(i * 3 + j, s.means.get(i * 3 + j) + c[j]);
    s.opacity_logits.set(i, -2.0);
    for (int64_t k = 1; k < s.sh.shape()[1]; ++k)
      for (int ch = 0; ch < 3; ++ch) s.sh.set((i * s.sh.shape()[1] + k) * 3 + ch, 0.0);
  }
  return s;
}

int splat_train(const Args& a) {
  if (!a.has("images") || !a.has("cameras")) usage_fail("splat train needs --images DIR and --cameras FILE");
  if (!a.has("out") || a.get("out").size() < 5 || a.get("out").substr(a.get("out").size() - 4) != ".ply")
    usage_fail("splat train needs --out SCENE.ply");
  auto cams = read_cameras(a.get("cameras"));
  if (cams.empty()) fail("[splat] ", a.get("cameras"), " holds no cameras");
  std::vector<View> views, held;
  const int64_t every = a.integer("holdout-every");
  for (size_t i = 0; i < cams.size(); ++i) {
    if (cams[i].name.empty()) fail("[splat] camera ", i, " of ", a.get("cameras"), " names no image file");
    View v{cams[i], read_png((fs::path(a.get("images")) / cams[i].name).string())};
    if (v.image.shape()[0] != v.cam.height || v.image.shape()[1] != v.cam.width)
      fail("[splat] ", cams[i].name, " is ", v.image.shape()[1], "x", v.image.shape()[0], " but its camera says ",
           v.cam.width, "x", v.cam.height);
    (every > 0 && static_cast<int64_t>(i) % every == every - 1 ? held : views).push_back(v);
  }
  if (views.empty()) fail("[splat] every view is held out; lower --holdout-every");
  FitOptions fo;
  fo.steps = a.integer("steps");
  fo.device = a.get("device");
  fo.sh_degree = static_cast<int>(a.integer("sh-degree"));
  fo.seed = static_cast<uint64_t>(a.integer("seed"));
  fo.densify_enabled = !a.has("no-densify");
  fo.densify.start = std::min<int64_t>(fo.densify.start, fo.steps / 4);
  fo.densify.every = std::max<int64_t>(1, std::min<int64_t>(fo.densify.every, fo.steps / 6));
  fo.densify.stop = fo.steps / 2;
  background(a, fo.background);
  Scene s = a.has("init") ? read_ply(a.get("init"))
                          : init_scene(views, a.integer("init-count"), fo.sh_degree, fo.seed);
  const bool bar = !a.has("quiet") && isatty(2);
  const int64_t log_every = a.integer("log-every");
  auto t0 = std::chrono::steady_clock::now();
  fit(s, views, fo, [&](const StepStats& st) {
    if (bar) {
      const int w = 30, filled = static_cast<int>(w * (st.step + 1) / fo.steps);
      std::fprintf(stderr, "\rstep %lld/%lld [%s%s] loss %.4f psnr %.2f dB  %lld Gaussians ",
                   static_cast<long long>(st.step + 1), static_cast<long long>(fo.steps),
                   std::string(static_cast<size_t>(filled), '#').c_str(),
                   std::string(static_cast<size_t>(w - filled), '.').c_str(), st.loss, st.psnr,
                   static_cast<long long>(st.gaussians));
    } else if (!a.has("quiet") && (st.step % log_every == 0 || st.step + 1 == fo.steps)) {
      std::printf("step %lld loss %.5f psnr %.2f gaussians %lld\n", static_cast<long long>(st.step + 1), st.loss,
                  st.psnr, static_cast<long long>(st.gaussians));
    }
  });
  if (bar) std::fprintf(stderr, "\n");
  double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  write_ply(a.get("out"), s);
  RenderOptions ro;
  ro.sh_degree = fo.sh_degree;
  double mean = 0;
  for (auto& v : held) {
    double p = psnr(render(s, v.cam, fo.background, ro, fo.device), v.image);
    std::printf("held-out %s: psnr %.2f dB\n", v.cam.name.c_str(), p);
    mean += p / static_cast<double>(held.size());
  }
  std::printf("trained %lld steps in %.1f s: %lld Gaussians -> %s", static_cast<long long>(fo.steps), sec,
              static_cast<long long>(s.size()), a.get("out").c_str());
  if (!held.empty()) std::printf("; held-out mean psnr %.2f dB", mean);
  std::printf("\n");
  return 0;
}

// A known random scene rendered from a ring of cameras: DIR/view_XXX.png, DIR/cameras.json,
// DIR/truth.ply.
int splat_synth(const Args& a) {
  const std::string dir = a.get("out-dir");
  if (dir.empty()) usage_fail("splat synth needs --out-dir DIR");
  fs::create_directories(dir);
  const int64_t n = a.integer("count"), size = a.integer("size");
  const int degree = static_cast<int>(a.integer("sh-degree"));
  Scene s = random_scene(n, degree, static_cast<uint64_t>(a.integer("seed")));
  auto cams = ring_cameras(static_cast<int>(a.integer("views")), 4.0, 1.0, size, size);
  double bg[3];
  background(a, bg);
  RenderOptions ro;
  ro.sh_degree = degree;
  for (size_t i = 0; i < cams.size(); ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "view_%03zu.png", i);
    cams[i].name = name;
    write_png((fs::path(dir) / name).string(), render(s, cams[i], bg, ro, a.get("device")));
  }
  write_cameras_json((fs::path(dir) / "cameras.json").string(), cams);
  write_ply((fs::path(dir) / "truth.ply").string(), s);
  std::printf("wrote %zu views of %lld Gaussians (%lldx%lld) and cameras.json, truth.ply to %s\n", cams.size(),
              static_cast<long long>(n), static_cast<long long>(size), static_cast<long long>(size), dir.c_str());
  return 0;
}

}  // namespace

int cmd_splat(const Args& a) {
  const std::string& act = a.positional.at(0);
  if (act == "render") return splat_render(a);
  if (act == "train") return splat_train(a);
  if (act == "synth") return splat_synth(a);
  usage_fail("splat: unknown action '", act, "' (render, train, synth)", closest(act, {"render", "train", "synth"}));
}

}  // namespace rlx::cli
