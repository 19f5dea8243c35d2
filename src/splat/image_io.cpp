// PNG read/write on libpng's simplified API (png_image), which handles every color type and bit
// depth and reports errors as messages instead of longjmp.
#include "splat/image_io.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "formats/file_io.h"

#if __has_include(<png.h>)
#include <png.h>
#define RLX_HAVE_PNG 1
#endif

namespace rlx::splat {

#ifdef RLX_HAVE_PNG

void write_png(const std::string& path, const Tensor& img) {
  RLX_CHECK(img.rank() == 3 && img.shape()[2] == 3, "[png] ", path, ": image must be [H,W,3]");
  png_image pi{};
  pi.version = PNG_IMAGE_VERSION;
  pi.width = static_cast<png_uint_32>(img.shape()[1]);
  pi.height = static_cast<png_uint_32>(img.shape()[0]);
  pi.format = PNG_FORMAT_RGB;
  std::vector<uint8_t> px(static_cast<size_t>(img.numel()));
  for (int64_t i = 0; i < img.numel(); ++i)
    px[static_cast<size_t>(i)] = static_cast<uint8_t>(std::lround(std::clamp(img.get(i), 0.0, 1.0) * 255.0));
  png_alloc_size_t size = 0;
  RLX_CHECK(png_image_write_get_memory_size(pi, size, 0, px.data(), 0, nullptr), "[png] ", path, ": ", pi.message);
  std::string buf(size, '\0');
  RLX_CHECK(png_image_write_to_memory(&pi, buf.data(), &size, 0, px.data(), 0, nullptr), "[png] ", path, ": ",
            pi.message);
  buf.resize(size);
  formats::write_file_atomic(path, buf, "png");
}

Tensor read_png(const std::string& path) {
  std::string bytes = formats::read_file_bytes(path, "png");
  png_image pi{};
  pi.version = PNG_IMAGE_VERSION;
  RLX_CHECK(png_image_begin_read_from_memory(&pi, bytes.data(), bytes.size()), "[png] ", path, ": ", pi.message);
  pi.format = PNG_FORMAT_RGB;
  std::vector<uint8_t> px(PNG_IMAGE_SIZE(pi));
  if (!png_image_finish_read(&pi, nullptr, px.data(), 0, nullptr)) {
    std::string m = pi.message;
    png_image_free(&pi);
    fail("[png] ", path, ": ", m);
  }
  Tensor t(DType::f32, {static_cast<int64_t>(pi.height), static_cast<int64_t>(pi.width), 3});
  float* d = t.data<float>();
  for (size_t i = 0; i < px.size(); ++i) d[i] = static_cast<float>(px[i]) / 255.0f;
  return t;
}

#else  // a build without libpng's headers (the lent GPU machine's image)

void write_png(const std::string& path, const Tensor&) { fail("[png] ", path, ": this build has no libpng"); }
Tensor read_png(const std::string& path) { fail("[png] ", path, ": this build has no libpng"); }

#endif

}  // namespace rlx::splat
