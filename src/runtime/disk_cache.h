// On-disk caches of compiled artifacts (cuda cubins, cpu JIT shared objects, vulkan SPIR-V): one directory
// layout, one content hash, writes that a concurrent reader never sees half-done, and a size cap
// with least-recently-used eviction (RLX_CACHE_MAX_MB).
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

// ---- size cap (least recently used first). "Used" is the file's mtime: an entry's writer sets it,
// cache_touch() refreshes it on every disk hit (atime is not reliable: relatime/noatime mounts).
// The cap in bytes: $RLX_CACHE_MAX_MB (MiB; 0 = no cap), else kDefaultCacheMaxMb.
constexpr uint64_t kDefaultCacheMaxMb = 512;
uint64_t cache_max_bytes();
// A disk-cache hit on `path`: marks it used now (one utimensat; a vanished file is ignored).
void cache_touch(const std::string& path);
// A new entry `path` was just renamed into place: evicts from the cache root (cpu/, cuda/ and
// spirv/ together) until it fits the cap. One directory scan per insert (inserts follow a compile, seconds), none
// per hit. Never removes `path` itself.
void cache_inserted(const std::string& path);

struct EvictStats {
  int removed = 0;
  uint64_t bytes_before = 0, bytes_after = 0;
};
// The eviction itself: removes the entries of <root>/cpu, <root>/cuda and <root>/spirv (files named <16 hex
// digits>.<anything>: entries and their temporaries; nothing else there is counted or touched)
// with the oldest mtime until their total size is <= max_bytes. Skips `keep` and temporaries of a
// write in progress (".tmp" in the name, younger than an hour). Safe against other processes doing
// the same at once: a file that vanished between the scan and its removal is just skipped (and not
// counted).
EvictStats cache_evict(const std::string& root, uint64_t max_bytes, const std::string& keep = "");

}  // namespace rlx
