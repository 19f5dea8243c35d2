// libFuzzer target for the safetensors header parser: any input must parse or throw rlx::Error.
// Input layout as in a file: u64 LE header length, header JSON, data section.
// Built and run by `make fuzz-smoke` (Makefile; tests/fuzz/README.md).
#include <cstdint>
#include <string>

#include "rlx/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(data[i]) << (8 * i);
  if (n > size - 8) return 0;
  try {
    std::map<std::string, std::string> meta;
    std::string header(reinterpret_cast<const char*>(data + 8), n);
    auto entries = rlx::parse_safetensors_header(header, size - 8 - n, "fuzz", &meta);
    for (auto& [name, e] : entries)
      if (e.end > size - 8 - n || e.begin > e.end) __builtin_trap();  // the parser promised in-range
  } catch (const rlx::Error&) {
  }
  return 0;
}
