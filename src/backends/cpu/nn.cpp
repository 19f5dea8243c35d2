// Normalization, softmax and attention kernels for the cpu device: row-parallel on the pool, inner
// loops vectorized (RLX_SIMD). Attention works per (batch, head) on blocks of 64 query rows: scores
// live in a per-thread cache-resident block, never as a [B,H,S,T] tensor.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

#include "backends/cpu/blas.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/vmath.h"

namespace rlx::cpu {

namespace {

template <class T>
void softmax_t(const Node& n, const Tensor& x, Tensor& y) {
  int64_t ax = attr_int(n, "axis");
  if (ax < 0) ax += x.rank();
  int64_t outer = 1, len = x.shape()[ax], inner = 1;
  for (int64_t i = 0; i < ax; ++i) outer *= x.shape()[i];
  for (int64_t i = ax + 1; i < x.rank(); ++i) inner *= x.shape()[i];
  const T* X = x.data<T>();
  T* Y = y.data<T>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const T* xr = X + o * len * inner + in;
      T* yr = Y + o * len * inner + in;
      T m = -std::numeric_limits<T>::infinity();
      for (int64_t i = 0; i < len; ++i) m = std::max(m, xr[i * inner]);
      T s = 0;
      for (int64_t i = 0; i < len; ++i) s += (yr[i * inner] = std::exp(xr[i * inner] - m));
      for (int64_t i = 0; i < len; ++i) yr[i * inner] /= s;
    }
  }
}

RLX_SIMD float row_max(const float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// y = exp(x - m), returns the sum.
RLX_SIMD float row_exp(const float* x, float* y, int64_t n, float m) {
  float s = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    float e = vm::exp(x[i] - m);
    y[i] = e;
    s += e;
  }
  return s;
}

RLX_SIMD void row_scale(float* y, int64_t n, float f) {
  for (int64_t i = 0; i < n; ++i) y[i] *= f;
}

// Softmax of one contiguous row; a row of -inf (or NaN max) follows the reference via std::exp.
void softmax_row(const float* x, float* y, int64_t n) {
  float m = row_max(x, n);
  if (!std::isfinite(m)) {
    float s = 0;
    for (int64_t i = 0; i < n; ++i) s += (y[i] = std::exp(x[i] - m));
    for (int64_t i = 0; i < n; ++i) y[i] /= s;
    return;
  }
  float s = row_exp(x, y, n, m);
  row_scale(y, n, 1.f / s);
}

RLX_SIMD void layer_norm_rows(const float* X, const float* G, const float* B, float* Y, int64_t r0, int64_t r1,
                              int64_t D, float eps) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = X + r * D;
    float* yr = Y + r * D;
    // Two passes in float with a shifted mean keep accuracy for the row lengths models use.
    float s = 0.f;
    for (int64_t i = 0; i < D; ++i) s += xr[i];
    float mean = s / static_cast<float>(D);
    float v = 0.f;
    for (int64_t i = 0; i < D; ++i) {
      float d = xr[i] - mean;
      v += d * d;
    }
    float inv = 1.f / std::sqrt(v / static_cast<float>(D) + eps);
    if (B)
      for (int64_t i = 0; i < D; ++i) yr[i] = (xr[i] - mean) * inv * G[i] + B[i];
    else
      for (int64_t i = 0; i < D; ++i) yr[i] = (xr[i] - mean) * inv * G[i];
  }
}

// scores[rows,T] = Q[rows,D] · Kᵀ with K packed as Kt[D,T]: the inner loop runs over T.
RLX_SIMD void qk_block(const float* Q, const float* Kt, float* P, int64_t rows, int64_t D, int64_t T) {
  for (int64_t i = 0; i < rows; ++i) {
    float* p = P + i * T;
    const float* q = Q + i * D;
    for (int64_t t = 0; t < T; ++t) p[t] = 0.f;
    for (int64_t d = 0; d < D; ++d) {
      float qd = q[d];
      const float* k = Kt + d * T;
      for (int64_t t = 0; t < T; ++t) p[t] += qd * k[t];
    }
  }
}

// O[rows,Dv] = P[rows,T] · V[T,Dv].
RLX_SIMD void pv_block(const float* P, const float* V, float* O, int64_t rows, int64_t T, int64_t Dv) {
  for (int64_t i = 0; i < rows; ++i) {
    float* o = O + i * Dv;
    const float* p = P + i * T;
    for (int64_t j = 0; j < Dv; ++j) o[j] = 0.f;
    for (int64_t t = 0; t < T; ++t) {
      float w = p[t];
      if (w == 0.f) continue;  // masked keys
      const float* v = V + t * Dv;
      for (int64_t j = 0; j < Dv; ++j) o[j] += w * v[j];
    }
  }
}

RLX_SIMD void transpose_block(const float* K, float* Kt, int64_t T, int64_t D) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t d = 0; d < D; ++d) Kt[d * T + t] = K[t * D + d];
}

}  // namespace

void softmax(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  if (in[0].dtype() == DType::f32) {
    int64_t ax = attr_int(n, "axis");
    if (ax < 0) ax += in[0].rank();
    if (ax == in[0].rank() - 1 && in[0].numel() > 0) {  // contiguous rows: the fast path
      int64_t len = in[0].shape()[ax], rows = in[0].numel() / len;
      const float* X = in[0].data<float>();
      float* Y = out[0].data<float>();
      parallel_for(rows, std::max<int64_t>(1, 4096 / len), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) softmax_row(X + r * len, Y + r * len, len);
      });
      return;
    }
    return softmax_t<float>(n, in[0], out[0]);
  }
  if (in[0].dtype() == DType::f64) return softmax_t<double>(n, in[0], out[0]);
  generic_kernel(n, in, out);
}

void layer_norm(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  if (in[0].dtype() != DType::f32) return generic_kernel(n, in, out);
  const Tensor& x = in[0];
  int64_t ax = attr_int(n, "axis");
  if (ax < 0) ax += x.rank();
  int64_t D = 1;
  for (int64_t i = ax; i < x.rank(); ++i) D *= x.shape()[i];
  int64_t rows = D ? x.numel() / D : 0;
  float eps = static_cast<float>(attr_float(n, "eps"));
  const float *X = x.data<float>(), *G = in[1].data<float>(), *B = in.size() > 2 ? in[2].data<float>() : nullptr;
  float* Y = out[0].data<float>();
  parallel_for(rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(D, 1)),
               [&](int64_t r0, int64_t r1) { layer_norm_rows(X, G, B, Y, r0, r1, D, eps); });
}

void attention(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  if (in[0].dtype() != DType::f32) return generic_kernel(n, in, out);
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  const std::string& kind = attr_str(n, "mask");
  int64_t B = q.shape()[0], H = q.shape()[1], S = q.shape()[2], D = q.shape()[3];
  int64_t Hk = k.shape()[1], T = k.shape()[2], Dv = v.shape()[3];
  double sc = attr_float(n, "scale");
  float scale = static_cast<float>(sc == 0 ? 1.0 / std::sqrt(static_cast<double>(D)) : sc);
  bool causal = kind == "causal" || kind == "causal_padding";
  bool padding = kind == "padding" || kind == "causal_padding";
  bool bias = kind == "bias";
  int64_t bstr[4] = {0, 0, 0, 0};
  if (bias) {  // the bias broadcasts to [B,H,S,T]: size-1 dims get stride 0
    const auto& bs = in[3].shape();
    int64_t full[4] = {B, H, S, T}, r = static_cast<int64_t>(bs.size()), st = 1;
    for (int64_t d = 3; d >= 0; --d) {
      int64_t bd = d - (4 - r);
      int64_t size = bd >= 0 ? bs[bd] : 1;
      bstr[d] = (size == 1 && full[d] != 1) || bd < 0 ? 0 : st;
      st *= size;
    }
  }
  // Key mask per batch row, read once (any dtype: nonzero = attend).
  std::vector<char> keep;
  if (padding) {
    keep.resize(static_cast<size_t>(B * T));
    for (int64_t i = 0; i < B * T; ++i) keep[i] = in[3].get(i) != 0.0;
  }
  const float *Q = q.data<float>(), *K = k.data<float>(), *V = v.data<float>();
  const float* Bias = bias ? in[3].data<float>() : nullptr;
  float* O = out[0].data<float>();
  constexpr int64_t kRows = 64;  // query rows per block: the score block stays in L1/L2
  int64_t sblocks = (S + kRows - 1) / kRows;
  // Direct vectorized loops (RLX_ATTN_DIRECT=1, small heads only) measured 1.6-1.9x slower than
  // an OpenBLAS call per block at b32 s128 D=32 here, so BLAS is the default.
  const bool direct = D <= 128 && T <= 1024 && std::getenv("RLX_ATTN_DIRECT") != nullptr;
  parallel_for(B * H * sblocks, 1, [&](int64_t w0, int64_t w1) {
    thread_local std::vector<float> scores, kt;
    if (static_cast<int64_t>(scores.size()) < kRows * T) scores.resize(static_cast<size_t>(kRows * T));
    if (direct && static_cast<int64_t>(kt.size()) < D * T) kt.resize(static_cast<size_t>(D * T));
    float* P = scores.data();
    const float* packed = nullptr;  // the K head currently transposed into kt
    for (int64_t w = w0; w < w1; ++w) {
      int64_t bh = w / sblocks, s0 = (w % sblocks) * kRows, rows = std::min(kRows, S - s0);
      int64_t b = bh / H, h = bh % H, hk = h / (H / Hk);
      const float* Kb = K + (b * Hk + hk) * T * D;
      const float* Vb = V + (b * Hk + hk) * T * Dv;
      const float* Qb = Q + ((b * H + h) * S + s0) * D;
      float* Ob = O + ((b * H + h) * S + s0) * Dv;
      if (direct) {
        if (packed != Kb) transpose_block(Kb, kt.data(), T, D);
        packed = Kb;
        qk_block(Qb, kt.data(), P, rows, D, T);
      } else {
        sgemm_serial(false, true, rows, T, D, Qb, D, Kb, D, P, T);
      }
      for (int64_t i = 0; i < rows; ++i) {
        int64_t s = s0 + i;
        float* p = P + i * T;
        bool any = false;
        for (int64_t t = 0; t < T; ++t) {
          bool ok = (!causal || t <= s + (T - S)) && (!padding || keep[b * T + t]);
          float d = p[t] * scale;
          if (bias) d += Bias[b * bstr[0] + h * bstr[1] + s * bstr[2] + t * bstr[3]];
          p[t] = ok ? d : -std::numeric_limits<float>::infinity();
          any |= ok;
        }
        if (!any) {  // fully masked row: zeros, by definition
          std::fill(p, p + T, 0.f);
          continue;
        }
        softmax_row(p, p, T);
      }
      if (direct)
        pv_block(P, Vb, Ob, rows, T, Dv);
      else
        sgemm_serial(false, false, rows, Dv, T, P, T, Vb, Dv, Ob, Dv);
    }
  });
}

}  // namespace rlx::cpu
