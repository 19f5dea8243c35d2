#include "rlx/graph.h"

#include <algorithm>

#include "rlx/builder.h"

namespace rlx {

ValueId Graph::add_input(const std::string& name, DType dt, Shape shape) {
  for (auto i : inputs)
    RLX_CHECK(values[i].name != name, "[ir] duplicate graph input '", name, "'");
  values.push_back(Value{ValueType{dt, std::move(shape)}, -1, 0, name});
  auto id = static_cast<ValueId>(values.size() - 1);
  inputs.push_back(id);
  return id;
}

// Attribute kinds are checked against the schema; ints are accepted where floats are expected.
static void check_attrs(OpKind op, Attrs& attrs, const std::string& where) {
  const auto& info = op_info(op);
  for (auto& [name, a] : attrs) {
    const AttrSpec* spec = nullptr;
    for (auto& s : info.attrs)
      if (s.name == name) spec = &s;
    RLX_CHECK(spec != nullptr, where, ": unknown attribute '", name, "'");
    if (spec->kind == AttrKind::Float && a.kind() == AttrKind::Int)
      a = Attr(static_cast<double>(std::get<int64_t>(a.v)));
    if (spec->kind == AttrKind::Dims && a.kind() == AttrKind::Ints)
      a = Attr(to_shape(std::get<std::vector<int64_t>>(a.v)));
    if (spec->kind == AttrKind::Floats && a.kind() == AttrKind::Ints) {
      auto& iv = std::get<std::vector<int64_t>>(a.v);
      a = Attr(std::vector<double>(iv.begin(), iv.end()));
    }
    RLX_CHECK(a.kind() == spec->kind, where, ": attribute '", name, "' must be ",
              attr_kind_name(spec->kind), ", got ", attr_kind_name(a.kind()));
  }
  for (auto& s : info.attrs)
    RLX_CHECK(s.has_default || attrs.count(s.name), where, ": missing required attribute '", s.name, "'");
}

std::vector<ValueType> infer_types(OpKind op, const std::vector<ValueType>& in, const Attrs& attrs,
                                   const std::string& where) {
  const auto& info = op_info(op);
  int n = static_cast<int>(in.size());
  RLX_CHECK(n >= info.min_inputs && (info.max_inputs < 0 || n <= info.max_inputs), where, ": expects ",
            info.min_inputs, info.max_inputs == info.min_inputs ? "" : "..",
            info.max_inputs == info.min_inputs ? "" : (info.max_inputs < 0 ? "n" : std::to_string(info.max_inputs)),
            " inputs, got ", n);
  if (n > 0)
    RLX_CHECK(info.dtypes.has(in[0].dtype), where, ": dtype ", dtype_name(in[0].dtype),
              " not accepted (accepts ", info.dtypes.str(), ")");
  std::vector<ValueType> out;
  std::string err = info.infer(in, attrs, out);
  RLX_CHECK(err.empty(), where, ": ", err);
  RLX_CHECK(static_cast<int>(out.size()) == info.num_outputs, where, ": shape rule gave ", out.size(), " outputs");
  return out;
}

std::vector<ValueId> Graph::add_node(OpKind op, std::vector<ValueId> ins, Attrs attrs, std::string nname) {
  std::string where = "[ir] " + std::string(op_name(op)) + (nname.empty() ? "" : " '" + nname + "'");
  check_attrs(op, attrs, where);
  std::vector<ValueType> in_types;
  for (auto v : ins) {
    RLX_CHECK(v >= 0 && v < static_cast<ValueId>(values.size()), where, ": bad input value id ", v);
    in_types.push_back(values[v].type);
  }
  auto out_types = infer_types(op, in_types, attrs, where);
  Node n{op, std::move(ins), {}, std::move(attrs), std::move(nname)};
  auto node_index = static_cast<int32_t>(nodes.size());
  for (size_t i = 0; i < out_types.size(); ++i) {
    values.push_back(Value{out_types[i], node_index, static_cast<int32_t>(i), ""});
    n.outputs.push_back(static_cast<ValueId>(values.size() - 1));
  }
  nodes.push_back(std::move(n));
  return nodes.back().outputs;
}

std::string Graph::value_label(ValueId v) const {
  const auto& val = values.at(v);
  return "%" + (val.name.empty() ? std::to_string(v) : val.name);
}

std::string Graph::node_label(const Node& n) const {
  std::string nm = n.name.empty() && !n.outputs.empty() ? value_label(n.outputs[0]) : "'" + n.name + "'";
  return nm + " (" + std::string(op_name(n.op)) + ")";
}

bool Graph::is_hir_free() const {
  return std::all_of(nodes.begin(), nodes.end(), [](const Node& n) { return op_info(n.op).level == Level::Mir; });
}

std::vector<std::string> Graph::symbols() const {
  std::vector<std::string> r;
  for (auto i : inputs)
    for (auto& d : values[i].type.shape)
      if (!d.is_static() && std::find(r.begin(), r.end(), d.sym) == r.end()) r.push_back(d.sym);
  return r;
}

ValueId Builder::scalar(double v, DType dt) {
  Tensor t(dt, {});
  t.set(0, v);
  return constant(t);
}

ValueId Builder::linear(ValueId x, ValueId w, ValueId b, const std::string& act) {
  std::vector<ValueId> in{x, w};
  if (b >= 0) in.push_back(b);
  return op1(OpKind::Linear, in, {{"activation", act}});
}

ValueId Builder::layer_norm(ValueId x, ValueId g, ValueId b, double eps) {
  std::vector<ValueId> in{x, g};
  if (b >= 0) in.push_back(b);
  return op1(OpKind::LayerNorm, in, {{"eps", eps}});
}

ValueId Builder::attention(ValueId q, ValueId k, ValueId v, ValueId mask, const std::string& kind, double scale) {
  std::vector<ValueId> in{q, k, v};
  if (mask >= 0) in.push_back(mask);
  return op1(OpKind::Attention, in, {{"mask", kind}, {"scale", scale}});
}

}  // namespace rlx
