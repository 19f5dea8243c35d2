// RLX side of the H200 splatting benchmark (bench/splat_gsplat.py --splatcuda writes the scenes,
// runs this, then times gsplat on the same data and merges): per scene size, the render graph
// (forward) and value_and_grad of the L1 loss graph w.r.t. the five parameter groups
// (forward+backward), 1920x1080, SH degree 3, f32, compiled for cuda; inputs device-resident;
// `warm` runs, then `iters` single runs each timed by CUDA events (CompiledModel's executable
// resident_time(1)); p50/p90 over them.
// Usage: h200_splatcuda SCENE_DIR OUT_JSONL [iters=20] [sizes=100000,1000000] [device=cuda]
// (another device, e.g. cpu with a small scene, only to smoke-test the program without a GPU)
// SCENE_DIR/scene_<n>.f32: means [n,3], log_scales [n,3], quats [n,4], opacity_logits [n],
// sh [n,16,3], viewmat [4,4], K [3,3], campos [3], float32, concatenated in that order.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "autodiff/autodiff.h"
#include "rlx/session.h"
#include "runtime/backend.h"
#include "splat/pipeline.h"

using namespace rlx;

namespace {

std::vector<Tensor> read_scene(const std::string& path, int64_t n) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("[h200_splatcuda] cannot read ", path);
  std::vector<std::vector<int64_t>> shapes = {{n, 3}, {n, 3}, {n, 4}, {n}, {n, 16, 3}, {4, 4}, {3, 3}, {3}};
  std::vector<Tensor> out;
  for (auto& s : shapes) {
    Tensor t(DType::f32, s);
    f.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
    if (!f) fail("[h200_splatcuda] ", path, " is too short");
    out.push_back(std::move(t));
  }
  return out;
}

std::pair<double, double> time_runs(Executable& exe, int warm, int iters) {
  for (int i = 0; i < warm; ++i) exe.resident_time(1);
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) ms.push_back(exe.resident_time(1));
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms[std::min(ms.size() - 1, ms.size() * 9 / 10)]};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: h200_splatcuda SCENE_DIR OUT_JSONL [iters] [sizes]\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::ofstream rows(argv[2]);
  const int iters = argc > 3 ? std::max(10, std::atoi(argv[3])) : 20;
  std::vector<int64_t> sizes;
  {
    std::stringstream ss(argc > 4 ? argv[4] : "100000,1000000");
    std::string tok;
    while (std::getline(ss, tok, ',')) sizes.push_back(std::atoll(tok.c_str()));
  }
  const std::string device = argc > 5 ? argv[5] : "cuda";
  const int64_t w = 1920, h = 1080;
  try {
    for (int64_t n : sizes) {
      std::vector<Tensor> in = read_scene(dir + "/scene_" + std::to_string(n) + ".f32", n);
      in.push_back(Tensor::from<double>(DType::f32, {3}, {0, 0, 0}));  // background
      splat::RenderOptions o;
      o.width = w, o.height = h, o.sh_degree = 3, o.dtype = DType::f32;
      CompileOptions co;
      co.device = device;
      CompiledModel fwd(splat::render_graph(n, 16, o), co);
      std::vector<Tensor> out = fwd.run(in);
      // forward+backward: the L1 loss against the rendered image shifted by 0.05, as bench/splat.py
      Tensor target(DType::f32, {h, w, 3});
      for (int64_t i = 0; i < target.numel(); ++i) target.set(i, std::min(1.0, std::max(0.0, out[0].get(i) + 0.05)));
      std::vector<Tensor> fb_in = in;
      fb_in.push_back(Tensor(DType::f32, {n, 2}));
      fb_in.push_back(target);
      CompiledModel fb(ad::value_and_grad(splat::loss_graph(n, 16, o), {0, 1, 2, 3, 4}), co);
      fb.run(fb_in);
      for (int v = 0; v < 2; ++v) {
        CompiledModel& m = v == 0 ? fwd : fb;
        Executable& exe = m.executable();
        exe.resident_upload(v == 0 ? in : fb_in);
        auto [p50, p90] = time_runs(exe, 3, iters);
        const char* variant = v == 0 ? "forward" : "forward+backward";
        std::printf("rlx %s %-17s N=%8lld: p50 %.3f ms  p90 %.3f ms  (%s)\n", device.c_str(), variant, (long long)n, p50, p90,
                    exe.summary().c_str());
        char line[768];
        std::snprintf(line, sizeof line,
                      "{\"system\": \"rlx\", \"variant\": \"%s\", \"device\": \"%s\", \"workload\": \"%lld "
                      "Gaussians, SH3, %lldx%lld\", \"dtype\": \"f32\", \"batch\": 1, \"seq\": null, \"p50_ms\": %.4f, "
                      "\"p90_ms\": %.4f, \"throughput\": null, \"unit\": null, \"peak_rss_mb\": null, \"iters\": %d}\n",
                      variant, device == "cuda" ? "cuda (H200)" : device.c_str(), (long long)n, (long long)w, (long long)h, p50, p90, iters);
        rows << line;
        rows.flush();
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "h200_splatcuda: %s\n", e.what());
    return 1;
  }
  return 0;
}
