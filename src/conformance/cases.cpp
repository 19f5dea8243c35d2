// One conformance case per (op, dtype): shapes and attributes chosen to exercise broadcasting,
// padding, grouping and masking, with seeded inputs in each op's domain.
#include <random>

#include "quant/blocks.h"
#include "rlx/builder.h"
#include "rlx/conformance.h"
#include "splat/synthetic.h"

namespace rlx {

bool build_sparse_case(OpKind op, DType dt, ConformanceCase* out);  // cases_sparse.cpp

namespace {

using O = OpKind;

Tensor random_tensor(DType dt, std::vector<int64_t> shape, std::mt19937& rng, double lo = -2, double hi = 2) {
  Tensor t(dt, std::move(shape));
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (dtype_class(dt)) {
      case DClass::kFloat: t.set(i, u(rng)); break;
      case DClass::kComplex: t.setc(i, {u(rng), u(rng)}); break;
      case DClass::kSigned: t.set(i, std::floor(u(rng) * 3)); break;
      case DClass::kUnsigned: t.set(i, std::floor(std::abs(u(rng)) * 4)); break;
      case DClass::kBool: t.set(i, u(rng) > 0 ? 1 : 0); break;
    }
  }
  return t;
}

Tensor indices(std::vector<int64_t> shape, int64_t n, std::mt19937& rng) {
  Tensor t(DType::i64, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.set_int(i, static_cast<int64_t>(rng() % n));
  return t;
}

// A batch of well-conditioned matrices [b, n, n]: uniform [-1, 1) plus n on the diagonal; with
// `spd`, M Mᵀ + n I instead (symmetric positive definite), for the linear-algebra ops.
Tensor conditioned(DType dt, int64_t b, int64_t n, std::mt19937& rng, bool spd) {
  Tensor t(dt, {b, n, n});
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> m(n * n);
  for (int64_t k = 0; k < b; ++k) {
    for (auto& x : m) x = u(rng);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double v = m[i * n + j];
        if (spd) {
          v = 0;
          for (int64_t l = 0; l < n; ++l) v += m[i * n + l] * m[j * n + l];
        }
        t.set((k * n + i) * n + j, v + (i == j ? static_cast<double>(n) : 0.0));
      }
  }
  return t;
}

bool positive_domain(O op) { return op == O::Log || op == O::Sqrt || op == O::Rsqrt || op == O::Pow; }

// GGML blocks packed from seeded values, u8 [rows, row_bytes] (Q8_0 or Q4_0).
Tensor packed_blocks(const char* type, int64_t rows, int64_t k, std::mt19937& rng) {
  bool q8 = std::string(type) == "Q8_0";
  int64_t rb = static_cast<int64_t>(quant::row_bytes(q8 ? quant::GgmlType::Q8_0 : quant::GgmlType::Q4_0, k));
  Tensor t(DType::u8, {rows, rb});
  std::vector<float> v(static_cast<size_t>(k));
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& e : v) e = u(rng);
    if (q8) quant::quantize_row_q8_0(v.data(), reinterpret_cast<quant::BlockQ8_0*>(t.data<uint8_t>() + r * rb), k);
    else quant::quantize_row_q4_0(v.data(), reinterpret_cast<quant::BlockQ4_0*>(t.data<uint8_t>() + r * rb), k);
  }
  return t;
}

// Random i8/u8 bytes, or i32 in [-100000, 100000] (accumulator-sized), for the affine int8 ops.
Tensor int_bytes(DType dt, std::vector<int64_t> shape, std::mt19937& rng) {
  Tensor t(dt, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dt == DType::i8) t.data<int8_t>()[i] = static_cast<int8_t>(rng());
    else if (dt == DType::u8) t.data<uint8_t>()[i] = static_cast<uint8_t>(rng());
    else t.data<int32_t>()[i] = static_cast<int32_t>(rng() % 200001) - 100000;
  }
  return t;
}

struct CaseBuilder {
  ConformanceCase c;
  Builder b{c.graph};
  std::mt19937 rng;
  CaseBuilder(O op, DType dt) : rng(static_cast<unsigned>(static_cast<int>(op) * 131 + static_cast<int>(dt))) {
    c.op = op;
    c.dtype = dt;
  }
  ValueId in(DType dt, std::vector<int64_t> shape, double lo = -2, double hi = 2) {
    std::string name = "x" + std::to_string(c.inputs.size());
    c.inputs.push_back(random_tensor(dt, shape, rng, lo, hi));
    return b.input(name, dt, to_shape(shape));
  }
  ValueId in_tensor(Tensor t) {
    std::string name = "x" + std::to_string(c.inputs.size());
    ValueId v = b.input(name, t.dtype(), to_shape(t.shape()));
    c.inputs.push_back(std::move(t));
    return v;
  }
  void finish(std::vector<ValueId> outs) {
    for (auto o : outs) b.output(o);
  }
};

// Splat ops on 24 Gaussians in front of a 24x20 camera; the 2-D inputs of rasterize come from a
// projection node in the same graph, so they are consistent (radii match the conics).
std::vector<ValueId> splat_case(CaseBuilder& cb, O op, DType dt) {
  auto& b = cb.b;
  const int64_t n = 24, w = 24, h = 20;
  auto cast = [&](const Tensor& t) {
    Tensor o(dt, t.shape());
    for (int64_t i = 0; i < t.numel(); ++i) o.set(i, t.get(i));
    return o;
  };
  splat::Scene s = splat::random_scene(n, 1, 5, 0.6, 0.12, DType::f64);
  const double eye[3] = {0.3, -0.4, -3.0}, target[3] = {0, 0, 0};
  splat::Camera cam = splat::look_at(eye, target, w, h, 55);
  Tensor op_t(DType::f64, {n});
  for (int64_t i = 0; i < n; ++i) op_t.set(i, 0.3 + 0.6 * (static_cast<double>(i % 5) / 4.0));
  if (op == O::SplatSh) return b.op(op, {cb.in_tensor(cast(s.means)), cb.in_tensor(cast(s.sh))}, {{"degree", int64_t{1}}});
  ValueId means = cb.in_tensor(cast(s.means)), ls = cb.in_tensor(cast(s.log_scales)), q = cb.in_tensor(cast(s.quats));
  ValueId opac = cb.in_tensor(cast(op_t)), view = cb.in_tensor(cam.viewmat(dt)), K = cb.in_tensor(cam.intrinsics(dt));
  Attrs pa{{"width", w}, {"height", h}};
  auto pr = b.op(O::SplatProject, {means, ls, q, opac, view, K}, pa);
  if (op == O::SplatProject) return pr;
  if (op == O::SplatProjectGrad)
    return b.op(op, {means, ls, q, opac, view, K, pr[3], cb.in(dt, {n, 2}), cb.in(dt, {n, 3}), cb.in(dt, {n})}, pa);
  ValueId colors = cb.in(dt, {n, 3}, 0, 1), bg = cb.in(dt, {3}, 0, 1);
  std::vector<ValueId> ri = {pr[0], pr[1], colors, opac, pr[2], pr[3], bg};
  if (op == O::SplatRasterize) return b.op(op, ri, pa);
  ri.push_back(cb.in(dt, {h, w, 3}));
  ri.push_back(cb.in(dt, {h, w}));
  return b.op(op, ri, pa);
}

bool build(O op, DType dt, ConformanceCase* out) {
  CaseBuilder cb(op, dt);
  auto& b = cb.b;
  double lo = positive_domain(op) ? 0.25 : -2, hi = 2;
  std::vector<ValueId> outs;
  if (is_elementwise(op)) {
    if (op == O::Select) {
      if (dt != DType::boolean) return false;
      auto p = cb.in(DType::boolean, {3, 5});
      outs = b.op(op, {p, cb.in(DType::f32, {3, 5}), cb.in(DType::f32, {5})});
    } else if (op == O::Convert) {
      outs = b.op(op, {cb.in(dt, {3, 5})}, {{"to", dt == DType::f32 ? DType::f16 : DType::f32}});
    } else if (op_info(op).min_inputs == 2) {
      outs = b.op(op, {cb.in(dt, {3, 5}, lo, hi), cb.in(dt, {5}, lo, hi)});
    } else {
      outs = b.op(op, {cb.in(dt, {3, 5}, lo, hi)});
    }
    cb.finish(outs);
    *out = std::move(cb.c);
    return true;
  }
  const bool is_f = is_float(dt);
  switch (op) {
    case O::Constant: outs = b.op(op, {}, {{"value", random_tensor(dt, {2, 3}, cb.rng)}}); break;
    case O::Iota:
      if (dt == DType::boolean || dt == DType::c64) return false;
      outs = b.op(op, {}, {{"shape", Shape{3, 4}}, {"dim", int64_t{1}}, {"dtype", dt}});
      break;
    case O::RngUniform:
      if (!is_f) return false;
      outs = b.op(op, {}, {{"shape", Shape{16}}, {"dtype", dt}, {"seed", int64_t{7}}, {"low", -1.0}, {"high", 3.0}});
      break;
    case O::ReduceSum: case O::ReduceMax: case O::ReduceMin: case O::ReduceProd: case O::ReduceMean:
      outs = b.op(op, {cb.in(dt, {3, 4, 5}, -1.5, 1.5)}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}});
      break;
    case O::ArgMax: case O::ArgMin: outs = b.op(op, {cb.in(dt, {3, 5})}, {{"axis", int64_t{1}}}); break;
    case O::DotGeneral:
      outs = b.op(op, {cb.in(dt, {2, 3, 4}), cb.in(dt, {2, 4, 5})},
                  {{"lhs_batch", std::vector<int64_t>{0}}, {"rhs_batch", std::vector<int64_t>{0}},
                   {"lhs_contract", std::vector<int64_t>{2}}, {"rhs_contract", std::vector<int64_t>{1}}});
      break;
    case O::Conv:
      outs = b.op(op, {cb.in(dt, {1, 4, 6, 6}), cb.in(dt, {6, 2, 3, 3})},
                  {{"strides", std::vector<int64_t>{1, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                   {"groups", int64_t{2}}});
      break;
    case O::ReduceWindow:
      outs = b.op(op, {cb.in(dt, {1, 2, 5, 5})},
                  {{"kind", "max"}, {"window", std::vector<int64_t>{1, 1, 2, 2}},
                   {"strides", std::vector<int64_t>{1, 1, 2, 2}}, {"pads", std::vector<int64_t>{0, 0, 1, 1, 0, 0, 0, 0}}});
      break;
    case O::Cumsum: outs = b.op(op, {cb.in(dt, {3, 5})}, {{"axis", int64_t{1}}}); break;
    case O::Sort: outs = b.op(op, {cb.in(dt, {3, 5})}, {{"axis", int64_t{-1}}}); break;
    case O::TopK: outs = b.op(op, {cb.in(dt, {3, 6})}, {{"k", int64_t{3}}}); break;
    case O::BroadcastInDim:
      outs = b.op(op, {cb.in(dt, {3, 1})}, {{"shape", Shape{2, 3, 4}}, {"dims", std::vector<int64_t>{1, 2}}});
      break;
    case O::Reshape: outs = b.op(op, {cb.in(dt, {3, 4})}, {{"shape", Shape{2, 6}}}); break;
    case O::Transpose: outs = b.op(op, {cb.in(dt, {2, 3, 4})}, {{"perm", std::vector<int64_t>{2, 0, 1}}}); break;
    case O::Slice:
      outs = b.op(op, {cb.in(dt, {4, 6})}, {{"start", std::vector<int64_t>{1, 0}}, {"limit", std::vector<int64_t>{3, 6}},
                                             {"stride", std::vector<int64_t>{1, 2}}});
      break;
    case O::Pad:
      outs = b.op(op, {cb.in(dt, {3, 4})}, {{"low", std::vector<int64_t>{1, 0}}, {"high", std::vector<int64_t>{0, 2}}});
      break;
    case O::Concatenate: outs = b.op(op, {cb.in(dt, {2, 3}), cb.in(dt, {2, 2})}, {{"axis", int64_t{1}}}); break;
    case O::Gather: {
      auto x = cb.in(dt, {5, 3});
      outs = b.op(op, {x, cb.in_tensor(indices({4}, 5, cb.rng))});
      break;
    }
    case O::ScatterAdd: {
      auto x = cb.in(dt, {5, 3});
      auto idx = cb.in_tensor(indices({4}, 5, cb.rng));
      outs = b.op(op, {x, idx, cb.in(dt, {4, 3})});
      break;
    }
    case O::MatMul: outs = b.op(op, {cb.in(dt, {2, 3, 4}), cb.in(dt, {4, 5})}); break;
    case O::Linear:
      outs = b.op(op, {cb.in(dt, {2, 3, 8}), cb.in(dt, {6, 8}), cb.in(dt, {6})}, {{"activation", "gelu"}});
      break;
    case O::Convolution:
      outs = b.op(op, {cb.in(dt, {1, 3, 7, 7}), cb.in(dt, {4, 3, 3, 3}), cb.in(dt, {4})},
                  {{"strides", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
      break;
    case O::MaxPool:
      outs = b.op(op, {cb.in(dt, {1, 2, 6, 6})}, {{"kernel", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
      break;
    case O::AvgPool:
      outs = b.op(op, {cb.in(dt, {1, 2, 6, 6})}, {{"kernel", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
                                                  {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
      break;
    case O::GlobalAvgPool: outs = b.op(op, {cb.in(dt, {2, 3, 4, 4})}); break;
    case O::LayerNorm: outs = b.op(op, {cb.in(dt, {2, 3, 8}), cb.in(dt, {8}), cb.in(dt, {8})}); break;
    case O::RmsNorm: outs = b.op(op, {cb.in(dt, {2, 3, 8}), cb.in(dt, {8})}); break;
    case O::Softmax: case O::LogSoftmax: outs = b.op(op, {cb.in(dt, {3, 7})}); break;
    case O::Gelu: case O::Silu: case O::Relu: outs = b.op(op, {cb.in(dt, {3, 5})}); break;
    case O::Embedding: {
      auto t = cb.in(dt, {10, 4});
      outs = b.op(op, {t, cb.in_tensor(indices({2, 3}, 10, cb.rng))});
      break;
    }
    case O::Attention:
      outs = b.op(op, {cb.in(dt, {2, 4, 5, 8}), cb.in(dt, {2, 2, 7, 8}), cb.in(dt, {2, 2, 7, 8})}, {{"mask", "causal"}});
      break;
    case O::Rope: {
      auto x = cb.in(dt, {1, 2, 4, 8});
      outs = b.op(op, {x, cb.in_tensor(indices({4}, 64, cb.rng))});
      break;
    }
    case O::Expand: outs = b.op(op, {cb.in(dt, {3, 1})}, {{"shape", Shape{2, 3, 4}}}); break;
    case O::Squeeze: outs = b.op(op, {cb.in(dt, {3, 1, 4})}, {{"axes", std::vector<int64_t>{1}}}); break;
    case O::Unsqueeze: outs = b.op(op, {cb.in(dt, {3, 4})}, {{"axes", std::vector<int64_t>{0, 2}}}); break;
    // quantized weights
    case O::Dequantize:
      if (dt != DType::u8) return false;
      outs = b.op(op, {cb.in_tensor(packed_blocks("Q4_0", 3, 64, cb.rng))}, {{"type", "Q4_0"}, {"k", int64_t{64}}});
      break;
    case O::DequantMatMul: {
      auto x = cb.in(dt, {2, 3, 64});
      outs = b.op(op, {x, cb.in_tensor(packed_blocks("Q8_0", 5, 64, cb.rng))}, {{"type", "Q8_0"}, {"k", int64_t{64}}});
      break;
    }
    // affine int8 (docs/quantization.md)
    case O::QuantizeAffine: {
      auto x = cb.in(dt, {3, 5});
      Tensor s(DType::f32, {5}), z(DType::u8, {5});
      for (int64_t i = 0; i < 5; ++i) s.set(i, 0.01 * (i + 1)), z.set(i, 120 + 3 * i);
      outs = b.op(op, {x, cb.in_tensor(s), cb.in_tensor(z)}, {{"axis", int64_t{1}}});
      break;
    }
    case O::DequantizeAffine: {
      auto q = cb.in_tensor(int_bytes(dt, {3, 5}, cb.rng));
      Tensor z(dt, {});
      z.set(0, 3);
      outs = b.op(op, {q, cb.in_tensor(Tensor::from(DType::f32, {}, std::vector<float>{0.05f})), cb.in_tensor(z)});
      break;
    }
    case O::QMatMul: {
      Tensor az(dt, {}), bz(DType::i8, {4});
      az.set(0, 5);
      for (int64_t i = 0; i < 4; ++i) bz.set(i, static_cast<double>(i) - 2);
      outs = b.op(op, {cb.in_tensor(int_bytes(dt, {2, 3, 7}, cb.rng)), cb.in_tensor(int_bytes(DType::i8, {7, 4}, cb.rng)),
                       cb.in_tensor(az), cb.in_tensor(bz)});
      break;
    }
    case O::Requantize:
      outs = b.op(op, {cb.in_tensor(int_bytes(dt, {4, 3}, cb.rng))},
                  {{"multiplier", std::vector<int64_t>{1 << 30, 1395864371, 2147483647}},
                   {"shift", std::vector<int64_t>{9, 4, -2}}, {"axis", int64_t{1}}, {"zero_point", int64_t{3}}});
      break;
    case O::QLinear:
      outs = b.op(op, {cb.in_tensor(int_bytes(dt, {3, 16}, cb.rng)), cb.in_tensor(int_bytes(DType::i8, {5, 16}, cb.rng)),
                       cb.in_tensor(int_bytes(DType::i32, {5}, cb.rng))},
                  {{"x_zero_point", int64_t{3}}, {"multiplier", std::vector<int64_t>{1125899907}},
                   {"shift", std::vector<int64_t>{9}}, {"zero_point", int64_t{2}}});
      break;
    case O::QConv:  // depthwise-by-two groups, strided, padded, per-channel requantize with ReLU
      outs = b.op(op, {cb.in_tensor(int_bytes(dt, {1, 4, 6, 6}, cb.rng)), cb.in_tensor(int_bytes(DType::i8, {4, 2, 3, 3}, cb.rng)),
                       cb.in_tensor(int_bytes(DType::i32, {4}, cb.rng))},
                  {{"strides", std::vector<int64_t>{1, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                   {"groups", int64_t{2}}, {"x_zero_point", int64_t{3}},
                   {"multiplier", std::vector<int64_t>{1125899907, 1395864371, 1 << 30, 2147483647}},
                   {"shift", std::vector<int64_t>{9, 10, 8, 11}}, {"zero_point", int64_t{2}}, {"relu", int64_t{1}}});
      break;
    // dense linear algebra: well-conditioned inputs, so every device's kernel agrees to its dtype
    case O::Cholesky:
    case O::Eigh: outs = b.op(op, {cb.in_tensor(conditioned(dt, 2, 5, cb.rng, true))}); break;
    case O::TriangularSolve:
      outs = b.op(op, {cb.in_tensor(conditioned(dt, 2, 4, cb.rng, false)), cb.in(dt, {2, 4, 3})}, {{"lower", int64_t{0}}});
      break;
    case O::Lu: outs = b.op(op, {cb.in(dt, {2, 5, 4})}); break;
    case O::Qr:
    case O::Svd: outs = b.op(op, {cb.in(dt, {2, 5, 3})}); break;
    case O::Solve: outs = b.op(op, {cb.in_tensor(conditioned(dt, 2, 4, cb.rng, false)), cb.in(dt, {2, 4, 2})}); break;
    case O::Inv:
    case O::Det:
    case O::Slogdet: outs = b.op(op, {cb.in_tensor(conditioned(dt, 2, 4, cb.rng, false))}); break;
    case O::Lstsq: outs = b.op(op, {cb.in(dt, {2, 6, 3}), cb.in(dt, {2, 6, 2})}); break;
    case O::MatrixExp: outs = b.op(op, {cb.in(dt, {2, 4, 4}, -0.5, 0.5)}); break;
    // identity in value; lowers to its input before LIR
    case O::StopGradient: outs = b.op(op, {cb.in(dt, {3, 5})}); break;
    // gaussian splatting: a seeded scene seen by one camera (splat_cases below)
    case O::SplatProject:
    case O::SplatProjectGrad:
    case O::SplatSh:
    case O::SplatRasterize:
    case O::SplatRasterizeGrad:
      if (dt != DType::f32 && dt != DType::f64) return false;
      outs = splat_case(cb, op, dt);
      break;
    // collectives over a world of one rank (the conformance process; several ranks: tests/unit/test_dist.cpp)
    case O::AllReduce: case O::AllGather: case O::ReduceScatter: case O::AllToAll: case O::CollectiveBroadcast: {
      if (dt != DType::f32 && dt != DType::f64 && dt != DType::i32) return false;
      Attrs a{{"groups", std::vector<int64_t>{0}}};
      if (op == O::AllGather || op == O::ReduceScatter) a["axis"] = int64_t{1};
      if (op == O::AllToAll) a["concat_axis"] = int64_t{1};
      outs = b.op(op, {cb.in(dt, {3, 4})}, a);
      break;
    }
    case O::Send: case O::Recv: {  // a message to itself
      if (dt != DType::f32 && dt != DType::i32) return false;
      auto sent = b.op1(O::Send, {cb.in(dt, {2, 3})}, {{"peer", int64_t{0}}, {"tag", int64_t{5}}});
      outs = b.op(O::Recv, {sent}, {{"peer", int64_t{0}}, {"tag", int64_t{5}}, {"shape", Shape{2, 3}}, {"dtype", dt}});
      outs.push_back(sent);
      break;
    }
    default: return build_sparse_case(op, dt, out);  // the sparse_* ops (cases_sparse.cpp)
  }
  cb.finish(outs);
  *out = std::move(cb.c);
  return true;
}

}  // namespace

std::vector<ConformanceCase> conformance_cases() {
  std::vector<ConformanceCase> r;
  for (int i = 0; i < num_ops(); ++i) {
    auto op = static_cast<O>(i);
    for (int d = 0; d < kNumDTypes; ++d) {
      auto dt = static_cast<DType>(d);
      if (op_info(op).min_inputs > 0 && !op_info(op).dtypes.has(dt)) continue;
      ConformanceCase c;
      if (build(op, dt, &c)) r.push_back(std::move(c));
    }
  }
  return r;
}

}  // namespace rlx
