#include "formats/file_io.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "rlx/error.h"

namespace rlx::formats {

std::string read_file_bytes(const std::string& path, const char* tag) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail("[", tag, "] ", path, ": cannot open: ", std::strerror(errno));
  std::string out;
  char buf[1 << 16];
  for (;;) {
    size_t n = std::fread(buf, 1, sizeof buf, f);
    out.append(buf, n);
    if (n < sizeof buf) break;
  }
  bool bad = std::ferror(f) != 0;
  int err = errno;
  std::fclose(f);
  if (bad) fail("[", tag, "] ", path, ": read error: ", std::strerror(err));
  return out;
}

void write_file_atomic(const std::string& path, std::string_view bytes, const char* tag) {
  std::string tmp = path + ".tmp." + std::to_string(static_cast<long>(::getpid()));
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail("[", tag, "] ", path, ": cannot create '", tmp, "': ", std::strerror(errno));
  int err = 0;
  auto check = [&](bool step) {
    if (!step && err == 0) err = errno ? errno : EIO;
  };
  check(bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
  if (err == 0) check(std::fflush(f) == 0);
  if (err == 0) check(::fsync(::fileno(f)) == 0);  // so a crash after rename cannot expose a torn file
  check(std::fclose(f) == 0);
  bool ok = err == 0;
  if (!ok) {
    std::remove(tmp.c_str());
    fail("[", tag, "] ", path, ": write failed: ", std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    std::remove(tmp.c_str());
    fail("[", tag, "] ", path, ": cannot rename '", tmp, "' into place: ", std::strerror(err));
  }
}

}  // namespace rlx::formats
