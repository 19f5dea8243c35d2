// Packed dequant-matmul on cpu: weights stay in their GGML blocks. One row of x (decoding one
// sequence): Q4_0/Q4_1/Q8_0 rows are dotted with x block by block without expanding them; other
// types are expanded one weight row at a time into a small f32 buffer (L1-resident) and dotted. Several rows (a prefill, or a decode step batched over sequences): each worker
// expands a tile of weight rows and runs the f32 GEMM over all rows of x against it, so the
// expansion is paid once per tile instead of the dot products dominating. Covers every block type
// of src/quant (Q8_0, Q4_0, Q4_K, Q6_K are the ones Qwen3 GGUF files use).
#include <algorithm>
#include <vector>

#include "backends/cpu/gemm_avx2.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "quant/blocks.h"

namespace rlx::cpu {

namespace {

// One weight row of 32-element blocks dotted with x without expanding the row: per block the
// integer codes are multiplied into x and the block scale (and Q4_1's min times the block's x sum)
// applied once. Covers the block types llama-family GGUF files use for most projections.
template <quant::GgmlType T>
float block_row_dot(const uint8_t* wr, const float* x, int64_t nb) {
  float acc = 0;
  for (int64_t b = 0; b < nb; ++b, x += quant::kQK) {
    float s = 0, sx = 0;
    if constexpr (T == quant::GgmlType::Q8_0) {
      const auto* blk = reinterpret_cast<const quant::BlockQ8_0*>(wr) + b;
      for (int i = 0; i < quant::kQK; ++i) s += static_cast<float>(blk->qs[i]) * x[i];
      acc += f16_to_f32(blk->d) * s;
    } else if constexpr (T == quant::GgmlType::Q4_0) {
      const auto* blk = reinterpret_cast<const quant::BlockQ4_0*>(wr) + b;
      for (int i = 0; i < quant::kQK / 2; ++i) {
        s += static_cast<float>((blk->qs[i] & 15) - 8) * x[i];
        s += static_cast<float>((blk->qs[i] >> 4) - 8) * x[i + quant::kQK / 2];
      }
      acc += f16_to_f32(blk->d) * s;
    } else {
      const auto* blk = reinterpret_cast<const quant::BlockQ4_1*>(wr) + b;
      for (int i = 0; i < quant::kQK / 2; ++i) {
        s += static_cast<float>(blk->qs[i] & 15) * x[i];
        s += static_cast<float>(blk->qs[i] >> 4) * x[i + quant::kQK / 2];
        sx += x[i] + x[i + quant::kQK / 2];
      }
      acc += f16_to_f32(blk->d) * s + f16_to_f32(blk->m) * sx;
    }
  }
  return acc;
}

template <quant::GgmlType T>
void fused_gemv(const float* xp, const uint8_t* wp, float* yp, int64_t M, int64_t N, int64_t k, int64_t rb) {
  const int64_t nb = k / quant::kQK, grain = std::max<int64_t>(1, 65536 / (k * std::max<int64_t>(M, 1) + 1));
  parallel_for(N, grain, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j)
      for (int64_t m = 0; m < M; ++m) yp[m * N + j] = block_row_dot<T>(wp + j * rb, xp + m * k, nb);
  });
}

}  // namespace

void dequant_matmul(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor &x = in[0], &w = in[1];
  Tensor& y = out[0];
  RLX_CHECK(x.dtype() == DType::f32 && y.dtype() == DType::f32, "[cpu] dequant_matmul: f32 only");
  const quant::TypeTraits* tr = quant::type_traits_by_name(attr_str(n, "type"));
  RLX_CHECK(tr && tr->quantized, "[cpu] dequant_matmul: unknown quant type '", attr_str(n, "type"), "'");
  int64_t k = attr_int(n, "k"), N = w.shape()[0], rb = w.shape()[1], M = x.numel() / k;
  const float* xp = x.data<float>();
  const uint8_t* wp = w.data<uint8_t>();
  float* yp = y.data<float>();
  if (M >= 2 && fast_gemm_available()) {
    // Tiles of weight rows small enough to stay in L2 while the GEMM streams x past them.
    const int64_t tile = std::max<int64_t>(16, std::min<int64_t>(128, (128 * 1024 / 4) / std::max<int64_t>(k, 1)) / 16 * 16);
    parallel_for((N + tile - 1) / tile, 1, [&](int64_t t0, int64_t t1) {
      std::vector<float> wt(static_cast<size_t>(tile * k));
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t j0 = t * tile, nj = std::min(tile, N - j0);
        for (int64_t j = 0; j < nj; ++j) quant::dequantize_row(tr->type, wp + (j0 + j) * rb, wt.data() + j * k, k);
        // y[:, j0:j0+nj] = x[M,k] . wt[nj,k]^T
        gemm_f32(false, true, M, nj, k, xp, k, wt.data(), k, yp + j0, N, 0.f, false);
      }
    });
    return;
  }
  if (M == 1 && k % quant::kQK == 0) {  // one row (a decode step): the blocks dotted in place
    switch (tr->type) {
      case quant::GgmlType::Q8_0: return fused_gemv<quant::GgmlType::Q8_0>(xp, wp, yp, M, N, k, rb);
      case quant::GgmlType::Q4_0: return fused_gemv<quant::GgmlType::Q4_0>(xp, wp, yp, M, N, k, rb);
      case quant::GgmlType::Q4_1: return fused_gemv<quant::GgmlType::Q4_1>(xp, wp, yp, M, N, k, rb);
      default: break;
    }
  }
  int64_t grain = std::max<int64_t>(1, 65536 / (k * std::max<int64_t>(M, 1) + 1));
  parallel_for(N, grain, [&](int64_t j0, int64_t j1) {
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t j = j0; j < j1; ++j) {
      quant::dequantize_row(tr->type, wp + j * rb, row.data(), k);
      const float* r = row.data();
      for (int64_t m = 0; m < M; ++m) {
        const float* xr = xp + m * k;
        float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        int64_t e = 0;
        for (; e + 4 <= k; e += 4) {
          a0 += xr[e] * r[e];
          a1 += xr[e + 1] * r[e + 1];
          a2 += xr[e + 2] * r[e + 2];
          a3 += xr[e + 3] * r[e + 3];
        }
        for (; e < k; ++e) a0 += xr[e] * r[e];
        yp[m * N + j] = (a0 + a1) + (a2 + a3);
      }
    }
  });
}

// The MIR primitive: blocks -> f32, rows in parallel.
void dequantize(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const quant::TypeTraits* tr = quant::type_traits_by_name(attr_str(n, "type"));
  RLX_CHECK(tr && tr->quantized, "[cpu] dequantize: unknown quant type '", attr_str(n, "type"), "'");
  int64_t k = attr_int(n, "k"), N = in[0].shape()[0], rb = in[0].shape()[1];
  const uint8_t* wp = in[0].data<uint8_t>();
  float* yp = out[0].data<float>();
  parallel_for(N, 16, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) quant::dequantize_row(tr->type, wp + j * rb, yp + j * k, k);
  });
}

}  // namespace rlx::cpu
