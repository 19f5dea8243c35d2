// The README's C++ example as a program built against the installed RLX package (find_package(rlx)
// or pkg-config): an MLP layer with a symbolic batch, compiled for cpu, run, its dispatch report;
// then the same on the null backend, which checks that every backend was linked in.
#include <cmath>
#include <cstdio>
#include <iostream>

#include "rlx/builder.h"
#include "rlx/device.h"
#include "rlx/session.h"

int main() {
  rlx::Graph g;
  rlx::Builder b(g);
  auto x = b.input("x", rlx::DType::f32, {"batch", 8});
  auto w = b.input("w", rlx::DType::f32, {4, 8});
  b.output(b.softmax(b.linear(x, w, -1, "gelu")));
  rlx::CompiledModel m(g, {"cpu"});
  rlx::Tensor x_tensor(rlx::DType::f32, {2, 8}), w_tensor(rlx::DType::f32, {4, 8});
  for (int64_t i = 0; i < x_tensor.numel(); ++i) x_tensor.set(i, 0.1 * double(i % 5));
  for (int64_t i = 0; i < w_tensor.numel(); ++i) w_tensor.set(i, 0.05 * double(i % 7) - 0.1);
  auto out = m.run({x_tensor, w_tensor});
  std::cout << m.report().table();
  // softmax rows sum to 1
  const rlx::Tensor& y = out.at(0);
  for (int64_t r = 0; r < 2; ++r) {
    double s = 0;
    for (int64_t c = 0; c < 4; ++c) s += y.get(r * 4 + c);
    if (std::fabs(s - 1.0) > 1e-5) {
      std::printf("row %lld sums to %g\n", (long long)r, s);
      return 1;
    }
  }
  // Every backend registered itself in the installed static library (none dropped by the linker):
  // the 16 listed targets, and the null backend runs the same model.
  if (rlx::device_names().size() != 16 || !rlx::device_info("null").can_execute()) {
    std::printf("installed package lists %zu targets\n", rlx::device_names().size());
    return 1;
  }
  rlx::CompiledModel on_null(g, {"null"});
  if (std::fabs(on_null.run({x_tensor, w_tensor}).at(0).get(0) - y.get(0)) > 1e-5) {
    std::printf("null and cpu disagree\n");
    return 1;
  }
  std::printf("ok: y [%lld, %lld]\n", (long long)y.shape()[0], (long long)y.shape()[1]);
  return 0;
}
