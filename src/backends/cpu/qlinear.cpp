// The cpu kernels of qlinear and qmatmul: the int8 GEMM of qgemm.h on the ISA level in use
// (RLX_CPU_ISA: generic -> scalar, avx2 -> AVX2, avx512 -> AVX-512 VNNI where the host has it, else
// AVX2), zero points folded in through row/column sums, and the epilogue (bias, requantize per
// src/quant/fixed_point.h or the f32 scale, relu; the row kernels of qepilogue.h, AVX2 where the
// host has it) applied to each finished block of rows while it is in cache.
#include <algorithm>
#include <memory>

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

// A per-tensor (1-entry) list as one entry per column.
template <class T>
void expand(std::vector<T>& v, int64_t n) {
  if (v.size() == 1) v.assign(static_cast<size_t>(n), v[0]);
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

void qlinear_with(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out, const qgemm::PackedB& b) {
  const Tensor& x = in[0];
  int64_t K = b.K, M = x.numel() / std::max<int64_t>(K, 1);
  bool xs = x.dtype() == DType::i8;
  Epilogue e;
  e.za = attr_int(n, "x_zero_point") + (xs ? 128 : 0);
  const auto& wzp = attr_ints(n, "w_zero_point");
  e.wz.assign(static_cast<size_t>(b.N), 0);
  for (int64_t j = 0; j < b.N; ++j) e.wz[static_cast<size_t>(j)] = wzp.empty() ? 0 : static_cast<int32_t>(pick(wzp, j));
  DType dt = out[0].dtype();
  e.relu = attr_int(n, "relu") != 0;
  if (dt == DType::f32) {
    e.kind = OutKind::F32;
    for (double s : attr_floats(n, "scale")) e.scale.push_back(static_cast<float>(s));
  } else {
    e.kind = OutKind::Q8;
    for (int64_t v : attr_ints(n, "multiplier")) e.rq.mul.push_back(static_cast<int32_t>(v));
    for (int64_t v : attr_ints(n, "shift")) e.rq.shift.push_back(static_cast<int32_t>(v));
    e.rq.zp = static_cast<int32_t>(attr_int(n, "zero_point"));
    quant::int8_range(dt == DType::u8, &e.rq.lo, &e.rq.hi);
    if (e.relu) e.rq.lo = std::max(e.rq.lo, e.rq.zp);
    RLX_CHECK(quant::parse_rounding(attr_str(n, "rounding"), &e.rq.mode), "[cpu] qlinear: bad rounding");
  }
  finish_epilogue(e, b, in.size() > 2 ? in[2].data<int32_t>() : nullptr);
  expand(e.scale, b.N), expand(e.rq.mul, b.N), expand(e.rq.shift, b.N);
  if (e.kind == OutKind::Q8) e.rq.prepare();
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

}  // namespace rlx::cpu
