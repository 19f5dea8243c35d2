// The start-up check of a multi-rank program: a hash of a graph's structure and shapes (ops,
// attributes, value types; constants by dtype and shape only, so per-rank weight shards agree).
#include "dist/graph_hash.h"

#include "dist/communicator.h"

namespace rlx::dist {

namespace {

void add_attr(std::string& s, const Attr& a) {
  switch (a.kind()) {
    case AttrKind::Int: s += std::to_string(std::get<int64_t>(a.v)); break;
    case AttrKind::Float: s += std::to_string(std::get<double>(a.v)); break;
    case AttrKind::Str: s += std::get<std::string>(a.v); break;
    case AttrKind::Ints:
      for (auto v : std::get<std::vector<int64_t>>(a.v)) s += std::to_string(v) + ",";
      break;
    case AttrKind::Floats:
      for (auto v : std::get<std::vector<double>>(a.v)) s += std::to_string(v) + ",";
      break;
    case AttrKind::Dims: s += shape_str(std::get<Shape>(a.v)); break;
    case AttrKind::DTypeK: s += dtype_name(std::get<DType>(a.v)); break;
    case AttrKind::TensorK: {
      const Tensor& t = std::get<Tensor>(a.v);
      s += std::string(dtype_name(t.dtype())) + "[";
      for (auto d : t.shape()) s += std::to_string(d) + ",";
      s += "]";
      break;
    }
  }
}

std::string type_str(const Graph& g, ValueId v) {
  return std::string(dtype_name(g.type(v).dtype)) + shape_str(g.type(v).shape);
}

}  // namespace

uint64_t graph_shape_hash(const Graph& g) {
  std::string s;
  for (auto v : g.inputs) s += "in " + type_str(g, v) + ";";
  for (auto& n : g.nodes) {
    s += std::string(op_name(n.op)) + "(";
    for (auto v : n.inputs) s += std::to_string(v) + ",";
    s += ")";
    for (auto& [k, a] : n.attrs) {
      s += k + "=";
      add_attr(s, a);
      s += ";";
    }
    for (auto v : n.outputs) s += "->" + type_str(g, v);
    s += "\n";
  }
  for (auto v : g.outputs) s += "out " + std::to_string(v) + ";";
  return fnv1a(s);
}

bool has_collectives(const Graph& g) {
  for (auto& n : g.nodes)
    if (is_collective(n.op)) return true;
  return false;
}

void check_graph_on_all_ranks(const Graph& g) {
  if (!distributed() || !has_collectives(g)) return;
  // send/recv name their peers: ranks (pipeline stages) run different graphs by design.
  for (auto& n : g.nodes)
    if (n.op == OpKind::Send || n.op == OpKind::Recv) return;
  check_same_on_all_ranks("graph '" + g.name + "' (structure and shapes)", graph_shape_hash(g));
}

}  // namespace rlx::dist
