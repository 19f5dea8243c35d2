// Structural checks over a Graph: SSA, arity, attribute kinds, re-run shape rules, outputs.
// It only reads the graph and never trusts an id, so a broken graph gets a message, not a crash.
#include <vector>

#include "rlx/text.h"

namespace rlx {

namespace {

struct Verifier {
  const Graph& g;
  bool mir_only;
  std::vector<int> defined;  // per value: 0 = not yet, 1 = defined

  bool in_range(ValueId v) const { return v >= 0 && v < static_cast<ValueId>(g.values.size()); }
  std::string vlabel(ValueId v) const {
    return in_range(v) ? g.value_label(v) : "%<bad id " + std::to_string(v) + ">";
  }
  // Graph::node_label, safe for out-of-range ids and unknown op kinds.
  std::string nlabel(const Node& n) const {
    std::string nm =
        n.name.empty() ? (n.outputs.empty() ? "<no outputs>" : vlabel(n.outputs[0])) : "'" + n.name + "'";
    std::string op = static_cast<int>(n.op) < num_ops() ? std::string(op_name(n.op))
                                                        : "op#" + std::to_string(static_cast<int>(n.op));
    return nm + " (" + op + ")";
  }

  void run() {
    defined.assign(g.values.size(), 0);
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      ValueId v = g.inputs[i];
      RLX_CHECK(in_range(v), "[verify] graph input #", i, " has bad value id ", v);
      RLX_CHECK(!defined[v], "[verify] graph input ", vlabel(v), " is listed twice");
      RLX_CHECK(g.values[v].producer == -1, "[verify] graph input ", vlabel(v), " has producer ",
                g.values[v].producer, " (must be -1)");
      defined[v] = 1;
    }
    for (size_t i = 0; i < g.nodes.size(); ++i) check_node(static_cast<int32_t>(i));
    for (size_t v = 0; v < g.values.size(); ++v)
      RLX_CHECK(defined[v], "[verify] value ", vlabel(static_cast<ValueId>(v)),
                " is defined by no node or graph input");
    RLX_CHECK(!g.outputs.empty(), "[verify] graph '", g.name, "' has no outputs");
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      ValueId v = g.outputs[i];
      RLX_CHECK(in_range(v), "[verify] graph output #", i, " has bad value id ", v);
    }
  }

  void check_node(int32_t idx) {
    const Node& n = g.nodes[idx];
    const std::string where = "[verify] node " + nlabel(n);
    RLX_CHECK(static_cast<int>(n.op) < num_ops(), where, ": unknown op kind ", static_cast<int>(n.op));
    const OpInfo& info = op_info(n.op);
    RLX_CHECK(!(mir_only && info.level == Level::Hir), where, ": HIR op in a graph that must be MIR only");

    std::vector<ValueType> in;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      ValueId v = n.inputs[i];
      RLX_CHECK(in_range(v), where, ": input #", i, " has bad value id ", v);
      RLX_CHECK(defined[v], where, ": input #", i, " ", vlabel(v), " is used before it is defined");
      in.push_back(g.values[v].type);
    }
    int ni = static_cast<int>(n.inputs.size());
    RLX_CHECK(
        ni >= info.min_inputs && (info.max_inputs < 0 || ni <= info.max_inputs), where, ": takes ",
        info.min_inputs,
        info.max_inputs == info.min_inputs ? "" : (info.max_inputs < 0 ? " or more" : " to "),
        info.max_inputs == info.min_inputs || info.max_inputs < 0 ? "" : std::to_string(info.max_inputs),
        " inputs, has ", ni);

    // Stored attributes have exactly the schema's kind (add_node converts, so no coercion here).
    for (auto& [name, a] : n.attrs) {
      const AttrSpec* spec = nullptr;
      for (auto& s : info.attrs)
        if (s.name == name) spec = &s;
      RLX_CHECK(spec != nullptr, where, ": unknown attribute '", name, "'");
      RLX_CHECK(a.kind() == spec->kind, where, ": attribute '", name, "' must be ",
                attr_kind_name(spec->kind), ", is ", attr_kind_name(a.kind()));
      if (a.kind() == AttrKind::TensorK)
        RLX_CHECK(std::get<Tensor>(a.v).defined(), where, ": attribute '", name,
                  "' holds a tensor with no data");
    }
    for (auto& s : info.attrs)
      RLX_CHECK(s.has_default || n.attrs.count(s.name), where, ": missing required attribute '", s.name, "'");

    RLX_CHECK(static_cast<int>(n.outputs.size()) == info.num_outputs, where, ": has ", n.outputs.size(),
              " outputs, op produces ", info.num_outputs);
    auto inferred = infer_types(n.op, in, n.attrs, where);
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      ValueId v = n.outputs[k];
      RLX_CHECK(in_range(v), where, ": output #", k, " has bad value id ", v);
      RLX_CHECK(!defined[v], where, ": output #", k, " ", vlabel(v), " is already defined");
      const Value& val = g.values[v];
      RLX_CHECK(val.producer == idx && val.index == static_cast<int32_t>(k), where, ": output #", k, " ",
                vlabel(v), " records producer ", val.producer, " index ", val.index, ", expected ", idx,
                " index ", k);
      const ValueType& t = val.type;
      RLX_CHECK(t.dtype == inferred[k].dtype && t.shape == inferred[k].shape, where, ": output #", k, " ",
                vlabel(v), " is stored as ", dtype_name(t.dtype), shape_str(t.shape),
                " but the shape rule gives ", dtype_name(inferred[k].dtype), shape_str(inferred[k].shape));
      defined[v] = 1;
    }
  }
};

}  // namespace

void verify_graph(const Graph& g, bool mir_only) { Verifier{g, mir_only, {}}.run(); }

}  // namespace rlx
