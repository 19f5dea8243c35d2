// Camera files for `rlx splat`: COLMAP's text model (cameras.txt + images.txt; PINHOLE,
// SIMPLE_PINHOLE, and SIMPLE_RADIAL/RADIAL/OPENCV with their distortion ignored, said on stderr)
// and a simple JSON: {"cameras": [{"file", "width", "height", "fx", "fy", "cx", "cy",
// "viewmat": 16 numbers, world -> camera row-major}]}.
#pragma once
#include <string>
#include <vector>

#include "splat/pipeline.h"

namespace rlx::splat {

// `path`: a .json file, or COLMAP text: a folder holding cameras.txt and images.txt, or either file.
std::vector<Camera> read_cameras(const std::string& path);
std::vector<Camera> parse_cameras_json(const std::string& text, const std::string& label);
std::vector<Camera> parse_colmap(const std::string& cameras_txt, const std::string& images_txt, const std::string& label);
void write_cameras_json(const std::string& path, const std::vector<Camera>& cams);

}  // namespace rlx::splat
