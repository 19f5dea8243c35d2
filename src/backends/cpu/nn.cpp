// Normalization, softmax and attention kernels for the cpu device: row-parallel on the pool, inner
// loops vectorized (RLX_SIMD). Attention works per (batch, head) on blocks of 128 query rows: K and V
// of the head are packed once for the packed GEMM, scores live in a per-thread cache-resident
// block (never a [B,H,S,T] tensor), and keys past a sentence's last real token are skipped.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

#include "backends/cpu/blas.h"
#include "backends/cpu/gemm_avx2.h"
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

}  // namespace

void layer_norm_rows_f32(const float* X, const float* G, const float* B, float* Y, int64_t r0, int64_t r1, int64_t D,
                         float eps) {
  layer_norm_rows(X, G, B, Y, r0, r1, D, eps);
}

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
  const std::string& kind = attr_str(n, "mask");
  // Layout: element (b, h, s, d) of Q/K/V/O lives at base + b*sb + h*sh + s*ss + d. The standard
  // layout is [B,H,S,D]; fuse_cpu_lir's fused form (attr cpu_qkv) reads the heads in place from one
  // [B,S,3*H*D] QKV buffer and writes O as [B,S,H,D], so no transposes run.
  const bool fused = n.attrs.count("cpu_qkv") > 0;
  int64_t B, H, S, D, Hk, T, Dv;
  const float *Q, *K, *V;
  int64_t qb, qh, qs, kb, kh, ks, vb, vh, vs, ob, oh, os;
  const Tensor* mask_t = nullptr;
  if (fused) {
    const Tensor& qkv = in[0];
    H = Hk = attr_int(n, "cpu_qkv");
    B = qkv.shape()[0];
    S = T = qkv.shape()[1];
    D = Dv = qkv.shape()[2] / (3 * H);
    const int64_t W = 3 * H * D;
    Q = qkv.data<float>();
    K = Q + H * D;
    V = Q + 2 * H * D;
    qb = kb = vb = S * W;
    qh = kh = vh = D;
    qs = ks = vs = W;
    ob = S * H * D, oh = D, os = H * D;
    if (in.size() > 1) mask_t = &in[1];
  } else {
    const Tensor &q = in[0], &k = in[1], &v = in[2];
    B = q.shape()[0], H = q.shape()[1], S = q.shape()[2], D = q.shape()[3];
    Hk = k.shape()[1], T = k.shape()[2], Dv = v.shape()[3];
    Q = q.data<float>(), K = k.data<float>(), V = v.data<float>();
    qb = H * S * D, qh = S * D, qs = D;
    kb = Hk * T * D, kh = T * D, ks = D;
    vb = Hk * T * Dv, vh = T * Dv, vs = Dv;
    ob = H * S * Dv, oh = S * Dv, os = Dv;
    if (in.size() > 3) mask_t = &in[3];
  }
  double sc = attr_float(n, "scale");
  float scale = static_cast<float>(sc == 0 ? 1.0 / std::sqrt(static_cast<double>(D)) : sc);
  bool causal = kind == "causal" || kind == "causal_padding";
  bool padding = kind == "padding" || kind == "causal_padding";
  bool bias = kind == "bias";
  int64_t bstr[4] = {0, 0, 0, 0};
  if (bias) {  // the bias broadcasts to [B,H,S,T]: size-1 dims get stride 0
    const auto& bs = mask_t->shape();
    int64_t full[4] = {B, H, S, T}, r = static_cast<int64_t>(bs.size()), st = 1;
    for (int64_t d = 3; d >= 0; --d) {
      int64_t bd = d - (4 - r);
      int64_t size = bd >= 0 ? bs[bd] : 1;
      bstr[d] = (size == 1 && full[d] != 1) || bd < 0 ? 0 : st;
      st *= size;
    }
  }
  // Key mask per batch row, read once (any dtype: nonzero = attend). Keys past the last kept one
  // are skipped entirely (t_end), which saves the padded tail of short sentences.
  thread_local std::vector<char> keep;
  thread_local std::vector<int64_t> t_end;
  keep.assign(static_cast<size_t>(padding ? B * T : 0), 1);
  t_end.assign(static_cast<size_t>(B), T);
  if (padding) {
    for (int64_t b = 0; b < B; ++b) {
      int64_t last = 0;
      for (int64_t t = 0; t < T; ++t) {
        bool k = mask_t->get(b * T + t) != 0.0;
        keep[b * T + t] = k;
        if (k) last = t + 1;
      }
      if (!causal) t_end[b] = last;
    }
  }
  // (thread_local storage is the caller's; workers read it through these plain pointers)
  const char* keep_p = keep.data();
  const int64_t* t_end_p = t_end.data();
  const float* Bias = bias ? mask_t->data<float>() : nullptr;
  float* O = out[0].data<float>();
  const bool fast = fast_gemm_available();
  constexpr int64_t kRows = 128;  // query rows per block: the score block stays in L2
  const int64_t sblocks = (S + kRows - 1) / kRows;
  parallel_for(B * H * sblocks, 1, [&](int64_t w0, int64_t w1) {
    thread_local std::vector<float> scores, kp, vp;
    if (static_cast<int64_t>(scores.size()) < kRows * T) scores.resize(static_cast<size_t>(kRows * T));
    if (fast) {
      int64_t kn = packed_b_size(D, T), vn = packed_b_size(T, Dv);
      if (static_cast<int64_t>(kp.size()) < kn) kp.resize(static_cast<size_t>(kn));
      if (static_cast<int64_t>(vp.size()) < vn) vp.resize(static_cast<size_t>(vn));
    }
    float* P = scores.data();
    int64_t packed_bh = -1;  // the (b, h) whose K and V are packed in kp / vp
    for (int64_t w = w0; w < w1; ++w) {
      int64_t bh = w / sblocks, s0 = (w % sblocks) * kRows, rows = std::min(kRows, S - s0);
      int64_t b = bh / H, h = bh % H, hk = h / (H / Hk), Te = t_end_p[b];
      const float* Kb = K + b * kb + hk * kh;
      const float* Vb = V + b * vb + hk * vh;
      const float* Qb = Q + b * qb + h * qh + s0 * qs;
      float* Ob = O + b * ob + h * oh + s0 * os;
      if (Te == 0) {  // every key masked: zeros, by definition
        for (int64_t i = 0; i < rows; ++i) std::fill(Ob + i * os, Ob + i * os + Dv, 0.f);
        continue;
      }
      if (fast) {
        if (packed_bh != bh) {
          pack_b(true, Kb, ks, D, Te, kp.data());
          pack_b(false, Vb, vs, Te, Dv, vp.data());
          packed_bh = bh;
        }
        gemm_packed_serial(rows, Te, D, Qb, qs, kp.data(), P, Te, nullptr);
      } else {
        sgemm_serial(false, true, rows, Te, D, Qb, qs, Kb, ks, P, Te);
      }
      for (int64_t i = 0; i < rows; ++i) {
        int64_t s = s0 + i;
        float* p = P + i * Te;
        bool any = false;
        if (!causal && !bias && !padding) {
          row_scale(p, Te, scale);
          any = true;
        } else {
          for (int64_t t = 0; t < Te; ++t) {
            bool ok = (!causal || t <= s + (T - S)) && (!padding || keep_p[b * T + t]);
            float d = p[t] * scale;
            if (bias) d += Bias[b * bstr[0] + h * bstr[1] + s * bstr[2] + t * bstr[3]];
            p[t] = ok ? d : -std::numeric_limits<float>::infinity();
            any |= ok;
          }
        }
        if (!any) {  // fully masked row: zeros, by definition
          std::fill(p, p + Te, 0.f);
          continue;
        }
        softmax_row(p, p, Te);
      }
      if (fast)
        gemm_packed_serial(rows, Dv, Te, P, Te, vp.data(), Ob, os, nullptr);
      else
        sgemm_serial(false, false, rows, Dv, Te, P, Te, Vb, vs, Ob, os);
    }
  });
}

}  // namespace rlx::cpu
