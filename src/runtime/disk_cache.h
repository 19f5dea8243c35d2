// On-disk caches of compiled artifacts (cuda cubins, cpu JIT shared objects): one directory
// layout, one content hash, and writes that a concurrent reader never sees half-done.
#pragma once
#include <cstdint>
#include <string>

namespace rlx {

// FNV-1a 64-bit of `s`, as 16 hex digits: the cache key of a source + toolchain string.
uint64_t fnv1a64(const std::string& s);
std::string hex64(uint64_t h);
// <root>/<sub>, created if missing (unless !create). root: $RLX_CACHE_DIR, else
// $XDG_CACHE_HOME/rlx, else ~/.cache/rlx, else /tmp/rlx-cache.
std::string cache_dir(const std::string& sub, bool create = true);
// Writes `bytes` to `path` through a temporary file in the same directory and rename(2), so
// another process sees either nothing or the whole file. Returns false on any I/O error.
bool write_file_atomic(const std::string& path, const std::string& bytes);
// A fresh temporary path next to `path` (unique per process and call), for tools that write a
// file themselves before it is renamed into place.
std::string temp_path_for(const std::string& path);

}  // namespace rlx
