// Normalization, softmax and attention kernels for the cpu device (single pass per row, no
// materialized score matrix beyond one row in attention).
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/kernels.h"

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

}  // namespace

void softmax(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  if (in[0].dtype() == DType::f32) return softmax_t<float>(n, in[0], out[0]);
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
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = X + r * D;
    double mean = 0, var = 0;  // double accumulation keeps long rows accurate
    for (int64_t i = 0; i < D; ++i) mean += xr[i];
    mean /= static_cast<double>(D);
    for (int64_t i = 0; i < D; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= static_cast<double>(D);
    float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
    for (int64_t i = 0; i < D; ++i)
      Y[r * D + i] = (xr[i] - static_cast<float>(mean)) * inv * G[i] + (B ? B[i] : 0.f);
  }
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
  // The bias broadcasts to [B,H,S,T]: compute its strides once (size-1 dims get stride 0).
  int64_t bstr[4] = {0, 0, 0, 0};
  if (bias) {
    const auto& bs = in[3].shape();
    int64_t full[4] = {B, H, S, T}, r = static_cast<int64_t>(bs.size()), st = 1;
    for (int64_t d = 3; d >= 0; --d) {
      int64_t bd = d - (4 - r);
      int64_t size = bd >= 0 ? bs[bd] : 1;
      bstr[d] = (size == 1 && full[d] != 1) || bd < 0 ? 0 : st;
      st *= size;
    }
  }
  const float *Q = q.data<float>(), *K = k.data<float>(), *V = v.data<float>();
  float* O = out[0].data<float>();
  std::vector<float> p(static_cast<size_t>(T));
  std::vector<char> allowed(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      int64_t hk = h / (H / Hk);
      const float* Kb = K + (b * Hk + hk) * T * D;
      const float* Vb = V + (b * Hk + hk) * T * Dv;
      for (int64_t s = 0; s < S; ++s) {
        const float* qr = Q + ((b * H + h) * S + s) * D;
        float m = -std::numeric_limits<float>::infinity();
        bool any = false;
        for (int64_t t = 0; t < T; ++t) {
          bool ok = (!causal || t <= s + (T - S)) && (!padding || in[3].get(b * T + t) != 0.0);
          allowed[t] = ok;
          if (!ok) continue;
          float d = 0;
          for (int64_t i = 0; i < D; ++i) d += qr[i] * Kb[t * D + i];
          d *= scale;
          if (bias) d += in[3].data<float>()[b * bstr[0] + h * bstr[1] + s * bstr[2] + t * bstr[3]];
          p[t] = d;
          m = std::max(m, d);
          any = true;
        }
        float* orow = O + ((b * H + h) * S + s) * Dv;
        std::fill(orow, orow + Dv, 0.f);
        if (!any) continue;  // fully masked row: zeros, by definition
        float sum = 0;
        for (int64_t t = 0; t < T; ++t)
          if (allowed[t]) sum += (p[t] = std::exp(p[t] - m));
        for (int64_t t = 0; t < T; ++t) {
          if (!allowed[t]) continue;
          float w = p[t] / sum;
          for (int64_t i = 0; i < Dv; ++i) orow[i] += w * Vb[t * Dv + i];
        }
      }
    }
  }
}

}  // namespace rlx::cpu
