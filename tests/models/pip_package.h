// The folder of an installed Python package (pip wheels that carry model files), found with
// importlib's find_spec so the package itself is not imported. Empty when it is not installed.
#pragma once
#include <cstdio>
#include <string>

namespace rlx::testing {

inline std::string pip_package_dir(const std::string& module) {
  std::string out;
  std::string cmd = "python3 -c \"import importlib.util as u; s=u.find_spec('" + module +
                    "'); print(s.submodule_search_locations[0] if s else '')\" 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  ::pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

}  // namespace rlx::testing
