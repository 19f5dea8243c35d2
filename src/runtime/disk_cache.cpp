// See disk_cache.h.
#include "runtime/disk_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace rlx {

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string hex64(uint64_t h) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(h));
  return b;
}

std::string cache_dir(const std::string& sub, bool create) {
  std::string d;
  if (const char* e = std::getenv("RLX_CACHE_DIR"); e && *e) d = e;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) d = std::string(x) + "/rlx";
  else if (const char* h = std::getenv("HOME"); h && *h) d = std::string(h) + "/.cache/rlx";
  else d = "/tmp/rlx-cache";
  if (!sub.empty()) d += "/" + sub;
  if (!create) return d;
  std::string cur;
  for (size_t i = 0; i <= d.size(); ++i) {  // mkdir -p
    if (i == d.size() || d[i] == '/') {
      if (!cur.empty()) ::mkdir(cur.c_str(), 0755);
    }
    if (i < d.size()) cur += d[i];
  }
  return d;
}

std::string temp_path_for(const std::string& path) {
  static std::atomic<int> n{0};
  return path + ".tmp" + std::to_string(::getpid()) + "." + std::to_string(n++);
}

bool write_file_atomic(const std::string& path, const std::string& bytes) {
  std::string tmp = temp_path_for(path);
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) return false;
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.close();  // the final flush can fail too (disk full): check it before the rename
    if (!f) {
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace rlx
