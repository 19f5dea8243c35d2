// GGUF reader (versions 2 and 3): metadata of every value type, tensor infos, alignment, split
// files. Tensor data stays in a read-only mmap; tensors are views of it until dequantized.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rlx/tensor.h"

namespace rlx::gguf {

enum class ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7, String = 8, Array = 9,
  U64 = 10, I64 = 11, F64 = 12,
};
const char* value_type_name(ValueType t);

struct Value {
  ValueType type = ValueType::U8;
  uint64_t u = 0;  // unsigned ints and bool
  int64_t i = 0;   // signed ints
  double f = 0;    // floats
  std::string s;
  ValueType elem = ValueType::U8;  // arrays: element type
  std::vector<Value> arr;

  bool is_int() const;
  int64_t as_int() const;     // any integer/bool; throws otherwise
  double as_float() const;    // any number
  const std::string& as_str() const;
  std::string str(size_t max_items = 8) const;  // printable form
};

struct TensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the fastest-varying (row length)
  uint32_t type = 0;        // ggml type id (quant::GgmlType)
  uint64_t offset = 0;      // relative to its file's data section
  uint64_t nbytes = 0;
  int file = 0;             // index into the split parts
  const uint8_t* data = nullptr;
  int64_t numel() const;
  // Row-major shape (ne reversed), e.g. a [n_out, n_in] weight for ne = {n_in, n_out}.
  std::vector<int64_t> shape() const;
};

class File {
 public:
  // Opens one file, or every part of a split model when `path` names part 1
  // ("name-00001-of-00003.gguf") or any part carrying split.count. Throws "[gguf] path: ...".
  static File open(const std::string& path);
  // Parses from memory (fuzzing, tests); `owner` keeps the bytes alive.
  static File parse(std::shared_ptr<void> owner, const uint8_t* data, size_t size, const std::string& label);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  int num_parts() const { return static_cast<int>(parts_.size()); }
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(const std::string& key) const;
  const Value& at(const std::string& key) const;  // throws naming the key
  int64_t get_int(const std::string& key, int64_t def) const;
  double get_float(const std::string& key, double def) const;
  std::string get_str(const std::string& key, const std::string& def) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* tensor(const std::string& name) const;
  // Dequantized (or converted) to f32 with the row-major shape.
  Tensor to_f32(const std::string& name) const;
  // The packed bytes as a u8 [rows, row_bytes] view of the mmap (no copy).
  Tensor packed(const std::string& name) const;

 private:
  void add_part(std::shared_ptr<void> owner, const uint8_t* data, size_t size, const std::string& label);
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<std::pair<std::string, Value>> kv_;
  std::map<std::string, size_t> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
  std::vector<std::shared_ptr<void>> parts_;
};

}  // namespace rlx::gguf
