// shard-tensor-parallel: one rank's part of a Megatron-style tensor-parallel graph (passes/shard.h).
// Values split across ranks (the features of a column-parallel Linear's output) are tracked from
// the column Linear to the row Linear that consumes them; everything else stays replicated.
#include <cstring>
#include <map>
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
       " row-parallel, " + std::to_string(replicated_linear) + " replicated Linear(s), " +
       std::to_string(vocab_parallel) + " vocab-parallel embedding/LM head; " +
       std::to_string(collectives.size()) + " collective(s) per forward pass\n";
  return s;
}

std::string shard_pattern(const std::string& preset) {
  if (preset == "mlp") return "CR";
  if (preset == "bert") return "CCCRCR";
  if (preset == "llama") return "CCCRCCR";
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

// Collective report entry: the value's type and its bytes (symbolic dims kept as factors).
InsertedCollective collective_entry(Builder& b, ValueId y, std::string op, std::string where) {
  InsertedCollective c{std::move(op), std::move(where), std::string(dtype_name(b.dtype(y))) + shape_str(b.shape(y)),
                       static_cast<int64_t>(dtype_size(b.dtype(y))), {}};
  for (auto& d : b.shape(y)) {
    if (d.is_static()) c.bytes_per_unit *= d.v;
    else c.syms.push_back(d.sym);
  }
  return c;
}

bool is_binary_elementwise(OpKind k) {
  return k == OpKind::Add || k == OpKind::Sub || k == OpKind::Mul || k == OpKind::Div || k == OpKind::Max ||
         k == OpKind::Min;
}

}  // namespace

Graph shard_tensor_parallel(const Graph& g, const std::string& preset, int64_t tp, int64_t rank, ShardReport* report) {
  RLX_CHECK(tp >= 1 && rank >= 0 && rank < tp, "[shard] rank ", rank, " of tp ", tp);
  std::string pattern = shard_pattern(preset);
  const bool vocab_parallel = preset == "llama" && tp > 1;
  ShardReport rep;
  rep.tp = tp;
  rep.rank = rank;
  rep.pattern = pattern;
  std::vector<int64_t> world;
  for (int64_t r = 0; r < tp; ++r) world.push_back(r);

  GraphRebuild rb(g);
  std::map<ValueId, int64_t> split;  // src values split across ranks -> the split axis
  std::set<ValueId> is_output(g.outputs.begin(), g.outputs.end());
  auto full_shape = [&](ValueId v) -> const Shape& { return g.values[v].type.shape; };
  auto producer_constant = [&](ValueId v) -> const Tensor* {
    int32_t p = g.values[v].producer;
    return p >= 0 && g.nodes[p].op == OpKind::Constant ? &attr_tensor(g.nodes[p], "value") : nullptr;
  };
  auto weight = [&](ValueId v, const Node& at) -> const Tensor& {
    const Tensor* t = producer_constant(v);
    RLX_CHECK(t, "[shard] ", op_name(at.op), " '", at.name, "': weights must be graph constants to be split");
    return *t;
  };
  // This rank's part along `axis` of a replicated operand: a constant is sliced here, any other
  // value (a KV cache input) gathered with a constant index list, so every rank's graph has the
  // same structure and attributes (the start-up hash compares constants by shape, not value).
  auto rank_part = [&](Builder& b, ValueId src, ValueId dst, int64_t axis, const auto& fail_here) -> ValueId {
    const Shape& vs = full_shape(src);
    if (!vs[axis].is_static() || vs[axis].v % tp) fail_here("a replicated operand spans the split axis");
    const int64_t lo = rank * vs[axis].v / tp, hi = (rank + 1) * vs[axis].v / tp;
    if (const Tensor* c = producer_constant(src)) return b.constant(slice_dim(*c, axis, lo, hi));
    Tensor idx(DType::i64, {hi - lo});
    for (int64_t i = lo; i < hi; ++i) idx.data<int64_t>()[i - lo] = i;
    return b.op1(OpKind::Gather, {dst, b.constant(idx)}, {{"axis", axis}});
  };
  int64_t linear_index = 0;
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node& n = g.nodes[ni];
    auto ins = rb.inputs_of(n);
    bool any_split = false;
    for (auto v : n.inputs) any_split = any_split || split.count(v);
    const std::string where = "'" + (n.name.empty() ? std::string(op_name(n.op)) : n.name) + "' (node " + std::to_string(ni) + ")";
    Builder b(rb.dst);
    // Vocab-parallel embedding: each rank holds rows [lo, hi) of the table, looks up the ids in its
    // range (others read row 0 and are zeroed), and all_reduce(sum) assembles every row.
    if (vocab_parallel && n.op == OpKind::Embedding && producer_constant(n.inputs[0]) && !any_split) {
      const Tensor& table = weight(n.inputs[0], n);
      const int64_t vocab = table.shape()[0];
      RLX_CHECK(vocab % tp == 0, "[shard] embedding ", where, ": vocabulary ", vocab, " does not split over ", tp, " ranks");
      const int64_t lo = rank * vocab / tp, hi = (rank + 1) * vocab / tp;
      DType it = b.dtype(ins[1]);
      ValueId ids = ins[1];
      ValueId inside = b.mul(b.convert(b.op1(OpKind::Ge, {ids, b.scalar(double(lo), it)}), DType::f32),
                             b.convert(b.op1(OpKind::Lt, {ids, b.scalar(double(hi), it)}), DType::f32));
      ValueId local = b.max(b.op1(OpKind::Min, {b.sub(ids, b.scalar(double(lo), it)), b.scalar(double(hi - lo - 1), it)}),
                            b.scalar(0.0, it));
      ValueId e = b.op1(OpKind::Embedding, {b.constant(slice_dim(table, 0, lo, hi)), local});
      Shape ms = b.shape(inside);
      ms.push_back(Dim(1));
      e = b.mul(e, b.convert(b.reshape(inside, ms), b.dtype(e)));
      ValueId y = b.op1(OpKind::AllReduce, {e}, {{"reduce", std::string("sum")}, {"groups", world}});
      rb.bind(n, {y});
      rep.collectives.push_back(collective_entry(b, y, "all_reduce(sum)", "vocab-parallel Embedding " + where));
      ++rep.vocab_parallel;
      continue;
    }
    if (n.op == OpKind::Linear) {
      const bool head = vocab_parallel && is_output.count(n.outputs[0]);  // the LM head
      char role = head ? 'V' : pattern[linear_index++ % pattern.size()];
      if (tp == 1) role = '-';
      const Tensor& w = weight(n.inputs[1], n);
      const int64_t out = w.shape()[0], inner = w.shape()[1];
      const int64_t last = static_cast<int64_t>(full_shape(n.inputs[0]).size()) - 1;
      if (role == 'C' || role == 'V') {
        RLX_CHECK(!any_split, "[shard] column-parallel Linear ", where, " reads a split tensor (pattern ", pattern, ")");
        RLX_CHECK(out % tp == 0, "[shard] Linear ", where, ": ", out, " output features do not split over ", tp, " ranks");
        int64_t lo = rank * out / tp, hi = (rank + 1) * out / tp;
        std::vector<ValueId> nin{ins[0], b.constant(slice_dim(w, 0, lo, hi))};
        if (n.inputs.size() > 2) nin.push_back(b.constant(slice_dim(weight(n.inputs[2], n), 0, lo, hi)));
        if (role == 'V') {  // vocab-parallel LM head: each rank's logits, all-gathered along the vocabulary
          ValueId part = b.op1(OpKind::Linear, nin, n.attrs);
          ValueId y = b.op1(OpKind::AllGather, {part}, {{"axis", last}, {"groups", world}});
          rb.bind(n, {y});
          rep.collectives.push_back(collective_entry(b, y, "all_gather(axis " + std::to_string(last) + ")",
                                                     "vocab-parallel Linear " + where));
          ++rep.vocab_parallel;
          continue;
        }
        rb.copy(n, nin, n.attrs);
        split[n.outputs[0]] = last;
        ++rep.column;
        continue;
      }
      if (role == 'R') {
        RLX_CHECK(any_split && split.count(n.inputs[0]) && split[n.inputs[0]] == last, "[shard] row-parallel Linear ",
                  where, " needs an input split along its features (pattern ", pattern, ")");
        RLX_CHECK(attr_str(n, "activation") == "none", "[shard] row-parallel Linear ", where,
                  " has a fused activation; it must follow the all_reduce");
        int64_t lo = rank * inner / tp, hi = (rank + 1) * inner / tp;
        ValueId part = b.op1(OpKind::Linear, {ins[0], b.constant(slice_dim(w, 1, lo, hi))});
        ValueId y = b.op1(OpKind::AllReduce, {part}, {{"reduce", std::string("sum")}, {"groups", world}});
        if (n.inputs.size() > 2) y = b.add(y, ins[2]);
        rb.bind(n, {y});
        rep.collectives.push_back(collective_entry(b, y, "all_reduce(sum)", "Linear " + where));
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
    // Ops that work on the split values as they are (each rank its share of the heads or features).
    const int64_t out_rank = static_cast<int64_t>(g.values[n.outputs[0]].type.shape.size());
    int64_t axis = -1;  // the output's split axis
    for (auto v : n.inputs)
      if (split.count(v) && axis < 0) axis = split[v] + out_rank - static_cast<int64_t>(full_shape(v).size());
    auto fail_here = [&](const std::string& why) {
      fail("[shard] ", op_name(n.op), " ", where, " reads a tensor split across ranks along axis ", axis, ": ", why,
           " (pattern ", pattern, ")");
    };
    Attrs at = n.attrs;
    switch (n.op) {
      case OpKind::Reshape: {
        // The split axis keeps its place, with the dims before it unchanged ([B,S,H·D] <-> [B,S,H,D]):
        // the dim there (heads, or the features) divides by tp.
        Shape s = attr_dims(n, "shape");
        const Shape& in = full_shape(n.inputs[0]);
        int64_t a = split[n.inputs[0]];
        bool prefix = a < static_cast<int64_t>(s.size()) && s[a].is_static();
        for (int64_t d = 0; prefix && d < a; ++d) prefix = s[d] == in[d];
        if (!prefix) fail_here("a reshape must keep the dims before the split axis and a static dim on it");
        RLX_CHECK(s[a].v % tp == 0, "[shard] reshape ", where, ": dim ", s[a].v, " (axis ", a, ") does not split over ", tp,
                  " ranks");
        s[a].v /= tp;
        at["shape"] = s;
        axis = a;
        break;
      }
      case OpKind::Transpose: {
        auto perm = attr_ints(n, "perm");
        for (size_t i = 0; i < perm.size(); ++i)
          if (perm[i] == split[n.inputs[0]]) axis = static_cast<int64_t>(i);
        break;
      }
      case OpKind::Attention:  // q, k, v split along the heads (axis 1); a mask stays replicated
        for (size_t i = 0; i < 3; ++i)
          if (!split.count(n.inputs[i]) || split[n.inputs[i]] != 1) fail_here("attention needs q, k and v split by heads");
        if (n.inputs.size() > 3 && split.count(n.inputs[3])) fail_here("the attention mask must be replicated");
        axis = 1;
        break;
      case OpKind::RmsNorm:  // normalizes the last axis: fine when the heads, not the features, are split
      case OpKind::Rope:
        if (axis == out_rank - 1 || (n.inputs.size() > 1 && split.count(n.inputs[1])))
          fail_here("it reads along the split axis");
        break;
      case OpKind::Slice: {
        auto st = attr_ints(n, "start"), lim = attr_ints(n, "limit");
        const Shape& in = full_shape(n.inputs[0]);
        if (st[axis] != 0 || !in[axis].is_static() || lim[axis] != in[axis].v) fail_here("a slice along the split axis");
        lim[axis] /= tp;
        at["limit"] = lim;
        break;
      }
      case OpKind::Concatenate: {  // a replicated input (a KV cache's past) is cut to this rank's part
        int64_t cat = attr_int(n, "axis");
        if (cat < 0) cat += out_rank;  // the importers and builders allow negative axes
        if (cat == axis) fail_here("a concatenation along the split axis");
        for (size_t i = 0; i < n.inputs.size(); ++i) {
          if (split.count(n.inputs[i]) && split[n.inputs[i]] != axis) fail_here("the inputs are split along different axes");
          if (!split.count(n.inputs[i])) ins[i] = rank_part(b, n.inputs[i], ins[i], axis, fail_here);
        }
        break;
      }
      case OpKind::Gelu:
      case OpKind::Relu:
      case OpKind::Silu:
      case OpKind::Tanh:
      case OpKind::Logistic:
      case OpKind::Convert:
      case OpKind::StopGradient: break;
      default:
        if (!is_binary_elementwise(n.op))
          fail_here("only reshape, transpose, slice, concatenate, attention, rms_norm, rope, activations and "
                    "elementwise arithmetic run on split values");
        // Elementwise: a split operand along another axis fails; a replicated operand that
        // broadcasts over the split axis stays; a constant that spans it is sliced to this rank's part.
        for (size_t i = 0; i < n.inputs.size(); ++i) {
          ValueId v = n.inputs[i];
          const Shape& vs = full_shape(v);
          int64_t va = axis - (out_rank - static_cast<int64_t>(vs.size()));
          if (split.count(v)) {
            if (split[v] != va) fail_here("the operands are split along different axes");
            continue;
          }
          if (va < 0 || (vs[va].is_static() && vs[va].v == 1)) continue;
          ins[i] = rank_part(b, v, ins[i], va, fail_here);
        }
    }
    rb.copy(n, ins, at);
    for (auto o : n.outputs) split[o] = axis;
  }
  // A graph output still split (per-head K/V of a decoder step) is all-gathered along its split
  // axis, so the sharded graph returns what the original does.
  Graph dst = rb.finish();
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    auto it = split.find(g.outputs[i]);
    if (it == split.end()) continue;
    RLX_CHECK(vocab_parallel, "[shard] a graph output is still split across ranks: the pattern ", pattern,
              " ends with a column-parallel Linear");
    Builder b(dst);
    ValueId y = b.op1(OpKind::AllGather, {dst.outputs[i]}, {{"axis", it->second}, {"groups", world}});
    dst.outputs[i] = y;
    rep.collectives.push_back(collective_entry(b, y, "all_gather(axis " + std::to_string(it->second) + ")",
                                               "graph output " + std::to_string(i)));
  }
  if (report) *report = rep;
  return eliminate_dead_code(dst);
}

}  // namespace rlx
