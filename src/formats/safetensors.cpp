// safetensors reader (mmap, zero-copy) and writer. Layout: u64 LE header length N, N bytes of JSON,
// then the data section; every tensor's data_offsets are relative to the data section.
#include "rlx/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "formats/file_io.h"

namespace rlx {

namespace {

constexpr uint64_t kMaxHeader = 100u << 20;  // same cap as the reference implementation

struct DTypeName {
  const char* name;
  size_t size;
  bool known;  // has an RLX DType
  DType dt;
};
const DTypeName kDTypes[] = {
    {"F32", 4, true, DType::f32},      {"F16", 2, true, DType::f16},   {"BF16", 2, true, DType::bf16},
    {"F64", 8, true, DType::f64},      {"C64", 8, true, DType::c64},   {"I8", 1, true, DType::i8},
    {"U8", 1, true, DType::u8},        {"I16", 2, true, DType::i16},   {"I32", 4, true, DType::i32},
    {"I64", 8, true, DType::i64},      {"BOOL", 1, true, DType::boolean},
    {"U16", 2, false, DType::f32},     {"U32", 4, false, DType::f32},  {"U64", 8, false, DType::f32},
    {"F8_E4M3", 1, false, DType::f32}, {"F8_E5M2", 1, false, DType::f32},
};

const DTypeName* find_dtype(const std::string& s) {
  for (auto& d : kDTypes)
    if (s == d.name) return &d;
  return nullptr;
}

}  // namespace

bool safetensors_dtype(const std::string& s, DType* out) {
  const DTypeName* d = find_dtype(s);
  if (!d || !d->known) return false;
  *out = d->dt;
  return true;
}

std::string safetensors_dtype_name(DType t) {
  for (auto& d : kDTypes)
    if (d.known && d.dt == t) return d.name;
  fail("[safetensors] dtype ", dtype_name(t), " has no safetensors name");
}

std::map<std::string, SafeTensors::Entry> parse_safetensors_header(const std::string& text, size_t data_size,
                                                                  const std::string& where,
                                                                  std::map<std::string, std::string>* metadata) {
  using nlohmann::json;
  json h;
  try {
    h = json::parse(text);
  } catch (const json::exception& e) {
    fail("[safetensors] ", where, ": header is not valid JSON: ", e.what());
  }
  RLX_CHECK(h.is_object(), "[safetensors] ", where, ": header must be a JSON object");
  std::map<std::string, SafeTensors::Entry> out;
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      RLX_CHECK(v.is_object(), "[safetensors] ", where, ": __metadata__ must be an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        RLX_CHECK(m.value().is_string(), "[safetensors] ", where, ": __metadata__ value '", m.key(),
                  "' is not a string");
        if (metadata) (*metadata)[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string& what) { fail("[safetensors] ", where, ": tensor '", name, "': ", what); };
    if (!v.is_object()) bad("entry is not an object");
    for (auto f = v.begin(); f != v.end(); ++f)
      if (f.key() != "dtype" && f.key() != "shape" && f.key() != "data_offsets") bad("unknown field '" + f.key() + "'");
    if (!v.contains("dtype") || !v["dtype"].is_string()) bad("missing or non-string 'dtype'");
    if (!v.contains("shape") || !v["shape"].is_array()) bad("missing or non-array 'shape'");
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2)
      bad("'data_offsets' must be [begin, end]");
    SafeTensors::Entry e;
    e.dtype = v["dtype"].get<std::string>();
    const DTypeName* d = find_dtype(e.dtype);
    if (!d) bad("unknown dtype '" + e.dtype + "'");
    uint64_t count = 1;
    bool overflow = false;  // the element count passes 2^64 (reported with the shape as written)
    std::string shape_text;
    for (auto& s : v["shape"]) {
      if (!s.is_number_unsigned()) bad("shape entries must be non-negative integers");
      uint64_t n = s.get<uint64_t>();
      shape_text += (shape_text.empty() ? "" : ",") + std::to_string(n);
      if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) overflow = true;
      if (n && count > UINT64_MAX / n) overflow = true;
      if (!overflow) count *= n;
      e.shape.push_back(static_cast<int64_t>(n));
    }
    shape_text = "[" + shape_text + "]";
    if (overflow || count > UINT64_MAX / d->size)
      bad(e.dtype + " shape " + shape_text + " needs more than 2^64 bytes");
    for (auto& o : v["data_offsets"])
      if (!o.is_number_unsigned()) bad("data_offsets must be non-negative integers");
    uint64_t b = v["data_offsets"][0].get<uint64_t>(), en = v["data_offsets"][1].get<uint64_t>();
    if (b > en) bad("data_offsets begin " + std::to_string(b) + " > end " + std::to_string(en));
    if (en > data_size)
      bad("data_offsets [" + std::to_string(b) + ", " + std::to_string(en) + "] past the data section (" +
          std::to_string(data_size) + " bytes; file truncated?)");
    if (en - b != count * d->size)
      bad("holds " + std::to_string(en - b) + " bytes but " + e.dtype + " shape " + shape_text + " needs " +
          std::to_string(count * d->size));
    e.begin = b;
    e.end = en;
    out.emplace(name, std::move(e));
  }
  // No two tensors may share bytes.
  std::vector<std::pair<size_t, const std::string*>> spans;
  for (auto& [n, e] : out)
    if (e.end > e.begin) spans.push_back({e.begin, &n});
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    const auto& prev = out.at(*spans[i - 1].second);
    if (spans[i].first < prev.end)
      fail("[safetensors] ", where, ": tensors '", *spans[i - 1].second, "' and '", *spans[i].second,
           "' overlap");
  }
  return out;
}

SafeTensors SafeTensors::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("[safetensors] ", path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail("[safetensors] ", path, ": cannot stat: ", std::strerror(err));
  }
  size_t size = static_cast<size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    fail("[safetensors] ", path, ": file is ", size, " bytes, too short for a header (truncated?)");
  }
  // Copy-on-write: tensors may be written by a caller without touching the file.
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) fail("[safetensors] ", path, ": mmap failed: ", std::strerror(err));
  SafeTensors s;
  s.path_ = path;
  s.map_ = std::shared_ptr<void>(p, [size](void* q) { ::munmap(q, size); });
  const auto* bytes = static_cast<const unsigned char*>(p);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  RLX_CHECK(n <= kMaxHeader, "[safetensors] ", path, ": header length ", n, " is implausible (not a safetensors file?)");
  RLX_CHECK(n <= size - 8, "[safetensors] ", path, ": header length ", n, " exceeds the file (", size,
            " bytes; truncated?)");
  std::string header(reinterpret_cast<const char*>(bytes + 8), n);
  s.data_ = reinterpret_cast<const char*>(bytes + 8 + n);
  s.entries_ = parse_safetensors_header(header, size - 8 - n, path, &s.metadata_);
  for (auto& [name, e] : s.entries_) s.order_.push_back(name);
  std::stable_sort(s.order_.begin(), s.order_.end(),
                   [&](const std::string& a, const std::string& b) { return s.entries_[a].begin < s.entries_[b].begin; });
  return s;
}

std::vector<std::string> SafeTensors::names() const { return order_; }
bool SafeTensors::has(const std::string& name) const { return entries_.count(name) > 0; }

std::string SafeTensors::dtype_str(const std::string& name) const {
  auto it = entries_.find(name);
  RLX_CHECK(it != entries_.end(), "[safetensors] ", path_, ": no tensor '", name, "'");
  return it->second.dtype;
}

std::vector<int64_t> SafeTensors::shape(const std::string& name) const {
  auto it = entries_.find(name);
  RLX_CHECK(it != entries_.end(), "[safetensors] ", path_, ": no tensor '", name, "'");
  return it->second.shape;
}

Tensor SafeTensors::get(const std::string& name) const {
  auto it = entries_.find(name);
  RLX_CHECK(it != entries_.end(), "[safetensors] ", path_, ": no tensor '", name, "'");
  const Entry& e = it->second;
  DType dt;
  RLX_CHECK(safetensors_dtype(e.dtype, &dt), "[safetensors] ", path_, ": tensor '", name, "' has dtype ", e.dtype,
            ", which RLX does not support");
  char* p = const_cast<char*>(data_ + e.begin);
  size_t align = std::min<size_t>(dtype_size(dt), 8);
  if (reinterpret_cast<uintptr_t>(p) % align == 0) return Tensor::wrap(dt, e.shape, map_, p);
  Tensor t(dt, e.shape);  // misaligned data section: one copy keeps typed access well-defined
  std::memcpy(t.raw(), p, e.end - e.begin);
  return t;
}

std::map<std::string, std::string> SafeTensors::metadata() const { return metadata_; }

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (auto& [k, v] : metadata) m[k] = v;
    h["__metadata__"] = m;
  }
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return dtype_size(tensors[a].second.dtype()) > dtype_size(tensors[b].second.dtype());
  });
  std::map<std::string, size_t> begin;
  size_t off = 0;
  for (size_t i : order) {
    const auto& [name, t] = tensors[i];
    RLX_CHECK(!name.empty() && name != "__metadata__", "[safetensors] ", path, ": bad tensor name '", name, "'");
    RLX_CHECK(!begin.count(name), "[safetensors] ", path, ": duplicate tensor name '", name, "'");
    RLX_CHECK(t.defined(), "[safetensors] ", path, ": tensor '", name, "' has no data");
    begin[name] = off;
    off += t.nbytes();
  }
  for (const auto& [name, t] : tensors) {
    nlohmann::ordered_json e;
    e["dtype"] = safetensors_dtype_name(t.dtype());
    e["shape"] = t.shape();
    e["data_offsets"] = {begin[name], begin[name] + t.nbytes()};
    h[name] = e;
  }
  std::string text = h.dump();
  while ((8 + text.size()) % 8) text += ' ';  // keep the data section 8-byte aligned
  std::string out;
  out.reserve(8 + text.size() + off);
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  out += text;
  for (size_t i : order) {
    const Tensor& t = tensors[i].second;
    out.append(static_cast<const char*>(t.raw()), t.nbytes());
  }
  formats::write_file_atomic(path, out, "safetensors");
}

}  // namespace rlx
