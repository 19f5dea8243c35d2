// The C++ graph-builder API: typed handles over a Graph, one method per common op.
#pragma once
#include <string>
#include <vector>

#include "rlx/graph.h"

namespace rlx {

class Builder {
 public:
  explicit Builder(Graph& g) : g_(g) {}
  Graph& graph() { return g_; }
  const ValueType& type(ValueId v) const { return g_.type(v); }
  const Shape& shape(ValueId v) const { return g_.type(v).shape; }
  DType dtype(ValueId v) const { return g_.type(v).dtype; }
  int64_t rank(ValueId v) const { return static_cast<int64_t>(shape(v).size()); }

  ValueId input(const std::string& name, DType dt, Shape shape) { return g_.add_input(name, dt, shape); }
  void output(ValueId v) { g_.outputs.push_back(v); }
  // Generic entry: any op of the table.
  std::vector<ValueId> op(OpKind k, std::vector<ValueId> in, Attrs attrs = {}) {
    return g_.add_node(k, std::move(in), std::move(attrs), origin_);
  }
  ValueId op1(OpKind k, std::vector<ValueId> in, Attrs attrs = {}) { return op(k, std::move(in), std::move(attrs))[0]; }
  // Name stamped on nodes created from here on (decompositions keep their source node's name).
  void set_origin(std::string n) { origin_ = std::move(n); }

  ValueId constant(const Tensor& t) { return op1(OpKind::Constant, {}, {{"value", t}}); }
  ValueId scalar(double v, DType dt);  // rank-0 constant
  ValueId add(ValueId a, ValueId b) { return op1(OpKind::Add, {a, b}); }
  ValueId sub(ValueId a, ValueId b) { return op1(OpKind::Sub, {a, b}); }
  ValueId mul(ValueId a, ValueId b) { return op1(OpKind::Mul, {a, b}); }
  ValueId div(ValueId a, ValueId b) { return op1(OpKind::Div, {a, b}); }
  ValueId max(ValueId a, ValueId b) { return op1(OpKind::Max, {a, b}); }
  ValueId unary(OpKind k, ValueId a) { return op1(k, {a}); }
  ValueId convert(ValueId a, DType to) { return op1(OpKind::Convert, {a}, {{"to", to}}); }
  ValueId select(ValueId p, ValueId a, ValueId b) { return op1(OpKind::Select, {p, a, b}); }
  ValueId reduce(OpKind k, ValueId a, std::vector<int64_t> axes, bool keepdims) {
    return op1(k, {a}, {{"axes", std::move(axes)}, {"keepdims", int64_t{keepdims}}});
  }
  ValueId reshape(ValueId a, Shape s) { return op1(OpKind::Reshape, {a}, {{"shape", std::move(s)}}); }
  ValueId transpose(ValueId a, std::vector<int64_t> perm) {
    return op1(OpKind::Transpose, {a}, {{"perm", std::move(perm)}});
  }
  ValueId broadcast_in_dim(ValueId a, Shape s, std::vector<int64_t> dims) {
    return op1(OpKind::BroadcastInDim, {a}, {{"shape", std::move(s)}, {"dims", std::move(dims)}});
  }
  ValueId dot_general(ValueId a, ValueId b, std::vector<int64_t> lb, std::vector<int64_t> rb,
                      std::vector<int64_t> lc, std::vector<int64_t> rc) {
    return op1(OpKind::DotGeneral, {a, b},
               {{"lhs_batch", std::move(lb)}, {"rhs_batch", std::move(rb)},
                {"lhs_contract", std::move(lc)}, {"rhs_contract", std::move(rc)}});
  }
  // HIR conveniences.
  ValueId matmul(ValueId a, ValueId b) { return op1(OpKind::MatMul, {a, b}); }
  ValueId linear(ValueId x, ValueId w, ValueId b = -1, const std::string& act = "none");
  ValueId layer_norm(ValueId x, ValueId g, ValueId b, double eps = 1e-5);
  ValueId softmax(ValueId x, int64_t axis = -1) { return op1(OpKind::Softmax, {x}, {{"axis", axis}}); }
  ValueId gelu(ValueId x, const std::string& approx = "none") {
    return op1(OpKind::Gelu, {x}, {{"approximate", approx}});
  }
  ValueId relu(ValueId x) { return op1(OpKind::Relu, {x}); }
  // identity in value; autodiff passes no cotangent/tangent through it
  ValueId stop_gradient(ValueId x) { return op1(OpKind::StopGradient, {x}); }
  ValueId attention(ValueId q, ValueId k, ValueId v, ValueId mask = -1, const std::string& kind = "none",
                    double scale = 0);

 private:
  Graph& g_;
  std::string origin_;
};

}  // namespace rlx
