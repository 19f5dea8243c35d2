// See disk_cache.h.
#include "runtime/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <string_view>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <tuple>
#include <vector>

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

// ---- size cap

uint64_t cache_max_bytes() {
  uint64_t mb = kDefaultCacheMaxMb;
  if (const char* e = std::getenv("RLX_CACHE_MAX_MB"); e && *e) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(e, &end, 10);
    if (end && *end == '\0' && e[0] != '-') mb = v;
    else std::fprintf(stderr, "[cache] ignoring RLX_CACHE_MAX_MB=%s (not a whole number of MiB)\n", e);
  }
  return mb * 1024 * 1024;
}

void cache_touch(const std::string& path) { ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0); }

void cache_inserted(const std::string& path) {
  uint64_t cap = cache_max_bytes();
  if (cap > 0) cache_evict(cache_dir("", false), cap, path);
}

namespace {

struct CacheFile {
  int64_t mtime_ns;
  std::string path;
  uint64_t size;
};

// The sub-caches that hold entries keyed by hex64 (an entry's and its temporaries' names start with
// the 16 hex digits and a dot). Only these files are counted and evicted: RLX_CACHE_DIR may point
// at a folder holding other things.
const char* const kEvictableSubs[] = {"cpu", "cuda", "spirv"};  // spirv: vulkan's glslc output

bool is_entry_name(const char* n) {
  for (int i = 0; i < 16; ++i)
    if (!std::isxdigit(static_cast<unsigned char>(n[i]))) return false;  // also stops at the '\0'
  return n[16] == '.';
}

// Appends the cache entries of folder `dir` (regular files, links not followed): one fstatat per
// entry. An entry that vanishes while we look is skipped.
void list_entries(const std::string& dir, std::vector<CacheFile>& out) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  const int fd = ::dirfd(d);
  while (const struct dirent* e = ::readdir(d)) {
    if (!is_entry_name(e->d_name)) continue;
    struct stat s;
    if (::fstatat(fd, e->d_name, &s, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(s.st_mode)) continue;
    out.push_back({int64_t{s.st_mtim.tv_sec} * 1000000000 + s.st_mtim.tv_nsec, dir + "/" + e->d_name,
                   static_cast<uint64_t>(s.st_size)});
  }
  ::closedir(d);
}

// `p` without "." / ".." / doubled slashes and without a trailing slash, so paths compare as text.
std::string normal_path(const std::string& p) {
  std::string n = std::filesystem::path(p).lexically_normal().string();
  while (n.size() > 1 && n.back() == '/') n.pop_back();
  return n;
}

}  // namespace

EvictStats cache_evict(const std::string& root, uint64_t max_bytes, const std::string& keep) {
  EvictStats st;
  std::vector<CacheFile> all, files;
  const std::string r = normal_path(root);
  for (const char* sub : kEvictableSubs) list_entries(r + "/" + sub, all);
  struct timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  const int64_t now_ns = int64_t{now.tv_sec} * 1000000000 + now.tv_nsec, hour_ns = int64_t{3600} * 1000000000;
  const std::string kept = keep.empty() ? "" : normal_path(keep);
  for (CacheFile& f : all) {
    st.bytes_before += f.size;
    // Only the file name marks a write in progress: a cache root such as ~/.tmp/rlx must not make
    // every file look unfinished.
    const size_t slash = f.path.rfind('/');
    const std::string_view name = std::string_view(f.path).substr(slash == std::string::npos ? 0 : slash + 1);
    bool in_progress = name.find(".tmp") != std::string_view::npos && now_ns - f.mtime_ns < hour_ns;
    if (f.path != kept && !in_progress) files.push_back(std::move(f));
  }
  st.bytes_after = st.bytes_before;
  if (st.bytes_after <= max_bytes) return st;
  std::sort(files.begin(), files.end(), [](const CacheFile& a, const CacheFile& b) {
    return std::tie(a.mtime_ns, a.path) < std::tie(b.mtime_ns, b.path);
  });
  for (const CacheFile& f : files) {
    if (st.bytes_after <= max_bytes) break;
    if (::unlink(f.path.c_str()) == 0) {
      ++st.removed;
      st.bytes_after -= f.size;
    } else if (errno == ENOENT) {  // another process evicted (or replaced) it meanwhile
      st.bytes_after -= f.size;
    }
  }
  return st;
}

}  // namespace rlx
