// Shapes: each dimension is a static size or a named symbolic dim ("batch", "seq").
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace rlx {

struct Dim {
  int64_t v = 0;    // size when static
  std::string sym;  // non-empty when symbolic; "?" means unknown
  Dim() = default;
  Dim(int64_t n) : v(n) {}  // NOLINT: dims are written as plain ints
  Dim(const char* s) : v(-1), sym(s) {}
  Dim(std::string s) : v(-1), sym(std::move(s)) {}
  bool is_static() const { return sym.empty(); }
  bool operator==(const Dim& o) const { return sym == o.sym && (!sym.empty() || v == o.v); }
  bool operator!=(const Dim& o) const { return !(*this == o); }
};

using Shape = std::vector<Dim>;
using Bindings = std::map<std::string, int64_t>;  // symbolic dim -> size

std::string shape_str(const Shape& s);  // "[batch,128]"
bool is_static(const Shape& s);
int64_t numel(const Shape& s);  // requires static
std::vector<int64_t> static_dims(const Shape& s);  // requires static
Shape to_shape(const std::vector<int64_t>& d);
// Substitutes bound symbols; throws if a symbol stays unbound.
Shape bind_shape(const Shape& s, const Bindings& b);
// Normalizes a possibly negative axis against rank; throws naming `what` when out of range.
int64_t norm_axis(int64_t axis, int64_t rank, const char* what);

}  // namespace rlx
