// Runs the built `rlx` binary (RLX_BIN) with ARGS and returns its exit code and output (stdout and
// stderr together unless `stdout_only`), for the command-line tests.
#pragma once
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

struct RlxRun {
  int code;
  std::string out;
};

inline RlxRun run_rlx(const std::string& args, bool stdout_only = false) {
  std::string cmd = std::string(RLX_BIN) + " " + args + (stdout_only ? " 2>/dev/null" : " 2>&1");
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int st = pclose(p);
  return {WEXITSTATUS(st), out};
}
