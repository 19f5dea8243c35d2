// IDX reader: raw and gzip files, big-endian payloads, and clear errors on bad input.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "data/idx.h"
#include "test_util.h"

using namespace rlx;

namespace {
std::string tmp(const std::string& n) { return (std::filesystem::temp_directory_path() / ("rlx_idx_" + n)).string(); }
std::vector<unsigned char> idx_i16() {  // i16 [2,3] = 1..6, big-endian
  std::vector<unsigned char> b = {0, 0, 0x0B, 2, 0, 0, 0, 2, 0, 0, 0, 3};
  for (int v = 1; v <= 6; ++v) {
    b.push_back(0);
    b.push_back(static_cast<unsigned char>(v));
  }
  return b;
}
}  // namespace

TEST(Idx, ReadsRawAndGzip) {
  auto bytes = idx_i16();
  std::string raw = tmp("a.idx"), gz = tmp("a.idx.gz");
  std::ofstream(raw, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  gzFile f = gzopen(gz.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
  for (auto& p : {raw, gz}) {
    Tensor t = data::read_idx(p);
    EXPECT_EQ(t.dtype(), DType::i16);
    EXPECT_EQ(t.shape(), (std::vector<int64_t>{2, 3}));
    for (int i = 0; i < 6; ++i) EXPECT_EQ(t.get_int(i), i + 1);
  }
}

TEST(Idx, RejectsTruncatedAndBadMagic) {
  auto bytes = idx_i16();
  std::string p = tmp("short.idx");
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size() - 3);
  EXPECT_THROW(data::read_idx(p), Error);
  bytes[0] = 7;
  std::string q = tmp("magic.idx");
  std::ofstream(q, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  try {
    data::read_idx(q);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("magic"), std::string::npos);
  }
  EXPECT_THROW(data::read_idx(tmp("does_not_exist")), Error);
}

TEST(Idx, MnistSplitLoads) {
  // ../shared/data/mnist beside the checkout (absent in a clone elsewhere: skipped), or RLX_MNIST_DIR,
  // which must then exist.
  std::string dir = mnist_dir();
  if (!std::filesystem::exists(dir)) {
    if (std::getenv("RLX_MNIST_DIR")) FAIL() << "RLX_MNIST_DIR=" << dir << " does not exist";
    GTEST_SKIP() << "no MNIST data at " << dir;
  }
  auto ds = data::load_dataset("mnist", dir);
  EXPECT_EQ(ds.train_x.shape(), (std::vector<int64_t>{8000, 784}));
  EXPECT_EQ(ds.test_y.shape(), (std::vector<int64_t>{2000}));
  for (int i = 0; i < 2000; ++i) ASSERT_LT(ds.test_y.get_int(i), 10);
}
