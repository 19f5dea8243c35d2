// PNG line charts of training curves (loss per step, accuracy per epoch).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace rlx::train {

struct Series {
  std::vector<double> y;  // evenly spaced over the x axis
  uint32_t rgb = 0x1f77b4;
  double y_min = 0, y_max = 0;  // fixed range when y_max > y_min, else auto
};
void write_curves_png(const std::string& path, const std::vector<Series>& series, int width = 640, int height = 360);

}  // namespace rlx::train
