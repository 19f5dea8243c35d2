// .npy reader/writer. The header is a Python dict literal; we parse just the literal subset numpy
// writes (strings, ints, True/False/None, tuples/lists, dicts) with a depth limit.
#include "rlx/npy.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstring>
#include <limits>
#include <memory>
#include <variant>

#include "formats/file_io.h"
#include "rlx/shape.h"

namespace rlx {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr bool kLittle = std::endian::native == std::endian::little;

// ---- the header literal --------------------------------------------------------------------------

struct PyVal;
using PyList = std::vector<PyVal>;
using PyDict = std::vector<std::pair<std::string, PyVal>>;
struct PyNone {};
struct PyVal {
  // bool before int64 so `true` never reads as an int; tuple and list share one alternative.
  std::variant<PyNone, bool, int64_t, std::string, std::shared_ptr<PyList>, std::shared_ptr<PyDict>> v;
};

class LiteralParser {
 public:
  LiteralParser(std::string_view s, const std::string& where) : s_(s), where_(where) {}

  PyVal parse_all() {
    PyVal v = value(0);
    skip_ws();
    if (i_ != s_.size()) bad("trailing characters after the header dict");
    return v;
  }

 private:
  [[noreturn]] void bad(const std::string& what) {
    fail("[npy] ", where_, ": malformed header (", what, " at offset ", i_, "): ", shown());
  }
  std::string shown() const {
    std::string h(s_.substr(0, 120));
    for (char& c : h)
      if (static_cast<unsigned char>(c) < 32 || static_cast<unsigned char>(c) > 126) c = '?';
    return "'" + h + (s_.size() > 120 ? "...'" : "'");
  }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    skip_ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) bad(std::string("expected '") + c + "'");
  }

  PyVal value(int depth) {
    if (depth > 16) bad("nesting too deep");
    skip_ws();
    if (i_ >= s_.size()) bad("unexpected end");
    char c = s_[i_];
    if (c == '\'' || c == '"') return PyVal{str()};
    if (c == '{') return dict(depth);
    if (c == '(' || c == '[') return seq(depth, c == '(' ? ')' : ']');
    if (c == '-' || (c >= '0' && c <= '9')) return PyVal{integer()};
    size_t start = i_;
    while (i_ < s_.size() && std::isalpha(static_cast<unsigned char>(s_[i_]))) ++i_;
    std::string_view word = s_.substr(start, i_ - start);
    if (word == "True") return PyVal{true};
    if (word == "False") return PyVal{false};
    if (word == "None") return PyVal{PyNone{}};
    i_ = start;
    bad("unexpected token");
  }

  std::string str() {
    char q = s_[i_++];
    std::string out;
    while (i_ < s_.size() && s_[i_] != q) {
      if (s_[i_] == '\\') {
        if (++i_ >= s_.size()) break;
      }
      out += s_[i_++];
    }
    if (i_ >= s_.size()) bad("unterminated string");
    ++i_;
    return out;
  }

  int64_t integer() {
    bool neg = s_[i_] == '-';
    if (neg) ++i_;
    if (i_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[i_]))) bad("expected a digit");
    uint64_t v = 0;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      uint64_t d = static_cast<uint64_t>(s_[i_++] - '0');
      if (v > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - d) / 10) bad("integer too large");
      v = v * 10 + d;
    }
    if (i_ < s_.size() && (s_[i_] == 'L' || s_[i_] == 'l')) ++i_;  // Python 2 longs in old files
    return neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  }

  PyVal seq(int depth, char close) {
    ++i_;
    auto list = std::make_shared<PyList>();
    while (!eat(close)) {
      list->push_back(value(depth + 1));
      if (!eat(',')) {
        expect(close);
        break;
      }
    }
    return PyVal{list};
  }

  PyVal dict(int depth) {
    ++i_;
    auto d = std::make_shared<PyDict>();
    while (!eat('}')) {
      skip_ws();
      if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) bad("expected a string key");
      std::string key = str();
      expect(':');
      d->emplace_back(std::move(key), value(depth + 1));
      if (!eat(',')) {
        expect('}');
        break;
      }
    }
    return PyVal{d};
  }

  std::string_view s_;
  const std::string& where_;
  size_t i_ = 0;
};

// ---- dtypes ----------------------------------------------------------------------------------------

struct NpyType {
  DType dtype;
  bool swap;         // data is in the other byte order
  size_t swap_unit;  // bytes per swapped scalar (c8 swaps each 4-byte half)
};

NpyType parse_descr(const std::string& descr, const std::string& where) {
  auto unknown = [&]() -> NpyType {
    fail("[npy] ", where, ": unsupported dtype descr '", descr,
         "' (supported: f2 f4 f8 c8 i1 u1 i2 i4 i8 u2 u4 u8 b1, any byte order)");
  };
  if (descr.size() < 3) unknown();
  char order = descr[0];
  std::string code = descr.substr(1);
  if (order != '<' && order != '>' && order != '=' && order != '|') unknown();
  static const std::pair<const char*, DType> kCodes[] = {
      {"f2", DType::f16}, {"f4", DType::f32}, {"f8", DType::f64}, {"c8", DType::c64},
      {"i1", DType::i8},  {"u1", DType::u8},  {"i2", DType::i16}, {"i4", DType::i32},
      {"i8", DType::i64}, {"b1", DType::boolean}, {"u2", DType::u16}, {"u4", DType::u32}, {"u8", DType::u64}};
  for (auto& [c, dt] : kCodes) {
    if (code != c) continue;
    size_t unit = dt == DType::c64 ? 4 : dtype_size(dt);
    // '|' means "not applicable" and is only valid for single-byte types.
    if (order == '|' && unit != 1) unknown();
    bool big = order == '>';
    bool little = order == '<';
    bool swap = unit > 1 && ((big && kLittle) || (little && !kLittle));
    return {dt, swap, unit};
  }
  return unknown();
}

std::string descr_for(DType dt) {
  const char* order = kLittle ? "<" : ">";
  switch (dt) {
    case DType::f32: return std::string(order) + "f4";
    case DType::f16: return std::string(order) + "f2";
    case DType::f64: return std::string(order) + "f8";
    case DType::c64: return std::string(order) + "c8";
    case DType::i8: return "|i1";
    case DType::u8: return "|u1";
    case DType::i16: return std::string(order) + "i2";
    case DType::i32: return std::string(order) + "i4";
    case DType::i64: return std::string(order) + "i8";
    case DType::boolean: return "|b1";
    case DType::u16: return std::string(order) + "u2";
    case DType::u32: return std::string(order) + "u4";
    case DType::u64: return std::string(order) + "u8";
    case DType::bf16: break;
  }
  fail("[npy] bf16 has no numpy dtype; convert to f32 first");
}

void byte_swap(char* p, size_t bytes, size_t unit) {
  for (size_t off = 0; off + unit <= bytes; off += unit) std::reverse(p + off, p + off + unit);
}

// Column-major (fortran_order) bytes -> row-major, for any element size.
void fortran_to_c(const char* src, char* dst, const std::vector<int64_t>& shape, size_t esize) {
  size_t rank = shape.size();
  int64_t n = 1;
  for (auto d : shape) n *= d;
  if (n == 0) return;
  std::vector<int64_t> fstride(rank), idx(rank, 0);
  int64_t s = 1;
  for (size_t k = 0; k < rank; ++k) {
    fstride[k] = s;
    s *= shape[k];
  }
  // Walk destination in row-major order, tracking the source offset incrementally.
  int64_t src_off = 0;
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(dst + static_cast<size_t>(i) * esize, src + static_cast<size_t>(src_off) * esize, esize);
    for (size_t k = rank; k-- > 0;) {
      if (++idx[k] < shape[k]) {
        src_off += fstride[k];
        break;
      }
      src_off -= fstride[k] * (shape[k] - 1);
      idx[k] = 0;
    }
  }
}

uint32_t read_le(const unsigned char* p, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

// ---- public API --------------------------------------------------------------------------------

Tensor parse_npy(const void* data, size_t size, const std::string& where) {
  const auto* p = static_cast<const unsigned char*>(data);
  if (size < kMagicLen + 2 || std::memcmp(p, kMagic, kMagicLen) != 0)
    fail("[npy] ", where, ": not a .npy file (bad magic)");
  int major = p[6], minor = p[7];
  size_t pre = 0, hlen = 0;
  if (major == 1) {
    if (size < 10) fail("[npy] ", where, ": truncated header");
    hlen = read_le(p + 8, 2);
    pre = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) fail("[npy] ", where, ": truncated header");
    hlen = read_le(p + 8, 4);
    pre = 12;
  } else {
    fail("[npy] ", where, ": unsupported format version ", major, ".", minor);
  }
  if (hlen > size - pre)
    fail("[npy] ", where, ": truncated header (needs ", hlen, " bytes, file has ", size - pre, ")");
  // Version 3 allows UTF-8 in the header; our literal parser only cares about ASCII structure.
  std::string_view header(reinterpret_cast<const char*>(p + pre), hlen);
  PyVal root = LiteralParser(header, where).parse_all();
  auto* dict = std::get_if<std::shared_ptr<PyDict>>(&root.v);
  if (!dict) fail("[npy] ", where, ": header is not a dict");

  const PyVal *descr = nullptr, *fortran = nullptr, *shape = nullptr;
  for (auto& [k, v] : **dict) {
    if (k == "descr") descr = &v;
    else if (k == "fortran_order") fortran = &v;
    else if (k == "shape") shape = &v;
  }
  if (!descr || !fortran || !shape)
    fail("[npy] ", where, ": header lacks ", !descr ? "'descr'" : !fortran ? "'fortran_order'" : "'shape'");
  auto* dstr = std::get_if<std::string>(&descr->v);
  if (!dstr) fail("[npy] ", where, ": structured dtypes are not supported (descr is not a string)");
  auto* fbool = std::get_if<bool>(&fortran->v);
  if (!fbool) fail("[npy] ", where, ": 'fortran_order' is not True/False");
  auto* slist = std::get_if<std::shared_ptr<PyList>>(&shape->v);
  if (!slist) fail("[npy] ", where, ": 'shape' is not a tuple");

  NpyType nt = parse_descr(*dstr, where);
  std::vector<int64_t> dims;
  size_t esize = dtype_size(nt.dtype);
  // Overflow-checked element count: a lying header must not make us allocate or read past the end.
  uint64_t count = 1;
  bool huge = false;
  for (auto& d : **slist) {
    auto* iv = std::get_if<int64_t>(&d.v);
    if (!iv || *iv < 0) fail("[npy] ", where, ": shape entries must be non-negative integers");
    dims.push_back(*iv);
    if (*iv != 0 && count > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(*iv)) huge = true;
    else count *= static_cast<uint64_t>(*iv);
  }
  if (count == 0) huge = false;
  size_t avail = size - pre - hlen;
  if (huge || count > avail / esize)
    fail("[npy] ", where, ": truncated data (shape ", shape_str(to_shape(dims)), " of ", *dstr,
         " needs more than the ", avail, " bytes present)");
  size_t nbytes = static_cast<size_t>(count) * esize;

  Tensor t(nt.dtype, dims);
  const char* src = reinterpret_cast<const char*>(p + pre + hlen);
  char* dst = static_cast<char*>(t.raw());
  if (nbytes == 0) return t;
  if (*fbool && dims.size() > 1) fortran_to_c(src, dst, dims, esize);
  else std::memcpy(dst, src, nbytes);
  if (nt.swap) byte_swap(dst, nbytes, nt.swap_unit);
  if (nt.dtype == DType::boolean)
    for (size_t i = 0; i < nbytes; ++i) dst[i] = dst[i] != 0;
  return t;
}

std::string serialize_npy(const Tensor& t) {
  std::string descr = descr_for(t.dtype());
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < t.shape().size(); ++i) {
    header += std::to_string(t.shape()[i]);
    header += (t.shape().size() == 1 || i + 1 < t.shape().size()) ? "," : "";
    if (i + 1 < t.shape().size()) header += " ";
  }
  header += "), }";
  // Pad with spaces and a final newline so the data starts 64-byte aligned (as numpy does).
  size_t pre = 10;
  int major = 1;
  if (header.size() + 64 > 65535) {  // only absurd ranks need the 4-byte length of version 2.0
    pre = 12;
    major = 2;
  }
  size_t total = pre + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic, kMagicLen);
  out += static_cast<char>(major);
  out += '\0';
  uint32_t hlen = static_cast<uint32_t>(header.size());
  for (size_t i = 0; i < pre - 8; ++i) out += static_cast<char>((hlen >> (8 * i)) & 0xff);
  out += header;
  if (t.nbytes()) out.append(static_cast<const char*>(t.raw()), t.nbytes());
  return out;
}

Tensor read_npy(const std::string& path) {
  std::string bytes = formats::read_file_bytes(path, "npy");
  return parse_npy(bytes.data(), bytes.size(), path);
}

void write_npy(const std::string& path, const Tensor& t) {
  if (t.dtype() == DType::bf16)
    fail("[npy] bf16 has no numpy dtype; convert to f32 first (writing '", path, "')");
  formats::write_file_atomic(path, serialize_npy(t), "npy");
}

}  // namespace rlx
