// A PJRT plugin, loaded at run time: dlopen, GetPjrtApi, the API version check, one client and its
// first addressable device. The header is the one in the installed `xla-cpu-pjrt` wheel (CMake
// finds it); RLX accepts a plugin whose PJRT C API major version equals the header's and whose
// minor version is at least the header's (the C API keeps struct layouts and the function table
// append-only within a major version, so a newer plugin reads the structs RLX fills).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "pjrt_c_api.h"
#include "rlx/dtype.h"

namespace rlx::pjrt {

struct Plugin {
  std::string path;             // the .so loaded
  const PJRT_Api* api = nullptr;
  int major = 0, minor = 0;     // the plugin's pjrt_api_version
  PJRT_Client* client = nullptr;
  PJRT_Device* device = nullptr;  // first addressable device
  std::string platform, platform_version;
  size_t num_devices = 0;

  // Throws `[tpu] <what>: <plugin message>` when `e` is an error (and frees it).
  void check(PJRT_Error* e, const std::string& what) const;
  void await(PJRT_Event* ev, const std::string& what) const;  // waits, frees the event
  void destroy(PJRT_Buffer* b) const;
};

// The plugin RLX uses: RLX_PJRT_PLUGIN (a path) when set, else the first installed of the XLA CPU
// plugin wheels (xla_plugins.xla_cpu_pjrt, lammps_jax_pjrt_cpu), found through python3.
// Loaded once per process; throws with the reason when none loads or no client comes up.
const Plugin& plugin();
// The candidate plugin paths in search order (for `rlx devices` and errors).
std::vector<std::string> plugin_candidates();
PJRT_Buffer_Type buffer_type(DType t);  // throws for a dtype without a PJRT type

}  // namespace rlx::pjrt
