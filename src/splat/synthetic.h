// Synthetic scenes for tests, demos and benchmarks: random Gaussians in a cube and cameras on a
// ring looking at its center (seeded, so every run sees the same data).
#pragma once
#include <cstdint>
#include <vector>

#include "splat/pipeline.h"

namespace rlx::splat {

// n Gaussians, centers uniform in [-extent, extent]^3, scales log-uniform around `scale`, random
// rotations, opacity logits in [-1, 3], SH of `degree` (DC colors in [-1.5, 1.5]/C0-ish, rest small).
Scene random_scene(int64_t n, int degree, uint64_t seed, double extent = 1.0, double scale = 0.08,
                   DType dt = DType::f32);
// A camera at `eye` looking at `target` (OpenCV axes: x right, y down, z forward).
Camera look_at(const double eye[3], const double target[3], int64_t width, int64_t height, double fov_x_deg = 60);
// `count` cameras on a ring of `radius` at height `height_y`, angle offset `phase` (radians).
std::vector<Camera> ring_cameras(int count, double radius, double height_y, int64_t width, int64_t height,
                                 double phase = 0);

}  // namespace rlx::splat
