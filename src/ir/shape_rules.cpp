// Shape and dtype rules for every op of ops.def. Each returns "" on success or a message.
#include <algorithm>
#include <climits>
#include <map>
#include <set>

#include "rlx/graph.h"

namespace rlx {

namespace {

using In = std::vector<ValueType>;
using Out = std::vector<ValueType>;

std::string dims_str(const Shape& s) { return shape_str(s); }

template <class T>
const T* get(OpKind k, const Attrs& a, const char* n) {
  const Attr* at = find_attr(k, a, n);
  return at ? std::get_if<T>(&at->v) : nullptr;
}
int64_t geti(OpKind k, const Attrs& a, const char* n) { return *get<int64_t>(k, a, n); }
std::vector<int64_t> getv(OpKind k, const Attrs& a, const char* n) { return *get<std::vector<int64_t>>(k, a, n); }

// Numpy broadcasting over static and symbolic dims. Returns false on mismatch.
bool broadcast(const Shape& a, const Shape& b, Shape* out) {
  size_t r = std::max(a.size(), b.size());
  Shape o(r);
  for (size_t i = 0; i < r; ++i) {
    const Dim* da = i < r - a.size() ? nullptr : &a[i - (r - a.size())];
    const Dim* db = i < r - b.size() ? nullptr : &b[i - (r - b.size())];
    if (!da) o[i] = *db;
    else if (!db) o[i] = *da;
    else if (*da == *db) o[i] = *da;
    else if (da->is_static() && da->v == 1) o[i] = *db;
    else if (db->is_static() && db->v == 1) o[i] = *da;
    else return false;
  }
  *out = o;
  return true;
}

bool norm_axes(std::vector<int64_t>& axes, int64_t rank, std::string* err) {
  std::set<int64_t> seen;
  for (auto& a : axes) {
    if (a < -rank || a >= rank) {
      *err = "axis " + std::to_string(a) + " out of range for rank " + std::to_string(rank);
      return false;
    }
    if (a < 0) a += rank;
    if (!seen.insert(a).second) {
      *err = "duplicate axis " + std::to_string(a);
      return false;
    }
  }
  return true;
}

#define REQUIRE(cond, msg) \
  do {                     \
    if (!(cond)) return msg; \
  } while (0)

int64_t rank_of(const ValueType& t) { return static_cast<int64_t>(t.shape.size()); }

}  // namespace

std::string infer_constant(const In&, const Attrs& a, Out& o) {
  const Tensor* t = get<Tensor>(OpKind::Constant, a, "value");
  REQUIRE(t, "missing tensor value");
  o = {ValueType{t->dtype(), to_shape(t->shape())}};
  return "";
}

std::string infer_iota(const In&, const Attrs& a, Out& o) {
  const Shape& s = *get<Shape>(OpKind::Iota, a, "shape");
  int64_t d = geti(OpKind::Iota, a, "dim");
  REQUIRE(d >= 0 && d < static_cast<int64_t>(s.size()), "iota dim out of range");
  DType t = *get<DType>(OpKind::Iota, a, "dtype");
  REQUIRE(t != DType::boolean && t != DType::c64, "iota dtype must be real");
  o = {ValueType{t, s}};
  return "";
}

std::string infer_rng(const In&, const Attrs& a, Out& o) {
  DType t = *get<DType>(OpKind::RngUniform, a, "dtype");
  REQUIRE(is_float(t), "rng_uniform dtype must be a float type");
  o = {ValueType{t, *get<Shape>(OpKind::RngUniform, a, "shape")}};
  return "";
}

std::string infer_unary(const In& in, const Attrs&, Out& o) {
  o = {in[0]};
  return "";
}

std::string infer_to_bool(const In& in, const Attrs&, Out& o) {
  o = {ValueType{DType::boolean, in[0].shape}};
  return "";
}

std::string infer_complex_part(const In& in, const Attrs&, Out& o) {
  o = {ValueType{DType::f32, in[0].shape}};
  return "";
}

std::string infer_convert(const In& in, const Attrs& a, Out& o) {
  o = {ValueType{*get<DType>(OpKind::Convert, a, "to"), in[0].shape}};
  return "";
}

std::string infer_binary(const In& in, const Attrs&, Out& o) {
  REQUIRE(in[0].dtype == in[1].dtype, "operand dtypes differ: " + std::string(dtype_name(in[0].dtype)) + " vs " +
                                          std::string(dtype_name(in[1].dtype)));
  Shape s;
  REQUIRE(broadcast(in[0].shape, in[1].shape, &s),
          "shapes " + dims_str(in[0].shape) + " and " + dims_str(in[1].shape) + " do not broadcast");
  o = {ValueType{in[0].dtype, s}};
  return "";
}

std::string infer_compare(const In& in, const Attrs& a, Out& o) {
  std::string e = infer_binary(in, a, o);
  if (!e.empty()) return e;
  o[0].dtype = DType::boolean;
  return "";
}

std::string infer_select(const In& in, const Attrs&, Out& o) {
  REQUIRE(in[0].dtype == DType::boolean, "select predicate must be bool");
  REQUIRE(in[1].dtype == in[2].dtype, "select branches differ in dtype");
  Shape s, s2;
  REQUIRE(broadcast(in[0].shape, in[1].shape, &s) && broadcast(s, in[2].shape, &s2), "select shapes do not broadcast");
  o = {ValueType{in[1].dtype, s2}};
  return "";
}

// Reductions share the axes/keepdims attributes; the op is found from the attrs via any reduce kind.
static std::string reduce_shape(const ValueType& x, std::vector<int64_t> axes, bool keep, Out& o) {
  std::string err;
  if (!norm_axes(axes, rank_of(x), &err)) return err;
  Shape s;
  for (int64_t i = 0; i < rank_of(x); ++i) {
    bool red = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!red) s.push_back(x.shape[i]);
    else if (keep) s.push_back(Dim(1));
  }
  o = {ValueType{x.dtype, s}};
  return "";
}

std::string infer_reduce(const In& in, const Attrs& a, Out& o) {
  auto it = a.find("axes");
  REQUIRE(it != a.end(), "missing axes");
  auto k = a.find("keepdims");
  bool keep = k != a.end() && std::get<int64_t>(k->second.v) != 0;
  return reduce_shape(in[0], std::get<std::vector<int64_t>>(it->second.v), keep, o);
}

std::string infer_arg_reduce(const In& in, const Attrs& a, Out& o) {
  int64_t axis = geti(OpKind::ArgMax, a, "axis");
  bool keep = geti(OpKind::ArgMax, a, "keepdims") != 0;
  std::string e = reduce_shape(in[0], {axis}, keep, o);
  if (!e.empty()) return e;
  o[0].dtype = DType::i64;
  return "";
}

std::string infer_dot_general(const In& in, const Attrs& a, Out& o) {
  REQUIRE(in[0].dtype == in[1].dtype, "operand dtypes differ");
  auto lb = getv(OpKind::DotGeneral, a, "lhs_batch"), rb = getv(OpKind::DotGeneral, a, "rhs_batch");
  auto lc = getv(OpKind::DotGeneral, a, "lhs_contract"), rc = getv(OpKind::DotGeneral, a, "rhs_contract");
  REQUIRE(lb.size() == rb.size() && lc.size() == rc.size(), "batch/contract dim lists differ in length");
  std::string err;
  auto l = lb, r = rb;
  l.insert(l.end(), lc.begin(), lc.end());
  r.insert(r.end(), rc.begin(), rc.end());
  if (!norm_axes(l, rank_of(in[0]), &err) || !norm_axes(r, rank_of(in[1]), &err)) return err;
  for (size_t i = 0; i < l.size(); ++i)
    REQUIRE(in[0].shape[l[i]] == in[1].shape[r[i]], "dot_general dims differ: lhs " + dims_str(in[0].shape) +
                                                       " rhs " + dims_str(in[1].shape));
  Shape s;
  for (auto d : lb) s.push_back(in[0].shape[d < 0 ? d + rank_of(in[0]) : d]);
  for (int64_t i = 0; i < rank_of(in[0]); ++i)
    if (std::find(l.begin(), l.end(), i) == l.end()) s.push_back(in[0].shape[i]);
  for (int64_t i = 0; i < rank_of(in[1]); ++i)
    if (std::find(r.begin(), r.end(), i) == r.end()) s.push_back(in[1].shape[i]);
  o = {ValueType{in[0].dtype, s}};
  return "";
}

// Output size of one windowed dim; "" or an error.
static std::string window_dim(const Dim& in, int64_t k, int64_t s, int64_t pb, int64_t pe, int64_t dil, Dim* out) {
  REQUIRE(in.is_static(), "windowed dim must be static, got '" + in.sym + "'");
  REQUIRE(k >= 1 && s >= 1 && dil >= 1 && pb >= 0 && pe >= 0, "bad window/stride/dilation/padding");
  int64_t eff = dil * (k - 1) + 1;
  int64_t span = in.v + pb + pe - eff;
  REQUIRE(span >= 0, "window larger than padded input");
  *out = Dim(span / s + 1);
  return "";
}

static std::string conv_shape(OpKind k, const In& in, const Attrs& a, Out& o) {
  const auto &x = in[0], &w = in[1];
  REQUIRE(rank_of(x) >= 3 && rank_of(w) == rank_of(x), "conv needs x [N,C,spatial...] and w [O,C/g,k...] of equal rank");
  REQUIRE(x.dtype == w.dtype, "operand dtypes differ");
  int64_t sp = rank_of(x) - 2;
  int64_t g = geti(k, a, "groups");
  auto st = getv(k, a, "strides"), pads = getv(k, a, "pads"), dil = getv(k, a, "dilations");
  if (st.empty()) st.assign(sp, 1);
  if (dil.empty()) dil.assign(sp, 1);
  if (pads.empty()) pads.assign(2 * sp, 0);
  REQUIRE(static_cast<int64_t>(st.size()) == sp && static_cast<int64_t>(dil.size()) == sp &&
              static_cast<int64_t>(pads.size()) == 2 * sp, "strides/dilations/pads lengths must match spatial rank");
  REQUIRE(x.shape[1].is_static() && w.shape[0].is_static() && w.shape[1].is_static(), "channel dims must be static");
  REQUIRE(g >= 1 && x.shape[1].v == w.shape[1].v * g && w.shape[0].v % g == 0, "channels " + dims_str(x.shape) + " vs weight " + dims_str(w.shape) + " with groups " + std::to_string(g));
  Shape s{x.shape[0], w.shape[0]};
  for (int64_t i = 0; i < sp; ++i) {
    Dim d;
    REQUIRE(w.shape[2 + i].is_static(), "kernel dims must be static");
    auto e = window_dim(x.shape[2 + i], w.shape[2 + i].v, st[i], pads[i], pads[sp + i], dil[i], &d);
    if (!e.empty()) return e;
    s.push_back(d);
  }
  if (in.size() > 2) REQUIRE(rank_of(in[2]) == 1 && in[2].shape[0] == w.shape[0], "bias must be [O]");
  o = {ValueType{x.dtype, s}};
  return "";
}

std::string infer_conv(const In& in, const Attrs& a, Out& o) { return conv_shape(OpKind::Conv, in, a, o); }
std::string infer_convolution(const In& in, const Attrs& a, Out& o) { return conv_shape(OpKind::Convolution, in, a, o); }

std::string infer_reduce_window(const In& in, const Attrs& a, Out& o) {
  const auto* kind = get<std::string>(OpKind::ReduceWindow, a, "kind");
  REQUIRE(*kind == "sum" || *kind == "max" || *kind == "min", "reduce_window kind must be sum|max|min");
  int64_t r = rank_of(in[0]);
  auto win = getv(OpKind::ReduceWindow, a, "window"), st = getv(OpKind::ReduceWindow, a, "strides"),
       pads = getv(OpKind::ReduceWindow, a, "pads");
  if (st.empty()) st.assign(r, 1);
  if (pads.empty()) pads.assign(2 * r, 0);
  REQUIRE(static_cast<int64_t>(win.size()) == r && static_cast<int64_t>(st.size()) == r &&
              static_cast<int64_t>(pads.size()) == 2 * r, "window/strides/pads must have one entry per dim");
  Shape s;
  for (int64_t i = 0; i < r; ++i) {
    if (win[i] == 1 && st[i] == 1 && pads[i] == 0 && pads[r + i] == 0) {
      s.push_back(in[0].shape[i]);
      continue;
    }
    Dim d;
    auto e = window_dim(in[0].shape[i], win[i], st[i], pads[i], pads[r + i], 1, &d);
    if (!e.empty()) return e;
    s.push_back(d);
  }
  o = {ValueType{in[0].dtype, s}};
  return "";
}

std::string infer_sort(const In& in, const Attrs& a, Out& o) {
  int64_t ax = geti(OpKind::Sort, a, "axis");
  REQUIRE(ax >= -rank_of(in[0]) && ax < rank_of(in[0]), "sort axis out of range");
  o = {in[0], ValueType{DType::i64, in[0].shape}};
  return "";
}

std::string infer_topk(const In& in, const Attrs& a, Out& o) {
  int64_t r = rank_of(in[0]);
  int64_t ax = geti(OpKind::TopK, a, "axis"), k = geti(OpKind::TopK, a, "k");
  REQUIRE(ax >= -r && ax < r, "topk axis out of range");
  if (ax < 0) ax += r;
  const Dim& d = in[0].shape[ax];
  REQUIRE(k >= 0 && (!d.is_static() || k <= d.v), "topk k=" + std::to_string(k) + " exceeds axis size");
  Shape s = in[0].shape;
  s[ax] = Dim(k);
  o = {ValueType{in[0].dtype, s}, ValueType{DType::i64, s}};
  return "";
}

std::string infer_broadcast_in_dim(const In& in, const Attrs& a, Out& o) {
  const Shape& s = *get<Shape>(OpKind::BroadcastInDim, a, "shape");
  auto dims = getv(OpKind::BroadcastInDim, a, "dims");
  REQUIRE(static_cast<int64_t>(dims.size()) == rank_of(in[0]), "dims must name one output dim per input dim");
  for (size_t i = 0; i < dims.size(); ++i) {
    REQUIRE(dims[i] >= 0 && dims[i] < static_cast<int64_t>(s.size()), "broadcast dim out of range");
    REQUIRE(i == 0 || dims[i] > dims[i - 1], "broadcast dims must increase");
    const Dim& d = in[0].shape[i];
    REQUIRE(d == s[dims[i]] || (d.is_static() && d.v == 1),
            "cannot broadcast " + dims_str(in[0].shape) + " to " + dims_str(s));
  }
  o = {ValueType{in[0].dtype, s}};
  return "";
}

std::string infer_reshape(const In& in, const Attrs& a, Out& o) {
  Shape t = *get<Shape>(OpKind::Reshape, a, "shape");
  // Symbols cancel by name; static parts by product.
  std::multiset<std::string> sin, st;
  int64_t pin = 1, pt = 1;
  for (auto& d : in[0].shape) {
    if (d.is_static()) REQUIRE(!__builtin_mul_overflow(pin, d.v, &pin), "reshape input element count overflows int64");
    else sin.insert(d.sym);
  }
  int infer_at = -1;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].is_static() && t[i].v == -1) {
      REQUIRE(infer_at < 0, "reshape allows one -1");
      infer_at = static_cast<int>(i);
    } else if (t[i].is_static()) {
      REQUIRE(t[i].v >= 0, "negative reshape dim");
      REQUIRE(!__builtin_mul_overflow(pt, t[i].v, &pt), "reshape target element count overflows int64");
    } else {
      st.insert(t[i].sym);
    }
  }
  for (auto& s : st) {
    auto it = sin.find(s);
    REQUIRE(it != sin.end(), "reshape target uses symbol '" + s + "' the input lacks");
    sin.erase(it);
  }
  if (infer_at >= 0) {
    if (sin.empty()) {
      REQUIRE(pt != 0 && pin % pt == 0, "cannot reshape " + dims_str(in[0].shape) + " to " + dims_str(t));
      t[infer_at] = Dim(pin / pt);
    } else {
      REQUIRE(sin.size() == 1 && pin == pt, "cannot infer -1 reshaping " + dims_str(in[0].shape));
      t[infer_at] = Dim(*sin.begin());
    }
  } else {
    REQUIRE(sin.empty() && pin == pt, "cannot reshape " + dims_str(in[0].shape) + " to " + dims_str(t));
  }
  o = {ValueType{in[0].dtype, t}};
  return "";
}

std::string infer_transpose(const In& in, const Attrs& a, Out& o) {
  auto p = getv(OpKind::Transpose, a, "perm");
  REQUIRE(static_cast<int64_t>(p.size()) == rank_of(in[0]), "perm length must equal rank");
  std::vector<bool> seen(p.size(), false);
  Shape s;
  for (auto i : p) {
    REQUIRE(i >= 0 && i < static_cast<int64_t>(p.size()) && !seen[i], "perm is not a permutation");
    seen[i] = true;
    s.push_back(in[0].shape[i]);
  }
  o = {ValueType{in[0].dtype, s}};
  return "";
}

std::string infer_slice(const In& in, const Attrs& a, Out& o) {
  auto st = getv(OpKind::Slice, a, "start"), li = getv(OpKind::Slice, a, "limit"), sd = getv(OpKind::Slice, a, "stride");
  int64_t r = rank_of(in[0]);
  if (sd.empty()) sd.assign(r, 1);
  REQUIRE(static_cast<int64_t>(st.size()) == r && static_cast<int64_t>(li.size()) == r &&
              static_cast<int64_t>(sd.size()) == r, "start/limit/stride need one entry per dim");
  Shape s;
  for (int64_t i = 0; i < r; ++i) {
    const Dim& d = in[0].shape[i];
    REQUIRE(sd[i] >= 1, "slice stride must be positive");
    if (!d.is_static()) {
      REQUIRE(st[i] == 0 && sd[i] == 1 && li[i] >= (int64_t{1} << 62), "slicing symbolic dim '" + d.sym + "' needs a static size");
      s.push_back(d);
      continue;
    }
    int64_t lim = std::min(li[i], d.v);
    REQUIRE(st[i] >= 0 && st[i] <= lim, "slice start " + std::to_string(st[i]) + " out of range for dim " + std::to_string(d.v));
    s.push_back(Dim((lim - st[i] + sd[i] - 1) / sd[i]));
  }
  o = {ValueType{in[0].dtype, s}};
  return "";
}

std::string infer_pad(const In& in, const Attrs& a, Out& o) {
  auto lo = getv(OpKind::Pad, a, "low"), hi = getv(OpKind::Pad, a, "high");
  int64_t r = rank_of(in[0]);
  REQUIRE(static_cast<int64_t>(lo.size()) == r && static_cast<int64_t>(hi.size()) == r, "low/high need one entry per dim");
  Shape s;
  for (int64_t i = 0; i < r; ++i) {
    const Dim& d = in[0].shape[i];
    if (lo[i] == 0 && hi[i] == 0) {
      s.push_back(d);
      continue;
    }
    REQUIRE(d.is_static(), "padding symbolic dim '" + d.sym + "' needs a static size");
    REQUIRE(d.v + lo[i] + hi[i] >= 0, "negative padded size");
    s.push_back(Dim(d.v + lo[i] + hi[i]));
  }
  o = {ValueType{in[0].dtype, s}};
  return "";
}

std::string infer_concatenate(const In& in, const Attrs& a, Out& o) {
  int64_t r = rank_of(in[0]);
  int64_t ax = geti(OpKind::Concatenate, a, "axis");
  REQUIRE(ax >= -r && ax < r, "concatenate axis out of range");
  if (ax < 0) ax += r;
  Shape s = in[0].shape;
  for (size_t k = 1; k < in.size(); ++k) {
    REQUIRE(in[k].dtype == in[0].dtype && rank_of(in[k]) == r, "concatenate operands differ in dtype or rank");
    for (int64_t i = 0; i < r; ++i) {
      if (i == ax) continue;
      REQUIRE(in[k].shape[i] == s[i], "concatenate operands differ off the axis");
    }
    REQUIRE(s[ax].is_static() && in[k].shape[ax].is_static(), "concatenating along a symbolic dim needs static sizes");
    s[ax] = Dim(s[ax].v + in[k].shape[ax].v);
  }
  o = {ValueType{in[0].dtype, s}};
  return "";
}

std::string infer_gather(const In& in, const Attrs& a, Out& o) {
  REQUIRE(is_int(in[1].dtype), "gather indices must be integer");
  int64_t r = rank_of(in[0]);
  int64_t ax = geti(OpKind::Gather, a, "axis");
  REQUIRE(ax >= -r && ax < r, "gather axis out of range");
  if (ax < 0) ax += r;
  Shape s(in[0].shape.begin(), in[0].shape.begin() + ax);
  s.insert(s.end(), in[1].shape.begin(), in[1].shape.end());
  s.insert(s.end(), in[0].shape.begin() + ax + 1, in[0].shape.end());
  o = {ValueType{in[0].dtype, s}};
  return "";
}

std::string infer_scatter_add(const In& in, const Attrs& a, Out& o) {
  Out g;
  auto e = infer_gather({in[0], in[1]}, a, g);
  if (!e.empty()) return e;
  REQUIRE(in[2].dtype == in[0].dtype && in[2].shape == g[0].shape, "scatter_add updates must have shape " + dims_str(g[0].shape));
  o = {in[0]};
  return "";
}

// ---- HIR ------------------------------------------------------------------------------------

std::string infer_matmul(const In& in, const Attrs&, Out& o) {
  REQUIRE(in[0].dtype == in[1].dtype, "operand dtypes differ");
  Shape a = in[0].shape, b = in[1].shape;
  REQUIRE(!a.empty() && !b.empty(), "matmul operands must have rank >= 1");
  bool va = a.size() == 1, vb = b.size() == 1;
  if (va) a.insert(a.begin(), Dim(1));
  if (vb) b.push_back(Dim(1));
  REQUIRE(a.back() == b[b.size() - 2], "matmul inner dims differ: " + dims_str(in[0].shape) + " x " + dims_str(in[1].shape));
  Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2), bs;
  REQUIRE(broadcast(ba, bb, &bs), "matmul batch dims do not broadcast");
  if (!va) bs.push_back(a[a.size() - 2]);
  if (!vb) bs.push_back(b.back());
  o = {ValueType{in[0].dtype, bs}};
  return "";
}

std::string infer_linear(const In& in, const Attrs& a, Out& o) {
  const auto *act = get<std::string>(OpKind::Linear, a, "activation");
  REQUIRE(*act == "none" || *act == "relu" || *act == "gelu" || *act == "gelu_tanh" || *act == "silu",
          "activation must be none|relu|gelu|gelu_tanh|silu");
  REQUIRE(in[1].dtype == in[0].dtype, "weight dtype differs from input");
  REQUIRE(rank_of(in[0]) >= 1 && rank_of(in[1]) == 2, "linear needs x [..., in] and w [out, in]");
  REQUIRE(in[0].shape.back() == in[1].shape[1], "linear in-features differ: x " + dims_str(in[0].shape) + " w " + dims_str(in[1].shape));
  if (in.size() > 2)
    REQUIRE(in[2].dtype == in[0].dtype && rank_of(in[2]) == 1 && in[2].shape[0] == in[1].shape[0], "bias must be [out]");
  Shape s = in[0].shape;
  s.back() = in[1].shape[0];
  o = {ValueType{in[0].dtype, s}};
  return "";
}

std::string infer_pool(const In& in, const Attrs& a, Out& o) {
  int64_t r = rank_of(in[0]);
  REQUIRE(r >= 3, "pooling needs [N,C,spatial...]");
  int64_t sp = r - 2;
  const Attr* ka = a.count("kernel") ? &a.at("kernel") : nullptr;
  REQUIRE(ka, "missing kernel");
  auto k = std::get<std::vector<int64_t>>(ka->v);
  std::vector<int64_t> st, pads;
  if (a.count("strides")) st = std::get<std::vector<int64_t>>(a.at("strides").v);
  if (a.count("pads")) pads = std::get<std::vector<int64_t>>(a.at("pads").v);
  if (st.empty()) st.assign(sp, 1);
  if (pads.empty()) pads.assign(2 * sp, 0);
  REQUIRE(static_cast<int64_t>(k.size()) == sp && static_cast<int64_t>(st.size()) == sp &&
              static_cast<int64_t>(pads.size()) == 2 * sp, "kernel/strides/pads must match spatial rank");
  Shape s{in[0].shape[0], in[0].shape[1]};
  for (int64_t i = 0; i < sp; ++i) {
    Dim d;
    auto e = window_dim(in[0].shape[2 + i], k[i], st[i], pads[i], pads[sp + i], 1, &d);
    if (!e.empty()) return e;
    s.push_back(d);
  }
  o = {ValueType{in[0].dtype, s}};
  return "";
}

std::string infer_global_pool(const In& in, const Attrs&, Out& o) {
  REQUIRE(rank_of(in[0]) >= 3, "global pooling needs [N,C,spatial...]");
  Shape s = in[0].shape;
  for (size_t i = 2; i < s.size(); ++i) s[i] = Dim(1);
  o = {ValueType{in[0].dtype, s}};
  return "";
}

std::string infer_norm(const In& in, const Attrs& a, Out& o) {
  int64_t r = rank_of(in[0]);
  REQUIRE(r >= 1, "norm needs rank >= 1");
  int64_t ax = -1;
  if (a.count("axis")) ax = std::get<int64_t>(a.at("axis").v);
  REQUIRE(ax >= -r && ax < r, "norm axis out of range");
  if (ax < 0) ax += r;
  Shape ns(in[0].shape.begin() + ax, in[0].shape.end());
  for (size_t i = 1; i < in.size(); ++i) {
    REQUIRE(in[i].dtype == in[0].dtype, "scale/shift dtype differs from input");
    REQUIRE(in[i].shape == ns, "scale/shift must have shape " + dims_str(ns) + ", got " + dims_str(in[i].shape));
  }
  o = {in[0]};
  return "";
}

std::string infer_embedding(const In& in, const Attrs&, Out& o) {
  REQUIRE(rank_of(in[0]) == 2, "embedding table must be [vocab, dim]");
  REQUIRE(is_int(in[1].dtype), "embedding ids must be integer");
  Shape s = in[1].shape;
  s.push_back(in[0].shape[1]);
  o = {ValueType{in[0].dtype, s}};
  return "";
}

std::string infer_attention(const In& in, const Attrs& a, Out& o) {
  const auto* kind = get<std::string>(OpKind::Attention, a, "mask");
  const auto &q = in[0], &k = in[1], &v = in[2];
  REQUIRE(rank_of(q) == 4 && rank_of(k) == 4 && rank_of(v) == 4, "attention needs q [B,H,S,D], k/v [B,Hkv,T,D]");
  REQUIRE(k.dtype == q.dtype && v.dtype == q.dtype, "q/k/v dtypes differ");
  REQUIRE(q.shape[0] == k.shape[0] && k.shape[0] == v.shape[0], "batch dims differ");
  REQUIRE(q.shape[3] == k.shape[3], "q and k head dims differ");
  REQUIRE(k.shape[1] == v.shape[1] && k.shape[2] == v.shape[2], "k and v shapes differ");
  REQUIRE(q.shape[1].is_static() && k.shape[1].is_static() && k.shape[1].v > 0 && q.shape[1].v % k.shape[1].v == 0,
          "query heads must be a multiple of kv heads");
  bool wants_mask = *kind == "padding" || *kind == "causal_padding" || *kind == "bias";
  REQUIRE(wants_mask || *kind == "none" || *kind == "causal", "mask must be none|causal|padding|causal_padding|bias");
  REQUIRE(wants_mask == (in.size() == 4), "mask kind '" + *kind + (wants_mask ? "' needs" : "' takes no") + " mask input");
  if (*kind == "padding" || *kind == "causal_padding") {
    REQUIRE(rank_of(in[3]) == 2 && in[3].shape[0] == q.shape[0] && in[3].shape[1] == k.shape[2], "padding mask must be [B,T]");
  } else if (*kind == "bias") {
    Shape s;
    REQUIRE(in[3].dtype == q.dtype && rank_of(in[3]) <= 4 &&
                broadcast(in[3].shape, Shape{q.shape[0], q.shape[1], q.shape[2], k.shape[2]}, &s) &&
                s == Shape({q.shape[0], q.shape[1], q.shape[2], k.shape[2]}),
            "bias must broadcast to [B,H,S,T]");
  }
  o = {ValueType{q.dtype, Shape{q.shape[0], q.shape[1], q.shape[2], v.shape[3]}}};
  return "";
}

std::string infer_rope(const In& in, const Attrs&, Out& o) {
  REQUIRE(rank_of(in[0]) == 4, "rope needs x [B,H,S,D]");
  REQUIRE(in[0].shape[3].is_static() && in[0].shape[3].v % 2 == 0, "rope head dim must be static and even");
  REQUIRE(is_int(in[1].dtype) && rank_of(in[1]) == 1 && in[1].shape[0] == in[0].shape[2], "positions must be integer [S]");
  o = {in[0]};
  return "";
}

std::string infer_expand(const In& in, const Attrs& a, Out& o) {
  Shape s;
  REQUIRE(broadcast(in[0].shape, *get<Shape>(OpKind::Expand, a, "shape"), &s), "expand shapes do not broadcast");
  o = {ValueType{in[0].dtype, s}};
  return "";
}

std::string infer_squeeze(const In& in, const Attrs& a, Out& o) {
  auto axes = getv(OpKind::Squeeze, a, "axes");
  std::string err;
  if (!norm_axes(axes, rank_of(in[0]), &err)) return err;
  Shape s;
  for (int64_t i = 0; i < rank_of(in[0]); ++i) {
    bool sq = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (sq) REQUIRE(in[0].shape[i].is_static() && in[0].shape[i].v == 1, "squeezed dim must be 1");
    else s.push_back(in[0].shape[i]);
  }
  o = {ValueType{in[0].dtype, s}};
  return "";
}

std::string infer_unsqueeze(const In& in, const Attrs& a, Out& o) {
  auto axes = getv(OpKind::Unsqueeze, a, "axes");
  int64_t r = rank_of(in[0]) + static_cast<int64_t>(axes.size());
  std::string err;
  if (!norm_axes(axes, r, &err)) return err;
  Shape s;
  size_t k = 0;
  for (int64_t i = 0; i < r; ++i) {
    if (std::find(axes.begin(), axes.end(), i) != axes.end()) s.push_back(Dim(1));
    else s.push_back(in[0].shape[k++]);
  }
  o = {ValueType{in[0].dtype, s}};
  return "";
}

}  // namespace rlx
