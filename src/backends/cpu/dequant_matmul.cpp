// Packed dequant-matmul on cpu: weights stay in their GGML blocks.
//  - Up to 8 rows of x (a decode step, a short prompt) on Q4_0/Q4_1: x is quantized to 8-bit blocks
//    once and every weight row is an integer block dot with each row (qdot.h, llama.cpp's decode
//    arithmetic).
//  - One row on Q8_0, and on Q4_0/Q4_1 under RLX_QDOT=0: blocks dotted with f32 x (the op's f32
//    semantics; AVX2 for Q8_0). One row on other types: each weight row expanded into a small f32
//    buffer (L1-resident) and dotted.
//  - More rows (a prefill, a decode step batched over many sequences): each worker expands a tile of
//    weight rows and runs the f32 GEMM over all rows of x against it, so the expansion is paid once
//    per tile instead of the dot products dominating.
// Covers every block type of src/quant. The products of the first two are split over output rows
// into one range per thread, and run on the calling thread when too small to pay for waking the pool.
#include <algorithm>
#include <vector>

#include "backends/cpu/gemm_avx2.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/qdot.h"
#include "quant/blocks.h"
#include "runtime/env.h"

namespace rlx::cpu {

namespace {

// RLX_QDOT=0: one-row products in f32 (no activation quantization). Read once.
bool qdot_enabled() {
  static const bool on = env_on("RLX_QDOT", true);
  return on;
}

// Multiply-adds below which a product runs on the calling thread: waking the other worker and
// joining costs a few microseconds, about what this many block MACs take on one core.
constexpr int64_t kMinMacsPerThread = int64_t{1} << 17;

// fn(j0, j1) over the N output rows of a product of N * k multiply-adds: one contiguous range per
// thread, or all of them inline when the product is small.
template <class F>
void split_rows(int64_t N, int64_t k, F&& fn) {
  const int64_t parts = std::min<int64_t>(num_threads(), std::max<int64_t>(1, N * k / kMinMacsPerThread));
  if (parts <= 1) return fn(int64_t{0}, N);
  parallel_for(N, (N + parts - 1) / parts, fn);
}

// One weight row of 32-element blocks dotted with f32 x without expanding the row: per block the
// integer codes are multiplied into x and the block scale (and Q4_1's min times the block's x sum)
// applied once.
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
void f32_gemv(const float* xp, const uint8_t* wp, float* yp, int64_t N, int64_t k, int64_t rb) {
  const int64_t nb = k / quant::kQK;
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx2 = cpu_isa() >= CpuIsa::Avx2;
  if (T == quant::GgmlType::Q8_0 && avx2)
    return split_rows(N, k, [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j) yp[j] = qdot::row_dot_f32_q8_0_avx2(wp + j * rb, xp, nb);
    });
#endif
  split_rows(N, k, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) yp[j] = block_row_dot<T>(wp + j * rb, xp, nb);
  });
}

// Rows of x (a decode step, or a short prompt) up to which Q4_0/Q4_1 products take the integer
// dots: each weight row is read once and dotted with every row of x while it sits in L1, where the
// GEMM path would first expand every weight row to f32.
constexpr int64_t kIntDotMaxRows = 8;

// The M rows of x quantized once into a per-thread buffer (kept across runs, so warm runs do not
// allocate), then every weight row an integer block dot against each of them.
void int_gemv(quant::GgmlType t, const float* xp, const uint8_t* wp, float* yp, int64_t M, int64_t N, int64_t k,
              int64_t rb) {
  thread_local std::vector<qdot::BlockX8> xq;
  const int64_t nb = k / quant::kQK;
  if (static_cast<int64_t>(xq.size()) < M * nb) xq.resize(static_cast<size_t>(M * nb));
  for (int64_t m = 0; m < M; ++m) qdot::quantize_row(xp + m * k, xq.data() + m * nb, k);
  const qdot::BlockX8* xb = xq.data();
  split_rows(N, k * M, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j)
      for (int64_t m = 0; m < M; ++m) yp[m * N + j] = qdot::row_dot(t, wp + j * rb, xb + m * nb, nb);
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
  if (M <= kIntDotMaxRows && k % quant::kQK == 0 && qdot_enabled() && qdot::preferred(tr->type))
    return int_gemv(tr->type, xp, wp, yp, M, N, k, rb);
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
  if (M == 1 && k % quant::kQK == 0 && qdot::supported(tr->type)) {  // one row (a decode step)
    switch (tr->type) {
      case quant::GgmlType::Q8_0: return f32_gemv<quant::GgmlType::Q8_0>(xp, wp, yp, N, k, rb);
      case quant::GgmlType::Q4_0: return f32_gemv<quant::GgmlType::Q4_0>(xp, wp, yp, N, k, rb);
      default: return f32_gemv<quant::GgmlType::Q4_1>(xp, wp, yp, N, k, rb);
    }
  }
  auto rows = [&](int64_t j0, int64_t j1) {
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
  };
  if (M == 1) return split_rows(N, k, rows);
  parallel_for(N, std::max<int64_t>(1, 65536 / (k * M + 1)), rows);
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
