// The row/panel loop the SIMD int8 GEMMs share (qgemm_avx2.cpp, qgemm_vnni.cpp): B is packed in
// panels of `Cols` columns, each tile call computes up to `Mr` rows x two panels (2·Cols columns)
// into a scratch tile, and the valid part is copied into C. An odd last panel is computed twice and
// half of it kept. Standard library only, like qgemm.h.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

namespace rlx::cpu::qgemm {

// tiles[mr](A, lda, B0, B1, kq, out): mr rows of A against panels B0, B1 into out[mr][2·Cols].
template <int Mr, int Cols, class TA, class TB, class Tile>
void gemm_panels(const TA* A0, int64_t lda, const TB* B, int64_t panel, int64_t panels, int64_t kq, int64_t N,
                 const Tile* tiles, int64_t m0, int64_t m1, int32_t* C, int64_t ldc) {
  alignas(64) int32_t out[Mr * 2 * Cols];
  for (int64_t m = m0; m < m1; m += Mr) {
    int mr = static_cast<int>(std::min<int64_t>(Mr, m1 - m));
    const TA* A = A0 + m * lda;
    for (int64_t p = 0; p < panels; p += 2) {
      const TB* B0 = B + p * panel;
      const TB* B1 = p + 1 < panels ? B0 + panel : B0;
      tiles[mr](A, lda, B0, B1, kq, out);
      int64_t c0 = p * Cols, nc = std::min<int64_t>(2 * Cols, N - c0);
      if (p + 1 >= panels) nc = std::min<int64_t>(nc, Cols);
      for (int r = 0; r < mr; ++r)
        std::memcpy(C + (m - m0 + r) * ldc + c0, out + r * 2 * Cols, static_cast<size_t>(nc) * 4);
    }
  }
}

}  // namespace rlx::cpu::qgemm
