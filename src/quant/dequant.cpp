// Reference dequantizers for the GGML block formats: plain loops that mirror the format definitions.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "rlx/dtype.h"
#include "rlx/error.h"

namespace rlx::quant {

namespace {

const TypeTraits kTraits[] = {
    {GgmlType::F32, "F32", 1, 4, false},         {GgmlType::F16, "F16", 1, 2, false},
    {GgmlType::BF16, "BF16", 1, 2, false},       {GgmlType::F64, "F64", 1, 8, false},
    {GgmlType::I8, "I8", 1, 1, false},           {GgmlType::I16, "I16", 1, 2, false},
    {GgmlType::I32, "I32", 1, 4, false},         {GgmlType::I64, "I64", 1, 8, false},
    {GgmlType::Q4_0, "Q4_0", kQK, 18, true},     {GgmlType::Q4_1, "Q4_1", kQK, 20, true},
    {GgmlType::Q5_0, "Q5_0", kQK, 22, true},     {GgmlType::Q5_1, "Q5_1", kQK, 24, true},
    {GgmlType::Q8_0, "Q8_0", kQK, 34, true},     {GgmlType::Q8_1, "Q8_1", kQK, 36, true},
    {GgmlType::Q2_K, "Q2_K", kQKK, 84, true},    {GgmlType::Q3_K, "Q3_K", kQKK, 110, true},
    {GgmlType::Q4_K, "Q4_K", kQKK, 144, true},   {GgmlType::Q5_K, "Q5_K", kQKK, 176, true},
    {GgmlType::Q6_K, "Q6_K", kQKK, 210, true},   {GgmlType::Q8_K, "Q8_K", kQKK, 292, true},
};

inline float h2f(uint16_t h) { return f16_to_f32(h); }

// 6-bit scale and min j (0..7) of a Q4_K/Q5_K super-block.
inline void scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void deq_q4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    float d = h2f(b[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = ((b[i].qs[j] & 0xF) - 8) * d;
      y[j + kQK / 2] = ((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}
void deq_q4_1(const BlockQ4_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    float d = h2f(b[i].d), m = h2f(b[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = (b[i].qs[j] & 0xF) * d + m;
      y[j + kQK / 2] = (b[i].qs[j] >> 4) * d + m;
    }
  }
}
template <class B, bool kHasMin>
void deq_q5(const B* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    float d = h2f(b[i].d);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    for (int j = 0; j < kQK / 2; ++j) {
      int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
      int x0 = (b[i].qs[j] & 0xF) | h0, x1 = (b[i].qs[j] >> 4) | h1;
      if constexpr (kHasMin) {
        float m = h2f(b[i].m);
        y[j] = x0 * d + m;
        y[j + kQK / 2] = x1 * d + m;
      } else {
        y[j] = (x0 - 16) * d;
        y[j + kQK / 2] = (x1 - 16) * d;
      }
    }
  }
}
template <class B>
void deq_q8(const B* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    float d = h2f(b[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = b[i].qs[j] * d;
  }
}
void deq_q2_k(const BlockQ2_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
    const uint8_t* q = b[i].qs;
    int is = 0;
    for (int n = 0; n < kQKK; n += 128) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {
          uint8_t sc = b[i].scales[is++];
          float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
          for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l + 16 * half] >> shift) & 3) - ml;
        }
      }
      q += 32;
    }
  }
}
void deq_q3_k(const BlockQ3_K* b, float* y, int64_t nb) {
  const uint32_t km1 = 0x03030303, km2 = 0x0f0f0f0f;
  for (int64_t i = 0; i < nb; ++i) {
    float d_all = h2f(b[i].d);
    uint32_t aux[4];
    std::memcpy(aux, b[i].scales, 12);
    uint32_t tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & km2) | (((tmp >> 4) & km1) << 4);
    aux[3] = ((aux[1] >> 4) & km2) | (((tmp >> 6) & km1) << 4);
    aux[0] = (aux[0] & km2) | (((tmp >> 0) & km1) << 4);
    aux[1] = (aux[1] & km2) | (((tmp >> 2) & km1) << 4);
    int8_t scales[16];
    std::memcpy(scales, aux, 16);
    const uint8_t* q = b[i].qs;
    const uint8_t* hm = b[i].hmask;
    uint8_t m = 1;
    int is = 0;
    for (int n = 0; n < kQKK; n += 128) {
      for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
        for (int half = 0; half < 2; ++half) {
          float dl = d_all * (scales[is++] - 32);
          for (int l = 0; l < 16; ++l) {
            int k = l + 16 * half;
            *y++ = dl * (((q[k] >> shift) & 3) - ((hm[k] & m) ? 0 : 4));
          }
        }
      }
      q += 32;
    }
  }
}
void deq_q4_k(const BlockQ4_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
    const uint8_t* q = b[i].qs;
    for (int j = 0, is = 0; j < kQKK; j += 64, is += 2, q += 32) {
      uint8_t sc, m;
      scale_min_k4(is, b[i].scales, &sc, &m);
      float d1 = d * sc, m1 = dmin * m;
      scale_min_k4(is + 1, b[i].scales, &sc, &m);
      float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    }
  }
}
void deq_q5_k(const BlockQ5_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
    const uint8_t* ql = b[i].qs;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0, is = 0; j < kQKK; j += 64, is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
      uint8_t sc, m;
      scale_min_k4(is, b[i].scales, &sc, &m);
      float d1 = d * sc, m1 = dmin * m;
      scale_min_k4(is + 1, b[i].scales, &sc, &m);
      float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (b[i].qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (b[i].qh[l] & u2 ? 16 : 0)) - m2;
    }
  }
}
void deq_q6_k(const BlockQ6_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = h2f(b[i].d);
    const uint8_t* ql = b[i].ql;
    const uint8_t* qh = b[i].qh;
    const int8_t* sc = b[i].scales;
    for (int n = 0; n < kQKK; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        int is = l / 16;
        int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
    }
  }
}
void deq_q8_k(const BlockQ8_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i)
    for (int j = 0; j < kQKK; ++j) *y++ = b[i].d * b[i].qs[j];
}

}  // namespace

const TypeTraits* type_traits(uint32_t id) {
  for (auto& t : kTraits)
    if (static_cast<uint32_t>(t.type) == id) return &t;
  return nullptr;
}

const TypeTraits* type_traits_by_name(std::string_view name) {
  for (auto& t : kTraits) {
    std::string_view n = t.name;
    if (n.size() != name.size()) continue;
    bool eq = true;
    for (size_t i = 0; i < n.size(); ++i)
      eq = eq && std::toupper(static_cast<unsigned char>(name[i])) == n[i];
    if (eq) return &t;
  }
  return nullptr;
}

std::string type_name(uint32_t id) {
  const TypeTraits* t = type_traits(id);
  return t ? t->name : "type#" + std::to_string(id);
}

size_t row_bytes(GgmlType t, int64_t n) {
  const TypeTraits* tr = type_traits(static_cast<uint32_t>(t));
  RLX_CHECK(tr, "[quant] unknown type id ", static_cast<uint32_t>(t));
  RLX_CHECK(n >= 0 && n % tr->block_elems == 0, "[quant] ", tr->name, ": row of ", n,
            " elements is not a multiple of the block size ", tr->block_elems);
  return static_cast<size_t>(n / tr->block_elems) * tr->block_bytes;
}

namespace {
template <class T>
T load(const void* p, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(p) + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}
}  // namespace

void dequantize_row(GgmlType t, const void* src, float* y, int64_t n) {
  const TypeTraits* tr = type_traits(static_cast<uint32_t>(t));
  RLX_CHECK(tr, "[quant] unknown type id ", static_cast<uint32_t>(t));
  RLX_CHECK(n % tr->block_elems == 0, "[quant] ", tr->name, ": ", n, " elements is not a multiple of ",
            tr->block_elems);
  int64_t nb = n / tr->block_elems;
  switch (t) {
    case GgmlType::F32: std::memcpy(y, src, n * 4); return;
    // Element loads through memcpy: a caller's buffer need not be aligned to the element.
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) y[i] = f16_to_f32(load<uint16_t>(src, i));
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_f32(load<uint16_t>(src, i));
      return;
    case GgmlType::F64:
      for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(load<double>(src, i));
      return;
    case GgmlType::Q4_0: return deq_q4_0(static_cast<const BlockQ4_0*>(src), y, nb);
    case GgmlType::Q4_1: return deq_q4_1(static_cast<const BlockQ4_1*>(src), y, nb);
    case GgmlType::Q5_0: return deq_q5<BlockQ5_0, false>(static_cast<const BlockQ5_0*>(src), y, nb);
    case GgmlType::Q5_1: return deq_q5<BlockQ5_1, true>(static_cast<const BlockQ5_1*>(src), y, nb);
    case GgmlType::Q8_0: return deq_q8(static_cast<const BlockQ8_0*>(src), y, nb);
    case GgmlType::Q8_1: return deq_q8(static_cast<const BlockQ8_1*>(src), y, nb);
    case GgmlType::Q2_K: return deq_q2_k(static_cast<const BlockQ2_K*>(src), y, nb);
    case GgmlType::Q3_K: return deq_q3_k(static_cast<const BlockQ3_K*>(src), y, nb);
    case GgmlType::Q4_K: return deq_q4_k(static_cast<const BlockQ4_K*>(src), y, nb);
    case GgmlType::Q5_K: return deq_q5_k(static_cast<const BlockQ5_K*>(src), y, nb);
    case GgmlType::Q6_K: return deq_q6_k(static_cast<const BlockQ6_K*>(src), y, nb);
    case GgmlType::Q8_K: return deq_q8_k(static_cast<const BlockQ8_K*>(src), y, nb);
    default: fail("[quant] cannot dequantize ", tr->name);
  }
}

void quantize_row_q8_0(const float* x, BlockQ8_0* b, int64_t n) {
  RLX_CHECK(n % kQK == 0, "[quant] Q8_0 row of ", n, " elements");
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float amax = 0;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    float d = amax / 127.f, id = d ? 1.f / d : 0.f;
    b[i].d = f32_to_f16(d);
    for (int j = 0; j < kQK; ++j) b[i].qs[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));
  }
}

void quantize_row_q4_0(const float* x, BlockQ4_0* b, int64_t n) {
  RLX_CHECK(n % kQK == 0, "[quant] Q4_0 row of ", n, " elements");
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float amax = 0, mx = 0;
    for (int j = 0; j < kQK; ++j)
      if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), mx = x[j];
    float d = mx / -8.f, id = d ? 1.f / d : 0.f;
    b[i].d = f32_to_f16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      int q1 = std::min(15, static_cast<int>(x[j + kQK / 2] * id + 8.5f));
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

}  // namespace rlx::quant
