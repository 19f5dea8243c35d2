// Splat formats: the 3DGS .ply round trip and its errors, COLMAP text and JSON cameras, PNG, and
// densification's clone/split/prune bookkeeping.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>

#include <unistd.h>

#include "formats/file_io.h"
#include "splat/cameras.h"
#include "splat/densify.h"
#include "splat/image_io.h"
#include "splat/ply.h"
#include "splat/synthetic.h"

using namespace rlx;
using namespace rlx::splat;

namespace {
std::string tmp(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("rlx_splat_" + std::to_string(::getpid()) + "_" + name)).string();
}
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(SplatIo, PlyRoundTripAllDegrees) {
  for (int deg = 0; deg <= 3; ++deg) {
    Scene s = random_scene(9, deg, 5 + deg);
    std::string p = tmp("rt.ply");
    write_ply(p, s);
    Scene r = read_ply(p);
    std::filesystem::remove(p);
    ASSERT_EQ(r.size(), 9);
    ASSERT_EQ(r.sh.shape(), s.sh.shape());
    EXPECT_EQ(r.sh_degree(), deg);
    auto same = [](const Tensor& a, const Tensor& b) {
      for (int64_t i = 0; i < a.numel(); ++i)
        if (a.get(i) != b.get(i)) return false;
      return true;
    };
    EXPECT_TRUE(same(s.means, r.means) && same(s.log_scales, r.log_scales) && same(s.quats, r.quats) &&
                same(s.opacity_logits, r.opacity_logits) && same(s.sh, r.sh));
  }
}

TEST(SplatIo, PlyChannelMajorRest) {
  // f_rest_{c*(K-1)+k}: coefficient k+1 of channel c, as the reference 3DGS writer lays it out.
  Scene s = random_scene(1, 1, 3);
  for (int64_t i = 0; i < s.sh.numel(); ++i) s.sh.set(i, static_cast<double>(i));  // sh[0,k,c] = 3k + c
  std::string p = tmp("cm.ply");
  write_ply(p, s);
  std::string b = formats::read_file_bytes(p, "test");
  std::filesystem::remove(p);
  const size_t body = b.find("end_header\n") + 11;
  float v[9 + 9];
  std::memcpy(v, b.data() + body, sizeof v);
  EXPECT_EQ(v[6], 0.f);   // f_dc_0 = sh[0,0,0]
  EXPECT_EQ(v[8], 2.f);   // f_dc_2 = sh[0,0,2]
  EXPECT_EQ(v[9], 3.f);   // f_rest_0 = sh[0,1,0]
  EXPECT_EQ(v[12], 4.f);  // f_rest_3 = sh[0,1,1]
}

TEST(SplatIo, PlyErrorsAreClear) {
  EXPECT_NE(error_of([] { parse_ply("hello", "x.ply"); }).find("not a .ply file"), std::string::npos);
  std::string h = "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nend_header\n";
  EXPECT_NE(error_of([&] { parse_ply(h, "x.ply"); }).find("binary_little_endian"), std::string::npos);
  std::string h2 = "ply\nformat binary_little_endian 1.0\nelement vertex 4\nproperty float x\nend_header\nabc";
  EXPECT_NE(error_of([&] { parse_ply(h2, "x.ply"); }).find("vertex bytes"), std::string::npos);
  std::string h3 = "ply\nformat binary_little_endian 1.0\nelement vertex 1\nproperty float x\nend_header\n1234";
  EXPECT_NE(error_of([&] { parse_ply(h3, "x.ply"); }).find("missing vertex property 'y'"), std::string::npos);
}

TEST(SplatIo, ColmapAndJsonCamerasAgree) {
  std::string cams = "# Camera list\n1 PINHOLE 64 48 50 51 32 24\n2 SIMPLE_PINHOLE 32 32 40 16 16\n";
  // identity rotation, then a 90-degree turn about y: q = (cos 45, 0, sin 45, 0)
  std::string imgs = "# Image list\n1 1 0 0 0 0.5 -0.25 3 1 a.png\n0.0 0.0 -1\n"
                     "2 0.7071067811865476 0 0.7071067811865476 0 0 0 4 2 b.png\n\n";
  auto v = parse_colmap(cams, imgs, "colmap");
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].name, "a.png");
  EXPECT_EQ(v[0].width, 64);
  EXPECT_DOUBLE_EQ(v[0].fy, 51);
  EXPECT_DOUBLE_EQ(v[0].view[3], 0.5);
  EXPECT_DOUBLE_EQ(v[0].view[11], 3);
  EXPECT_NEAR(v[1].view[2], 1, 1e-12);   // R = rot_y(90): row 0 = (0, 0, 1)
  EXPECT_NEAR(v[1].view[8], -1, 1e-12);  // row 2 = (-1, 0, 0)
  EXPECT_DOUBLE_EQ(v[1].fx, 40);
  std::string p = tmp("cams.json");
  write_cameras_json(p, v);
  auto j = read_cameras(p);
  std::filesystem::remove(p);
  ASSERT_EQ(j.size(), 2u);
  for (int i = 0; i < 16; ++i) EXPECT_DOUBLE_EQ(j[1].view[i], v[1].view[i]);
  EXPECT_EQ(j[1].name, "b.png");
  EXPECT_NE(error_of([] { parse_colmap("1 FISHEYE_X 4 4 1 1 1", "", "c"); }).find("not supported"), std::string::npos);
  EXPECT_NE(error_of([] { parse_cameras_json("{\"cameras\": [{\"width\": 4}]}", "j"); }).find("camera 0"),
            std::string::npos);
}

TEST(SplatIo, PngRoundTrip) {
  Tensor img(DType::f32, {5, 7, 3});
  for (int64_t i = 0; i < img.numel(); ++i) img.set(i, static_cast<double>((i * 37) % 256) / 255.0);
  std::string p = tmp("img.png");
  write_png(p, img);
  Tensor r = read_png(p);
  std::filesystem::remove(p);
  ASSERT_EQ(r.shape(), img.shape());
  for (int64_t i = 0; i < img.numel(); ++i) EXPECT_NEAR(r.get(i), img.get(i), 1e-6);
  EXPECT_NE(error_of([] { read_png("/nonexistent/x.png"); }).find("cannot open"), std::string::npos);
}

TEST(SplatIo, DensifyClonesSplitsPrunes) {
  Scene s = random_scene(4, 0, 1);
  // 0: small + high gradient -> clone; 1: large + high gradient -> split; 2: transparent -> prune; 3: keep
  for (int j = 0; j < 3; ++j) {
    s.log_scales.set(0 * 3 + j, std::log(0.001));
    s.log_scales.set(1 * 3 + j, std::log(0.05));
  }
  for (int i = 0; i < 4; ++i) s.opacity_logits.set(i, i == 2 ? -8.0 : 1.0);
  GradStats st;
  st.reset(4);
  st.sum = {1.0, 1.0, 1.0, 0.0};
  st.count = {1, 1, 1, 1};
  DensifyOptions o;
  DensifyResult r = densify(s, st, o, 1.0, false, 7);
  EXPECT_EQ(r.cloned, 1);
  EXPECT_EQ(r.split, 1);
  EXPECT_EQ(r.pruned, 1);
  ASSERT_EQ(s.size(), 5);
  EXPECT_EQ(r.source, (std::vector<int64_t>{0, 0, 1, 1, 3}));
  EXPECT_FALSE(r.fresh[0]);
  EXPECT_TRUE(r.fresh[1]);
  EXPECT_NEAR(s.log_scales.get(2 * 3), std::log(0.05 / 1.6), 1e-6);  // split halves shrink by 1.6
  EXPECT_NE(s.means.get(2 * 3), s.means.get(3 * 3));                  // and are resampled apart
}
