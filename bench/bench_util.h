// Small helpers the C++ benchmarks share: percentiles of timings and comma-separated arguments.
#pragma once

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

namespace rlx_bench {

// The q-quantile (0..1) of `v`, nearest rank from below (p50: pct(v, 0.5)).
inline double pct(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1))];
}

// "1,32,128" -> {"1", "32", "128"}; empty fields are dropped.
inline std::vector<std::string> split(const std::string& s, char sep = ',') {
  std::vector<std::string> r;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, sep))
    if (!x.empty()) r.push_back(x);
  return r;
}

}  // namespace rlx_bench
