// Seeded random scenes and ring cameras (see synthetic.h).
#include "splat/synthetic.h"

#include <cmath>
#include <random>

namespace rlx::splat {

Scene random_scene(int64_t n, int degree, uint64_t seed, double extent, double scale, DType dt) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::normal_distribution<double> nd;
  const int64_t k = (degree + 1) * (degree + 1);
  Scene s{Tensor(dt, {n, 3}), Tensor(dt, {n, 3}), Tensor(dt, {n, 4}), Tensor(dt, {n}), Tensor(dt, {n, k, 3})};
  for (int64_t i = 0; i < n; ++i) {
    for (int j = 0; j < 3; ++j) s.means.set(i * 3 + j, extent * u(rng));
    for (int j = 0; j < 3; ++j) s.log_scales.set(i * 3 + j, std::log(scale) + 0.5 * u(rng));
    for (int j = 0; j < 4; ++j) s.quats.set(i * 4 + j, nd(rng));
    s.opacity_logits.set(i, 1.0 + 2.0 * u(rng));
    for (int64_t c = 0; c < k; ++c)
      for (int j = 0; j < 3; ++j) s.sh.set((i * k + c) * 3 + j, c == 0 ? 1.5 * u(rng) : 0.15 * u(rng));
  }
  return s;
}

Camera look_at(const double eye[3], const double target[3], int64_t width, int64_t height, double fov_x_deg) {
  auto norm = [](double* v) {
    double l = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    for (int i = 0; i < 3; ++i) v[i] /= l;
  };
  double f[3] = {target[0] - eye[0], target[1] - eye[1], target[2] - eye[2]};
  norm(f);
  const double up[3] = {0, 1, 0};
  double r[3] = {f[1] * up[2] - f[2] * up[1], f[2] * up[0] - f[0] * up[2], f[0] * up[1] - f[1] * up[0]};
  norm(r);
  double d[3] = {f[1] * r[2] - f[2] * r[1], f[2] * r[0] - f[0] * r[2], f[0] * r[1] - f[1] * r[0]};
  Camera c;
  const double* rows[3] = {r, d, f};
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) c.view[i * 4 + j] = rows[i][j];
    c.view[i * 4 + 3] = -(rows[i][0] * eye[0] + rows[i][1] * eye[1] + rows[i][2] * eye[2]);
  }
  c.view[12] = c.view[13] = c.view[14] = 0;
  c.view[15] = 1;
  c.width = width;
  c.height = height;
  c.fx = c.fy = 0.5 * static_cast<double>(width) / std::tan(0.5 * fov_x_deg * M_PI / 180.0);
  c.cx = 0.5 * static_cast<double>(width);
  c.cy = 0.5 * static_cast<double>(height);
  return c;
}

std::vector<Camera> ring_cameras(int count, double radius, double height_y, int64_t width, int64_t height,
                                 double phase) {
  std::vector<Camera> v;
  const double target[3] = {0, 0, 0};
  for (int i = 0; i < count; ++i) {
    double a = phase + 2 * M_PI * i / count;
    double eye[3] = {radius * std::cos(a), height_y, radius * std::sin(a)};
    v.push_back(look_at(eye, target, width, height));
  }
  return v;
}

}  // namespace rlx::splat
