// fold-constants: nodes fed only by constants are evaluated once at compile time by the reference
// interpreter, so devices never run them (e.g. RoPE frequency tables, iota masks of fixed shapes).
#include <map>

#include "passes/passes.h"
#include "rlx/reference.h"

namespace rlx {

Graph fold_constants(const Graph& g, int64_t max_elems) {
  GraphRebuild r(g);
  std::map<ValueId, Tensor> known;  // dst value id -> constant tensor
  for (auto& n : g.nodes) {
    std::vector<ValueId> ins = r.inputs_of(n);
    std::vector<Tensor> vals;
    for (auto v : ins) {
      auto it = known.find(v);
      if (it != known.end()) vals.push_back(it->second);
    }
    bool small = true;
    for (auto o : n.outputs)
      if (numel(g.type(o).shape) > max_elems) small = false;
    // Zero-input primitives (iota, rng_uniform with its fixed seed) fold too; constants stay as they are.
    bool foldable = vals.size() == ins.size() && small && n.op != OpKind::Constant && op_info(n.op).level == Level::Mir &&
                    !is_collective(n.op);  // a collective talks to other ranks: at run time only
    std::vector<ValueId> outs;
    if (foldable) {
      std::vector<ValueType> ot;
      for (auto o : n.outputs) ot.push_back(g.type(o));
      for (auto& t : reference_eval(n, vals, ot)) {
        outs.push_back(r.dst.add_node(OpKind::Constant, {}, {{"value", t}}, n.name)[0]);
        known[outs.back()] = t;
      }
      r.bind(n, outs);
    } else {
      outs = r.copy(n, ins, n.attrs);
      if (n.op == OpKind::Constant) known[outs[0]] = attr_tensor(n, "value");
    }
  }
  return r.finish();
}

}  // namespace rlx
