// The counter-based RNG shared by every device (SplitMix64 finalizer over seed + counter), so
// rng_uniform gives bit-identical streams everywhere: element i depends only on (seed, i).
#pragma once
#include <cstdint>

namespace rlx {

// Uniform double in [0, 1) for element `i` (row-major) of a stream seeded with `seed`.
inline double rng_uniform_at(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

}  // namespace rlx
