// row-regions: the row-wise kernels over one [R, C] shape around a reduction over the last axis
// (softmax, log-softmax, cross-entropy and its backward, argmax accuracy, LayerNorm-style rows)
// become one generated kernel with attrs cpu_rows = R, cpu_cols = C and a multi-output body of
// reduce_* / argmax / broadcast_in_dim / reshape / elementwise nodes. The region runs where the
// seed reduction ran; a later kernel joins when it reads only buffers made before the seed or by
// members, and an earlier row kernel whose result only members read joins too. The backend says
// whether its row kernel covers the body (LirAbsorbs::row_region; cpu: fused.cpp rows_kernel).
#include <functional>
#include <string>

#include "lir/rewrite/pass.h"
#include "lir/rewrite/rows.h"
#include "lir/rewrite/uses.h"

namespace rlx {

namespace {

bool last_axis_reduce(const LirProgram& p, const LirKernel& k) {
  if (k.kind != KernelKind::Library || k.in.size() != 1 || k.out.size() != 1) return false;
  if (p.buffers[k.in[0]].type.shape.size() != 2 || p.buffers[k.in[0]].type.dtype != DType::f32) return false;
  Node n{k.op, {}, {}, k.attrs, ""};
  switch (k.op) {
    case OpKind::ReduceSum:
    case OpKind::ReduceMax:
    case OpKind::ReduceMin: {
      const auto& ax = attr_ints(n, "axes");
      return ax.size() == 1 && (ax[0] == 1 || ax[0] == -1);
    }
    case OpKind::ArgMax:
    case OpKind::ArgMin: {
      int64_t ax = attr_int(n, "axis");
      return ax == 1 || ax == -1;
    }
    default: return false;
  }
}

// A kernel that can join a region over [R, C] (the body check, rows_plan_ok, comes last).
bool row_member(const LirProgram& p, const LirKernel& k, int64_t R, int64_t C) {
  if (k.out.size() != 1 || k.attrs.count("cpu_epi") || k.attrs.count("cpu_rows")) return false;
  RowShape y = row_shape(p.buffers[k.out[0]].type.shape, R, C);
  if (y != RowShape::Full && y != RowShape::Row) return false;
  for (int b : k.in)
    if (row_shape(p.buffers[b].type.shape, R, C) == RowShape::None) return false;
  if (k.kind == KernelKind::Generated) {
    if (k.body.outputs.size() != 1) return false;
    for (auto& n : k.body.nodes)
      if (!is_elementwise(n.op)) return false;
    return true;
  }
  if (last_axis_reduce(p, k)) return row_shape(p.buffers[k.in[0]].type.shape, R, C) == RowShape::Full;
  return k.op == OpKind::BroadcastInDim || k.op == OpKind::Reshape || is_elementwise(k.op);
}

}  // namespace

RowShape row_shape(const Shape& s, int64_t R, int64_t C) {
  int64_t n = 1;
  for (auto& d : s) n *= d.v;
  if (n == 1) return RowShape::Scalar;
  if (s.size() == 2 && s[0].v == R && s[1].v == C) return RowShape::Full;
  if ((s.size() == 1 && s[0].v == R) || (s.size() == 2 && s[0].v == R && s[1].v == 1)) return RowShape::Row;
  if ((s.size() == 1 && s[0].v == C) || (s.size() == 2 && s[0].v == 1 && s[1].v == C)) return RowShape::Col;
  return RowShape::None;
}

int pass_row_regions(LirProgram& p, const LirAbsorbs& abs) {
  if (!abs.row_region) return 0;
  const size_t nb = p.buffers.size(), nk = p.kernels.size();
  auto root = [&](int b) { return lir_root(p, b); };
  std::vector<int> prod(nb, -1);
  for (size_t k = 0; k < nk; ++k)
    for (int b : p.kernels[k].out) prod[b] = static_cast<int>(k);
  std::vector<bool> dead(nk, false), in_region(nk, false);
  int changed = 0;
  for (size_t s = 0; s < nk; ++s) {
    if (dead[s] || in_region[s] || !last_axis_reduce(p, p.kernels[s])) continue;
    const Shape& xs = p.buffers[p.kernels[s].in[0]].type.shape;
    const int64_t R = xs[0].v, C = xs[1].v;
    if (R < 2 || R == C || !row_member(p, p.kernels[s], R, C)) continue;
    // The region runs where s runs. Grow forward: a later kernel joins when it reads only buffers made
    // before s or by members; kernels skipped in between keep their order after it.
    std::vector<bool> mem(nk, false);
    std::vector<size_t> members{s};
    mem[s] = true;
    // Back: a row kernel before s joins when nothing between it and s but members reads its result
    // (e.g. a bias add, or a residual sum before a LayerNorm-style row); it then runs at s.
    for (size_t j = s; j-- > 0 && j + 64 > s;) {
      if (dead[j] || in_region[j] || !row_member(p, p.kernels[j], R, C)) continue;
      const int ob = p.kernels[j].out[0];
      bool ok = p.buffers[ob].kind != BufferKind::Output;
      for (size_t q = j + 1; q < s && ok; ++q)
        if (!mem[q])
          for (int b : p.kernels[q].in) ok &= root(b) != ob;
      if (!ok) continue;
      mem[j] = true;
      members.insert(members.begin(), j);
    }
    for (size_t j = s + 1; j < nk && j < s + 256; ++j) {
      if (dead[j] || in_region[j] || !row_member(p, p.kernels[j], R, C)) continue;
      bool ok = true;
      for (int b : p.kernels[j].in) {
        int pb = prod[root(b)];
        ok &= pb < static_cast<int>(s) || mem[static_cast<size_t>(pb)];
      }
      if (!ok) continue;
      mem[j] = true;
      members.push_back(j);
    }
    if (members.size() < 2) continue;
    // The body: external buffers become inputs, views of member outputs become reshapes.
    Graph body;
    std::vector<int> ext;
    std::vector<ValueId> val(nb, -1);
    std::function<ValueId(int)> get = [&](int b) -> ValueId {
      if (val[b] >= 0) return val[b];
      const LirBuffer& lb = p.buffers[b];
      int pb = prod[root(b)];
      if (lb.kind == BufferKind::View && pb >= 0 && mem[static_cast<size_t>(pb)]) {
        ValueId src = get(lb.view_of);
        return val[b] = body.add_node(OpKind::Reshape, {src}, {{"shape", lb.type.shape}})[0];
      }
      ext.push_back(b);
      std::string name = "x";  // (not "x" + to_string: GCC 12 warns -Wrestrict on that)
      name += std::to_string(ext.size() - 1);
      return val[b] = body.add_input(name, lb.type.dtype, lb.type.shape);
    };
    bool built = true;
    try {
      for (size_t m : members) {
        const LirKernel& k = p.kernels[m];
        std::vector<ValueId> args;
        for (int b : k.in) args.push_back(get(b));
        if (k.kind == KernelKind::Library) {
          val[k.out[0]] = body.add_node(k.op, args, k.attrs, k.origin)[0];
          continue;
        }
        std::vector<ValueId> map(k.body.values.size(), -1);
        for (size_t i = 0; i < k.body.inputs.size(); ++i) map[k.body.inputs[i]] = args[i];
        for (const Node& n : k.body.nodes) {
          std::vector<ValueId> a;
          for (ValueId v : n.inputs) a.push_back(map[v]);
          map[n.outputs[0]] = body.add_node(n.op, a, n.attrs, n.name)[0];
        }
        val[k.out[0]] = map[k.body.outputs[0]];
      }
    } catch (const std::exception&) {
      built = false;  // a shape rule disagreed with the buffers: leave the kernels as they are
    }
    if (!built) continue;
    // Outputs: member results read after the region (directly or through a view) or returned.
    std::vector<int> outs;
    for (size_t m : members) {
      int ob = p.kernels[m].out[0];
      bool needed = p.buffers[ob].kind == BufferKind::Output;
      for (size_t j = 0; j < nk && !needed; ++j) {
        if (mem[j] || dead[j]) continue;
        for (int b : p.kernels[j].in) needed |= root(b) == ob;
      }
      for (int o : p.outputs) needed |= root(o) == ob;
      if (!needed) continue;
      if (body.type(val[ob]).shape != p.buffers[ob].type.shape) {
        built = false;
        break;
      }
      outs.push_back(ob);
      body.outputs.push_back(val[ob]);
    }
    if (!built || outs.empty() || !abs.row_region(body, R, C)) continue;
    LirKernel nkr;
    nkr.kind = KernelKind::Generated;
    nkr.body = std::move(body);
    nkr.in = ext;
    nkr.out = outs;
    nkr.attrs["cpu_rows"] = R;
    nkr.attrs["cpu_cols"] = C;
    nkr.origin = "rows";
    for (size_t m : members) {
      in_region[m] = true;
      if (m != s) dead[m] = true;
    }
    for (int o : outs) prod[o] = static_cast<int>(s);
    p.kernels[s] = std::move(nkr);
    ++changed;
  }
  lir_drop(p, dead);
  return changed;
}

}  // namespace rlx
