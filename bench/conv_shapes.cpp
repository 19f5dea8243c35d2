// Per-layer speed of the cpu conv kernel (src/backends/cpu/conv.cpp) on the zoo models' conv shapes
// (VGG-19, ResNet-50, SqueezeNet, Inception): GFLOP/s of direct-conv FLOPs (2 x outputs x C x KH x KW,
// whatever the plan does), the plan picked, and the max relative difference against the im2col plan
// (RLX_CONV_WINOGRAD=0 in a second run shows that plan's own speed). Weights packed once, as the
// compiled model does (conv_prepack). With 1 thread the clock is the thread's CPU time (robust on a
// loaded shared machine), with more the wall time. Median of >= 7 runs after 2 warm-ups.
// Build: cmake --build build --target rlx_bench_conv_shapes
// Run:   RLX_NUM_THREADS=1 build/bin/rlx_bench_conv_shapes [substring of the shape names]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "backends/cpu/conv.h"
#include "backends/cpu/parallel.h"

using namespace rlx;

static bool g_cpu_clock = false;
static double now_ms() {
  if (g_cpu_clock) {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static double median_ms(const std::function<void()>& f) {
  for (int i = 0; i < 2; ++i) f();
  std::vector<double> t;
  double total = 0;
  while (t.size() < 7 || (total < 300 && t.size() < 101)) {
    const double a = now_ms();
    f();
    t.push_back(now_ms() - a);
    total += t.back();
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

static Tensor filled(const std::vector<int64_t>& shape, unsigned seed, float scale) {
  Tensor t(DType::f32, shape);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = scale * (float((i * 7919 + seed * 104729) % 1000) / 500.f - 1.f);
  return t;
}

int main(int argc, char** argv) {
  const std::string only = argc > 1 ? argv[1] : "";
  g_cpu_clock = cpu::num_threads() == 1;
  struct S { const char* what; int64_t N, C, H, O, k, s, p; };
  const std::vector<S> shapes = {
      {"vgg conv1_2", 1, 64, 224, 64, 3, 1, 1},     {"vgg conv2_2", 1, 128, 112, 128, 3, 1, 1},
      {"vgg conv3_x", 1, 256, 56, 256, 3, 1, 1},    {"vgg conv4_x", 1, 512, 28, 512, 3, 1, 1},
      {"vgg conv5_x", 1, 512, 14, 512, 3, 1, 1},    {"resnet 3x3 s56", 1, 64, 56, 64, 3, 1, 1},
      {"resnet 3x3 s28", 1, 128, 28, 128, 3, 1, 1}, {"resnet 3x3 s14", 1, 256, 14, 256, 3, 1, 1},
      {"resnet 3x3 s7", 1, 512, 7, 512, 3, 1, 1},   {"resnet 1x1 56", 1, 64, 56, 256, 1, 1, 0},
      {"resnet 1x1 14", 1, 1024, 14, 256, 1, 1, 0}, {"resnet conv1 7x7", 1, 3, 224, 64, 7, 2, 3},
      {"squeeze 3x3 e", 1, 16, 55, 64, 3, 1, 1},    {"squeeze 3x3 e4", 1, 64, 13, 256, 3, 1, 1},
      {"incep 3x3 28", 1, 96, 28, 128, 3, 1, 1},    {"vgg conv3_x b8", 8, 256, 56, 256, 3, 1, 1},
      {"resnet 3x3 s7 b8", 8, 512, 7, 512, 3, 1, 1}};
  std::printf("# %d thread(s), %s; GFLOP/s of direct-conv FLOPs\n", cpu::num_threads(),
              g_cpu_clock ? "thread CPU time" : "wall time");
  std::printf("%-18s %3s %5s %4s %5s %2s | %-9s %8s %8s\n", "shape", "N", "C", "H", "O", "k", "plan", "GFLOP/s", "ms");
  for (const S& s : shapes) {
    if (!only.empty() && std::string(s.what).find(only) == std::string::npos) continue;
    const int64_t OH = (s.H + 2 * s.p - s.k) / s.s + 1;
    Node n{OpKind::Conv, {}, {}, {{"strides", std::vector<int64_t>{s.s, s.s}}, {"pads", std::vector<int64_t>{s.p, s.p, s.p, s.p}},
                                 {"dilations", std::vector<int64_t>{1, 1}}, {"groups", int64_t(1)}}, ""};
    const std::vector<int64_t> xd{s.N, s.C, s.H, s.H}, wd{s.O, s.C, s.k, s.k}, yd{s.N, s.O, OH, OH};
    std::vector<Tensor> in{filled(xd, 1, 1.f), filled(wd, 2, 1.f / std::sqrt(float(s.C * s.k * s.k)))};
    std::vector<Tensor> out{Tensor(DType::f32, yd)};
    const std::vector<float> packed = cpu::conv_prepack(n, in[1], xd, yd);
    const double ms = median_ms([&] {
      if (!cpu::conv_f32(n, in, out, packed.empty() ? nullptr : packed.data(), nullptr)) std::abort();
    });
    const double gflop = 2.0 * s.N * s.O * OH * OH * s.C * s.k * s.k / 1e9;
    std::printf("%-18s %3lld %5lld %4lld %5lld %2lld | %-9s %8.1f %8.2f\n", s.what, (long long)s.N, (long long)s.C,
                (long long)s.H, (long long)s.O, (long long)s.k, cpu::conv_plan_name(n, xd, wd, yd).c_str(),
                gflop / ms * 1e3, ms);
  }
  return 0;
}
