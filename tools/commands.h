#pragma once
#include <map>
#include <string>
#include <vector>

#include "rlx/session.h"

namespace rlx::cli {

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> flags;
  bool has(const std::string& k) const { return flags.count(k) > 0; }
  std::string get(const std::string& k, const std::string& def = "") const;
  std::vector<std::string> all(const std::string& k) const {
    auto it = flags.find(k);
    return it == flags.end() ? std::vector<std::string>{} : it->second;
  }
};

Bindings bind_map(const Graph& g, const std::map<std::string, Tensor>& inputs);
int cmd_ops(const Args& a);

}  // namespace rlx::cli
