// attention (HIR): scaled dot-product attention with GQA, causal/padding/bias masks.
#include <cmath>
#include <limits>

#include "runtime/reference/common.h"

namespace rlx::ref {

Outs eval_attention(const Node& n, const Ins& in, const Types& ot) {
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  const std::string& kind = attr_str(n, "mask");
  bool causal = kind == "causal" || kind == "causal_padding";
  bool padding = kind == "padding" || kind == "causal_padding";
  bool bias = kind == "bias";
  RLX_CHECK(causal || padding || bias || kind == "none", "[reference] attention: unknown mask kind '", kind, "'");
  RLX_CHECK((padding || bias) == (in.size() == 4), "[reference] attention: mask kind '", kind,
            (padding || bias) ? "' needs" : "' takes no", " mask input");
  RLX_CHECK(dom_of(q.dtype()) == Dom::F && k.dtype() == q.dtype() && v.dtype() == q.dtype(),
            "[reference] attention needs float q/k/v of one dtype");
  RLX_CHECK(q.rank() == 4 && k.rank() == 4 && v.rank() == 4, "[reference] attention needs rank-4 q/k/v");
  int64_t B = q.shape()[0], Hq = q.shape()[1], S = q.shape()[2], D = q.shape()[3];
  int64_t Hkv = k.shape()[1], T = k.shape()[2], Dv = v.shape()[3];
  RLX_CHECK(k.shape()[0] == B && v.shape()[0] == B && k.shape()[3] == D && v.shape()[1] == Hkv &&
                v.shape()[2] == T && Hkv > 0 && Hq % Hkv == 0,
            "[reference] attention: q/k/v shapes do not agree");
  Tensor out = alloc(ot[0]);
  double scale = attr_float(n, "scale");
  if (scale == 0) scale = 1.0 / std::sqrt(static_cast<double>(D));
  int64_t group = Hq / Hkv;
  std::vector<int64_t> bias_map;
  if (bias) {
    RLX_CHECK(in[3].dtype() == q.dtype(), "[reference] attention: bias dtype differs from q");
    bias_map = broadcast_map(in[3].shape(), {B, Hq, S, T});
  }
  if (padding)
    RLX_CHECK(in[3].rank() == 2 && in[3].shape()[0] == B && in[3].shape()[1] == T,
              "[reference] attention: padding mask must be [B,T]");
  std::vector<double> score(static_cast<size_t>(T));
  std::vector<bool> keep(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hq; ++h) {
      int64_t hk = h / group;
      for (int64_t s = 0; s < S; ++s) {
        double m = -std::numeric_limits<double>::infinity();
        bool any = false;
        for (int64_t t = 0; t < T; ++t) {
          bool ok = true;
          if (causal) ok = t <= s + (T - S);
          if (padding) ok = ok && in[3].getc(b * T + t) != cplx(0.0, 0.0);
          double sc = 0;
          for (int64_t d = 0; d < D; ++d)
            sc += ld(q, ((b * Hq + h) * S + s) * D + d) * ld(k, ((b * Hkv + hk) * T + t) * D + d);
          sc *= scale;
          if (bias) sc += ld(in[3], bias_map[((b * Hq + h) * S + s) * T + t]);
          // A -inf score (from a bias) is a masked key too, so a row of them outputs zeros.
          if (sc == -std::numeric_limits<double>::infinity()) ok = false;
          keep[t] = ok;
          score[t] = sc;
          if (ok) {
            m = !any ? sc : (std::isnan(m) || std::isnan(sc)) ? std::nan("") : std::max(m, sc);
            any = true;
          }
        }
        double sum = 0;
        for (int64_t t = 0; t < T; ++t)
          if (keep[t]) sum += std::exp(score[t] - m);
        for (int64_t e = 0; e < Dv; ++e) {
          double acc = 0;
          if (any)
            for (int64_t t = 0; t < T; ++t)
              if (keep[t]) acc += std::exp(score[t] - m) / sum * ld(v, ((b * Hkv + hk) * T + t) * Dv + e);
          st(out, ((b * Hq + h) * S + s) * Dv + e, acc);
        }
      }
    }
  }
  return {out};
}

}  // namespace rlx::ref
