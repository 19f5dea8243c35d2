// libFuzzer target for the GGUF reader: any input must parse or throw rlx::Error, never crash.
// Built and run by `make fuzz-smoke` (Makefile; tests/fuzz/README.md); the .gguf files in
// tests/models/qwen3/ make good extra seeds.
#include <cstdint>
#include <memory>

#include "rlx/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto keep = std::make_shared<std::string>(reinterpret_cast<const char*>(data), size);
    auto f = rlx::gguf::File::parse(keep, reinterpret_cast<const uint8_t*>(keep->data()), keep->size(), "fuzz");
    for (auto& t : f.tensors())
      if (t.numel() <= (1 << 16)) (void)f.to_f32(t.name);
  } catch (const rlx::Error&) {
  }
  return 0;
}
