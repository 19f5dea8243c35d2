// Environment switches, read the same way by every backend (one copy): RLX_CPU_ROWS=0,
// RLX_CUDA_MERGE=0, RLX_ALLOW_TF32=1, ... Each is documented where its feature is.
#pragma once
#include <cstdlib>
#include <string>

namespace rlx {

// A feature switch: unset -> dflt, "0" -> false, anything else -> true.
inline bool env_on(const char* name, bool dflt) {
  const char* e = std::getenv(name);
  if (!e) return dflt;
  return std::string(e) != "0";
}

// Set to exactly "1" (opt-ins and measurement switches: RLX_ALLOW_TF32, RLX_CUDA_GEMM_OWN_ONLY, ...).
inline bool env_is_1(const char* name) {
  const char* e = std::getenv(name);
  return e && std::string(e) == "1";
}

}  // namespace rlx
