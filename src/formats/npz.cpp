// .npz = a zip archive of .npy entries. We read through the central directory (the authoritative
// sizes, even when local headers defer them to a data descriptor) and write stored entries only.
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "formats/file_io.h"
#include "rlx/npy.h"

namespace rlx {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr size_t kLocalLen = 30, kCentralLen = 46, kEndLen = 22;

// Bounds-checked little-endian reads over the archive bytes.
struct Reader {
  const unsigned char* p;
  size_t size;
  const std::string& where;
  void need(size_t off, size_t n, const char* what) const {
    if (off > size || n > size - off) fail("[npy] ", where, ": truncated zip (", what, ")");
  }
  uint32_t u(size_t off, int n, const char* what) const {
    need(off, static_cast<size_t>(n), what);
    uint32_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[off + i];
    return v;
  }
};

uint32_t crc32_of(const void* data, size_t n) {
  uLong c = crc32(0L, Z_NULL, 0);
  const auto* b = static_cast<const Bytef*>(data);
  while (n > 0) {  // zlib takes uInt lengths
    uInt chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    c = crc32(c, b, chunk);
    b += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(c);
}

std::string inflate_raw(const unsigned char* src, size_t n, size_t out_size, const std::string& where) {
  // Deflate cannot expand more than ~1032:1; a larger claim is a zip bomb or corruption.
  if (out_size / 1032 > n + 64) fail("[npy] ", where, ": implausible uncompressed size ", out_size);
  std::string out(out_size, '\0');
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) fail("[npy] ", where, ": zlib inflateInit2 failed");
  zs.next_in = const_cast<Bytef*>(src);
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  size_t in_left = n, out_left = out_size;
  int rc = Z_OK;
  for (;;) {
    // zlib counts in uInt; feed at most 1 GiB windows of input and output at a time.
    if (zs.avail_in == 0 && in_left > 0) {
      zs.avail_in = static_cast<uInt>(std::min<size_t>(in_left, 1u << 30));
      in_left -= zs.avail_in;
    }
    if (zs.avail_out == 0 && out_left > 0) {
      zs.avail_out = static_cast<uInt>(std::min<size_t>(out_left, 1u << 30));
      out_left -= zs.avail_out;
    }
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) break;
    if (rc == Z_OK) continue;  // progress was made
    if (rc == Z_BUF_ERROR && ((zs.avail_in == 0 && in_left > 0) || (zs.avail_out == 0 && out_left > 0)))
      continue;  // a refill above lets it proceed
    break;  // out of input or output before the end, or a data error
  }
  size_t produced = zs.total_out;
  std::string msg = zs.msg ? zs.msg : "";
  inflateEnd(&zs);
  if (rc != Z_STREAM_END)
    fail("[npy] ", where, ": corrupt deflate data", msg.empty() ? "" : " (" + msg + ")");
  if (produced != out_size)
    fail("[npy] ", where, ": inflated ", produced, " bytes, directory says ", out_size);
  return out;
}

void put(std::string& s, uint32_t v, int n) {
  for (int i = 0; i < n; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
}

}  // namespace

std::vector<std::pair<std::string, Tensor>> parse_npz(const void* data, size_t size, const std::string& where) {
  Reader r{static_cast<const unsigned char*>(data), size, where};
  if (size < kEndLen) fail("[npy] ", where, ": not a zip archive (too short)");
  // The end record sits in the last 22 + 65535 (max comment) bytes; scan backwards for it.
  size_t end = std::string::npos;
  size_t lowest = size > kEndLen + 65535 ? size - kEndLen - 65535 : 0;
  for (size_t off = size - kEndLen + 1; off-- > lowest;) {
    if (r.u(off, 4, "end record") == kEndSig) {
      end = off;
      break;
    }
  }
  if (end == std::string::npos) fail("[npy] ", where, ": not a zip archive (no end-of-central-directory record)");
  uint32_t disk = r.u(end + 4, 2, "end record"), cd_disk = r.u(end + 6, 2, "end record");
  uint32_t n_here = r.u(end + 8, 2, "end record"), n_total = r.u(end + 10, 2, "end record");
  uint32_t cd_size = r.u(end + 12, 4, "end record"), cd_off = r.u(end + 16, 4, "end record");
  bool zip64 = n_total == 0xffff || cd_size == 0xffffffffu || cd_off == 0xffffffffu ||
               (end >= 20 && r.u(end - 20, 4, "zip64 locator") == kZip64LocatorSig);
  if (zip64) fail("[npy] ", where, ": zip64 archives are not supported (re-save the .npz below 4 GiB)");
  if (disk != 0 || cd_disk != 0 || n_here != n_total)
    fail("[npy] ", where, ": multi-disk zip archives are not supported");
  r.need(cd_off, cd_size, "central directory out of range");

  std::vector<std::pair<std::string, Tensor>> out;
  std::set<std::string> seen;
  size_t off = cd_off;
  for (uint32_t e = 0; e < n_total; ++e) {
    if (r.u(off, 4, "central directory") != kCentralSig)
      fail("[npy] ", where, ": corrupt central directory (entry ", e, ")");
    r.need(off, kCentralLen, "central directory entry");
    uint32_t flags = r.u(off + 8, 2, "cd"), method = r.u(off + 10, 2, "cd");
    uint32_t crc = r.u(off + 16, 4, "cd"), csize = r.u(off + 20, 4, "cd"), usize = r.u(off + 24, 4, "cd");
    uint32_t name_len = r.u(off + 28, 2, "cd"), extra_len = r.u(off + 30, 2, "cd");
    uint32_t comment_len = r.u(off + 32, 2, "cd"), local = r.u(off + 42, 4, "cd");
    r.need(off + kCentralLen, name_len, "entry name");
    std::string name(reinterpret_cast<const char*>(r.p + off + kCentralLen), name_len);
    off += kCentralLen + name_len + extra_len + comment_len;
    std::string ewhere = where + ": entry '" + name + "'";
    if (csize == 0xffffffffu || usize == 0xffffffffu || local == 0xffffffffu)
      fail("[npy] ", ewhere, ": zip64 entries are not supported");
    if (flags & 1) fail("[npy] ", ewhere, ": encrypted entries are not supported");
    if (!name.empty() && name.back() == '/') continue;  // a directory entry

    if (r.u(local, 4, "local header") != kLocalSig) fail("[npy] ", ewhere, ": bad local header");
    r.need(local, kLocalLen, "local header");
    size_t data_off = local + kLocalLen + r.u(local + 26, 2, "local header") + r.u(local + 28, 2, "local header");
    r.need(data_off, csize, "entry data");
    const unsigned char* src = r.p + data_off;

    std::string inflated;
    const void* bytes = src;
    size_t nbytes = csize;
    if (method == 8) {
      inflated = inflate_raw(src, csize, usize, ewhere);
      bytes = inflated.data();
      nbytes = inflated.size();
    } else if (method == 0) {
      if (csize != usize) fail("[npy] ", ewhere, ": stored entry with differing sizes");
    } else {
      fail("[npy] ", ewhere, ": unsupported compression method ", method, " (only stored and deflated)");
    }
    if (crc32_of(bytes, nbytes) != crc) fail("[npy] ", ewhere, ": CRC-32 mismatch");

    std::string key = name;
    if (key.size() > 4 && key.compare(key.size() - 4, 4, ".npy") == 0) key.resize(key.size() - 4);
    if (!seen.insert(key).second) fail("[npy] ", where, ": duplicate entry '", key, "'");
    out.emplace_back(key, parse_npy(bytes, nbytes, ewhere));
  }
  return out;
}

std::vector<std::pair<std::string, Tensor>> read_npz_ordered(const std::string& path) {
  std::string bytes = formats::read_file_bytes(path, "npy");
  return parse_npz(bytes.data(), bytes.size(), path);
}

std::map<std::string, Tensor> read_npz(const std::string& path) {
  std::map<std::string, Tensor> m;
  for (auto& [k, t] : read_npz_ordered(path)) m.emplace(k, std::move(t));
  return m;
}

void write_npz(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& arrays) {
  // Validate everything before touching the file system.
  std::set<std::string> seen;
  for (auto& [k, t] : arrays) {
    if (k.empty()) fail("[npy] ", path, ": empty array name");
    if (!seen.insert(k).second) fail("[npy] ", path, ": duplicate array name '", k, "'");
    if (t.dtype() == DType::bf16)
      fail("[npy] bf16 has no numpy dtype; convert to f32 first (array '", k, "' of '", path, "')");
  }
  if (arrays.size() > 0xfffe) fail("[npy] ", path, ": too many arrays for a zip without zip64");

  std::string zip, central;
  constexpr uint32_t kDosTime = 0, kDosDate = (0 << 9) | (1 << 5) | 1;  // 1980-01-01: reproducible
  for (auto& [k, t] : arrays) {
    std::string name = k + ".npy";
    if (name.size() > 0xffff) fail("[npy] ", path, ": array name too long");
    std::string body = serialize_npy(t);
    if (body.size() >= 0xffffffffu || zip.size() >= 0xffffffffu)
      fail("[npy] ", path, ": archive would exceed 4 GiB, which needs zip64 (unsupported)");
    uint32_t crc = crc32_of(body.data(), body.size());
    uint32_t local_off = static_cast<uint32_t>(zip.size());
    uint32_t sz = static_cast<uint32_t>(body.size());
    uint32_t nl = static_cast<uint32_t>(name.size());
    put(zip, kLocalSig, 4);
    put(zip, 20, 2);  // version needed: 2.0
    put(zip, 0, 2);   // flags
    put(zip, 0, 2);   // method: stored
    put(zip, kDosTime, 2);
    put(zip, kDosDate, 2);
    put(zip, crc, 4);
    put(zip, sz, 4);
    put(zip, sz, 4);
    put(zip, nl, 2);
    put(zip, 0, 2);  // extra length
    zip += name;
    zip += body;

    put(central, kCentralSig, 4);
    put(central, (3 << 8) | 20, 2);  // made by: Unix, 2.0
    put(central, 20, 2);
    put(central, 0, 2);
    put(central, 0, 2);
    put(central, kDosTime, 2);
    put(central, kDosDate, 2);
    put(central, crc, 4);
    put(central, sz, 4);
    put(central, sz, 4);
    put(central, nl, 2);
    put(central, 0, 2);  // extra
    put(central, 0, 2);  // comment
    put(central, 0, 2);  // disk
    put(central, 0, 2);  // internal attributes
    put(central, 0100644u << 16, 4);  // external: a regular rw-r--r-- file
    put(central, local_off, 4);
    central += name;
  }
  if (zip.size() + central.size() >= 0xffffffffu)
    fail("[npy] ", path, ": archive would exceed 4 GiB, which needs zip64 (unsupported)");
  uint32_t cd_off = static_cast<uint32_t>(zip.size());
  uint32_t n = static_cast<uint32_t>(arrays.size());
  zip += central;
  put(zip, kEndSig, 4);
  put(zip, 0, 2);
  put(zip, 0, 2);
  put(zip, n, 2);
  put(zip, n, 2);
  put(zip, static_cast<uint32_t>(central.size()), 4);
  put(zip, cd_off, 4);
  put(zip, 0, 2);  // comment length
  formats::write_file_atomic(path, zip, "npy");
}

}  // namespace rlx
