// shard-tensor-parallel: one rank's part of a Megatron-style tensor-parallel graph (passes/shard.h).
// Values split across ranks (the features of a column-parallel Linear's output) are tracked from
// the column Linear to the row Linear that consumes them; everything else stays replicated.
#include <cstring>
#include <set>

#include "passes/passes.h"
#include "passes/shard.h"
#include "rlx/builder.h"

namespace rlx {

std::string InsertedCollective::bytes_str() const {
  std::string s = std::to_string(bytes_per_unit);
  for (auto& y : syms) s += "·" + y;
  return s + " B";
}

std::string ShardReport::str() const {
  std::string s;
  for (auto& c : collectives)
    s += "[shard] rank " + std::to_string(rank) + "/" + std::to_string(tp) + ": inserted " + c.op + " " + c.type + " after " +
         c.where + ": " + c.bytes_str() + "\n";
  s += "[shard] pattern " + pattern + ": " + std::to_string(column) + " column-parallel, " + std::to_string(row) +
       " row-parallel, " + std::to_string(replicated_linear) + " replicated Linear(s); " +
       std::to_string(collectives.size()) + " collective(s) per forward pass\n";
  return s;
}

std::string shard_pattern(const std::string& preset) {
  if (preset == "mlp") return "CR";
  if (preset == "bert") return "CCCRCR";
  RLX_CHECK(!preset.empty() && preset.find_first_not_of("CR-") == std::string::npos, "[shard] unknown preset '", preset,
            "' (mlp, bert, or a pattern of C, R and -)");
  return preset;
}

namespace {

// Rows [lo, hi) of dim `axis` of t (a rank-1 or rank-2 weight).
Tensor slice_dim(const Tensor& t, int64_t axis, int64_t lo, int64_t hi) {
  std::vector<int64_t> s = t.shape();
  int64_t outer = 1, inner = static_cast<int64_t>(dtype_size(t.dtype()));
  for (int64_t d = 0; d < axis; ++d) outer *= s[d];
  for (int64_t d = axis + 1; d < t.rank(); ++d) inner *= s[d];
  int64_t n = s[axis];
  s[axis] = hi - lo;
  Tensor r(t.dtype(), s);
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(static_cast<char*>(r.raw()) + o * (hi - lo) * inner,
                static_cast<const char*>(t.raw()) + (o * n + lo) * inner, static_cast<size_t>((hi - lo) * inner));
  return r;
}

}  // namespace

Graph shard_tensor_parallel(const Graph& g, const std::string& preset, int64_t tp, int64_t rank, ShardReport* report) {
  RLX_CHECK(tp >= 1 && rank >= 0 && rank < tp, "[shard] rank ", rank, " of tp ", tp);
  std::string pattern = shard_pattern(preset);
  ShardReport rep;
  rep.tp = tp;
  rep.rank = rank;
  rep.pattern = pattern;
  std::vector<int64_t> world;
  for (int64_t r = 0; r < tp; ++r) world.push_back(r);

  GraphRebuild rb(g);
  std::set<ValueId> split;  // src values whose last feature dim is split across ranks
  auto weight = [&](ValueId v, const Node& at) -> const Tensor& {
    int32_t p = g.values[v].producer;
    RLX_CHECK(p >= 0 && g.nodes[p].op == OpKind::Constant, "[shard] Linear '", at.name,
              "': weights must be graph constants to be split");
    return attr_tensor(g.nodes[p], "value");
  };
  int64_t linear_index = 0;
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node& n = g.nodes[ni];
    auto ins = rb.inputs_of(n);
    bool any_split = false;
    for (auto v : n.inputs) any_split = any_split || split.count(v);
    const std::string where = "'" + (n.name.empty() ? std::string(op_name(n.op)) : n.name) + "' (node " + std::to_string(ni) + ")";
    if (n.op == OpKind::Linear) {
      char role = pattern[linear_index++ % pattern.size()];
      if (tp == 1) role = '-';
      const Tensor& w = weight(n.inputs[1], n);
      const int64_t out = w.shape()[0], inner = w.shape()[1];
      Builder b(rb.dst);
      if (role == 'C') {
        RLX_CHECK(!any_split, "[shard] column-parallel Linear ", where, " reads a split tensor (pattern ", pattern, ")");
        RLX_CHECK(out % tp == 0, "[shard] Linear ", where, ": ", out, " output features do not split over ", tp, " ranks");
        int64_t lo = rank * out / tp, hi = (rank + 1) * out / tp;
        std::vector<ValueId> nin{ins[0], b.constant(slice_dim(w, 0, lo, hi))};
        if (n.inputs.size() > 2) nin.push_back(b.constant(slice_dim(weight(n.inputs[2], n), 0, lo, hi)));
        rb.copy(n, nin, n.attrs);
        split.insert(n.outputs[0]);
        ++rep.column;
        continue;
      }
      if (role == 'R') {
        RLX_CHECK(any_split && split.count(n.inputs[0]), "[shard] row-parallel Linear ", where,
                  " needs a split input (pattern ", pattern, ")");
        RLX_CHECK(attr_str(n, "activation") == "none", "[shard] row-parallel Linear ", where,
                  " has a fused activation; it must follow the all_reduce");
        int64_t lo = rank * inner / tp, hi = (rank + 1) * inner / tp;
        ValueId part = b.op1(OpKind::Linear, {ins[0], b.constant(slice_dim(w, 1, lo, hi))});
        ValueId y = b.op1(OpKind::AllReduce, {part}, {{"reduce", std::string("sum")}, {"groups", world}});
        if (n.inputs.size() > 2) y = b.add(y, ins[2]);
        rb.bind(n, {y});
        InsertedCollective c{"all_reduce(sum)", "Linear " + where, std::string(dtype_name(b.dtype(y))) + shape_str(b.shape(y)),
                             static_cast<int64_t>(dtype_size(b.dtype(y))), {}};
        for (auto& d : b.shape(y)) {
          if (d.is_static()) c.bytes_per_unit *= d.v;
          else c.syms.push_back(d.sym);
        }
        rep.collectives.push_back(c);
        ++rep.row;
        continue;
      }
      RLX_CHECK(!any_split, "[shard] replicated Linear ", where, " reads a split tensor (pattern ", pattern, ")");
      rb.copy(n, ins, n.attrs);
      ++rep.replicated_linear;
      continue;
    }
    if (!any_split) {
      rb.copy(n, ins, n.attrs);
      continue;
    }
    // Ops that work on the split features as they are.
    Attrs at = n.attrs;
    switch (n.op) {
      case OpKind::Reshape: {
        Shape s = attr_dims(n, "shape");
        bool done = false;
        for (auto& d : s)
          if (d.is_static() && !done) {
            RLX_CHECK(d.v % tp == 0, "[shard] reshape ", where, ": dim ", d.v, " does not split over ", tp, " ranks");
            d.v /= tp;
            done = true;
          }
        RLX_CHECK(done, "[shard] reshape ", where, " of a split tensor has no static dim to split");
        at["shape"] = s;
        break;
      }
      case OpKind::Transpose:
      case OpKind::Attention:
      case OpKind::Gelu:
      case OpKind::Relu:
      case OpKind::Silu:
      case OpKind::Tanh:
      case OpKind::Logistic:
      case OpKind::StopGradient: break;
      default:
        fail("[shard] ", op_name(n.op), " ", where, " reads a tensor split across ranks, which the pattern ", pattern,
             " does not cover (only reshape, transpose, attention and activations run on split features)");
    }
    rb.copy(n, ins, at);
    for (auto o : n.outputs) split.insert(o);
  }
  for (auto o : g.outputs)
    RLX_CHECK(!split.count(o), "[shard] a graph output is still split across ranks: the pattern ", pattern,
              " ends with a column-parallel Linear");
  if (report) *report = rep;
  return eliminate_dead_code(rb.finish());
}

}  // namespace rlx
