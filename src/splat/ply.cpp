// Reader and writer of the 3DGS .ply layout (see ply.h). The reader takes the header's properties
// in any order (float or double), requires the ones a scene needs and ignores others.
#include "splat/ply.h"

#include <cstring>
#include <map>
#include <sstream>

#include "formats/file_io.h"

namespace rlx::splat {

namespace {
struct Prop {
  std::string name;
  int size;  // 4 float, 8 double
  size_t offset;
};
}  // namespace

Scene parse_ply(const std::string& bytes, const std::string& label) {
  const std::string tag = "[ply] " + label + ": ";
  size_t he = bytes.find("end_header\n");
  RLX_CHECK(bytes.rfind("ply\n", 0) == 0 && he != std::string::npos, tag, "not a .ply file (no ply/end_header)");
  std::istringstream hs(bytes.substr(0, he));
  std::string line;
  int64_t n = -1;
  bool in_vertex = false, binary_le = false;
  std::vector<Prop> props;
  size_t stride = 0;
  while (std::getline(hs, line)) {
    std::istringstream ls(line);
    std::string w;
    ls >> w;
    if (w == "format") {
      std::string f;
      ls >> f;
      binary_le = f == "binary_little_endian";
    } else if (w == "element") {
      std::string e;
      int64_t cnt = -1;
      ls >> e >> cnt;
      in_vertex = e == "vertex";
      if (in_vertex) n = cnt;
      else RLX_CHECK(n >= 0, tag, "elements before 'vertex' are not supported");
    } else if (w == "property" && in_vertex) {
      std::string ty, name;
      ls >> ty >> name;
      RLX_CHECK(ty == "float" || ty == "float32" || ty == "double" || ty == "float64", tag, "property '", name,
                "' has type '", ty, "'; only float/double vertex properties are supported");
      int sz = (ty == "double" || ty == "float64") ? 8 : 4;
      props.push_back({name, sz, stride});
      stride += static_cast<size_t>(sz);
    }
  }
  RLX_CHECK(binary_le, tag, "only 'format binary_little_endian 1.0' is supported");
  RLX_CHECK(n >= 0 && n < (int64_t{1} << 31), tag, "bad vertex count ", n);
  const size_t body = he + std::strlen("end_header\n");
  RLX_CHECK(stride > 0 && bytes.size() - body >= static_cast<size_t>(n) * stride, tag, "file holds ",
            bytes.size() - body, " vertex bytes, header says ", n, " x ", stride);
  std::map<std::string, const Prop*> by;
  for (auto& p : props) by[p.name] = &p;
  auto need = [&](const std::string& nm) {
    auto it = by.find(nm);
    RLX_CHECK(it != by.end(), tag, "missing vertex property '", nm, "'");
    return it->second;
  };
  int rest = 0;
  while (by.count("f_rest_" + std::to_string(rest))) ++rest;
  RLX_CHECK(rest % 3 == 0, tag, rest, " f_rest properties is not a multiple of 3");
  const int64_t k = 1 + rest / 3;
  RLX_CHECK(k == 1 || k == 4 || k == 9 || k == 16, tag, "f_rest count ", rest, " is no SH degree (0, 9, 24, 45)");
  auto rd = [&](int64_t i, const Prop* p) {
    const char* at = bytes.data() + body + static_cast<size_t>(i) * stride + p->offset;
    if (p->size == 8) {
      double v;
      std::memcpy(&v, at, 8);
      return v;
    }
    float v;
    std::memcpy(&v, at, 4);
    return static_cast<double>(v);
  };
  Scene s{Tensor(DType::f32, {n, 3}), Tensor(DType::f32, {n, 3}), Tensor(DType::f32, {n, 4}), Tensor(DType::f32, {n}),
          Tensor(DType::f32, {n, k, 3})};
  const Prop* xyz[3] = {need("x"), need("y"), need("z")};
  const Prop* sc[3] = {need("scale_0"), need("scale_1"), need("scale_2")};
  const Prop* rot[4] = {need("rot_0"), need("rot_1"), need("rot_2"), need("rot_3")};
  const Prop* dc[3] = {need("f_dc_0"), need("f_dc_1"), need("f_dc_2")};
  const Prop* op = need("opacity");
  std::vector<const Prop*> fr;
  for (int r = 0; r < rest; ++r) fr.push_back(need("f_rest_" + std::to_string(r)));
  for (int64_t i = 0; i < n; ++i) {
    for (int j = 0; j < 3; ++j) s.means.set(i * 3 + j, rd(i, xyz[j]));
    for (int j = 0; j < 3; ++j) s.log_scales.set(i * 3 + j, rd(i, sc[j]));
    for (int j = 0; j < 4; ++j) s.quats.set(i * 4 + j, rd(i, rot[j]));
    s.opacity_logits.set(i, rd(i, op));
    for (int c = 0; c < 3; ++c) {
      s.sh.set((i * k) * 3 + c, rd(i, dc[c]));
      for (int64_t q = 1; q < k; ++q) s.sh.set((i * k + q) * 3 + c, rd(i, fr[static_cast<size_t>(c * (k - 1) + q - 1)]));
    }
  }
  return s;
}

Scene read_ply(const std::string& path) { return parse_ply(formats::read_file_bytes(path, "ply"), path); }

void write_ply(const std::string& path, const Scene& s) {
  const int64_t n = s.size(), k = s.sh.shape()[1];
  std::ostringstream h;
  h << "ply\nformat binary_little_endian 1.0\nelement vertex " << n << "\n";
  std::vector<std::string> names = {"x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"};
  for (int64_t r = 0; r < 3 * (k - 1); ++r) names.push_back("f_rest_" + std::to_string(r));
  for (const char* nm : {"opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"}) names.push_back(nm);
  for (auto& nm : names) h << "property float " << nm << "\n";
  h << "end_header\n";
  std::string out = h.str();
  std::vector<float> row(names.size());
  for (int64_t i = 0; i < n; ++i) {
    size_t p = 0;
    for (int j = 0; j < 3; ++j) row[p++] = static_cast<float>(s.means.get(i * 3 + j));
    for (int j = 0; j < 3; ++j) row[p++] = 0.f;
    for (int c = 0; c < 3; ++c) row[p++] = static_cast<float>(s.sh.get((i * k) * 3 + c));
    for (int c = 0; c < 3; ++c)
      for (int64_t q = 1; q < k; ++q) row[p++] = static_cast<float>(s.sh.get((i * k + q) * 3 + c));
    row[p++] = static_cast<float>(s.opacity_logits.get(i));
    for (int j = 0; j < 3; ++j) row[p++] = static_cast<float>(s.log_scales.get(i * 3 + j));
    for (int j = 0; j < 4; ++j) row[p++] = static_cast<float>(s.quats.get(i * 4 + j));
    out.append(reinterpret_cast<const char*>(row.data()), row.size() * sizeof(float));
  }
  formats::write_file_atomic(path, out, "ply");
}

}  // namespace rlx::splat
