// The "amp" pass (automatic mixed precision) and its report. Policy: contractions (dot_general,
// conv) run in the low dtype (bf16 or f16) with their f32 inputs converted on the way in and the
// result converted back to f32; everything else (reductions, softmax/log-softmax pieces, the loss,
// elementwise ops, the optimizer) stays f32. Parameters stay f32 ("master weights"): the VJP of a
// convert converts the cotangent back, so gradients arrive in f32. Loss scaling: train.h.
#include <sstream>

#include "passes/passes.h"
#include "rlx/builder.h"
#include "train/train.h"

namespace rlx::train {

bool amp_runs_low(OpKind op) { return op == OpKind::DotGeneral || op == OpKind::Conv; }

Graph amp_pass(const Graph& f, DType low, AmpReport* report) {
  RLX_CHECK(low == DType::bf16 || low == DType::f16, "[amp] low precision must be bf16 or f16, got ",
            dtype_name(low));
  if (report) {
    report->low = low;
    report->choices.clear();
  }
  GraphRebuild r(f);
  Builder b(r.dst);
  for (const Node& n : f.nodes) {
    auto ins = r.inputs_of(n);
    bool f32_in = !ins.empty();
    for (auto v : ins) f32_in &= r.dst.type(v).dtype == DType::f32;
    bool low_op = amp_runs_low(n.op) && f32_in;
    if (report) {
      std::string why = low_op ? "contraction: inputs converted, f32 result"
                        : amp_runs_low(n.op) ? "contraction on non-f32 inputs: unchanged"
                        : !n.outputs.empty() && !is_float(f.type(n.outputs[0]).dtype) ? "integer/bool: unchanged"
                        : is_elementwise(n.op) ? "elementwise: f32"
                        : "reduction/movement/other: f32 (policy)";
      DType dt = n.outputs.empty() ? DType::f32 : f.type(n.outputs[0]).dtype;
      report->choices.push_back({std::string(op_name(n.op)), f.node_label(n), low_op ? low : dt, why});
    }
    if (!low_op) {
      r.copy(n, ins, n.attrs);
      continue;
    }
    b.set_origin(n.name.empty() ? "amp" : n.name);
    std::vector<ValueId> lin;
    for (auto v : ins) lin.push_back(b.convert(v, low));
    auto outs = r.dst.add_node(n.op, lin, n.attrs, n.name);
    for (auto& o : outs) o = b.convert(o, DType::f32);
    r.bind(n, outs);
  }
  return r.finish();
}

std::string AmpReport::table() const {
  std::map<std::string, std::pair<int, std::string>> by;  // "op dtype" -> count, why
  for (auto& c : choices) {
    auto& e = by[c.op + " " + std::string(dtype_name(c.dtype))];
    e.first++;
    e.second = c.why;
  }
  std::ostringstream os;
  os << "amp (" << dtype_name(low) << "): per-op precision decided by the amp pass\n";
  for (auto& [k, v] : by) os << "  " << k << " x" << v.first << "  " << v.second << "\n";
  return os.str();
}

}  // namespace rlx::train
