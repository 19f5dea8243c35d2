// ONNX control flow — If, Loop, Scan — lowered at import into a static graph.
//
// The graph rlx compiles has no control flow, so subgraph bodies are imported inline:
//   If    when the condition is known at import (a constant, or computed from constants), only the
//         taken branch is imported. Otherwise both branches are imported and each output is a
//         Select on the condition, which needs both branches to agree in shape and dtype; when they
//         do not and the condition is computed from fed input values (ImportOptions::input_values),
//         the graph is specialized on the taken branch, as it is for Reshape targets.
//   Loop  unrolled when the trip count is known at import (constant or computed from fed values).
//         A condition known at import ends the unrolling early; one only known at run time (with a
//         known trip count and no scan outputs) masks the remaining iterations with Selects.
//   Scan  unrolled over the scan axis, whose length comes from the static shape of the scan inputs.
// Unrolling stops with a clear error beyond kMaxUnroll iterations.
#include "formats/onnx/control_flow.h"

#include <algorithm>

namespace rlx::onnx {

// ---- shared helpers -------------------------------------------------------------------------------

Item lookup(Ctx& c, const std::string& name) {
  auto ci = c.composites.find(name);
  if (ci != c.composites.end()) return Item::of(ci->second);
  auto it = c.env.find(name);
  if (it == c.env.end()) c.error("value '" + name + "' is not defined before use");
  return Item::tensor(it->second);
}

void bind_item(Ctx& c, const std::string& name, const Item& it) {
  if (name.empty()) return;
  if (it.composite) {
    c.env.erase(name);
    c.composites[name] = it.cv;
  } else {
    c.composites.erase(name);
    c.env[name] = it.v;
  }
}

const ::onnx::GraphProto& graph_attr(Ctx& c, const char* name) {
  auto* a = c.attr(name);
  if (!a || !a->has_g()) c.error(std::string("missing graph attribute '") + name + "'");
  return a->g();
}

int onnx_elem_type(DType dt) {
  for (int t = 1; t <= 23; ++t) {
    DType d;
    if (onnx_dtype(t, &d) && d == dt) return t;
  }
  return 0;
}

namespace {

// Restores the importer's name scope and current node when a subgraph import ends (or throws).
struct ScopeGuard {
  Ctx& c;
  std::map<std::string, V> env;
  std::map<std::string, CompositeValue> composites;
  const ::onnx::NodeProto* node;
  explicit ScopeGuard(Ctx& cx) : c(cx), env(cx.env), composites(cx.composites), node(&cx.node()) {}
  ~ScopeGuard() {
    c.env = std::move(env);
    c.composites = std::move(composites);
    c.begin(node);
  }
};

// Condition as a scalar bool value (ONNX allows [1] too).
V as_scalar_bool(Ctx& c, V v) {
  if (c.rank(v) > 0) v = c.reshape(v, {});
  return c.convert(v, DType::boolean);
}

// Per-output merge of the two branches of an If whose condition is only known at run time.
Item select_item(Ctx& c, V cond, const Item& a, const Item& b) {
  auto sel = [&](V x, V y) {
    if (c.dtype(x) != c.dtype(y) || c.shape(x) != c.shape(y))
      c.error("branches produce " + std::string(dtype_name(c.dtype(x))) + shape_str(c.shape(x)) + " and " +
              std::string(dtype_name(c.dtype(y))) + shape_str(c.shape(y)) + " but the condition is only known at run time");
    if (x == y) return x;
    return c.select(c.broadcast_to(cond, c.shape(x)), x, y);
  };
  if (a.composite != b.composite) c.error("branches produce a tensor and a sequence/optional");
  if (!a.composite) return Item::tensor(sel(a.v, b.v));
  if (a.cv.optional != b.cv.optional || a.cv.has_element != b.cv.has_element || a.cv.elems.size() != b.cv.elems.size())
    c.error("branches produce sequences/optionals of different lengths but the condition is only known at run time");
  CompositeValue r = a.cv;
  for (size_t i = 0; i < r.elems.size(); ++i) r.elems[i] = sel(a.cv.elems[i], b.cv.elems[i]);
  return Item::of(r);
}

// Stacks per-iteration tensors along a new axis `axis` (of rank+1).
V stack(Ctx& c, const std::vector<V>& xs, int64_t axis) {
  std::vector<V> us;
  for (V x : xs) {
    Shape s = c.shape(x);
    s.insert(s.begin() + axis, Dim(1));
    us.push_back(c.reshape_dims(x, s));
  }
  return us.size() == 1 ? us[0] : c.op1(OpKind::Concatenate, us, {{"axis", axis}});
}

// Element `i` of `x` along `axis`, with that axis removed.
V take(Ctx& c, V x, int64_t axis, int64_t i) {
  V s = c.slice_axis(x, axis, i, i + 1);
  Shape sh = c.shape(s);
  sh.erase(sh.begin() + axis);
  return c.reshape_dims(s, sh);
}

V empty_stack(Ctx& c, DType dt, const Shape& elem) {
  std::vector<int64_t> d{0};
  for (auto& x : elem) {
    if (!x.is_static()) c.error("a zero-iteration scan output needs a static element shape");
    d.push_back(x.v);
  }
  return c.constant(Tensor(dt, d));
}

std::vector<int64_t> scan_attr(Ctx& c, const char* name, int64_t n) {
  auto v = c.attr_ints(name);
  if (v.empty()) v.assign(static_cast<size_t>(n), 0);
  if (static_cast<int64_t>(v.size()) != n) c.error(std::string("attribute ") + name + " has the wrong length");
  return v;
}

// Scan's body over `T` steps: states carried, scan inputs sliced along their axes. Returns final
// states followed by the scan outputs (stacked along their axes).
std::vector<V> run_scan(Ctx& c, const ::onnx::GraphProto& body, std::vector<V> states, const std::vector<V>& xs,
                        const std::vector<int64_t>& in_axes, const std::vector<int64_t>& in_dirs,
                        const std::vector<int64_t>& out_axes, const std::vector<int64_t>& out_dirs) {
  int64_t T = -1;
  std::vector<int64_t> ax(xs.size());
  for (size_t j = 0; j < xs.size(); ++j) {
    int64_t r = c.rank(xs[j]);
    ax[j] = in_axes[j] < 0 ? in_axes[j] + r : in_axes[j];
    if (ax[j] < 0 || ax[j] >= r) c.error("scan_input_axes out of range");
    const Dim& d = c.shape(xs[j])[ax[j]];
    if (!d.is_static()) c.error("scan length is symbolic ('" + d.sym + "'); bind it (--bind) to import");
    if (T >= 0 && d.v != T) c.error("scan inputs disagree on the scan length");
    T = d.v;
  }
  if (T < 0) c.error("Scan without scan inputs is unsupported");
  if (T > kMaxUnroll) c.error("scan length " + std::to_string(T) + " exceeds the unroll limit " + std::to_string(kMaxUnroll));
  size_t N = states.size(), K = static_cast<size_t>(body.output_size()) - N;
  std::vector<std::vector<V>> outs(K);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<Item> args;
    for (V s : states) args.push_back(Item::tensor(s));
    for (size_t j = 0; j < xs.size(); ++j) args.push_back(Item::tensor(take(c, xs[j], ax[j], in_dirs[j] ? T - 1 - t : t)));
    auto r = import_subgraph(c, body, args);
    for (size_t i = 0; i < N; ++i) {
      if (r[i].composite) c.error("sequence-valued scan states are unsupported");
      states[i] = r[i].v;
    }
    for (size_t k = 0; k < K; ++k) {
      if (r[N + k].composite) c.error("sequence-valued scan outputs are unsupported");
      outs[k].push_back(r[N + k].v);
    }
  }
  std::vector<V> res = states;
  for (size_t k = 0; k < K; ++k) {
    if (T == 0) c.error("a zero-length scan with scan outputs is unsupported");
    if (out_dirs[k]) std::reverse(outs[k].begin(), outs[k].end());
    int64_t r = c.rank(outs[k][0]) + 1, a = out_axes[k] < 0 ? out_axes[k] + r : out_axes[k];
    if (a < 0 || a >= r) c.error("scan_output_axes out of range");
    res.push_back(stack(c, outs[k], a));
  }
  return res;
}

}  // namespace

std::optional<int64_t> known_int(Ctx& c, V v) {
  const Tensor* t = c.try_const(v);
  if (!t || t->numel() != 1) return std::nullopt;
  return t->get_int(0);
}

std::vector<Item> import_subgraph(Ctx& c, const ::onnx::GraphProto& body, const std::vector<Item>& args) {
  if (static_cast<int>(args.size()) != body.input_size())
    c.error("subgraph '" + body.name() + "' takes " + std::to_string(body.input_size()) + " inputs, given " +
            std::to_string(args.size()));
  std::string where = c.where();
  ScopeGuard guard(c);
  for (auto& t : body.initializer()) {
    V id = c.constant(tensor_from_proto(t, "", where + " subgraph"));
    bind_item(c, t.name(), Item::tensor(id));
  }
  for (int i = 0; i < body.input_size(); ++i) bind_item(c, body.input(i).name(), args[i]);
  for (auto& n : body.node()) import_node(c, n);
  std::vector<Item> outs;
  for (auto& o : body.output()) outs.push_back(lookup(c, o.name()));
  return outs;
}

void register_control_flow_ops(std::map<std::string, Converter>& r) {
  r["If"] = [](Ctx& c) {
    V cond = c.in(0);
    const auto& tb = graph_attr(c, "then_branch");
    const auto& eb = graph_attr(c, "else_branch");
    auto set_all = [&](const std::vector<Item>& outs) {
      if (static_cast<int>(outs.size()) != c.num_outputs()) c.error("branch output count differs from the node's");
      for (int i = 0; i < c.num_outputs(); ++i) bind_item(c, c.node().output(i), outs[i]);
    };
    if (const Tensor* k = c.cval(cond)) {
      set_all(import_subgraph(c, k->get(0) != 0 ? tb : eb, {}));
      return;
    }
    const Tensor* fed = c.try_const(cond);  // computed from fed input values
    std::string why;
    try {
      auto a = import_subgraph(c, tb, {}), b = import_subgraph(c, eb, {});
      if (a.size() != b.size()) c.error("branches have different output counts");
      V p = as_scalar_bool(c, cond);
      std::vector<Item> outs;
      for (size_t i = 0; i < a.size(); ++i) outs.push_back(select_item(c, p, a[i], b[i]));
      set_all(outs);
      return;
    } catch (const Error&) {
      if (!fed) throw;
    }
    set_all(import_subgraph(c, fed->get(0) != 0 ? tb : eb, {}));
  };

  r["Loop"] = [](Ctx& c) {
    const auto& body = graph_attr(c, "body");
    int n_carried = c.num_inputs() - 2;
    if (n_carried < 0) c.error("Loop needs at least the trip-count and condition inputs");
    int n_scan = body.output_size() - 1 - n_carried;
    if (n_scan < 0 || body.input_size() != 2 + n_carried) c.error("body signature does not match the node");
    std::optional<int64_t> M;
    if (c.has_input(0)) {
      M = known_int(c, c.in(0));
      if (!M) c.error("trip count is only known at run time; the loop cannot be unrolled at import");
    }
    V cond = c.has_input(1) ? c.in(1) : c.scalar(1, DType::boolean);
    std::vector<Item> carried;
    for (int i = 0; i < n_carried; ++i) carried.push_back(lookup(c, c.node().input(2 + i)));
    std::optional<V> alive;  // set once the condition is only known at run time
    std::vector<std::vector<V>> scans(static_cast<size_t>(n_scan));
    int64_t iters = 0;
    for (int64_t i = 0;; ++i) {
      if (M && i >= *M) break;
      if (!alive) {
        auto k = known_int(c, cond);
        if (k && !*k) break;
        if (!k) {
          if (!M) c.error("the loop condition is only known at run time and there is no trip count");
          if (n_scan) c.error("scan outputs of a loop whose condition is only known at run time are unsupported");
          alive = as_scalar_bool(c, cond);
        }
      }
      if (i >= kMaxUnroll) c.error("more than " + std::to_string(kMaxUnroll) + " iterations; the loop is unrolled at import");
      std::vector<Item> args{Item::tensor(c.scalar(static_cast<double>(i), DType::i64)), Item::tensor(cond)};
      for (auto& it : carried) args.push_back(it);
      auto outs = import_subgraph(c, body, args);
      if (outs[0].composite) c.error("the body's condition output is not a tensor");
      V cond_out = outs[0].v;
      for (int k = 0; k < n_carried; ++k) {
        Item nv = outs[1 + k];
        if (alive) nv = select_item(c, *alive, nv, carried[k]);
        carried[k] = nv;
      }
      for (int k = 0; k < n_scan; ++k) {
        const Item& s = outs[1 + n_carried + k];
        if (s.composite) c.error("sequence-valued scan outputs are unsupported");
        scans[k].push_back(s.v);
      }
      if (alive) alive = c.bin(OpKind::And, *alive, as_scalar_bool(c, cond_out));
      cond = cond_out;
      ++iters;
    }
    for (int k = 0; k < n_carried; ++k) bind_item(c, c.node().output(k), carried[k]);
    if (n_scan && iters == 0) {
      // No iteration ran: the scan outputs are empty; their element types come from the body.
      std::vector<Item> args{Item::tensor(c.scalar(0, DType::i64)), Item::tensor(cond)};
      for (auto& it : carried) args.push_back(it);
      auto outs = import_subgraph(c, body, args);
      for (int k = 0; k < n_scan; ++k) {
        V s = outs[1 + n_carried + k].v;
        bind_item(c, c.node().output(n_carried + k), Item::tensor(empty_stack(c, c.dtype(s), c.shape(s))));
      }
      return;
    }
    for (int k = 0; k < n_scan; ++k) bind_item(c, c.node().output(n_carried + k), Item::tensor(stack(c, scans[k], 0)));
  };

  r["Scan"] = [](Ctx& c) {
    const auto& body = graph_attr(c, "body");
    int64_t M = c.attr_i("num_scan_inputs", -1);
    if (M < 1) c.error("num_scan_inputs is required");
    if (c.opset() < 9) {
      // Scan-8: a leading batch axis on every state and scan input; optional sequence_lens first.
      if (c.has_input(0)) c.error("sequence_lens is unsupported");
      int64_t N = c.num_inputs() - 1 - M;
      if (N < 0) c.error("fewer inputs than num_scan_inputs");
      std::vector<V> st, xs;
      for (int64_t i = 0; i < N; ++i) st.push_back(c.in(static_cast<int>(1 + i)));
      for (int64_t j = 0; j < M; ++j) xs.push_back(c.in(static_cast<int>(1 + N + j)));
      auto dirs = scan_attr(c, "directions", M);
      int64_t K = body.output_size() - N;
      const Dim& bd = c.shape(xs[0])[0];
      if (!bd.is_static()) c.error("batch size is symbolic; bind it (--bind) to import");
      std::vector<std::vector<V>> per(static_cast<size_t>(N + K));
      for (int64_t b = 0; b < bd.v; ++b) {
        std::vector<V> sb, xb;
        for (V s : st) sb.push_back(take(c, s, 0, b));
        for (V x : xs) xb.push_back(take(c, x, 0, b));
        auto r = run_scan(c, body, sb, xb, std::vector<int64_t>(M, 0), dirs, std::vector<int64_t>(K, 0),
                          std::vector<int64_t>(K, 0));
        for (size_t i = 0; i < r.size(); ++i) per[i].push_back(r[i]);
      }
      for (int64_t i = 0; i < N + K; ++i) {
        if (bd.v == 0) c.error("a zero batch is unsupported");
        c.set_output(static_cast<int>(i), stack(c, per[i], 0));
      }
      return;
    }
    int64_t N = c.num_inputs() - M;
    if (N < 0) c.error("fewer inputs than num_scan_inputs");
    int64_t K = body.output_size() - N;
    if (K < 0 || body.input_size() != c.num_inputs()) c.error("body signature does not match the node");
    std::vector<V> st, xs;
    for (int64_t i = 0; i < N; ++i) st.push_back(c.in(static_cast<int>(i)));
    for (int64_t j = 0; j < M; ++j) xs.push_back(c.in(static_cast<int>(N + j)));
    auto r = run_scan(c, body, st, xs, scan_attr(c, "scan_input_axes", M), scan_attr(c, "scan_input_directions", M),
                      scan_attr(c, "scan_output_axes", K), scan_attr(c, "scan_output_directions", K));
    for (size_t i = 0; i < r.size(); ++i) c.set_output(static_cast<int>(i), r[i]);
  };

  // SequenceMap: the body applied to the sequences' elements in turn (tensor inputs passed whole).
  r["SequenceMap"] = [](Ctx& c) {
    const auto& body = graph_attr(c, "body");
    std::vector<Item> ins;
    for (int i = 0; i < c.num_inputs(); ++i) ins.push_back(lookup(c, c.node().input(i)));
    if (!ins[0].composite || !ins[0].cv.sequence) c.error("input 0 must be a sequence");
    size_t n = ins[0].cv.elems.size();
    for (auto& it : ins)
      if (it.composite && it.cv.elems.size() != n) c.error("input sequences differ in length");
    std::vector<CompositeValue> outs(static_cast<size_t>(c.num_outputs()));
    for (int k = 0; k < body.output_size() && k < c.num_outputs(); ++k) {
      const auto& tt = body.output(k).type();
      if (tt.has_sequence_type() && tt.sequence_type().elem_type().has_tensor_type())
        outs[k].elem_type = tt.sequence_type().elem_type().tensor_type().elem_type();
      else if (tt.has_tensor_type())
        outs[k].elem_type = tt.tensor_type().elem_type();
    }
    for (size_t e = 0; e < n; ++e) {
      std::vector<Item> args;
      for (auto& it : ins) args.push_back(it.composite ? Item::tensor(it.cv.elems[e]) : it);
      auto r = import_subgraph(c, body, args);
      for (size_t k = 0; k < outs.size(); ++k) {
        if (r[k].composite) c.error("body outputs must be tensors");
        outs[k].elems.push_back(r[k].v);
        outs[k].elem_type = onnx_elem_type(c.dtype(r[k].v));
      }
    }
    for (size_t k = 0; k < outs.size(); ++k) bind_item(c, c.node().output(static_cast<int>(k)), Item::of(outs[k]));
  };
}

}  // namespace rlx::onnx
