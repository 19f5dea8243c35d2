// The cpu kernels of qlinear, qmatmul and qconv (im2col onto the same GEMM and epilogue): the int8
// GEMM of qgemm.h on the ISA level in use
// (RLX_CPU_ISA: generic -> scalar, avx2 -> AVX2, avx512 -> AVX-512 VNNI where the host has it, else
// AVX2), zero points folded in through row/column sums, and the epilogue (bias, requantize per
// src/quant/fixed_point.h or the f32 scale, relu; the row kernels of qepilogue.h, AVX2 where the
// host has it) applied to each finished block of rows while it is in cache.
#include <algorithm>
#include <memory>
#include <type_traits>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/qepilogue.h"
#include "backends/cpu/qgemm.h"
#include "backends/cpu/simd_avx2.h"
#include "quant/fixed_point.h"

namespace rlx::cpu {

using qgemm::Path;

Path qgemm_path() {
  switch (cpu_isa()) {
    case CpuIsa::Generic: return Path::Scalar;
    case CpuIsa::Avx2: return Path::Avx2;
    case CpuIsa::Avx512: return qgemm::path_supported(Path::Avx512Vnni) ? Path::Avx512Vnni : Path::Avx2;
  }
  return Path::Scalar;
}

namespace {

enum class OutKind { I32, F32, Q8 };

// What runs after the GEMM, per output column n.
struct Epilogue {
  OutKind kind = OutKind::I32;
  int64_t za = 0;                   // the activation zero point after the u8 flip
  std::vector<int32_t> wz;          // weight zero point per column (after the s8 flip)
  std::vector<uint32_t> colterm;    // bias - za * colsum + K * za * wz, mod 2^32
  std::vector<float> scale;         // F32
  qepi::Requant rq;                 // Q8
  bool relu = false;
};

template <class T>
T pick(const std::vector<T>& v, int64_t n) {
  return v.size() == 1 ? v[0] : v[static_cast<size_t>(n)];
}

void finish_epilogue(Epilogue& e, const qgemm::PackedB& b, const int32_t* bias) {
  int64_t N = b.N;
  e.colterm.resize(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) {
    uint32_t t = bias ? static_cast<uint32_t>(bias[n]) : 0u;
    uint32_t z = static_cast<uint32_t>(e.wz[static_cast<size_t>(n)]), za = static_cast<uint32_t>(e.za);
    t -= za * static_cast<uint32_t>(b.colsum[static_cast<size_t>(n)]);
    t += static_cast<uint32_t>(b.K) * za * z;
    e.colterm[static_cast<size_t>(n)] = t;
  }
}

// Rows [m0, m1) of the GEMM, then the epilogue into out (row stride N, dtype by e.kind); one loop
// per output kind so each is a plain vectorizable loop over the columns.
void run_rows(const qgemm::PackedA& a, const qgemm::PackedB& b, const Epilogue& e, int64_t m0, int64_t m1, void* out) {
  const int64_t N = b.N, kBlock = 48;
  std::vector<int32_t> C(static_cast<size_t>(std::min(kBlock, m1 - m0) * N)), Q(static_cast<size_t>(N));
  const uint32_t* wz = reinterpret_cast<const uint32_t*>(e.wz.data());
  const uint32_t* ct = e.colterm.data();
  const bool v = simd::cpu_has_avx2();
  for (int64_t r0 = m0; r0 < m1; r0 += kBlock) {
    int64_t r1 = std::min(m1, r0 + kBlock);
    qgemm::gemm(a, b, r0, r1, C.data(), N);
    for (int64_t m = r0; m < r1; ++m) {
      int32_t* c = C.data() + (m - r0) * N;
      const uint32_t rs = static_cast<uint32_t>(a.rowsum[static_cast<size_t>(m)]);
      v ? qepi::correct_avx2(c, N, wz, rs, ct) : qepi::correct_scalar(c, N, wz, rs, ct);
      if (e.kind == OutKind::I32) {
        std::copy(c, c + N, static_cast<int32_t*>(out) + m * N);
      } else if (e.kind == OutKind::F32) {
        float* y = static_cast<float*>(out) + m * N;
        v ? qepi::scale_avx2(c, N, e.scale.data(), e.relu, y) : qepi::scale_scalar(c, N, e.scale.data(), e.relu, y);
      } else {
        v ? qepi::requant_avx2(c, N, e.rq, Q.data()) : qepi::requant_scalar(c, N, e.rq, Q.data());
        if (e.rq.lo < 0) std::copy(Q.begin(), Q.end(), static_cast<int8_t*>(out) + m * N);
        else std::copy(Q.begin(), Q.end(), static_cast<uint8_t*>(out) + m * N);
      }
    }
  }
}

void run(const qgemm::PackedA& a, const qgemm::PackedB& b, const Epilogue& e, void* out) {
  int64_t work = std::max<int64_t>(1, b.N * a.Kp);
  int64_t grain = std::max<int64_t>(8, (int64_t{1} << 20) / work);
  parallel_for(a.M, grain, [&](int64_t m0, int64_t m1) { run_rows(a, b, e, m0, m1, out); });
}

struct QLinearWeights {
  qgemm::PackedB b;
};

qgemm::PackedB pack_qlinear_w(const Tensor& w) {
  int64_t N = w.shape()[0], K = w.shape()[1];
  return qgemm::pack_b(w.data<uint8_t>(), N, K, K, 1, false, qgemm_path());
}

// The epilogue of output channels [c0, c0 + b.N) of a qlinear/qconv node (per-channel attribute
// entries taken from c0 on), for activations of dtype xs ? i8 : u8 and bias (i32 [b.N]) or null.
Epilogue make_epilogue(const Node& n, DType dt, bool xs, const qgemm::PackedB& b, const int32_t* bias, int64_t c0) {
  Epilogue e;
  e.za = attr_int(n, "x_zero_point") + (xs ? 128 : 0);
  const auto& wzp = attr_ints(n, "w_zero_point");
  e.wz.assign(static_cast<size_t>(b.N), 0);
  for (int64_t j = 0; j < b.N; ++j) e.wz[static_cast<size_t>(j)] = wzp.empty() ? 0 : static_cast<int32_t>(pick(wzp, c0 + j));
  e.relu = attr_int(n, "relu") != 0;
  auto sub = [&](const auto& all, auto& dst) {
    for (int64_t j = 0; j < b.N; ++j) dst.push_back(static_cast<typename std::decay_t<decltype(dst)>::value_type>(pick(all, c0 + j)));
  };
  if (dt == DType::f32) {
    e.kind = OutKind::F32;
    sub(attr_floats(n, "scale"), e.scale);
  } else {
    e.kind = OutKind::Q8;
    sub(attr_ints(n, "multiplier"), e.rq.mul);
    sub(attr_ints(n, "shift"), e.rq.shift);
    e.rq.zp = static_cast<int32_t>(attr_int(n, "zero_point"));
    quant::int8_range(dt == DType::u8, &e.rq.lo, &e.rq.hi);
    if (e.relu) e.rq.lo = std::max(e.rq.lo, e.rq.zp);
    if (n.op == OpKind::QConv) e.rq.hi = static_cast<int32_t>(std::min<int64_t>(e.rq.hi, attr_int(n, "max_q")));
    RLX_CHECK(quant::parse_rounding(attr_str(n, "rounding"), &e.rq.mode), "[cpu] ", op_name(n.op), ": bad rounding");
  }
  finish_epilogue(e, b, bias);
  if (e.kind == OutKind::Q8) e.rq.prepare();
  return e;
}

void qlinear_with(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out, const qgemm::PackedB& b) {
  const Tensor& x = in[0];
  int64_t K = b.K, M = x.numel() / std::max<int64_t>(K, 1);
  bool xs = x.dtype() == DType::i8;
  Epilogue e = make_epilogue(n, out[0].dtype(), xs, b, in.size() > 2 ? in[2].data<int32_t>() : nullptr, 0);
  qgemm::PackedA a = qgemm::pack_a(x.data<uint8_t>(), M, K, K, xs, b.path);
  run(a, b, e, out[0].raw());
}

}  // namespace

std::shared_ptr<const void> qlinear_prepack(const Tensor& w) {
  auto p = std::make_shared<QLinearWeights>();
  p->b = pack_qlinear_w(w);
  return p;
}

void qlinear_packed(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out, const void* packed) {
  const auto* p = static_cast<const QLinearWeights*>(packed);
  if (p->b.path == qgemm_path()) return qlinear_with(n, in, out, p->b);
  qlinear(n, in, out);
}

void qlinear(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  qlinear_with(n, in, out, pack_qlinear_w(in[1]));
}

void qmatmul(const Node&, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor &x = in[0], &w = in[1];
  int64_t K = w.shape()[0], N = w.shape()[1], M = x.numel() / std::max<int64_t>(K, 1);
  bool xs = x.dtype() == DType::i8, wu = w.dtype() == DType::u8;
  qgemm::PackedB b = qgemm::pack_b(w.data<uint8_t>(), N, K, 1, N, wu, qgemm_path());
  Epilogue e;
  e.za = (in.size() > 2 ? (xs ? in[2].data<int8_t>()[0] : in[2].data<uint8_t>()[0]) : 0) + (xs ? 128 : 0);
  e.wz.assign(static_cast<size_t>(N), 0);
  if (in.size() > 3) {
    bool per = in[3].rank() == 1;
    for (int64_t j = 0; j < N; ++j) {
      int64_t i = per ? j : 0;
      e.wz[static_cast<size_t>(j)] = wu ? in[3].data<uint8_t>()[i] - 128 : in[3].data<int8_t>()[i];
    }
  }
  finish_epilogue(e, b, nullptr);
  qgemm::PackedA a = qgemm::pack_a(x.data<uint8_t>(), M, K, K, xs, b.path);
  run(a, b, e, out[0].raw());
}

// qconv, per image and group: im2col rows [OH*OW][Cg*kh*kw] of raw bytes (padding = x_zero_point,
// a centered zero), the group's weights [Og][K] as B, the GEMM + epilogue into [OH*OW][Og], then
// scattered channel-major into NCHW.
void qconv(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor &x = in[0], &w = in[1];
  const auto &xd = x.shape(), &wd = w.shape(), &od = out[0].shape();
  const int64_t N = xd[0], C = xd[1], H = xd[2], W = xd[3], O = wd[0], Cg = wd[1], KH = wd[2], KW = wd[3];
  const int64_t OH = od[2], OW = od[3], G = attr_int(n, "groups"), Og = O / G, K = Cg * KH * KW, M = OH * OW;
  auto sd = attr_ints(n, "strides"), dil = attr_ints(n, "dilations"), pads = attr_ints(n, "pads");
  if (sd.empty()) sd = {1, 1};
  if (dil.empty()) dil = {1, 1};
  if (pads.empty()) pads = {0, 0, 0, 0};
  const bool xs = x.dtype() == DType::i8;
  const uint8_t pad = static_cast<uint8_t>(attr_int(n, "x_zero_point"));  // the raw byte of x's zero
  const DType dt = out[0].dtype();
  const size_t esz = dt == DType::f32 ? 4 : 1;
  const uint8_t* xp = x.data<uint8_t>();
  const int32_t* bias = in.size() > 2 ? in[2].data<int32_t>() : nullptr;
  std::vector<qgemm::PackedB> bs;
  std::vector<Epilogue> es;
  for (int64_t g = 0; g < G; ++g) {
    bs.push_back(qgemm::pack_b(w.data<uint8_t>() + g * Og * K, Og, K, K, 1, false, qgemm_path()));
    es.push_back(make_epilogue(n, dt, xs, bs.back(), bias ? bias + g * Og : nullptr, g * Og));
  }
  std::vector<uint8_t> cols(static_cast<size_t>(M * K)), tmp(static_cast<size_t>(M * Og) * esz);
  uint8_t* y = static_cast<uint8_t*>(out[0].raw());
  for (int64_t b = 0; b < N; ++b)
    for (int64_t g = 0; g < G; ++g) {
      for (int64_t oy = 0; oy < OH; ++oy)
        for (int64_t ox = 0; ox < OW; ++ox) {
          uint8_t* row = cols.data() + (oy * OW + ox) * K;
          for (int64_t c = 0; c < Cg; ++c) {
            const uint8_t* plane = xp + ((b * C + g * Cg + c) * H) * W;
            for (int64_t ky = 0; ky < KH; ++ky) {
              int64_t iy = oy * sd[0] - pads[0] + ky * dil[0];
              for (int64_t kx = 0; kx < KW; ++kx) {
                int64_t ix = ox * sd[1] - pads[1] + kx * dil[1];
                *row++ = iy < 0 || iy >= H || ix < 0 || ix >= W ? pad : plane[iy * W + ix];
              }
            }
          }
        }
      qgemm::PackedA a = qgemm::pack_a(cols.data(), M, K, K, xs, bs[static_cast<size_t>(g)].path);
      run(a, bs[static_cast<size_t>(g)], es[static_cast<size_t>(g)], tmp.data());
      for (int64_t o = 0; o < Og; ++o) {
        uint8_t* dst = y + ((b * O + g * Og + o) * M) * esz;
        for (int64_t m = 0; m < M; ++m) std::copy_n(tmp.data() + (m * Og + o) * esz, esz, dst + m * esz);
      }
    }
}

}  // namespace rlx::cpu
