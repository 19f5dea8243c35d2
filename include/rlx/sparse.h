// Sparse matrices: CSR (the form every sparse op takes) and COO (for assembly), Matrix Market I/O,
// and graph-building helpers for the sparse ops of src/ir/ops.def.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "rlx/builder.h"
#include "rlx/tensor.h"

namespace rlx::sparse {

// Compressed sparse rows. values [nnz] (f32/f64), col_indices [nnz] and row_ptr [rows+1] (both i32
// or both i64). Canonical form: row_ptr non-decreasing from 0 to nnz, columns in [0, cols), strictly
// increasing in each row (sorted, no duplicates). validate() checks all of it.
struct Csr {
  int64_t rows = 0, cols = 0;
  Tensor values, col_indices, row_ptr;

  int64_t nnz() const { return values.defined() ? values.numel() : 0; }
  DType dtype() const { return values.dtype(); }
  DType index_dtype() const { return col_indices.dtype(); }
  // Throws "[sparse] ..." naming the first offending entry; `require_sorted` adds the canonical
  // column order (duplicates and unsorted columns fail).
  void validate(bool require_sorted = true) const;
  Tensor to_dense() const;
  Csr transpose() const;
  Csr astype(DType values_dtype, DType index_dtype) const;
  static Csr from_dense(const Tensor& dense, DType index_dtype = DType::i32);
};

// Coordinate form for assembly: any order, duplicates allowed (summed by to_csr).
struct Coo {
  int64_t rows = 0, cols = 0;
  std::vector<int64_t> row, col;
  std::vector<double> val;
  void add(int64_t i, int64_t j, double v) {
    row.push_back(i);
    col.push_back(j);
    val.push_back(v);
  }
  // Sorted canonical CSR; duplicate (i, j) entries are summed. Out-of-range entries throw.
  Csr to_csr(DType values_dtype = DType::f64, DType index_dtype = DType::i32) const;
};

// Matrix Market (.mtx): "coordinate" with field real|integer|pattern and symmetry
// general|symmetric|skew-symmetric (the mirrored half is filled in). Errors name the line.
Coo read_matrix_market(const std::string& path);
// The 5-point Laplacian of an m x m grid (Dirichlet boundary): SPD, n = m^2; the test and benchmark
// matrix of the solvers.
Coo poisson2d(int64_t m);
Coo parse_matrix_market(const std::string& text, const std::string& source = "<string>");
void write_matrix_market(const Csr& a, const std::string& path);

// Shape attribute value of `a` for the sparse ops.
inline std::vector<int64_t> shape_attr(const Csr& a) { return {a.rows, a.cols}; }

// Graph helpers: `values`, `col`, `row_ptr` are graph values holding a CSR pattern of `shape`.
struct CsrValues {
  ValueId values, col, row_ptr;
  int64_t rows, cols;
};
ValueId matvec(Builder& b, const CsrValues& a, ValueId x, bool transpose = false);
ValueId matmul(Builder& b, const CsrValues& a, ValueId x, bool transpose = false);
struct SolveOut {
  ValueId x, iterations, residual;
};
SolveOut cg(Builder& b, const CsrValues& a, ValueId rhs, double tol = 1e-8, int64_t maxiter = 0,
            const std::string& precond = "none");
SolveOut bicgstab(Builder& b, const CsrValues& a, ValueId rhs, double tol = 1e-8, int64_t maxiter = 0,
                  const std::string& precond = "none");
ValueId solve(Builder& b, const CsrValues& a, ValueId rhs, const std::string& method = "auto");

// Which direct solvers this build has ("klu", "umfpack", "cholmod", "dense").
std::vector<std::string> direct_methods();

}  // namespace rlx::sparse
