// IDX (the MNIST file format) reader, raw or gzip (zlib reads both), and the MNIST-style datasets.
#pragma once
#include <string>

#include "rlx/tensor.h"

namespace rlx::data {

// Reads an IDX file (u8/i8/i16/i32/f32/f64 payloads) into a tensor of the matching dtype
// (u8, i8, i16, i32, f32, f64). Throws naming the file on a bad magic, short read or size.
Tensor read_idx(const std::string& path);

struct Dataset {
  Tensor train_x, train_y, test_x, test_y;  // x: f32 [N,784] scaled to [0,1]; y: i64 [N]
  std::string name;
};
// "fashion": /usr/share/datasets/fashion-mnist (or `dir`), 60k/10k. "mnist": the 10k MNIST test set
// in `dir` (default ../shared/data/mnist), first 8k to train, last 2k to test.
Dataset load_dataset(const std::string& which, std::string dir = "");

}  // namespace rlx::data
