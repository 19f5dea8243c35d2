// PNG images through libpng: [H,W,3] float tensors in [0,1] <-> 8-bit RGB files.
#pragma once
#include <string>

#include "rlx/tensor.h"

namespace rlx::splat {

// Writes [H,W,3] (values clamped to [0,1], rounded) as an 8-bit RGB PNG, atomically.
void write_png(const std::string& path, const Tensor& image);
// Reads a PNG (gray, RGB or RGBA, 8 or 16 bit; alpha dropped) as f32 [H,W,3] in [0,1].
Tensor read_png(const std::string& path);

}  // namespace rlx::splat
