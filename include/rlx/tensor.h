// A dense, row-major host tensor. Storage is shared; views of the same bytes are cheap.
#pragma once
#include <complex>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rlx/dtype.h"
#include "rlx/error.h"

namespace rlx {

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dt, std::vector<int64_t> shape);  // zero-filled
  // Wraps external bytes kept alive by `owner` (e.g. an mmap); no copy.
  static Tensor wrap(DType dt, std::vector<int64_t> shape, std::shared_ptr<void> owner, void* data);
  template <class T>
  static Tensor from(DType dt, std::vector<int64_t> shape, const std::vector<T>& vals) {
    Tensor t(dt, std::move(shape));
    RLX_CHECK(static_cast<int64_t>(vals.size()) == t.numel(), "[tensor] ", vals.size(),
              " values for ", t.numel(), " elements");
    for (size_t i = 0; i < vals.size(); ++i) t.set(static_cast<int64_t>(i), static_cast<double>(vals[i]));
    return t;
  }

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool defined() const { return data_ != nullptr || numel() == 0; }
  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <class T>
  T* data() { return static_cast<T*>(data_); }
  template <class T>
  const T* data() const { return static_cast<const T*>(data_); }

  // Element access through double / complex (every dtype); slow, for references and tests.
  double get(int64_t i) const;
  void set(int64_t i, double v);
  std::complex<double> getc(int64_t i) const;
  void setc(int64_t i, std::complex<double> v);
  int64_t get_int(int64_t i) const;  // exact for i64 (u64: the same 64 bits)
  uint64_t get_uint(int64_t i) const;  // exact for u64 and every non-negative integer
  void set_int(int64_t i, int64_t v);

  Tensor reshaped(std::vector<int64_t> shape) const;  // shares storage
  Tensor clone() const;
  std::string str(int64_t max_elems = 8) const;  // "f32[2,3] {1, 2, ...}"

 private:
  DType dtype_ = DType::f32;
  std::vector<int64_t> shape_;
  std::shared_ptr<void> owner_;
  void* data_ = nullptr;
};

}  // namespace rlx
