// libFuzzer target for the ONNX importer: any byte string must import or throw rlx::Error, never crash.
// Not built by default (needs clang + -fsanitize=fuzzer); see docs/onnx.md for the command line.
#include <cstddef>
#include <cstdint>
#include <string>

#include "formats/onnx/onnx.h"
#include "rlx/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    rlx::onnx::import_onnx(std::string(reinterpret_cast<const char*>(data), size), "", "fuzz");
  } catch (const rlx::Error&) {
  }
  return 0;
}
