// specialize-shapes: binds symbolic dims to sizes and re-runs shape inference, so later passes
// see concrete shapes. Dims attributes (reshape/broadcast/iota targets) are bound too.
#include "passes/passes.h"

namespace rlx {

Graph specialize_shapes(const Graph& g, const Bindings& b) {
  GraphRebuild r(g, &b);
  for (auto& n : g.nodes) {
    Attrs a = n.attrs;
    for (auto& [k, v] : a)
      if (auto* s = std::get_if<Shape>(&v.v)) v = Attr(bind_shape(*s, b));
    r.copy(n, r.inputs_of(n), a);
  }
  return r.finish();
}

Bindings bind_inputs(const Graph& g, const std::vector<Tensor>& inputs) {
  RLX_CHECK(inputs.size() == g.inputs.size(), "[run] graph '", g.name, "' takes ", g.inputs.size(), " inputs, got ",
            inputs.size());
  Bindings b;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = g.values[g.inputs[i]];
    const Tensor& t = inputs[i];
    RLX_CHECK(t.dtype() == v.type.dtype, "[run] input '", v.name, "': expected dtype ", dtype_name(v.type.dtype),
              ", got ", dtype_name(t.dtype()));
    RLX_CHECK(t.rank() == static_cast<int64_t>(v.type.shape.size()), "[run] input '", v.name, "': expected shape ",
              shape_str(v.type.shape), ", got ", shape_str(to_shape(t.shape())));
    for (size_t d = 0; d < v.type.shape.size(); ++d) {
      const Dim& dim = v.type.shape[d];
      int64_t got = t.shape()[d];
      if (dim.is_static()) {
        RLX_CHECK(dim.v == got, "[run] input '", v.name, "': expected shape ", shape_str(v.type.shape), ", got ",
                  shape_str(to_shape(t.shape())));
        continue;
      }
      auto it = b.find(dim.sym);
      RLX_CHECK(it == b.end() || it->second == got, "[run] input '", v.name, "': dim '", dim.sym, "' is ", got,
                " here but ", (it == b.end() ? 0 : it->second), " in an earlier input");
      b[dim.sym] = got;
    }
  }
  return b;
}

}  // namespace rlx
