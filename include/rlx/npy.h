// NumPy .npy / .npz files: the lingua franca for goldens, weights and test data.
// Errors read "[npy] <path>: <what>"; malformed or truncated files never crash or over-read.
// Writes are atomic (a temporary file renamed into place), so a failed write leaves nothing behind.
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "rlx/tensor.h"

namespace rlx {

// .npy, format versions 1.0, 2.0 and 3.0. Dtypes: f2 f4 f8 c8 i1 u1 i2 i4 i8 b1 in any byte order
// ('<', '>', '=', '|'); big-endian data is byte-swapped and fortran_order data is transposed, so the
// result is always a native, row-major Tensor. bf16 has no numpy dtype: writing it throws.
Tensor read_npy(const std::string& path);
void write_npy(const std::string& path, const Tensor& t);

// .npz: a zip archive of .npy entries; entry "x.npy" becomes key "x". Reads stored and deflated
// entries (CRC-checked); writes stored entries in the given order. zip64 archives are refused
// with a clear error.
std::map<std::string, Tensor> read_npz(const std::string& path);
std::vector<std::pair<std::string, Tensor>> read_npz_ordered(const std::string& path);
void write_npz(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& arrays);

// In-memory forms of the above (`where` names the source in error messages).
Tensor parse_npy(const void* data, size_t size, const std::string& where = "<memory>");
std::string serialize_npy(const Tensor& t);
std::vector<std::pair<std::string, Tensor>> parse_npz(const void* data, size_t size,
                                                      const std::string& where = "<memory>");

}  // namespace rlx
