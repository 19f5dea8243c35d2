// safetensors files (Hugging Face): an 8-byte little-endian header length, a JSON header naming each
// tensor's dtype, shape and byte range, then the raw little-endian data.
// Reading maps the file (copy-on-write) and returns tensors that point into the mapping, so loading
// is zero-copy; each tensor keeps the mapping alive. The header is validated up front (bad JSON,
// unknown fields, offsets out of range or overlapping, byte size != shape x dtype, truncated file),
// and errors read "[safetensors] <path>: <what>".
#pragma once
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rlx/tensor.h"

namespace rlx {

struct SafeTensors {
  // Maps `path` and validates its header.
  static SafeTensors open(const std::string& path);

  std::vector<std::string> names() const;  // in file order (by data offset)
  bool has(const std::string& name) const;
  // The tensor, wrapped over the mapping (copied only when the data is misaligned for its dtype).
  // Dtypes: F32 F16 BF16 F64 C64 I8 U8 I16 I32 I64 BOOL; others (F8_*, U16, U32, U64) are listed
  // by names() but get() refuses them with a clear error.
  Tensor get(const std::string& name) const;
  // The file's dtype string ("F32", "BF16", ...) and shape, without touching the data.
  std::string dtype_str(const std::string& name) const;
  std::vector<int64_t> shape(const std::string& name) const;
  std::map<std::string, std::string> metadata() const;  // "__metadata__" (string -> string)
  const std::string& path() const { return path_; }

  struct Entry {
    std::string dtype;
    std::vector<int64_t> shape;
    size_t begin = 0, end = 0;  // byte range within the data section
  };

 private:
  std::string path_;
  std::shared_ptr<void> map_;  // munmaps when the last tensor/SafeTensors using it goes
  const char* data_ = nullptr;  // start of the data section
  std::map<std::string, Entry> entries_;
  std::vector<std::string> order_;
  std::map<std::string, std::string> metadata_;
};

// Parses a header (the JSON text) against a data section of `data_size` bytes; exposed for tests
// and fuzzing. Throws "[safetensors] <where>: ..." on any inconsistency.
std::map<std::string, SafeTensors::Entry> parse_safetensors_header(const std::string& json, size_t data_size,
                                                                  const std::string& where,
                                                                  std::map<std::string, std::string>* metadata);

// Writes tensors (in the given order of names; data laid out by descending element size so every
// tensor stays aligned) and string metadata. Atomic: a failed write leaves nothing behind.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// safetensors dtype string <-> DType ("F32" <-> f32, "BOOL" <-> boolean, ...). Returns false when
// RLX has no such dtype.
bool safetensors_dtype(const std::string& s, DType* out);
std::string safetensors_dtype_name(DType t);

}  // namespace rlx
