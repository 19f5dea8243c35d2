// `rlx launch -n N [--transport mpi|ucx] -- rlx CMD ...`: runs N ranks of a command under Open MPI's
// mpirun (one host; several with --hosts). Each rank finds its rank and the world in mpirun's
// environment (src/dist/mpi.cpp), so `mpirun -n N rlx CMD ...` directly works the same.
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "commands.h"

namespace rlx::cli {

int cmd_launch(const Args& a) {
  std::vector<std::string> cmd = a.positional;
  if (cmd.empty()) usage_fail("launch: no command given (rlx launch -n N -- rlx CMD ...)");
  std::string transport = a.get("transport"), hosts = a.get("hosts");
  if (transport == "nccl")
    fail("[launch] --transport nccl: this build has no NCCL transport (collectives run on host buffers: mpi or ucx)");
  // The command's `rlx` is this very binary, so ranks run the same build as the launcher.
  if (cmd[0] == "rlx") {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) cmd[0] = std::string(self, static_cast<size_t>(n));
  }
  std::vector<std::string> argv{a.get("mpirun"), "-n", a.get("n"), "--oversubscribe", "--bind-to", "none"};
  if (!hosts.empty()) argv.insert(argv.end(), {"--hostfile", hosts});
  // Open MPI 4.1 takes UCX only on RDMA devices unless told any transport (tcp, shared memory) will do.
  if (transport == "ucx")
    argv.insert(argv.end(), {"--mca", "pml", "ucx", "--mca", "pml_ucx_tls", "any", "--mca", "pml_ucx_devices", "any"});
  if (transport == "mpi") argv.insert(argv.end(), {"--mca", "pml", "ob1"});
  // Every RLX_* switch reaches the ranks (mpirun forwards only what -x names).
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (kv.rfind("RLX_", 0) == 0) argv.insert(argv.end(), {"-x", kv.substr(0, kv.find('='))});
  }
  if (geteuid() == 0) {  // Open MPI refuses root unless told twice
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  }
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  std::vector<char*> cargv;
  for (auto& s : argv) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  if (a.has("dry-run")) {
    for (auto& s : argv) std::printf("%s ", s.c_str());
    std::printf("\n");
    return 0;
  }
  std::fflush(stdout);
  execvp(cargv[0], cargv.data());
  fail("[launch] cannot run '", argv[0], "': install Open MPI (apt install openmpi-bin; scripts/bootstrap.sh does) "
       "or name it with --mpirun");
}

}  // namespace rlx::cli
