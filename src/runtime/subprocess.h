// Running external tools (compilers, emulators, simulators, python3 for package lookups) without a
// shell: argv is passed as is, so paths with spaces or quotes need no escaping. One implementation
// for every backend and code generator that drives a tool.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace rlx {

// The executable `name` on PATH ("" if none); a name with a '/' is returned when it is executable.
std::string find_on_path(const std::string& name);

// Starts argv[0] (a path) with fds 0/1/2 redirected where the argument is >= 0 (else inherited) and
// `close_fds` closed in the child; returns the pid, or -1 when it could not start.
pid_t spawn_process(const std::vector<std::string>& argv, int in_fd, int out_fd, int err_fd,
                    const std::vector<int>& close_fds = {});

// Runs argv to completion with stdout and stderr appended to `out`; returns the exit status, or -1
// when it could not start or was killed by a signal.
int run_tool(const std::vector<std::string>& argv, std::string& out);

// The directory of the installed Python package `module` (importlib.util.find_spec, which locates it
// without importing it, so its own dependencies may be absent), or "" when python3 or the package is
// missing.
std::string python_package_dir(const std::string& module);

// write(2)/read(2) of exactly n bytes, retrying on EINTR; false on EOF or error.
bool write_all(int fd, const void* p, size_t n);
bool read_all(int fd, void* p, size_t n);

}  // namespace rlx
