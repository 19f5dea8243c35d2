// Shape/dtype rules of the sparse (CSR) ops; see the "sparse" block of src/ir/ops.def.
#include "rlx/graph.h"

namespace rlx {

namespace {

bool is_index(DType t) { return t == DType::i32 || t == DType::i64; }

int64_t sdim(const ValueType& t, size_t d) { return t.shape[d].is_static() ? t.shape[d].v : -1; }

// Checks the pattern (col [nnz], row_ptr [rows+1], one index dtype) against attribute shape and,
// when `values` is given, values [nnz] of a float dtype. Fills rows/cols/nnz; "" on success.
std::string check_csr(OpKind op, const ValueType* values, const ValueType& col, const ValueType& rp,
                      const Attrs& a, int64_t* rows, int64_t* cols, int64_t* nnz) {
  const Attr* sa = find_attr(op, a, "shape");
  const auto* sh = sa ? std::get_if<std::vector<int64_t>>(&sa->v) : nullptr;
  if (!sh || sh->size() != 2 || (*sh)[0] < 0 || (*sh)[1] < 0)
    return "attribute shape must be [rows, cols] with rows, cols >= 0";
  *rows = (*sh)[0];
  *cols = (*sh)[1];
  if (!is_index(col.dtype) || col.dtype != rp.dtype)
    return "col_indices and row_ptr must share an index dtype (i32 or i64), got " +
           std::string(dtype_name(col.dtype)) + " and " + std::string(dtype_name(rp.dtype));
  if (col.shape.size() != 1 || rp.shape.size() != 1) return "col_indices and row_ptr must be 1-D";
  if (sdim(rp, 0) != *rows + 1)
    return "row_ptr has " + shape_str(rp.shape) + " entries, expected rows + 1 = " + std::to_string(*rows + 1);
  *nnz = sdim(col, 0);
  if (values) {
    if (values->dtype != DType::f32 && values->dtype != DType::f64) return "values must be f32 or f64";
    if (values->shape.size() != 1 || sdim(*values, 0) != *nnz)
      return "values " + shape_str(values->shape) + " and col_indices " + shape_str(col.shape) +
             " must both be [nnz]";
  }
  return "";
}

bool transposed(OpKind op, const Attrs& a) {
  const Attr* t = find_attr(op, a, "transpose");
  const auto* v = t ? std::get_if<int64_t>(&t->v) : nullptr;
  return v && *v != 0;
}

}  // namespace

std::string infer_sparse_matvec(const std::vector<ValueType>& in, const Attrs& a, std::vector<ValueType>& o) {
  int64_t r, c, z;
  std::string e = check_csr(OpKind::SparseMatVec, &in[0], in[1], in[2], a, &r, &c, &z);
  if (!e.empty()) return e;
  bool t = transposed(OpKind::SparseMatVec, a);
  int64_t need = t ? r : c, give = t ? c : r;
  if (in[3].dtype != in[0].dtype) return "x must have the values' dtype";
  if (in[3].shape.size() != 1 || sdim(in[3], 0) != need)
    return "x is " + shape_str(in[3].shape) + ", expected [" + std::to_string(need) + "]";
  o = {ValueType{in[0].dtype, Shape{Dim(give)}}};
  return "";
}

std::string infer_sparse_matmul(const std::vector<ValueType>& in, const Attrs& a, std::vector<ValueType>& o) {
  int64_t r, c, z;
  std::string e = check_csr(OpKind::SparseMatMul, &in[0], in[1], in[2], a, &r, &c, &z);
  if (!e.empty()) return e;
  bool t = transposed(OpKind::SparseMatMul, a);
  int64_t need = t ? r : c, give = t ? c : r;
  if (in[3].dtype != in[0].dtype) return "X must have the values' dtype";
  if (in[3].shape.size() != 2 || sdim(in[3], 0) != need)
    return "X is " + shape_str(in[3].shape) + ", expected [" + std::to_string(need) + ", k]";
  o = {ValueType{in[0].dtype, Shape{Dim(give), in[3].shape[1]}}};
  return "";
}

std::string infer_sparse_add_dense(const std::vector<ValueType>& in, const Attrs& a, std::vector<ValueType>& o) {
  int64_t r, c, z;
  std::string e = check_csr(OpKind::SparseAddDense, &in[0], in[1], in[2], a, &r, &c, &z);
  if (!e.empty()) return e;
  if (in[3].dtype != in[0].dtype || in[3].shape.size() != 2 || sdim(in[3], 0) != r || sdim(in[3], 1) != c)
    return "D must be " + std::string(dtype_name(in[0].dtype)) + " [" + std::to_string(r) + ", " +
           std::to_string(c) + "]";
  o = {in[3]};
  return "";
}

std::string infer_sparse_transpose(const std::vector<ValueType>& in, const Attrs& a, std::vector<ValueType>& o) {
  int64_t r, c, z;
  std::string e = check_csr(OpKind::SparseTranspose, &in[0], in[1], in[2], a, &r, &c, &z);
  if (!e.empty()) return e;
  o = {in[0], in[1], ValueType{in[2].dtype, Shape{Dim(c + 1)}}};
  return "";
}

std::string infer_sparse_sddmm(const std::vector<ValueType>& in, const Attrs& a, std::vector<ValueType>& o) {
  int64_t r, c, z;
  std::string e = check_csr(OpKind::SparseSddmm, nullptr, in[2], in[3], a, &r, &c, &z);
  if (!e.empty()) return e;
  const ValueType &u = in[0], &v = in[1];
  if (v.dtype != u.dtype) return "U and V must share a dtype";
  if (u.shape.empty() || u.shape.size() > 2 || u.shape.size() != v.shape.size()) return "U and V must both be 1-D or both 2-D";
  if (sdim(u, 0) != r || sdim(v, 0) != c)
    return "U is " + shape_str(u.shape) + " and V " + shape_str(v.shape) + ", expected [" + std::to_string(r) +
           "(, k)] and [" + std::to_string(c) + "(, k)]";
  if (u.shape.size() == 2 && sdim(u, 1) != sdim(v, 1)) return "U and V must share their last dim";
  o = {ValueType{u.dtype, Shape{Dim(z)}}};
  return "";
}

std::string infer_sparse_sample(const std::vector<ValueType>& in, const Attrs& a, std::vector<ValueType>& o) {
  int64_t r, c, z;
  std::string e = check_csr(OpKind::SparseSample, nullptr, in[1], in[2], a, &r, &c, &z);
  if (!e.empty()) return e;
  if (in[0].shape.size() != 2 || sdim(in[0], 0) != r || sdim(in[0], 1) != c)
    return "D is " + shape_str(in[0].shape) + ", expected [" + std::to_string(r) + ", " + std::to_string(c) + "]";
  o = {ValueType{in[0].dtype, Shape{Dim(z)}}};
  return "";
}

std::string infer_sparse_solver(const std::vector<ValueType>& in, const Attrs& a, std::vector<ValueType>& o) {
  int64_t r, c, z;
  std::string e = check_csr(OpKind::SparseCg, &in[0], in[1], in[2], a, &r, &c, &z);
  if (!e.empty()) return e;
  if (r != c) return "A must be square, got [" + std::to_string(r) + ", " + std::to_string(c) + "]";
  for (size_t i = 3; i < in.size(); ++i)
    if (in[i].dtype != in[0].dtype || in[i].shape.size() != 1 || sdim(in[i], 0) != r)
      return std::string(i == 3 ? "b" : "x0") + " must be " + std::string(dtype_name(in[0].dtype)) + " [" +
             std::to_string(r) + "]";
  o = {in[3], ValueType{DType::i64, Shape{}}, ValueType{in[0].dtype, Shape{}}};
  return "";
}

std::string infer_sparse_solve(const std::vector<ValueType>& in, const Attrs& a, std::vector<ValueType>& o) {
  int64_t r, c, z;
  std::string e = check_csr(OpKind::SparseSolve, &in[0], in[1], in[2], a, &r, &c, &z);
  if (!e.empty()) return e;
  if (r != c) return "A must be square, got [" + std::to_string(r) + ", " + std::to_string(c) + "]";
  const ValueType& b = in[3];
  if (b.dtype != in[0].dtype || b.shape.empty() || b.shape.size() > 2 || sdim(b, 0) != r)
    return "B must be " + std::string(dtype_name(in[0].dtype)) + " [" + std::to_string(r) + "] or [" +
           std::to_string(r) + ", k]";
  o = {b};
  return "";
}

}  // namespace rlx
