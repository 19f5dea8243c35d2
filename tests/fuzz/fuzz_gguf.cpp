// libFuzzer target for the GGUF reader: any input must parse or throw rlx::Error, never crash.
// Build (clang): clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc \
//   tests/fuzz/fuzz_gguf.cpp src/formats/gguf/reader.cpp src/quant/dequant.cpp src/ir/dtype.cpp src/ir/tensor.cpp -o fuzz_gguf
// Run: ./fuzz_gguf -max_total_time=60 tests/models/qwen3/   (the .gguf files there seed the corpus)
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
