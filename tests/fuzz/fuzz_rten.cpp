// libFuzzer target for the .rten reader (src/formats/rten): any byte string must import or throw
// rlx::Error, never crash. Covers the header, flatbuffers verification, the graph checks (indices,
// cycles) and the translation into the ONNX converters. Built by -DRLX_FUZZ=ON (clang); see README.md.
#include <cstddef>
#include <cstdint>
#include <string>

#include "formats/rten/rten.h"
#include "rlx/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    rlx::rten::import_rten(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const rlx::Error&) {
  }
  return 0;
}
