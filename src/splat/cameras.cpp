// COLMAP text and JSON camera files (see cameras.h). COLMAP stores world -> camera as a unit
// quaternion (qw, qx, qy, qz) and translation in OpenCV axes, which is the view matrix as it is.
#include "splat/cameras.h"

#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "formats/file_io.h"
#include "splat/splat_math.h"

namespace rlx::splat {

std::vector<Camera> parse_cameras_json(const std::string& text, const std::string& label) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    fail("[cameras] ", label, ": not JSON: ", e.what());
  }
  RLX_CHECK(j.is_object() && j.contains("cameras") && j["cameras"].is_array(), "[cameras] ", label,
            ": expected {\"cameras\": [...]}");
  std::vector<Camera> v;
  for (auto& c : j["cameras"]) {
    Camera k;
    try {
      k.name = c.value("file", std::string());
      k.width = c.at("width").get<int64_t>();
      k.height = c.at("height").get<int64_t>();
      k.fx = c.at("fx").get<double>();
      k.fy = c.at("fy").get<double>();
      k.cx = c.at("cx").get<double>();
      k.cy = c.at("cy").get<double>();
      auto& m = c.at("viewmat");
      RLX_CHECK(m.is_array() && m.size() == 16, "viewmat must hold 16 numbers");
      for (int i = 0; i < 16; ++i) k.view[i] = m[static_cast<size_t>(i)].get<double>();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      fail("[cameras] ", label, ": camera ", v.size(), ": ", e.what());
    }
    RLX_CHECK(k.width > 0 && k.height > 0 && k.fx > 0 && k.fy > 0, "[cameras] ", label, ": camera ", v.size(),
              " needs positive width, height, fx, fy");
    v.push_back(k);
  }
  return v;
}

std::vector<Camera> parse_colmap(const std::string& cameras_txt, const std::string& images_txt, const std::string& label) {
  struct Intr {
    int64_t w, h;
    double fx, fy, cx, cy;
  };
  std::map<int64_t, Intr> intr;
  std::istringstream cs(cameras_txt);
  std::string line;
  while (std::getline(cs, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    int64_t id, w, h;
    std::string model;
    RLX_CHECK(static_cast<bool>(ls >> id >> model >> w >> h), "[cameras] ", label, ": bad cameras.txt line '", line, "'");
    std::vector<double> p;
    double x;
    while (ls >> x) p.push_back(x);
    Intr in{w, h, 0, 0, 0, 0};
    if (model == "PINHOLE" || model == "OPENCV" || model == "RADIAL_FISHEYE" || model == "FULL_OPENCV") {
      RLX_CHECK(p.size() >= 4, "[cameras] ", label, ": ", model, " needs fx fy cx cy");
      in = {w, h, p[0], p[1], p[2], p[3]};
    } else if (model == "SIMPLE_PINHOLE" || model == "SIMPLE_RADIAL" || model == "RADIAL") {
      RLX_CHECK(p.size() >= 3, "[cameras] ", label, ": ", model, " needs f cx cy");
      in = {w, h, p[0], p[0], p[1], p[2]};
    } else {
      fail("[cameras] ", label, ": camera model '", model, "' is not supported (PINHOLE, SIMPLE_PINHOLE, SIMPLE_RADIAL, RADIAL, OPENCV)");
    }
    if (model != "PINHOLE" && model != "SIMPLE_PINHOLE")
      std::cerr << "[cameras] " << label << ": camera " << id << " (" << model << "): distortion ignored\n";
    intr[id] = in;
  }
  std::vector<Camera> v;
  std::istringstream is(images_txt);
  bool points_line = false;
  while (std::getline(is, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (points_line) {
      points_line = false;
      continue;
    }
    std::istringstream ls(line);
    int64_t id, cam;
    double q[4], t[3];
    std::string name;
    RLX_CHECK(static_cast<bool>(ls >> id >> q[0] >> q[1] >> q[2] >> q[3] >> t[0] >> t[1] >> t[2] >> cam >> name),
              "[cameras] ", label, ": bad images.txt line '", line, "'");
    auto it = intr.find(cam);
    RLX_CHECK(it != intr.end(), "[cameras] ", label, ": image '", name, "' names unknown camera ", cam);
    double qn = std::sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
    RLX_CHECK(qn > 0, "[cameras] ", label, ": image '", name, "' has a zero quaternion");
    Mat3<double> R = quat_to_rot(q[0] / qn, q[1] / qn, q[2] / qn, q[3] / qn);
    Camera c;
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) c.view[i * 4 + j] = R.m[i][j];
      c.view[i * 4 + 3] = t[i];
    }
    c.width = it->second.w;
    c.height = it->second.h;
    c.fx = it->second.fx;
    c.fy = it->second.fy;
    c.cx = it->second.cx;
    c.cy = it->second.cy;
    c.name = name;
    v.push_back(c);
    points_line = true;
  }
  return v;
}

std::vector<Camera> read_cameras(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path p(path);
  if (p.extension() == ".json") return parse_cameras_json(formats::read_file_bytes(path, "cameras"), path);
  fs::path dir = fs::is_directory(p) ? p : p.parent_path();
  return parse_colmap(formats::read_file_bytes((dir / "cameras.txt").string(), "cameras"),
                      formats::read_file_bytes((dir / "images.txt").string(), "cameras"), dir.string());
}

void write_cameras_json(const std::string& path, const std::vector<Camera>& cams) {
  nlohmann::json j;
  j["cameras"] = nlohmann::json::array();
  for (auto& c : cams) {
    nlohmann::json e;
    e["file"] = c.name;
    e["width"] = c.width;
    e["height"] = c.height;
    e["fx"] = c.fx;
    e["fy"] = c.fy;
    e["cx"] = c.cx;
    e["cy"] = c.cy;
    e["viewmat"] = std::vector<double>(c.view, c.view + 16);
    j["cameras"].push_back(e);
  }
  formats::write_file_atomic(path, j.dump(1) + "\n", "cameras");
}

}  // namespace rlx::splat
