// Shape and dtype rules of the dense linear-algebra ops (the `linear algebra` block of ops.def).
// Every op works on the last two dims as matrices; leading dims are a batch that operands share.
#include "rlx/graph.h"

namespace rlx {

namespace {

using In = std::vector<ValueType>;
using Out = std::vector<ValueType>;

#define REQUIRE(c, msg)            \
  do {                             \
    if (!(c)) return (msg);        \
  } while (0)

int64_t attr_or(OpKind k, const Attrs& a, const char* n) {
  const Attr* at = find_attr(k, a, n);
  const int64_t* v = at ? std::get_if<int64_t>(&at->v) : nullptr;
  return v ? *v : 0;
}

std::string dstr(const Dim& d) { return d.is_static() ? std::to_string(d.v) : d.sym; }

// The matrix operand: f32/f64 (and c64 where `complex_ok`) and rank >= 2; `square` also requires n x n.
std::string matrix(const char* what, const ValueType& t, bool square, bool complex_ok = true) {
  REQUIRE(t.dtype == DType::f32 || t.dtype == DType::f64 || (complex_ok && t.dtype == DType::c64),
          std::string(what) + (complex_ok ? " must be f32, f64 or c64, got " : " must be f32 or f64, got ") +
              std::string(dtype_name(t.dtype)));
  REQUIRE(t.shape.size() >= 2, std::string(what) + " must have rank >= 2 (a [..., m, n] batch of matrices), got " +
                                   shape_str(t.shape));
  if (square) {
    const Dim &m = t.shape[t.shape.size() - 2], &n = t.shape.back();
    REQUIRE(m == n, std::string(what) + " must be square, got " + dstr(m) + "x" + dstr(n));
  }
  return "";
}

Shape batch_of(const Shape& s) { return Shape(s.begin(), s.end() - 2); }
Shape with(Shape b, std::initializer_list<Dim> tail) {
  for (const auto& d : tail) b.push_back(d);
  return b;
}
ValueType i32(Shape s) { return ValueType{DType::i32, std::move(s)}; }
// The dtype of real-valued results (eigenvalues, singular values, log|det|): f32 for c64.
DType real_of(DType t) { return t == DType::c64 ? DType::f32 : t; }

// min(a, b) of two dims; symbolic only when equal.
bool dim_min(const Dim& a, const Dim& b, Dim* out) {
  if (a == b) return *out = a, true;
  if (a.is_static() && b.is_static()) return *out = Dim(std::min(a.v, b.v)), true;
  return false;
}

// A second operand B [..., rows, k] sharing A's batch and dtype.
std::string rhs(const char* op, const ValueType& a, const ValueType& b) {
  REQUIRE(b.dtype == a.dtype, std::string(op) + ": A and B dtypes differ");
  REQUIRE(b.shape.size() == a.shape.size(), std::string(op) + ": B must have A's rank (" + shape_str(a.shape) +
                                                " vs " + shape_str(b.shape) + "); add a trailing axis to a vector");
  REQUIRE(batch_of(a.shape) == batch_of(b.shape), std::string(op) + ": batch dims differ: " + shape_str(a.shape) +
                                                      " vs " + shape_str(b.shape));
  return "";
}

}  // namespace

std::string infer_cholesky(const In& in, const Attrs&, Out& o) {
  if (auto e = matrix("cholesky input", in[0], true); !e.empty()) return e;
  o = {in[0], i32(batch_of(in[0].shape))};
  return "";
}

std::string infer_triangular_solve(const In& in, const Attrs& a, Out& o) {
  if (auto e = matrix("triangular_solve A", in[0], true); !e.empty()) return e;
  if (auto e = rhs("triangular_solve", in[0], in[1]); !e.empty()) return e;
  bool left = attr_or(OpKind::TriangularSolve, a, "left_side") != 0;
  const Shape& bs = in[1].shape;
  const Dim& n = in[0].shape.back();
  const Dim& along = left ? bs[bs.size() - 2] : bs.back();
  REQUIRE(along == n, "triangular_solve: B " + shape_str(bs) + " does not match A " + shape_str(in[0].shape) +
                          (left ? " (left side: B is [..., n, k])" : " (right side: B is [..., k, n])"));
  o = {in[1]};
  return "";
}

std::string infer_lu(const In& in, const Attrs&, Out& o) {
  if (auto e = matrix("lu input", in[0], false); !e.empty()) return e;
  const Shape& s = in[0].shape;
  Dim k;
  REQUIRE(dim_min(s[s.size() - 2], s.back(), &k), "lu: min(m, n) of symbolic dims is unknown");
  Shape b = batch_of(s);
  o = {in[0], i32(with(b, {k})), i32(with(b, {s[s.size() - 2]})), i32(b)};
  return "";
}

std::string infer_qr(const In& in, const Attrs& a, Out& o) {
  if (auto e = matrix("qr input", in[0], false); !e.empty()) return e;
  const Shape& s = in[0].shape;
  const Dim &m = s[s.size() - 2], &n = s.back();
  Dim k;
  if (attr_or(OpKind::Qr, a, "full_matrices")) k = m;
  else REQUIRE(dim_min(m, n, &k), "qr: min(m, n) of symbolic dims is unknown");
  Shape b = batch_of(s);
  o = {ValueType{in[0].dtype, with(b, {m, k})}, ValueType{in[0].dtype, with(b, {k, n})}};
  return "";
}

std::string infer_eigh(const In& in, const Attrs&, Out& o) {
  if (auto e = matrix("eigh input", in[0], true); !e.empty()) return e;
  o = {ValueType{real_of(in[0].dtype), with(batch_of(in[0].shape), {in[0].shape.back()})}, in[0]};
  return "";
}

std::string infer_svd(const In& in, const Attrs&, Out& o) {
  if (auto e = matrix("svd input", in[0], false); !e.empty()) return e;
  const Shape& s = in[0].shape;
  const Dim &m = s[s.size() - 2], &n = s.back();
  Dim k;
  REQUIRE(dim_min(m, n, &k), "svd: min(m, n) of symbolic dims is unknown");
  Shape b = batch_of(s);
  DType t = in[0].dtype;
  o = {ValueType{t, with(b, {m, k})}, ValueType{real_of(t), with(b, {k})}, ValueType{t, with(b, {k, n})}};
  return "";
}

std::string infer_solve(const In& in, const Attrs&, Out& o) {
  if (auto e = matrix("solve A", in[0], true); !e.empty()) return e;
  if (auto e = rhs("solve", in[0], in[1]); !e.empty()) return e;
  const Shape& bs = in[1].shape;
  REQUIRE(bs[bs.size() - 2] == in[0].shape.back(),
          "solve: B " + shape_str(bs) + " must be [..., n, k] for A " + shape_str(in[0].shape));
  o = {in[1]};
  return "";
}

std::string infer_inv(const In& in, const Attrs&, Out& o) {
  if (auto e = matrix("inv input", in[0], true); !e.empty()) return e;
  o = {in[0]};
  return "";
}

std::string infer_matrix_exp(const In& in, const Attrs&, Out& o) {
  if (auto e = matrix("matrix_exp input", in[0], true, false); !e.empty()) return e;
  o = {in[0]};
  return "";
}

std::string infer_det(const In& in, const Attrs&, Out& o) {
  if (auto e = matrix("det input", in[0], true); !e.empty()) return e;
  o = {ValueType{in[0].dtype, batch_of(in[0].shape)}};
  return "";
}

std::string infer_slogdet(const In& in, const Attrs&, Out& o) {
  if (auto e = matrix("slogdet input", in[0], true); !e.empty()) return e;
  Shape b = batch_of(in[0].shape);
  o = {ValueType{in[0].dtype, b}, ValueType{real_of(in[0].dtype), b}};
  return "";
}

std::string infer_lstsq(const In& in, const Attrs&, Out& o) {
  if (auto e = matrix("lstsq A", in[0], false, false); !e.empty()) return e;
  if (auto e = rhs("lstsq", in[0], in[1]); !e.empty()) return e;
  const Shape &as = in[0].shape, &bs = in[1].shape;
  const Dim &m = as[as.size() - 2], &n = as.back();
  REQUIRE(bs[bs.size() - 2] == m, "lstsq: B " + shape_str(bs) + " must be [..., m, k] for A " + shape_str(as));
  Dim k;
  REQUIRE(dim_min(m, n, &k), "lstsq: min(m, n) of symbolic dims is unknown");
  Shape b = batch_of(as);
  o = {ValueType{in[0].dtype, with(b, {n, bs.back()})}, i32(b), ValueType{in[0].dtype, with(b, {k})}};
  return "";
}

}  // namespace rlx
