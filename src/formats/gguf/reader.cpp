// GGUF parsing with bounds checks on every read: a malformed file fails with a message naming the
// file, the byte offset and what was being read, never with a crash.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <regex>
#include <sstream>

#include "quant/blocks.h"
#include "rlx/gguf.h"

namespace rlx::gguf {

namespace {

constexpr uint64_t kMaxCount = uint64_t{1} << 26;      // kv pairs / tensors / array items
constexpr uint64_t kMaxString = uint64_t{1} << 30;     // one string
constexpr int kMaxDims = 8;
constexpr int kMaxDepth = 4;                           // nested arrays

class Cursor {
 public:
  Cursor(const uint8_t* d, size_t n, const std::string& label) : d_(d), n_(n), label_(label) {}
  size_t pos() const { return p_; }
  [[noreturn]] void error(const std::string& what) const {
    fail("[gguf] ", label_, ": ", what, " at byte ", p_);
  }
  void need(uint64_t k, const char* what) {
    if (k > n_ - p_) error(std::string("truncated while reading ") + what);
  }
  template <class T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, d_ + p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  std::string read_string(const char* what) {
    uint64_t len = read<uint64_t>(what);
    if (len > kMaxString) error(std::string("absurd string length ") + std::to_string(len) + " for " + what);
    need(len, what);
    std::string s(reinterpret_cast<const char*>(d_ + p_), len);
    p_ += len;
    return s;
  }

 private:
  const uint8_t* d_;
  size_t n_, p_ = 0;
  const std::string& label_;
};

Value read_value(Cursor& c, ValueType t, int depth) {
  Value v;
  v.type = t;
  switch (t) {
    case ValueType::U8: v.u = c.read<uint8_t>("u8"); break;
    case ValueType::I8: v.i = c.read<int8_t>("i8"); break;
    case ValueType::U16: v.u = c.read<uint16_t>("u16"); break;
    case ValueType::I16: v.i = c.read<int16_t>("i16"); break;
    case ValueType::U32: v.u = c.read<uint32_t>("u32"); break;
    case ValueType::I32: v.i = c.read<int32_t>("i32"); break;
    case ValueType::U64: v.u = c.read<uint64_t>("u64"); break;
    case ValueType::I64: v.i = c.read<int64_t>("i64"); break;
    case ValueType::F32: v.f = c.read<float>("f32"); break;
    case ValueType::F64: v.f = c.read<double>("f64"); break;
    case ValueType::Bool: {
      uint8_t b = c.read<uint8_t>("bool");
      if (b > 1) c.error("bool value " + std::to_string(b) + " is not 0 or 1");
      v.u = b;
      break;
    }
    case ValueType::String: v.s = c.read_string("string value"); break;
    case ValueType::Array: {
      if (depth >= kMaxDepth) c.error("arrays nested too deeply");
      uint32_t et = c.read<uint32_t>("array element type");
      if (et > 12) c.error("unknown array element type " + std::to_string(et));
      v.elem = static_cast<ValueType>(et);
      uint64_t n = c.read<uint64_t>("array length");
      if (n > kMaxCount) c.error("absurd array length " + std::to_string(n));
      // Every element takes at least one byte, so a length beyond the file is caught before allocating.
      c.need(n, "array items");
      v.arr.reserve(n);
      for (uint64_t k = 0; k < n; ++k) v.arr.push_back(read_value(c, v.elem, depth + 1));
      break;
    }
    default: c.error("unknown metadata value type " + std::to_string(static_cast<uint32_t>(t)));
  }
  return v;
}

struct Mapping {
  void* p = nullptr;
  size_t n = 0;
  ~Mapping() {
    if (p && n) munmap(p, n);
  }
};

std::shared_ptr<Mapping> map_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail("[gguf] ", path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    fail("[gguf] ", path, ": cannot stat: ", std::strerror(e));
  }
  auto m = std::make_shared<Mapping>();
  m->n = static_cast<size_t>(st.st_size);
  if (m->n > 0) {
    m->p = mmap(nullptr, m->n, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m->p == MAP_FAILED) {
      int e = errno;
      m->p = nullptr;
      ::close(fd);
      fail("[gguf] ", path, ": mmap failed: ", std::strerror(e));
    }
  }
  ::close(fd);
  return m;
}

}  // namespace

const char* value_type_name(ValueType t) {
  static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
  auto i = static_cast<uint32_t>(t);
  return i < 13 ? names[i] : "?";
}

bool Value::is_int() const {
  switch (type) {
    case ValueType::U8: case ValueType::U16: case ValueType::U32: case ValueType::U64: case ValueType::Bool:
    case ValueType::I8: case ValueType::I16: case ValueType::I32: case ValueType::I64: return true;
    default: return false;
  }
}
int64_t Value::as_int() const {
  switch (type) {
    case ValueType::U8: case ValueType::U16: case ValueType::U32: case ValueType::U64: case ValueType::Bool:
      return static_cast<int64_t>(u);
    case ValueType::I8: case ValueType::I16: case ValueType::I32: case ValueType::I64: return i;
    default: fail("[gguf] value of type ", value_type_name(type), " is not an integer");
  }
}
double Value::as_float() const {
  if (type == ValueType::F32 || type == ValueType::F64) return f;
  return static_cast<double>(as_int());
}
const std::string& Value::as_str() const {
  RLX_CHECK(type == ValueType::String, "[gguf] value of type ", value_type_name(type), " is not a string");
  return s;
}
std::string Value::str(size_t max_items) const {
  std::ostringstream os;
  switch (type) {
    case ValueType::String: {
      std::string t = s.size() > 60 ? s.substr(0, 57) + "..." : s;
      os << '"' << t << '"';
      break;
    }
    case ValueType::F32: case ValueType::F64: os << f; break;
    case ValueType::Bool: os << (u ? "true" : "false"); break;
    case ValueType::Array: {
      os << value_type_name(elem) << "[" << arr.size() << "] [";
      for (size_t k = 0; k < arr.size() && k < max_items; ++k) os << (k ? ", " : "") << arr[k].str(max_items);
      if (arr.size() > max_items) os << ", ...";
      os << "]";
      break;
    }
    default: os << as_int();
  }
  return os.str();
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (auto d : ne) n *= d;
  return n;
}
std::vector<int64_t> TensorInfo::shape() const { return {ne.rbegin(), ne.rend()}; }

void File::add_part(std::shared_ptr<void> owner, const uint8_t* data, size_t size, const std::string& label) {
  Cursor c(data, size, label);
  uint32_t magic = c.read<uint32_t>("magic");
  if (magic != 0x46554747u) c.error("bad magic (not a GGUF file)");
  uint32_t version = c.read<uint32_t>("version");
  if (version != 2 && version != 3)
    c.error("unsupported GGUF version " + std::to_string(version) + " (this reader handles 2 and 3)");
  if (parts_.empty()) version_ = version;
  uint64_t n_tensors = c.read<uint64_t>("tensor count");
  uint64_t n_kv = c.read<uint64_t>("metadata count");
  if (n_tensors > kMaxCount) c.error("absurd tensor count " + std::to_string(n_tensors));
  if (n_kv > kMaxCount) c.error("absurd metadata count " + std::to_string(n_kv));
  uint64_t alignment = 32;
  bool first = parts_.empty();
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = c.read_string("metadata key");
    uint32_t t = c.read<uint32_t>("metadata value type");
    if (t > 12) c.error("key '" + key + "': unknown value type " + std::to_string(t));
    Value v = read_value(c, static_cast<ValueType>(t), 0);
    if (key == "general.alignment") {
      // The GGUF spec requires a multiple of 8; below that, f16 data and quant blocks would be misaligned.
      if (!v.is_int() || v.as_int() < 8 || (v.as_int() & (v.as_int() - 1)) != 0)
        c.error("general.alignment must be a power of two >= 8");
      alignment = static_cast<uint64_t>(v.as_int());
    }
    if (!first) continue;  // split parts repeat the header metadata of part 1
    if (kv_index_.count(key)) c.error("duplicate metadata key '" + key + "'");
    kv_index_[key] = kv_.size();
    kv_.emplace_back(std::move(key), std::move(v));
  }
  if (first) alignment_ = alignment;
  int part = static_cast<int>(parts_.size());
  size_t first_tensor = tensors_.size();
  for (uint64_t k = 0; k < n_tensors; ++k) {
    TensorInfo ti;
    ti.name = c.read_string("tensor name");
    uint32_t nd = c.read<uint32_t>("tensor rank");
    if (nd == 0 || nd > kMaxDims) c.error("tensor '" + ti.name + "': rank " + std::to_string(nd) + " out of range");
    int64_t numel = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      uint64_t e = c.read<uint64_t>("tensor dim");
      if (e == 0 || e > (uint64_t{1} << 40) || static_cast<uint64_t>(numel) > (uint64_t{1} << 42) / e)
        c.error("tensor '" + ti.name + "': absurd dim " + std::to_string(e));
      ti.ne.push_back(static_cast<int64_t>(e));
      numel *= static_cast<int64_t>(e);
    }
    ti.type = c.read<uint32_t>("tensor type");
    const quant::TypeTraits* tr = quant::type_traits(ti.type);
    if (!tr) c.error("tensor '" + ti.name + "': unsupported ggml type " + std::to_string(ti.type));
    if (ti.ne[0] % tr->block_elems != 0)
      c.error("tensor '" + ti.name + "': row of " + std::to_string(ti.ne[0]) + " is not a multiple of the " +
              tr->name + " block size " + std::to_string(tr->block_elems));
    ti.nbytes = static_cast<uint64_t>(numel / tr->block_elems) * tr->block_bytes;
    ti.offset = c.read<uint64_t>("tensor offset");
    if (ti.offset % alignment != 0)
      c.error("tensor '" + ti.name + "': offset " + std::to_string(ti.offset) + " is not aligned to " +
              std::to_string(alignment));
    ti.file = part;
    if (tensor_index_.count(ti.name)) c.error("duplicate tensor '" + ti.name + "'");
    tensor_index_[ti.name] = tensors_.size();
    tensors_.push_back(std::move(ti));
  }
  uint64_t data_start = (c.pos() + alignment - 1) / alignment * alignment;
  for (size_t k = first_tensor; k < tensors_.size(); ++k) {
    TensorInfo& ti = tensors_[k];
    uint64_t begin = data_start + ti.offset;
    if (begin < data_start || begin > size || ti.nbytes > size - begin)
      fail("[gguf] ", label, ": tensor '", ti.name, "' data [", begin, ", ", begin + ti.nbytes,
           ") is outside the file (", size, " bytes)");
    ti.data = data + begin;
  }
  parts_.push_back(std::move(owner));
}

File File::parse(std::shared_ptr<void> owner, const uint8_t* data, size_t size, const std::string& label) {
  File f;
  f.add_part(std::move(owner), data, size, label);
  return f;
}

File File::open(const std::string& path) {
  File f;
  auto m = map_file(path);
  f.add_part(m, static_cast<const uint8_t*>(m->p), m->n, path);
  int64_t count = f.get_int("split.count", 1);
  if (count <= 1) return f;
  // Split model: parts are named <prefix>-NNNNN-of-MMMMM.gguf; load the rest in order.
  static const std::regex re(R"((.*)-(\d{5})-of-(\d{5})\.gguf$)");
  std::smatch mt;
  RLX_CHECK(std::regex_match(path, mt, re), "[gguf] ", path, ": split.count is ", count,
            " but the name is not <prefix>-NNNNN-of-MMMMM.gguf");
  RLX_CHECK(std::stoi(mt[2].str()) == 1, "[gguf] ", path, ": open part 1 of a split model");
  RLX_CHECK(std::stoll(mt[3].str()) == count, "[gguf] ", path, ": name says ", mt[3].str(), " parts, split.count says ", count);
  for (int64_t k = 2; k <= count; ++k) {
    auto five = [](int64_t v) {  // at least five digits, zero-padded
      std::string d = std::to_string(v);
      return std::string(d.size() < 5 ? 5 - d.size() : 0, '0') + d;
    };
    std::string p = mt[1].str() + "-" + five(k) + "-of-" + five(count) + ".gguf";
    auto mk = map_file(p);
    f.add_part(mk, static_cast<const uint8_t*>(mk->p), mk->n, p);
  }
  return f;
}

const Value* File::find(const std::string& key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}
const Value& File::at(const std::string& key) const {
  const Value* v = find(key);
  RLX_CHECK(v, "[gguf] missing metadata key '", key, "'");
  return *v;
}
int64_t File::get_int(const std::string& key, int64_t def) const {
  const Value* v = find(key);
  return v ? v->as_int() : def;
}
double File::get_float(const std::string& key, double def) const {
  const Value* v = find(key);
  return v ? v->as_float() : def;
}
std::string File::get_str(const std::string& key, const std::string& def) const {
  const Value* v = find(key);
  return v ? v->as_str() : def;
}
const TensorInfo* File::tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Tensor File::to_f32(const std::string& name) const {
  const TensorInfo* ti = tensor(name);
  RLX_CHECK(ti, "[gguf] no tensor '", name, "'");
  auto t = static_cast<quant::GgmlType>(ti->type);
  Tensor out(DType::f32, ti->shape());
  if (t == quant::GgmlType::I8 || t == quant::GgmlType::I16 || t == quant::GgmlType::I32 || t == quant::GgmlType::I64)
    fail("[gguf] tensor '", name, "': integer type ", quant::type_name(ti->type), " is not a float tensor");
  quant::dequantize_row(t, ti->data, out.data<float>(), ti->numel());
  return out;
}

Tensor File::packed(const std::string& name) const {
  const TensorInfo* ti = tensor(name);
  RLX_CHECK(ti, "[gguf] no tensor '", name, "'");
  int64_t rb = static_cast<int64_t>(quant::row_bytes(static_cast<quant::GgmlType>(ti->type), ti->ne[0]));
  int64_t rows = ti->numel() / ti->ne[0];
  return Tensor::wrap(DType::u8, {rows, rb}, parts_[ti->file], const_cast<uint8_t*>(ti->data));
}

}  // namespace rlx::gguf
