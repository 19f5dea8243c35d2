#include "rlx/shape.h"

#include "rlx/error.h"

namespace rlx {

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ",";
    r += s[i].is_static() ? std::to_string(s[i].v) : s[i].sym;
  }
  return r + "]";
}

bool is_static(const Shape& s) {
  for (auto& d : s)
    if (!d.is_static()) return false;
  return true;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto& d : s) {
    RLX_CHECK(d.is_static(), "[shape] numel of symbolic shape ", shape_str(s));
    RLX_CHECK(!__builtin_mul_overflow(n, d.v, &n), "[shape] element count of ", shape_str(s), " overflows int64");
  }
  return n;
}

std::vector<int64_t> static_dims(const Shape& s) {
  std::vector<int64_t> r;
  r.reserve(s.size());
  for (auto& d : s) {
    RLX_CHECK(d.is_static(), "[shape] symbolic dim '", d.sym, "' where a static size is needed");
    r.push_back(d.v);
  }
  return r;
}

Shape to_shape(const std::vector<int64_t>& d) { return Shape(d.begin(), d.end()); }

Shape bind_shape(const Shape& s, const Bindings& b) {
  Shape r = s;
  for (auto& d : r) {
    if (d.is_static()) continue;
    auto it = b.find(d.sym);
    RLX_CHECK(it != b.end(), "[shape] symbolic dim '", d.sym, "' is not bound");
    d = Dim(it->second);
  }
  return r;
}

int64_t norm_axis(int64_t axis, int64_t rank, const char* what) {
  int64_t a = axis < 0 ? axis + rank : axis;
  RLX_CHECK(a >= 0 && a < rank, "[shape] ", what, ": axis ", axis, " out of range for rank ", rank);
  return a;
}

}  // namespace rlx
