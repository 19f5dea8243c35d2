// NCCL (cuda device buffers): what this build and host can say about it. The library is loaded at
// run time (libnccl.so.2); the transport itself needs a CUDA device per rank and is not part of
// this build, which `rlx devices` and docs/distributed.md state.
#include <dlfcn.h>

#include <string>

#include "dist/communicator.h"

#ifdef RLX_HAVE_NCCL_H
#include <nccl.h>
#endif

namespace rlx::dist {

std::string nccl_status() {
  std::string s;
#ifdef RLX_HAVE_NCCL_H
  s = "nccl.h " + std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." + std::to_string(NCCL_PATCH) +
      " at build time";
#else
  s = "built without nccl.h";
#endif
  void* h = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_LOCAL);
  s += h ? "; libnccl.so.2 loads" : "; libnccl.so.2 not found";
  if (h) dlclose(h);
  return s + "; NCCL transport not implemented in this build (cuda collectives: none)";
}

}  // namespace rlx::dist
