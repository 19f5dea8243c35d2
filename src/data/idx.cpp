// IDX reader over zlib's gz* API, which reads gzip and uncompressed files alike.
#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

namespace rlx::data {

namespace {

struct GzFile {
  gzFile f;
  ~GzFile() {
    if (f) gzclose(f);
  }
};

void read_exact(gzFile f, void* dst, size_t n, const std::string& path, const char* what) {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    unsigned chunk = static_cast<unsigned>(std::min<size_t>(n, 1u << 30));
    int got = gzread(f, p, chunk);
    RLX_CHECK(got > 0, "[idx] ", path, ": file ends inside the ", what);
    p += got;
    n -= static_cast<size_t>(got);
  }
}

}  // namespace

Tensor read_idx(const std::string& path) {
  GzFile g{gzopen(path.c_str(), "rb")};
  RLX_CHECK(g.f != nullptr, "[idx] cannot open '", path, "'");
  unsigned char magic[4];
  read_exact(g.f, magic, 4, path, "magic");
  RLX_CHECK(magic[0] == 0 && magic[1] == 0, "[idx] ", path, ": bad magic (not an IDX file)");
  DType dt;
  switch (magic[2]) {
    case 0x08: dt = DType::u8; break;
    case 0x09: dt = DType::i8; break;
    case 0x0B: dt = DType::i16; break;
    case 0x0C: dt = DType::i32; break;
    case 0x0D: dt = DType::f32; break;
    case 0x0E: dt = DType::f64; break;
    default: fail("[idx] ", path, ": unknown element type 0x", std::hex, int(magic[2]));
  }
  int rank = magic[3];
  RLX_CHECK(rank >= 1 && rank <= 8, "[idx] ", path, ": bad rank ", rank);
  std::vector<int64_t> shape;
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) {
    unsigned char d[4];
    read_exact(g.f, d, 4, path, "dims");
    int64_t v = (int64_t{d[0]} << 24) | (int64_t{d[1]} << 16) | (int64_t{d[2]} << 8) | d[3];
    RLX_CHECK(v >= 0 && v < (int64_t{1} << 31), "[idx] ", path, ": bad dim ", v);
    shape.push_back(v);
    n *= v;
    RLX_CHECK(n < (int64_t{1} << 34), "[idx] ", path, ": too large");
  }
  Tensor t(dt, shape);
  read_exact(g.f, t.raw(), t.nbytes(), path, "data");
  size_t es = dtype_size(dt);
  if (es > 1) {  // big-endian payload
    auto* p = static_cast<unsigned char*>(t.raw());
    for (int64_t i = 0; i < n; ++i) std::reverse(p + i * es, p + (i + 1) * es);
  }
  return t;
}

namespace {

Tensor to_images(const Tensor& raw, int64_t from, int64_t count) {
  RLX_CHECK(raw.dtype() == DType::u8 && raw.rank() == 3, "[idx] images must be u8 [N,H,W]");
  int64_t px = raw.shape()[1] * raw.shape()[2];
  Tensor x(DType::f32, {count, px});
  const uint8_t* s = raw.data<uint8_t>() + from * px;
  float* d = x.data<float>();
  for (int64_t i = 0; i < count * px; ++i) d[i] = static_cast<float>(s[i]) / 255.0f;
  return x;
}
// Labels are class ids 0..9: one outside would train silently against an all-zero one-hot target.
Tensor to_labels(const Tensor& raw, int64_t from, int64_t count, const std::string& file) {
  RLX_CHECK(raw.dtype() == DType::u8 && raw.rank() == 1, "[idx] labels must be u8 [N]");
  RLX_CHECK(from + count <= raw.shape()[0], "[data] ", file, ": ", raw.shape()[0], " labels, ", from + count, " needed");
  Tensor y(DType::i64, {count});
  for (int64_t i = 0; i < count; ++i) {
    int v = raw.data<uint8_t>()[from + i];
    RLX_CHECK(v < 10, "[data] ", file, ": label ", v, " at index ", from + i, " is outside the 10 classes 0..9");
    y.data<int64_t>()[i] = v;
  }
  return y;
}
// The MNIST folder when --data-dir is not given: $RLX_MNIST_DIR, else shared/data/mnist beside the
// checkout that holds the running binary (<checkout>/<build>/bin/rlx), never the working directory.
std::string default_mnist_dir() {
  if (const char* e = std::getenv("RLX_MNIST_DIR"); e && *e) return e;
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::string tried;
  if (!ec)
    for (auto rel : {"../../../shared/data/mnist", "../../shared/data/mnist"}) {
      auto p = (exe.parent_path() / rel).lexically_normal();
      if (std::filesystem::is_directory(p)) return p.string();
      tried += (tried.empty() ? "" : ", ") + p.string();
    }
  fail("[data] MNIST not found (looked in ", tried.empty() ? std::string("nothing: /proc/self/exe unreadable") : tried,
       "); pass --data-dir DIR holding t10k-images-idx3-ubyte[.gz] and t10k-labels-idx1-ubyte[.gz], or set RLX_MNIST_DIR");
}

std::string find(const std::string& dir, const std::string& stem) {
  for (const char* ext : {".gz", ""}) {
    std::string p = dir + "/" + stem + ext;
    if (std::filesystem::exists(p)) return p;
  }
  fail("[data] missing '", dir, "/", stem, "[.gz]'");
}

}  // namespace

Dataset load_dataset(const std::string& which, std::string dir) {
  Dataset ds;
  ds.name = which;
  if (which == "fashion") {
    if (dir.empty()) dir = "/usr/share/datasets/fashion-mnist";
    RLX_CHECK(std::filesystem::exists(dir), "[data] Fashion-MNIST not found at '", dir,
              "' (install the Debian package dataset-fashion-mnist: scripts/bootstrap.sh)");
    std::string fyi = find(dir, "train-labels-idx1-ubyte"), fyt = find(dir, "t10k-labels-idx1-ubyte");
    Tensor xi = read_idx(find(dir, "train-images-idx3-ubyte")), yi = read_idx(fyi);
    Tensor xt = read_idx(find(dir, "t10k-images-idx3-ubyte")), yt = read_idx(fyt);
    ds.train_x = to_images(xi, 0, xi.shape()[0]);
    ds.train_y = to_labels(yi, 0, xi.shape()[0], fyi);
    ds.test_x = to_images(xt, 0, xt.shape()[0]);
    ds.test_y = to_labels(yt, 0, xt.shape()[0], fyt);
  } else if (which == "mnist") {
    if (dir.empty()) dir = default_mnist_dir();
    std::string fy = find(dir, "t10k-labels-idx1-ubyte");
    Tensor x = read_idx(find(dir, "t10k-images-idx3-ubyte")), y = read_idx(fy);
    int64_t n = x.shape()[0];
    RLX_CHECK(n == 10000 && y.shape()[0] == n, "[data] expected the 10k MNIST test set in '", dir, "'");
    ds.train_x = to_images(x, 0, 8000);
    ds.train_y = to_labels(y, 0, 8000, fy);
    ds.test_x = to_images(x, 8000, 2000);
    ds.test_y = to_labels(y, 8000, 2000, fy);
  } else {
    fail("[data] unknown dataset '", which, "' (fashion|mnist)");
  }
  return ds;
}

}  // namespace rlx::data
