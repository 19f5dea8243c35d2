// The C kernel library every generated Cortex-M project carries (rlx_kernels.h): the int8 fully
// connected and convolution kernels (im2col rows, grouped and depthwise), int8 max/min pooling, with
// RLX's requantize rule (src/quant/fixed_point.h, the same integer steps
// line for line), affine quantize/dequantize, and the f32 helpers whose rounding matches the host
// (round half to even, max/min with signed zeros as the reference interpreter orders them).
// The dot product has three bodies chosen by the compiler's feature macros: MVE (Helium, M55),
// the DSP extension's SMLAD (M4), and plain C (any other core, or the host build).
#include "codegen/cortexm/cortexm.h"

namespace rlx::cortexm {

const char* kernels_header() {
  return R"C(/* rlx_kernels.h: int8 kernels of an RLX-generated Cortex-M project (plain C99). */
#ifndef RLX_KERNELS_H
#define RLX_KERNELS_H
#include <stdint.h>
#include <string.h>
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
#include <arm_mve.h>
#define RLX_DOT_MVE 1
#elif defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
#include <arm_acle.h>
#define RLX_DOT_SMLAD 1
#endif

/* round(p / 2^s), 1 <= s <= 62, by the exact remainder (fixed_point.h rounding_shift). */
static inline int64_t rlx_rounding_shift(int64_t p, int s, int half_away) {
  int64_t q = p >> s;
  int64_t r = p - (int64_t)((uint64_t)q << s);
  int64_t half = (int64_t)1 << (s - 1);
  int up;
  if (r != half) up = r > half;
  else if (!half_away) up = (q & 1) != 0;
  else up = p >= 0;
  return q + (up ? 1 : 0);
}

/* saturate(round(acc * m / 2^(31 + shift)) + zp) to [lo, hi] (fixed_point.h requantize). */
static inline int32_t rlx_requantize(int32_t acc, int32_t m, int32_t shift, int32_t zp, int32_t lo, int32_t hi,
                                     int half_away) {
  int64_t v = rlx_rounding_shift((int64_t)acc * m, 31 + shift, half_away) + zp;
  return (int32_t)(v < lo ? lo : (v > hi ? hi : v));
}

/* Round half to even in f32 (nearbyintf in the default rounding mode) without libm. */
static inline float rlx_rint(float v) {
  float a = v < 0 ? -v : v;
  if (!(a < 8388608.0f)) return v; /* >= 2^23: already an integer (or inf/nan) */
  float r = (a + 8388608.0f) - 8388608.0f; /* the f32 add rounds half to even (no -ffast-math) */
  return v < 0 ? -r : r;
}

/* ONNX QuantizeLinear of one element: f32 quotient, half-even, + zp, saturate (fixed_point.h quantize). */
static inline int32_t rlx_quantize(float x, float scale, int32_t zp, int32_t lo, int32_t hi) {
  float v = x / scale;
  if (v != v) return zp < lo ? lo : (zp > hi ? hi : zp);
  float r = rlx_rint(v);
  if (r < (float)(lo - zp)) return lo;
  if (r > (float)(hi - zp)) return hi;
  return (int32_t)r + zp;
}

static inline int rlx_signbit(float a) {
  uint32_t u;
  memcpy(&u, &a, 4);
  return (int)(u >> 31);
}
static inline float rlx_maxf(float a, float b) {
  if (a != a || b != b) return a + b;
  if (a == b) return rlx_signbit(a) ? b : a; /* max(-0, +0) = +0 */
  return a > b ? a : b;
}
static inline float rlx_minf(float a, float b) {
  if (a != a || b != b) return a + b;
  if (a == b) return rlx_signbit(a) ? a : b; /* min(-0, +0) = -0 */
  return a < b ? a : b;
}

/* sum_k x'[k] * w[k] over int8, x' = x ^ flip (flip 0x80 turns u8 activations into s8). */
static inline int32_t rlx_dot_s8(const int8_t* x, const int8_t* w, int k, uint8_t flip) {
  int32_t acc = 0;
  int i = 0;
#if defined(RLX_DOT_MVE)
  uint8x16_t f = vdupq_n_u8(flip);
  for (; i + 16 <= k; i += 16) {
    int8x16_t xv = vreinterpretq_s8_u8(veorq_u8(vld1q_u8((const uint8_t*)x + i), f));
    acc = vmladavaq_s8(acc, xv, vld1q_s8(w + i));
  }
  if (i < k) {
    mve_pred16_t p = vctp8q((uint32_t)(k - i));
    int8x16_t xv = vreinterpretq_s8_u8(veorq_u8(vld1q_z_u8((const uint8_t*)x + i, p), f));
    acc = vmladavaq_p_s8(acc, xv, vld1q_z_s8(w + i, p), p);
    i = k;
  }
#elif defined(RLX_DOT_SMLAD)
  uint32_t f4 = flip * 0x01010101u;
  for (; i + 4 <= k; i += 4) {
    uint32_t xv, wv;
    memcpy(&xv, x + i, 4);
    memcpy(&wv, w + i, 4);
    xv ^= f4;
    /* bytes 0,2 and 1,3 sign-extended to int16 pairs; SMLAD adds both products */
    acc = (int32_t)__smlad(__sxtb16(xv), __sxtb16(wv), (uint32_t)acc);
    acc = (int32_t)__smlad(__sxtb16((xv >> 8) | (xv << 24)), __sxtb16((wv >> 8) | (wv << 24)), (uint32_t)acc);
  }
#endif
  for (; i < k; ++i) acc += (int32_t)(int8_t)((uint8_t)x[i] ^ flip) * w[i];
  return acc;
}

#if defined(RLX_DOT_SMLAD)
static inline uint32_t rlx_ror8(uint32_t v) { return (v >> 8) | (v << 24); }
/* Two weight rows against one activation row: each x word is loaded, flipped and unpacked once. */
static inline void rlx_dot2_s8(const int8_t* x, const int8_t* w0, const int8_t* w1, int k, uint8_t flip, int32_t* a0,
                               int32_t* a1) {
  uint32_t s0 = 0, s1 = 0, f4 = flip * 0x01010101u;
  int i = 0;
  for (; i + 4 <= k; i += 4) {
    uint32_t xv, u, v;
    memcpy(&xv, x + i, 4);
    memcpy(&u, w0 + i, 4);
    memcpy(&v, w1 + i, 4);
    xv ^= f4;
    uint32_t xl = __sxtb16(xv), xh = __sxtb16(rlx_ror8(xv));
    s0 = __smlad(xl, __sxtb16(u), s0);
    s0 = __smlad(xh, __sxtb16(rlx_ror8(u)), s0);
    s1 = __smlad(xl, __sxtb16(v), s1);
    s1 = __smlad(xh, __sxtb16(rlx_ror8(v)), s1);
  }
  for (; i < k; ++i) {
    int32_t xi = (int8_t)((uint8_t)x[i] ^ flip);
    s0 += (uint32_t)(xi * w0[i]);
    s1 += (uint32_t)(xi * w1[i]);
  }
  *a0 = (int32_t)s0;
  *a1 = (int32_t)s1;
}
#endif

/* qlinear: acc = sum_k (x - xzp)(w - wzp[n]) + bias[n] (i32, wrapping), then requantize to i8/u8
   (out_kind 0/1) or f32(acc) * scale[n] (out_kind 2); relu clamps at the output's zero. */
typedef struct {
  int32_t m, k, n;
  int32_t x_unsigned, xzp;
  const int8_t* w;        /* [n][k] */
  const int32_t* wsum;    /* [n]: sum_k w */
  const int32_t* wzp;     /* [n] */
  const int32_t* bias;    /* [n] or NULL */
  int32_t out_kind, relu, half_away;
  const int32_t* mul;     /* [n] (out_kind 0/1) */
  const int32_t* shift;   /* [n] */
  int32_t zp;
  const float* scale;     /* [n] (out_kind 2) */
} rlx_qlinear_params;

static inline void rlx_qlinear(const rlx_qlinear_params* p, const void* xv, void* yv) {
  const int32_t K = p->k, N = p->n;
  const uint8_t flip = p->x_unsigned ? 0x80 : 0;
  const int32_t zx = p->xzp - (p->x_unsigned ? 128 : 0); /* zero point of x' = x ^ flip */
  int32_t lo = p->out_kind == 1 ? 0 : -128, hi = p->out_kind == 1 ? 255 : 127;
  if (p->relu && p->zp > lo) lo = p->zp;
  for (int32_t r = 0; r < p->m; ++r) {
    const int8_t* x = (const int8_t*)xv + (size_t)r * K;
    uint32_t xsum = 0;
    for (int32_t i = 0; i < K; ++i) xsum += (uint32_t)(int32_t)(int8_t)((uint8_t)x[i] ^ flip);
    int32_t next = 0; /* SMLAD: the second row's dot of a pair, used on the next j */
    (void)next;
    for (int32_t j = 0; j < N; ++j) {
      int32_t dot;
#if defined(RLX_DOT_SMLAD)
      if ((j & 1) == 0 && j + 1 < N) rlx_dot2_s8(x, p->w + (size_t)j * K, p->w + (size_t)(j + 1) * K, K, flip, &dot, &next);
      else if (j & 1) dot = next;
      else dot = rlx_dot_s8(x, p->w + (size_t)j * K, K, flip);
#else
      dot = rlx_dot_s8(x, p->w + (size_t)j * K, K, flip);
#endif
      /* sum (x' - zx)(w - wz) = dot - zx*wsum - wz*xsum + K*zx*wz, all mod 2^32 like an i32 accumulator */
      uint32_t wz = (uint32_t)p->wzp[j];
      uint32_t acc = (uint32_t)dot;
      acc += -(uint32_t)zx * (uint32_t)p->wsum[j] - wz * xsum + (uint32_t)K * (uint32_t)zx * wz;
      if (p->bias) acc += (uint32_t)p->bias[j];
      int32_t a = (int32_t)acc;
      size_t o = (size_t)r * N + j;
      if (p->out_kind == 2) {
        float y = (float)a * p->scale[j];
        ((float*)yv)[o] = p->relu && y < 0 ? 0.0f : y;
      } else {
        int32_t y = rlx_requantize(a, p->mul[j], p->shift[j], p->zp, lo, hi, p->half_away);
        if (p->out_kind == 1) ((uint8_t*)yv)[o] = (uint8_t)y;
        else ((int8_t*)yv)[o] = (int8_t)y;
      }
    }
  }
}

/* Accumulator of one output: the wrapping-i32 sum (x' - zx)(w - wz) + bias from dot = sum x' w. */
static inline int32_t rlx_acc(int32_t dot, int32_t zx, int32_t wsum, int32_t wz, uint32_t xsum, int32_t k,
                              const int32_t* bias, int32_t j) {
  uint32_t acc = (uint32_t)dot;
  acc += -(uint32_t)zx * (uint32_t)wsum - (uint32_t)wz * xsum + (uint32_t)k * (uint32_t)zx * (uint32_t)wz;
  if (bias) acc += (uint32_t)bias[j];
  return (int32_t)acc;
}

/* qconv (NCHW): per output pixel and group, the im2col row col[cg*kh*kw] (padding = the raw byte of
   xzp, a centered zero), dotted with each output channel's weights as rlx_qlinear does; groups = c
   with cg = 1 is depthwise. Output as rlx_qlinear, relu at the zero point, max_q caps (ReLU6). */
typedef struct {
  int32_t n, c, h, w, o, cg, kh, kw, oh, ow, groups, sy, sx, dy, dx, py, px;
  int32_t x_unsigned, xzp;
  const int8_t* wt;       /* [o][cg*kh*kw] */
  const int32_t* wsum;    /* [o] */
  const int32_t* wzp;     /* [o] */
  const int32_t* bias;    /* [o] or NULL */
  int32_t out_kind, relu, half_away, max_q;
  const int32_t* mul;     /* [o] */
  const int32_t* shift;   /* [o] */
  int32_t zp;
  const float* scale;     /* [o] */
} rlx_qconv_params;

static inline void rlx_qconv(const rlx_qconv_params* p, const void* xv, void* yv, int8_t* col) {
  const int32_t K = p->cg * p->kh * p->kw, og = p->o / p->groups, plane = p->oh * p->ow;
  const uint8_t flip = p->x_unsigned ? 0x80 : 0, padb = (uint8_t)p->xzp;
  const int32_t zx = p->xzp - (p->x_unsigned ? 128 : 0);
  int32_t lo = p->out_kind == 1 ? 0 : -128, hi = p->out_kind == 1 ? 255 : 127;
  if (p->relu && p->zp > lo) lo = p->zp;
  if (p->max_q < hi) hi = p->max_q;
  const uint8_t* x = (const uint8_t*)xv;
  for (int32_t b = 0; b < p->n; ++b)
    for (int32_t g = 0; g < p->groups; ++g)
      for (int32_t oy = 0; oy < p->oh; ++oy)
        for (int32_t ox = 0; ox < p->ow; ++ox) {
          int32_t i = 0;
          for (int32_t c = 0; c < p->cg; ++c) {
            const uint8_t* xp = x + ((size_t)(b * p->c + g * p->cg + c) * p->h) * p->w;
            for (int32_t ky = 0; ky < p->kh; ++ky) {
              int32_t iy = oy * p->sy - p->py + ky * p->dy;
              for (int32_t kx = 0; kx < p->kw; ++kx) {
                int32_t ix = ox * p->sx - p->px + kx * p->dx;
                col[i++] = (int8_t)(iy < 0 || iy >= p->h || ix < 0 || ix >= p->w ? padb : xp[iy * p->w + ix]);
              }
            }
          }
          uint32_t xsum = 0;
          for (int32_t t = 0; t < K; ++t) xsum += (uint32_t)(int32_t)(int8_t)((uint8_t)col[t] ^ flip);
          int32_t next = 0;
          (void)next;
          for (int32_t j = 0; j < og; ++j) {
            const int32_t o = g * og + j;
            int32_t dot;
#if defined(RLX_DOT_SMLAD)
            if ((j & 1) == 0 && j + 1 < og) rlx_dot2_s8(col, p->wt + (size_t)o * K, p->wt + (size_t)(o + 1) * K, K, flip, &dot, &next);
            else if (j & 1) dot = next;
            else dot = rlx_dot_s8(col, p->wt + (size_t)o * K, K, flip);
#else
            dot = rlx_dot_s8(col, p->wt + (size_t)o * K, K, flip);
#endif
            int32_t a = rlx_acc(dot, zx, p->wsum[o], p->wzp[o], xsum, K, p->bias, o);
            size_t at = (size_t)(b * p->o + o) * plane + (size_t)oy * p->ow + ox;
            if (p->out_kind == 2) {
              float y = (float)a * p->scale[o];
              ((float*)yv)[at] = p->relu && y < 0 ? 0.0f : y;
            } else {
              int32_t y = rlx_requantize(a, p->mul[o], p->shift[o], p->zp, lo, hi, p->half_away);
              if (p->out_kind == 1) ((uint8_t*)yv)[at] = (uint8_t)y;
              else ((int8_t*)yv)[at] = (int8_t)y;
            }
          }
        }
}

/* max/min pooling (reduce_window) over i8/u8 of rank <= 4 (leading dims padded with 1): padding is
   skipped, so a window holds only real elements (an all-padding window gives the type's extreme). */
typedef struct {
  int32_t d[4], od[4], win[4], st[4], pad[4];
  int32_t is_unsigned, is_min;
} rlx_pool8_params;

static inline void rlx_pool8(const rlx_pool8_params* p, const void* xv, void* yv) {
  const int32_t init = p->is_min ? (p->is_unsigned ? 255 : 127) : (p->is_unsigned ? 0 : -128);
  size_t at = 0;
  for (int32_t a = 0; a < p->od[0]; ++a)
    for (int32_t b = 0; b < p->od[1]; ++b)
      for (int32_t c = 0; c < p->od[2]; ++c)
        for (int32_t e = 0; e < p->od[3]; ++e, ++at) {
          int32_t best = init;
          for (int32_t wa = 0; wa < p->win[0]; ++wa) {
            int32_t ia = a * p->st[0] - p->pad[0] + wa;
            if (ia < 0 || ia >= p->d[0]) continue;
            for (int32_t wb = 0; wb < p->win[1]; ++wb) {
              int32_t ib = b * p->st[1] - p->pad[1] + wb;
              if (ib < 0 || ib >= p->d[1]) continue;
              for (int32_t wc = 0; wc < p->win[2]; ++wc) {
                int32_t ic = c * p->st[2] - p->pad[2] + wc;
                if (ic < 0 || ic >= p->d[2]) continue;
                size_t row = (((size_t)ia * p->d[1] + ib) * p->d[2] + ic) * p->d[3];
                for (int32_t we = 0; we < p->win[3]; ++we) {
                  int32_t ie = e * p->st[3] - p->pad[3] + we;
                  if (ie < 0 || ie >= p->d[3]) continue;
                  int32_t v = p->is_unsigned ? (int32_t)((const uint8_t*)xv)[row + ie] : (int32_t)((const int8_t*)xv)[row + ie];
                  if (p->is_min ? v < best : v > best) best = v;
                }
              }
            }
          }
          if (p->is_unsigned) ((uint8_t*)yv)[at] = (uint8_t)best;
          else ((int8_t*)yv)[at] = (int8_t)best;
        }
}

#endif
)C";
}

}  // namespace rlx::cortexm
