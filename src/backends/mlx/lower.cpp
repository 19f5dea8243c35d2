#ifdef RLX_HAVE_MLX
#include "backends/mlx/lower.h"

#include <algorithm>
#include <numeric>
#include <optional>

namespace rlx::mlx_backend {

using graph_api::FlatNode;
using graph_api::FlatProgram;

mx::Dtype to_mlx(DType t) {
  switch (t) {
    case DType::f32: return mx::float32;
    case DType::f16: return mx::float16;
    case DType::bf16: return mx::bfloat16;
    case DType::f64: return mx::float64;
    case DType::i8: return mx::int8;
    case DType::u8: return mx::uint8;
    case DType::i16: return mx::int16;
    case DType::i32: return mx::int32;
    case DType::i64: return mx::int64;
    case DType::u16: return mx::uint16;
    case DType::u32: return mx::uint32;
    case DType::u64: return mx::uint64;
    case DType::boolean: return mx::bool_;
    case DType::c64: return mx::complex64;
  }
  fail("[mlx] unsupported dtype ", dtype_name(t));
}

namespace {

mx::Shape shp(const std::vector<int64_t>& d) { return mx::Shape(d.begin(), d.end()); }
std::vector<int> ints(const std::vector<int64_t>& d) { return std::vector<int>(d.begin(), d.end()); }

// A scalar of dtype `t` holding v.
mx::array scalar(double v, DType t) { return mx::astype(mx::array(v, mx::float64), to_mlx(t)); }
mx::array scalar_like(double v, const mx::array& a) {
  if (a.dtype() == mx::float64 || a.dtype() == mx::int64 || a.dtype() == mx::uint64)
    return mx::astype(mx::array(static_cast<int64_t>(v)), a.dtype());
  return mx::astype(mx::array(static_cast<float>(v)), a.dtype());
}

// dot_general as one matmul: [batch..., lhs free..., contract...] x [batch..., contract..., rhs free...].
mx::array dot_general(const FlatNode& n, const mx::array& a, const mx::array& b, const std::vector<int64_t>& ad,
                      const std::vector<int64_t>& bd) {
  auto lb = graph_api::attr_is(n, "lhs_batch"), rb = graph_api::attr_is(n, "rhs_batch");
  auto lc = graph_api::attr_is(n, "lhs_contract"), rc = graph_api::attr_is(n, "rhs_contract");
  auto free_of = [](size_t rank, const std::vector<int64_t>& x, const std::vector<int64_t>& y) {
    std::vector<int64_t> f;
    for (int64_t i = 0; i < static_cast<int64_t>(rank); ++i)
      if (std::find(x.begin(), x.end(), i) == x.end() && std::find(y.begin(), y.end(), i) == y.end()) f.push_back(i);
    return f;
  };
  auto lf = free_of(ad.size(), lb, lc), rf = free_of(bd.size(), rb, rc);
  int64_t B = 1, M = 1, N = 1, K = 1;
  mx::Shape out;
  for (auto i : lb) B *= ad[i], out.push_back(static_cast<int>(ad[i]));
  for (auto i : lf) M *= ad[i], out.push_back(static_cast<int>(ad[i]));
  for (auto i : rf) N *= bd[i], out.push_back(static_cast<int>(bd[i]));
  for (auto i : lc) K *= ad[i];
  std::vector<int> pa, pb;
  for (auto v : {&lb, &lf, &lc})
    for (auto i : *v) pa.push_back(static_cast<int>(i));
  for (auto v : {&rb, &rc, &rf})
    for (auto i : *v) pb.push_back(static_cast<int>(i));
  mx::array x = mx::reshape(mx::transpose(a, pa), {static_cast<int>(B), static_cast<int>(M), static_cast<int>(K)});
  mx::array y = mx::reshape(mx::transpose(b, pb), {static_cast<int>(B), static_cast<int>(K), static_cast<int>(N)});
  return mx::reshape(mx::matmul(x, y), out);
}

mx::array lower_node(const FlatProgram& f, const FlatNode& n, const std::vector<mx::array>& in, DType odt,
                     const std::vector<int64_t>& od) {
  using K = OpKind;
  auto in_dims = [&](int i) { return f.dims(n.in[i]); };
  const bool is_bool = !n.in.empty() && f.values[n.in[0]].dtype == DType::boolean;
  switch (n.op) {
    case K::Neg: return mx::negative(in[0]);
    case K::Abs: return mx::abs(in[0]);
    case K::Exp: return mx::exp(in[0]);
    case K::Log: return mx::log(in[0]);
    case K::Sqrt: return mx::sqrt(in[0]);
    case K::Rsqrt: return mx::rsqrt(in[0]);
    case K::Tanh: return mx::tanh(in[0]);
    case K::Erf: return mx::erf(in[0]);
    case K::Sin: return mx::sin(in[0]);
    case K::Cos: return mx::cos(in[0]);
    case K::Logistic: return mx::sigmoid(in[0]);
    case K::Floor: return mx::floor(in[0]);
    case K::Ceil: return mx::ceil(in[0]);
    case K::Round: return mx::round(in[0], 0);
    case K::Sign: return mx::sign(in[0]);
    case K::Not: return is_bool ? mx::logical_not(in[0]) : mx::bitwise_invert(in[0]);
    case K::IsNan: return mx::isnan(in[0]);
    case K::Convert: return mx::astype(in[0], to_mlx(odt));
    case K::Add: return mx::add(in[0], in[1]);
    case K::Sub: return mx::subtract(in[0], in[1]);
    case K::Mul: return mx::multiply(in[0], in[1]);
    case K::Div: return mx::divide(in[0], in[1]);
    case K::Pow: return mx::power(in[0], in[1]);
    case K::Max: return mx::maximum(in[0], in[1]);
    case K::Min: return mx::minimum(in[0], in[1]);
    case K::And: return is_bool ? mx::logical_and(in[0], in[1]) : mx::bitwise_and(in[0], in[1]);
    case K::Or: return is_bool ? mx::logical_or(in[0], in[1]) : mx::bitwise_or(in[0], in[1]);
    case K::Xor: return is_bool ? mx::not_equal(in[0], in[1]) : mx::bitwise_xor(in[0], in[1]);
    case K::Eq: return mx::equal(in[0], in[1]);
    case K::Ne: return mx::not_equal(in[0], in[1]);
    case K::Lt: return mx::less(in[0], in[1]);
    case K::Le: return mx::less_equal(in[0], in[1]);
    case K::Gt: return mx::greater(in[0], in[1]);
    case K::Ge: return mx::greater_equal(in[0], in[1]);
    case K::Select: return mx::where(in[0], in[1], in[2]);
    case K::ReduceSum:
    case K::ReduceMax:
    case K::ReduceMin:
    case K::ReduceProd: {
      auto ax = ints(graph_api::reduce_axes(n, static_cast<int64_t>(in_dims(0).size())));
      bool keep = graph_api::attr_i(n, "keepdims") != 0;
      if (n.op == K::ReduceSum) return mx::sum(in[0], ax, keep);
      if (n.op == K::ReduceMax) return mx::max(in[0], ax, keep);
      if (n.op == K::ReduceMin) return mx::min(in[0], ax, keep);
      return mx::prod(in[0], ax, keep);
    }
    case K::ArgMax:
    case K::ArgMin: {
      int ax = static_cast<int>(norm_axis(graph_api::attr_i(n, "axis"), static_cast<int64_t>(in_dims(0).size()), "argmax"));
      bool keep = graph_api::attr_i(n, "keepdims") != 0;
      return n.op == K::ArgMax ? mx::argmax(in[0], ax, keep) : mx::argmin(in[0], ax, keep);
    }
    case K::DotGeneral: return dot_general(n, in[0], in[1], in_dims(0), in_dims(1));
    case K::BroadcastInDim: {
      auto dims = graph_api::attr_is(n, "dims");
      auto xd = in_dims(0);
      // Order the operand's dims by their output position, then insert the new unit dims.
      std::vector<int> perm(dims.size());
      std::iota(perm.begin(), perm.end(), 0);
      std::sort(perm.begin(), perm.end(), [&](int a, int b) { return dims[a] < dims[b]; });
      mx::array x = dims.empty() ? in[0] : mx::transpose(in[0], perm);
      mx::Shape s(od.size(), 1);
      for (int p : perm) s[dims[p]] = static_cast<int>(xd[p]);
      return mx::broadcast_to(mx::reshape(x, s), shp(od));
    }
    case K::Reshape: return mx::reshape(in[0], shp(od));
    case K::Transpose: return mx::transpose(in[0], ints(graph_api::attr_is(n, "perm")));
    case K::Slice: {
      auto st = graph_api::attr_is(n, "start"), lim = graph_api::attr_is(n, "limit"), str = graph_api::attr_is(n, "stride");
      if (str.empty()) str.assign(st.size(), 1);
      return mx::slice(in[0], shp(st), shp(lim), shp(str));
    }
    case K::Pad: {
      auto low = graph_api::attr_is(n, "low"), high = graph_api::attr_is(n, "high");
      auto xd = in_dims(0);
      // Negative padding crops: slice first, then pad what is positive.
      mx::Shape s0, s1, lo, hi;
      std::vector<int> axes;
      for (size_t i = 0; i < xd.size(); ++i) {
        s0.push_back(static_cast<int>(low[i] < 0 ? -low[i] : 0));
        s1.push_back(static_cast<int>(xd[i] + (high[i] < 0 ? high[i] : 0)));
        lo.push_back(static_cast<int>(std::max<int64_t>(low[i], 0)));
        hi.push_back(static_cast<int>(std::max<int64_t>(high[i], 0)));
        axes.push_back(static_cast<int>(i));
      }
      mx::array x = mx::slice(in[0], s0, s1);
      return mx::pad(x, axes, lo, hi, scalar(graph_api::attr_f(n, "value"), f.values[n.in[0]].dtype));
    }
    case K::Concatenate: {
      int ax = static_cast<int>(norm_axis(graph_api::attr_i(n, "axis"), static_cast<int64_t>(od.size()), "concatenate"));
      return mx::concatenate(in, ax);
    }
    case K::Gather: {
      int64_t r = static_cast<int64_t>(in_dims(0).size());
      int ax = static_cast<int>(norm_axis(graph_api::attr_i(n, "axis"), r, "gather"));
      mx::array ix = in[1];
      // Negative indices count from the end, as the reference's take_index does.
      ix = mx::where(mx::less(ix, scalar_like(0, ix)), mx::add(ix, scalar_like(static_cast<double>(in_dims(0)[ax]), ix)), ix);
      return mx::take(in[0], ix, ax);
    }
    case K::Iota: {
      auto shape = graph_api::attr_shape(n, "shape");
      int64_t d = graph_api::attr_i(n, "dim");
      mx::Shape s(shape.size(), 1);
      s[d] = static_cast<int>(shape[d]);
      mx::array a = mx::reshape(mx::arange(0.0, static_cast<double>(shape[d]), 1.0, mx::float64), s);
      return mx::broadcast_to(mx::astype(a, to_mlx(odt)), shp(shape));
    }
    default: break;
  }
  fail("[mlx] no lowering for ", op_name(n.op), " ('", n.origin, "')");
}

}  // namespace

std::vector<mx::array> lower_graph(const FlatProgram& f, const std::vector<mx::array>& args) {
  std::vector<std::optional<mx::array>> val(f.values.size());
  size_t a = 0;
  for (auto i : f.inputs) val[i] = args.at(a++);
  for (auto& c : f.constants) val[c.first] = args.at(a++);
  for (auto& n : f.nodes) {
    std::vector<mx::array> in;
    for (auto v : n.in) {
      RLX_CHECK(val[v].has_value(), "[mlx] ", op_name(n.op), " '", n.origin, "' reads an undefined value");
      in.push_back(*val[v]);
    }
    RLX_CHECK(n.out.size() == 1, "[mlx] ", op_name(n.op), ": multi-output ops are not lowered");
    const ValueType& ot = f.values[n.out[0]];
    mx::array r = lower_node(f, n, in, ot.dtype, static_dims(ot.shape));
    if (r.dtype() != to_mlx(ot.dtype)) r = mx::astype(r, to_mlx(ot.dtype));  // e.g. argmax's uint32
    val[n.out[0]] = r;
  }
  std::vector<mx::array> out;
  for (auto o : f.outputs) out.push_back(*val[o]);
  return out;
}

}  // namespace rlx::mlx_backend
#endif
