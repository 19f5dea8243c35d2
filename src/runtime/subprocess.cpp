#include "runtime/subprocess.h"

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <sstream>

extern char** environ;

namespace rlx {

namespace {
bool executable_file(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}
}  // namespace

std::string find_on_path(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return executable_file(name) ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(ss, dir, ':');)
    if (!dir.empty() && executable_file(dir + "/" + name)) return dir + "/" + name;
  return "";
}

pid_t spawn_process(const std::vector<std::string>& argv, int in_fd, int out_fd, int err_fd,
                    const std::vector<int>& close_fds) {
  if (argv.empty()) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (in_fd >= 0) posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
  if (out_fd >= 0) posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  if (err_fd >= 0) posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
  for (int f : close_fds) posix_spawn_file_actions_addclose(&fa, f);
  std::vector<char*> av;
  for (auto& a : argv) av.push_back(const_cast<char*>(a.c_str()));
  av.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, argv[0].c_str(), &fa, nullptr, av.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

int run_tool(const std::vector<std::string>& argv, std::string& out) {
  int p[2];
  if (::pipe(p) != 0) return -1;
  pid_t pid = spawn_process(argv, -1, p[1], p[1], {p[0]});
  ::close(p[1]);
  char buf[4096];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR);)
    if (n > 0) out.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  if (pid < 0) return -1;
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string python_package_dir(const std::string& module) {
  std::string py = find_on_path("python3"), out;
  if (py.empty()) return "";
  std::string script = "import importlib.util as u, sys\ntry:\n  s = u.find_spec(sys.argv[1])\nexcept Exception:\n  s = None\n"
                       "print('dir=' + (s.submodule_search_locations[0] if s and s.submodule_search_locations else ''))";
  if (run_tool({py, "-c", script, module}, out) != 0) return "";
  size_t at = out.rfind("dir=");  // stderr shares the pipe: skip any warning printed before
  if (at == std::string::npos) return "";
  out = out.substr(at + 4, out.find('\n', at) == std::string::npos ? std::string::npos : out.find('\n', at) - at - 4);
  while (!out.empty() && (out.back() == '\r' || out.back() == ' ')) out.pop_back();
  return out;
}

bool write_all(int fd, const void* p, size_t n) {
  auto* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w, n -= static_cast<size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* p, size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = ::read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r, n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace rlx
