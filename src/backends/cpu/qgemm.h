// u8 x s8 -> s32 GEMM for the affine int8 ops (qlinear, qmatmul): C[m, n] = sum_k A[m, k] * B[n, k],
// exact in 32-bit two's complement. Three paths, chosen at run time: scalar; AVX2; AVX-512 VNNI
// (vpdpbusd). AVX2 has two tiles: u8 x s8 with vpmaddubsw + vpmaddwd (32 products per pair of
// instructions), exact only when no pair a0*b0 + a1*b1 leaves s16 — guaranteed when every weight is
// in [-64, 64] ("narrow": 7-bit weights, 255*64*2 < 2^15) or every activation of the call is <= 127
// (127*128*2 < 2^15) — and otherwise the exact one with both operands widened to s16 (vpmaddwd).
// The choice is made per call from facts checked at packing, so every result is exact.
// Signed activations and unsigned weights are moved to u8 / s8 by flipping the top bit (x ^ 0x80 =
// x + 128 resp. x - 128); the caller folds the offset into the zero point. Self-contained (only the
// standard library), so the kernels' bit-exactness test also builds stand-alone for other hosts.
#pragma once
#include <cstdint>
#include <vector>

namespace rlx::cpu::qgemm {

enum class Path { Scalar, Avx2, Avx512Vnni };
const char* path_name(Path p);
bool path_supported(Path p);      // the host runs it (CPUID + OS register state)
std::vector<Path> host_paths();  // every supported path, scalar first

// A: M rows of K bytes (row stride lda), as u8 (flip: the source is s8), K padded with zeros.
struct PackedA {
  Path path = Path::Scalar;
  int64_t M = 0, K = 0, Kp = 0;
  std::vector<uint8_t> u8;      // [M][Kp]
  std::vector<int32_t> rowsum;  // sum_k A[m, k] (after the flip)
  int amax = 0;                 // the largest element (after the flip)
};
// B: N columns of K bytes, element (n, k) at raw[n * sn + k * sk], as s8 (flip: the source is u8).
struct PackedB {
  Path path = Path::Scalar;
  int64_t N = 0, K = 0, Kp = 0, Np = 0;
  bool narrow = false;       // every element in [-64, 64] (after the flip)
  std::vector<int8_t> s8;    // scalar: [N][Kp]; AVX2: [Np/8][Kp/4][8][4]; VNNI: [Np/16][Kp/4][16][4]
  std::vector<int16_t> s16;  // AVX2, only when !narrow: 8-column panels [Np/8][Kp/2][8][2]
  std::vector<int32_t> colsum;  // sum_k B[n, k] (after the flip)
};

PackedA pack_a(const uint8_t* a, int64_t M, int64_t K, int64_t lda, bool flip, Path p);
PackedB pack_b(const uint8_t* raw, int64_t N, int64_t K, int64_t sn, int64_t sk, bool flip, Path p);

// C rows [m0, m1) x all N columns (row stride ldc >= N): the raw products, no zero points.
void gemm(const PackedA& a, const PackedB& b, int64_t m0, int64_t m1, int32_t* C, int64_t ldc);

// AVX2: whether the u8 x s8 (vpmaddubsw) tile computes a x b exactly (else the s16 tile runs).
inline bool avx2_u8s8_exact(const PackedA& a, const PackedB& b) { return b.narrow || a.amax <= 127; }

}  // namespace rlx::cpu::qgemm
