// rlx._rlx sparse helpers under `rlx.sparse`: Matrix Market I/O and COO -> CSR assembly in C++.
// Arrays are copied in and out, as in bindings.cpp.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "rlx/sparse.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace rlx {
namespace {

template <class T>
nb::ndarray<nb::numpy, T, nb::ndim<1>> np_copy(const T* p, size_t n) {
  T* d = new T[n ? n : 1];
  std::copy(p, p + n, d);
  nb::capsule owner(d, [](void* q) noexcept { delete[] static_cast<T*>(q); });
  return nb::ndarray<nb::numpy, T, nb::ndim<1>>(d, {n}, owner);
}

template <class T>
using In1 = nb::ndarray<nb::ro, T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

nb::tuple coo_tuple(const sparse::Coo& c) {
  return nb::make_tuple(c.rows, c.cols, np_copy(c.row.data(), c.row.size()), np_copy(c.col.data(), c.col.size()),
                        np_copy(c.val.data(), c.val.size()));
}

// (values f64, col_indices, row_ptr) of a Csr, indices as its index dtype.
nb::tuple csr_tuple(const sparse::Csr& a) {
  nb::object ci, rp;
  if (a.index_dtype() == DType::i32) {
    ci = nb::cast(np_copy(a.col_indices.data<int32_t>(), a.nnz()));
    rp = nb::cast(np_copy(a.row_ptr.data<int32_t>(), a.rows + 1));
  } else {
    ci = nb::cast(np_copy(a.col_indices.data<int64_t>(), a.nnz()));
    rp = nb::cast(np_copy(a.row_ptr.data<int64_t>(), a.rows + 1));
  }
  return nb::make_tuple(np_copy(a.values.data<double>(), a.nnz()), ci, rp);
}

}  // namespace

void bind_sparse(nb::module_& m) {
  m.def("sparse_read_mtx", [](const std::string& p) { return coo_tuple(sparse::read_matrix_market(p)); }, "path"_a,
        "Matrix Market coordinate file -> (rows, cols, row, col, values) as int64/int64/float64 (0-based).");
  m.def("sparse_parse_mtx",
        [](const std::string& text, const std::string& source) { return coo_tuple(sparse::parse_matrix_market(text, source)); },
        "text"_a, "source"_a = "<string>");
  m.def("sparse_coo_to_csr",
        [](int64_t rows, int64_t cols, In1<int64_t> r, In1<int64_t> c, In1<double> v, const std::string& index_dtype) {
          if (r.shape(0) != c.shape(0) || c.shape(0) != v.shape(0)) fail("[sparse] COO arrays differ in length");
          sparse::Coo coo;
          coo.rows = rows;
          coo.cols = cols;
          coo.row.assign(r.data(), r.data() + r.shape(0));
          coo.col.assign(c.data(), c.data() + c.shape(0));
          coo.val.assign(v.data(), v.data() + v.shape(0));
          DType it = index_dtype == "i64" ? DType::i64 : DType::i32;
          if (index_dtype != "i32" && index_dtype != "i64") fail("[sparse] index dtype must be 'i32' or 'i64'");
          return csr_tuple(coo.to_csr(DType::f64, it));
        },
        "rows"_a, "cols"_a, "row"_a, "col"_a, "values"_a, "index_dtype"_a = "i32",
        "COO (duplicates summed) -> canonical CSR (values f64, col_indices, row_ptr).");
  m.def("sparse_write_mtx",
        [](const std::string& path, int64_t rows, int64_t cols, In1<double> v, In1<int64_t> c, In1<int64_t> rp) {
          sparse::Csr a;
          a.rows = rows;
          a.cols = cols;
          a.values = Tensor(DType::f64, {static_cast<int64_t>(v.shape(0))});
          std::copy(v.data(), v.data() + v.shape(0), a.values.data<double>());
          a.col_indices = Tensor(DType::i64, {static_cast<int64_t>(c.shape(0))});
          std::copy(c.data(), c.data() + c.shape(0), a.col_indices.data<int64_t>());
          a.row_ptr = Tensor(DType::i64, {static_cast<int64_t>(rp.shape(0))});
          std::copy(rp.data(), rp.data() + rp.shape(0), a.row_ptr.data<int64_t>());
          sparse::write_matrix_market(a, path);
        },
        "path"_a, "rows"_a, "cols"_a, "values"_a, "col_indices"_a, "row_ptr"_a);
  m.def("sparse_direct_methods", &sparse::direct_methods);
}

}  // namespace rlx
