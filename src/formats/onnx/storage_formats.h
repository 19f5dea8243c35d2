// ONNX storage-only element types (float8 E4M3FN/E4M3FNUZ/E5M2/E5M2FNUZ/E8M0, float4 E2M1,
// int4/uint4, int2/uint2) emulated in a wider rlx dtype: f32 for the float formats, i32 for the
// integer ones. Such a value holds exactly the numbers the format can represent (values exact,
// storage wider); casts into a format round/saturate onto its value grid the way the ONNX spec
// (and its reference implementation) does. See README.md "Storage-only dtypes".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "formats/onnx/importer.h"

namespace rlx::onnx {

// True for the ONNX types above; `carrier` gets f32 or i32.
bool is_narrow_type(int onnx_type, DType* carrier = nullptr);
bool is_narrow_float(int onnx_type);
int narrow_bits(int onnx_type);  // 8, 4 or 2 (storage bits per element)
// The value of one stored code (the low narrow_bits() bits of `code`): NaN/±inf where the format has them.
double narrow_decode(int onnx_type, uint32_t code);
// Decodes `n` elements stored as the format packs them (little-endian nibbles / 2-bit fields for
// 4-/2-bit types, one byte per element for float8) into a carrier tensor of `dims`.
Tensor narrow_tensor_from_bytes(int onnx_type, const std::vector<int64_t>& dims, const uint8_t* bytes, size_t nbytes,
                                const std::string& where);
// The finite non-negative values of a float format, ascending (for tests and the grid search).
std::vector<double> narrow_grid(int onnx_type);
// Host-side rounding of one value onto the format (the same rule the emitted graph computes).
double narrow_round_value(int onnx_type, double x, bool saturate, const std::string& round_mode = "up");

// Emits graph ops that cast `x` (any real dtype) onto the format's value grid, result in the carrier
// dtype. Float formats: saturate / round_mode as the ONNX Cast attributes (round_mode only matters
// for E8M0). Integer formats: saturate = round half to even and clamp (QuantizeLinear); otherwise
// truncate toward zero and wrap to the width (Cast, as numpy/ml_dtypes astype).
V emit_narrow_cast(Ctx& c, V x, int onnx_type, bool saturate, const std::string& round_mode = "up");

}  // namespace rlx::onnx
