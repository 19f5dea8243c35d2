// Packing, path selection and the scalar path of the int8 GEMM (qgemm.h); the SIMD tiles are in
// qgemm_avx2.cpp and qgemm_vnni.cpp.
#include "backends/cpu/qgemm.h"

#include <algorithm>

namespace rlx::cpu::qgemm {

void gemm_avx2(const PackedA& a, const PackedB& b, int64_t m0, int64_t m1, int32_t* C, int64_t ldc);  // qgemm_avx2.cpp
void gemm_vnni(const PackedA& a, const PackedB& b, int64_t m0, int64_t m1, int32_t* C, int64_t ldc);  // qgemm_vnni.cpp

namespace {

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

void gemm_scalar(const PackedA& a, const PackedB& b, int64_t m0, int64_t m1, int32_t* C, int64_t ldc) {
  for (int64_t m = m0; m < m1; ++m) {
    const uint8_t* ar = a.u8.data() + m * a.Kp;
    for (int64_t n = 0; n < b.N; ++n) {
      const int8_t* br = b.s8.data() + n * b.Kp;
      uint32_t acc = 0;  // wraps as the SIMD paths' 32-bit lanes do
      for (int64_t k = 0; k < a.K; ++k) acc += static_cast<uint32_t>(static_cast<int32_t>(ar[k]) * br[k]);
      C[(m - m0) * ldc + n] = static_cast<int32_t>(acc);
    }
  }
}

}  // namespace

const char* path_name(Path p) {
  switch (p) {
    case Path::Scalar: return "scalar";
    case Path::Avx2: return "avx2";
    case Path::Avx512Vnni: return "avx512vnni";
  }
  return "?";
}

bool path_supported(Path p) {
#if defined(__x86_64__)
  switch (p) {
    case Path::Scalar: return true;
    case Path::Avx2: return __builtin_cpu_supports("avx2");
    case Path::Avx512Vnni:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vnni");
  }
  return false;
#else
  return p == Path::Scalar;
#endif
}

std::vector<Path> host_paths() {
  std::vector<Path> r;
  for (Path p : {Path::Scalar, Path::Avx2, Path::Avx512Vnni})
    if (path_supported(p)) r.push_back(p);
  return r;
}

PackedA pack_a(const uint8_t* a, int64_t M, int64_t K, int64_t lda, bool flip, Path p) {
  PackedA r;
  r.path = p;
  r.M = M, r.K = K, r.Kp = round_up(std::max<int64_t>(K, 1), 4);
  const uint8_t f = flip ? 0x80 : 0;
  r.rowsum.assign(static_cast<size_t>(M), 0);
  r.u8.assign(static_cast<size_t>(M * r.Kp), 0);
  uint8_t mx = 0;
  for (int64_t m = 0; m < M; ++m) {
    int32_t s = 0;
    uint8_t* dst = r.u8.data() + m * r.Kp;
    const uint8_t* src = a + m * lda;
    for (int64_t k = 0; k < K; ++k) {  // plain loops the compiler vectorizes
      uint8_t v = src[k] ^ f;
      dst[k] = v;
      s += v;
      mx = v > mx ? v : mx;
    }
    r.rowsum[static_cast<size_t>(m)] = s;
  }
  r.amax = mx;
  return r;
}

PackedB pack_b(const uint8_t* raw, int64_t N, int64_t K, int64_t sn, int64_t sk, bool flip, Path p) {
  PackedB r;
  r.path = p;
  r.N = N, r.K = K, r.Kp = round_up(std::max<int64_t>(K, 1), 4);
  const uint8_t f = flip ? 0x80 : 0;
  auto at = [&](int64_t n, int64_t k) { return static_cast<int8_t>(raw[n * sn + k * sk] ^ f); };
  r.colsum.assign(static_cast<size_t>(N), 0);
  r.narrow = true;
  for (int64_t n = 0; n < N; ++n) {
    int32_t s = 0;
    for (int64_t k = 0; k < K; ++k) {
      int8_t v = at(n, k);
      s += v;
      r.narrow = r.narrow && v >= -64 && v <= 64;
    }
    r.colsum[static_cast<size_t>(n)] = s;
  }
  // k-quads of `cols`-column panels: element (n, k) at [n / cols][k / 4][n % cols][k % 4].
  auto quads = [&](int64_t cols) {
    r.Np = round_up(std::max<int64_t>(N, 1), cols);
    r.s8.assign(static_cast<size_t>(r.Np * r.Kp), 0);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k)
        r.s8[static_cast<size_t>(((n / cols * (r.Kp / 4) + k / 4) * cols + n % cols) * 4 + k % 4)] = at(n, k);
  };
  if (p == Path::Scalar) {
    r.Np = N;
    r.s8.assign(static_cast<size_t>(N * r.Kp), 0);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) r.s8[static_cast<size_t>(n * r.Kp + k)] = at(n, k);
  } else if (p == Path::Avx512Vnni) {
    quads(16);
  } else {
    quads(8);
    if (r.narrow) return r;  // the u8 x s8 tile is exact for every activation
    r.s16.assign(static_cast<size_t>(r.Np * r.Kp), 0);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        int64_t panel = n / 8, col = n % 8, q = k / 2, t = k % 2;
        r.s16[static_cast<size_t>(((panel * (r.Kp / 2) + q) * 8 + col) * 2 + t)] = at(n, k);
      }
  }
  return r;
}

void gemm(const PackedA& a, const PackedB& b, int64_t m0, int64_t m1, int32_t* C, int64_t ldc) {
  switch (b.path) {
    case Path::Scalar: return gemm_scalar(a, b, m0, m1, C, ldc);
    case Path::Avx2: return gemm_avx2(a, b, m0, m1, C, ldc);
    case Path::Avx512Vnni: return gemm_vnni(a, b, m0, m1, C, ldc);
  }
}

}  // namespace rlx::cpu::qgemm
