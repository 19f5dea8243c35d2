// A tiny PNG line-chart writer (zlib deflate + crc32) for training curves; no plotting library.
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "train/plot.h"
#include "formats/file_io.h"
#include "rlx/error.h"

namespace rlx::train {

namespace {

struct Canvas {
  int w, h;
  std::vector<uint8_t> px;  // RGB
  Canvas(int w_, int h_) : w(w_), h(h_), px(static_cast<size_t>(w_) * h_ * 3, 255) {}
  void set(int x, int y, uint32_t rgb) {
    if (x < 0 || y < 0 || x >= w || y >= h) return;
    size_t i = (static_cast<size_t>(y) * w + x) * 3;
    px[i] = rgb >> 16;
    px[i + 1] = (rgb >> 8) & 255;
    px[i + 2] = rgb & 255;
  }
  void line(int x0, int y0, int x1, int y1, uint32_t rgb) {
    int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, e = dx + dy;
    for (;;) {
      set(x0, y0, rgb);
      set(x0, y0 + 1, rgb);
      if (x0 == x1 && y0 == y1) break;
      int e2 = 2 * e;
      if (e2 >= dy) { e += dy; x0 += sx; }
      if (e2 <= dx) { e += dx; y0 += sy; }
    }
  }
};

void chunk(std::string& f, const char* type, const std::vector<uint8_t>& data) {
  auto be32 = [&](uint32_t v) {
    char b[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
    f.append(b, 4);
  };
  be32(static_cast<uint32_t>(data.size()));
  f.append(type, 4);
  f.append(reinterpret_cast<const char*>(data.data()), data.size());
  uLong crc = crc32(0, reinterpret_cast<const Bytef*>(type), 4);
  crc = crc32(crc, data.data(), static_cast<uInt>(data.size()));
  be32(static_cast<uint32_t>(crc));
}

}  // namespace

void write_curves_png(const std::string& path, const std::vector<Series>& series, int width, int height) {
  Canvas c(width, height);
  const int m = 20;
  c.line(m, height - m, width - m, height - m, 0x000000);  // axes
  c.line(m, m, m, height - m, 0x000000);
  for (int k = 1; k < 4; ++k) {  // light grid at quarters
    int y = m + (height - 2 * m) * k / 4;
    for (int x = m; x < width - m; x += 4) c.set(x, y, 0xcccccc);
  }
  for (auto& s : series) {
    if (s.y.empty()) continue;
    double hi = s.y_max > s.y_min ? s.y_max : *std::max_element(s.y.begin(), s.y.end());
    double lo = s.y_max > s.y_min ? s.y_min : std::min(0.0, *std::min_element(s.y.begin(), s.y.end()));
    if (hi <= lo) hi = lo + 1;
    size_t n = s.y.size();
    auto X = [&](size_t i) { return m + static_cast<int>((width - 2 * m) * (n == 1 ? 0.5 : double(i) / double(n - 1))); };
    auto Y = [&](double v) { return height - m - static_cast<int>((height - 2 * m) * (v - lo) / (hi - lo)); };
    for (size_t i = 0; i + 1 < n; ++i) c.line(X(i), Y(s.y[i]), X(i + 1), Y(s.y[i + 1]), s.rgb);
    for (size_t i = 0; i < n; ++i)
      for (int d = -2; d <= 2; ++d) c.line(X(i) - 2, Y(s.y[i]) + d, X(i) + 2, Y(s.y[i]) + d, s.rgb);
  }
  std::vector<uint8_t> raw;
  raw.reserve(static_cast<size_t>(height) * (width * 3 + 1));
  for (int y = 0; y < height; ++y) {
    raw.push_back(0);
    raw.insert(raw.end(), c.px.begin() + static_cast<long>(y) * width * 3, c.px.begin() + static_cast<long>(y + 1) * width * 3);
  }
  uLongf zn = compressBound(static_cast<uLong>(raw.size()));
  std::vector<uint8_t> z(zn);
  RLX_CHECK(compress2(z.data(), &zn, raw.data(), static_cast<uLong>(raw.size()), 6) == Z_OK, "[plot] deflate failed");
  z.resize(zn);
  std::string f;  // written whole or not at all
  const unsigned char sig[8] = {137, 80, 78, 71, 13, 10, 26, 10};
  f.append(reinterpret_cast<const char*>(sig), 8);
  std::vector<uint8_t> ihdr = {uint8_t(width >> 24), uint8_t(width >> 16), uint8_t(width >> 8), uint8_t(width),
                               uint8_t(height >> 24), uint8_t(height >> 16), uint8_t(height >> 8), uint8_t(height),
                               8, 2, 0, 0, 0};
  chunk(f, "IHDR", ihdr);
  chunk(f, "IDAT", z);
  chunk(f, "IEND", {});
  formats::write_file_atomic(path, f, "plot");
}

}  // namespace rlx::train
