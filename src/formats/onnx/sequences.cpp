// ONNX sequences and optionals. At import a sequence- or optional-typed value is a static
// list of graph values (CompositeValue): its length, and whether an optional holds an element, are
// fixed at import (by the model, or by the values fed for graph inputs); the element tensors stay
// ordinary run-time values. At the graph boundary each element is its own input/output NAME[i].
#include <algorithm>

#include "formats/onnx/control_flow.h"
#include "formats/onnx/onnx.h"

namespace rlx::onnx {

namespace {

const char* kCompositeOps[] = {"Identity",          "If",
                               "Loop",              "SequenceMap",
                               "SequenceConstruct", "SequenceEmpty",
                               "SequenceInsert",    "SequenceAt",
                               "SequenceErase",     "SequenceLength",
                               "ConcatFromSequence", "Optional",
                               "OptionalHasElement", "OptionalGetElement"};

CompositeValue seq_in(Ctx& c, int i) {
  if (!c.has_input(i)) c.error("missing sequence input " + std::to_string(i));
  auto it = c.composites.find(c.node().input(i));
  if (it == c.composites.end() || !it->second.sequence || (it->second.optional && !it->second.has_element))
    c.error("input '" + c.node().input(i) + "' is not a sequence");
  CompositeValue v = it->second;
  v.optional = false;
  v.has_element = true;
  return v;
}

void set_seq(Ctx& c, int i, CompositeValue v) {
  if (c.wants_output(i)) bind_item(c, c.node().output(i), Item::of(std::move(v)));
}

// A position input known at import, normalized into [0, n] (insert) or [0, n) (at/erase).
int64_t position(Ctx& c, int i, int64_t n, int64_t def, bool inclusive) {
  int64_t p = def;
  if (c.has_input(i)) {
    auto k = known_int(c, c.in(i));
    if (!k) c.error("position must be known at import time (computed at run time is unsupported)");
    p = *k;
  }
  if (p < 0) p += n;
  if (p < 0 || p > n || (!inclusive && p == n)) c.error("position " + std::to_string(p) + " out of range");
  return p;
}

// Element type and shape for the graph input element NAME[i].
Shape elem_shape(const ::onnx::TypeProto_Tensor& tt, const std::string& nm, const ImportOptions& o) {
  if (o.dim_params)
    for (auto& d : tt.shape().dim())
      if (d.has_dim_param() && !d.dim_param().empty()) o.dim_params->insert(d.dim_param());
  auto it = o.input_shapes.find(nm);
  if (it != o.input_shapes.end()) return to_shape(it->second);
  Shape s;
  int k = 0;
  for (auto& d : tt.shape().dim()) {
    if (d.has_dim_value()) s.push_back(Dim(d.dim_value()));
    else if (d.has_dim_param() && !d.dim_param().empty()) {
      auto b = o.bind.find(d.dim_param());
      s.push_back(b != o.bind.end() ? Dim(b->second) : Dim(d.dim_param()));
    } else
      s.push_back(Dim(nm + "_dim" + std::to_string(k)));
    ++k;
  }
  return s;
}

}  // namespace

bool is_composite_type(const ::onnx::TypeProto& t) { return t.has_sequence_type() || t.has_optional_type(); }

void bind_composite_input(Ctx& c, const ::onnx::ValueInfoProto& vi, const ImportOptions& o) {
  const std::string& name = vi.name();
  CompositeValue cv;
  const ::onnx::TypeProto* t = &vi.type();
  if (t->has_optional_type()) {
    cv.optional = true;
    t = &t->optional_type().elem_type();
  }
  cv.sequence = t->has_sequence_type();
  if (cv.sequence) t = &t->sequence_type().elem_type();
  RLX_CHECK(t->has_tensor_type(), "[onnx] graph input '", name, "': only sequences/optionals of tensors are supported");
  cv.elem_type = t->tensor_type().elem_type();
  DType dt;
  RLX_CHECK(onnx_dtype(cv.elem_type, &dt), "[onnx] graph input '", name, "': unsupported dtype ", onnx_dtype_name(cv.elem_type));
  auto it = o.sequence_lengths.find(name);
  RLX_CHECK(it != o.sequence_lengths.end(), "[onnx] graph input '", name,
            "' is a sequence/optional: its length must be known at import (feed it; ImportOptions::sequence_lengths)");
  int64_t n = it->second;
  if (n < 0) {
    RLX_CHECK(cv.optional, "[onnx] graph input '", name, "': negative sequence length");
    cv.has_element = false;
    n = 0;
  }
  RLX_CHECK(cv.sequence || n <= 1, "[onnx] graph input '", name, "': an optional tensor holds at most one element");
  for (int64_t i = 0; i < n; ++i) {
    std::string nm = name + "[" + std::to_string(i) + "]";
    V id = c.g().add_input(nm, dt, elem_shape(t->tensor_type(), nm, o));
    auto pv = o.input_values.find(nm);
    if (pv != o.input_values.end()) c.pin(id, pv->second);
    cv.elems.push_back(id);
  }
  c.composites[name] = cv;
}

void add_composite_output(Ctx& c, const ::onnx::ValueInfoProto& vi, std::set<V>& used) {
  Graph& g = c.g();
  std::vector<V> elems;
  auto it = c.composites.find(vi.name());
  if (it != c.composites.end()) elems = it->second.elems;
  else {
    auto te = c.env.find(vi.name());
    RLX_CHECK(te != c.env.end() && vi.type().has_optional_type(), "[onnx] graph output '", vi.name(), "' is never produced");
    elems.push_back(te->second);  // a tensor where an optional tensor is declared: a present optional
  }
  for (size_t i = 0; i < elems.size(); ++i) {
    V v = elems[i];
    std::string nm = vi.name() + "[" + std::to_string(i) + "]";
    bool is_in = std::find(g.inputs.begin(), g.inputs.end(), v) != g.inputs.end();
    if (is_in || used.count(v) || !g.values[v].name.empty())
      v = g.add_node(OpKind::Reshape, {v}, {{"shape", g.type(v).shape}}, nm)[0];
    used.insert(v);
    g.values[v].name = nm;
    g.outputs.push_back(v);
  }
}

bool convert_composite_node(Ctx& c) {
  const auto& n = c.node();
  bool any = false;
  for (auto& i : n.input()) any = any || (!i.empty() && c.composites.count(i));
  if (!any) return false;
  const std::string& op = n.op_type();
  if (op == "Identity") {
    bind_item(c, n.output(0), lookup(c, n.input(0)));
    return true;
  }
  for (auto* k : kCompositeOps)
    if (op == k) return false;  // these converters take composite inputs themselves
  for (auto& i : n.input())
    if (!i.empty() && c.composites.count(i)) c.error("input '" + i + "' is a sequence/optional, which " + op + " does not take");
  return false;
}

void register_sequence_ops(std::map<std::string, Converter>& r) {
  r["SequenceEmpty"] = [](Ctx& c) {
    CompositeValue v;
    v.elem_type = static_cast<int>(c.attr_i("dtype", 1));
    set_seq(c, 0, v);
  };
  r["SequenceConstruct"] = [](Ctx& c) {
    CompositeValue v;
    for (int i = 0; i < c.num_inputs(); ++i) v.elems.push_back(c.in(i));
    if (v.elems.empty()) c.error("SequenceConstruct needs at least one input");
    for (V e : v.elems)
      if (c.dtype(e) != c.dtype(v.elems[0])) c.error("sequence elements differ in dtype");
    v.elem_type = onnx_elem_type(c.dtype(v.elems[0]));
    set_seq(c, 0, v);
  };
  r["SequenceInsert"] = [](Ctx& c) {
    CompositeValue s = seq_in(c, 0);
    V t = c.in(1);
    int64_t n = static_cast<int64_t>(s.elems.size());
    int64_t p = position(c, 2, n, n, true);
    s.elems.insert(s.elems.begin() + p, t);
    s.elem_type = onnx_elem_type(c.dtype(t));
    set_seq(c, 0, s);
  };
  r["SequenceAt"] = [](Ctx& c) {
    CompositeValue s = seq_in(c, 0);
    int64_t p = position(c, 1, static_cast<int64_t>(s.elems.size()), 0, false);
    c.set_output(0, s.elems[static_cast<size_t>(p)]);
  };
  r["SequenceErase"] = [](Ctx& c) {
    CompositeValue s = seq_in(c, 0);
    int64_t n = static_cast<int64_t>(s.elems.size());
    int64_t p = position(c, 1, n, n - 1, false);
    s.elems.erase(s.elems.begin() + p);
    set_seq(c, 0, s);
  };
  r["SequenceLength"] = [](Ctx& c) {
    CompositeValue s = seq_in(c, 0);
    c.set_output(0, c.scalar(static_cast<double>(s.elems.size()), DType::i64));
  };
  r["SplitToSequence"] = [](Ctx& c) {
    V x = c.in(0);
    auto d = c.static_shape(x, "input");
    int64_t rk = c.rank(x), ax = c.attr_i("axis", 0);
    if (ax < 0) ax += rk;
    if (ax < 0 || ax >= rk) c.error("axis out of range");
    CompositeValue s;
    s.elem_type = onnx_elem_type(c.dtype(x));
    if (!c.has_input(1)) {
      bool keep = c.attr_i("keepdims", 1) != 0;
      for (int64_t i = 0; i < d[ax]; ++i) {
        V e = c.slice_axis(x, ax, i, i + 1);
        if (!keep) {
          auto sh = d;
          sh.erase(sh.begin() + ax);
          e = c.reshape(e, sh);
        }
        s.elems.push_back(e);
      }
      set_seq(c, 0, s);
      return;
    }
    const Tensor* st = c.try_const(c.in(1));
    if (!st) c.error("split must be known at import time (computed at run time is unsupported)");
    std::vector<int64_t> sizes;
    if (st->rank() == 0) {
      int64_t k = st->get_int(0);
      if (k <= 0) c.error("split must be positive");
      for (int64_t off = 0; off < d[ax]; off += k) sizes.push_back(std::min(k, d[ax] - off));
    } else {
      for (int64_t i = 0; i < st->numel(); ++i) sizes.push_back(st->get_int(i));
    }
    int64_t off = 0;
    for (auto k : sizes) {
      if (k < 0) c.error("negative split size");
      s.elems.push_back(c.slice_axis(x, ax, off, off + k));
      off += k;
    }
    if (off != d[ax]) c.error("split sizes do not sum to the axis length");
    set_seq(c, 0, s);
  };
  r["ConcatFromSequence"] = [](Ctx& c) {
    CompositeValue s = seq_in(c, 0);
    if (s.elems.empty()) c.error("ConcatFromSequence of an empty sequence");
    bool stack = c.attr_i("new_axis", 0) != 0;
    int64_t rk = c.rank(s.elems[0]), ax = c.attr_i("axis", 0);
    int64_t lim = stack ? rk + 1 : rk;
    if (ax < 0) ax += lim;
    if (ax < 0 || ax >= lim) c.error("axis out of range");
    std::vector<V> xs;
    for (V e : s.elems) {
      if (stack) {
        Shape sh = c.shape(e);
        sh.insert(sh.begin() + ax, Dim(1));
        e = c.reshape_dims(e, sh);
      }
      xs.push_back(e);
    }
    c.set_output(0, xs.size() == 1 ? xs[0] : c.op1(OpKind::Concatenate, xs, {{"axis", ax}}));
  };
  r["Optional"] = [](Ctx& c) {
    CompositeValue v;
    v.optional = true;
    if (c.has_input(0)) {
      Item it = lookup(c, c.node().input(0));
      if (it.composite) {
        if (it.cv.optional) c.error("an optional of an optional is unsupported");
        v = it.cv;
        v.optional = true;
      } else {
        v.sequence = false;
        v.elems.push_back(it.v);
        v.elem_type = onnx_elem_type(c.dtype(it.v));
      }
    } else {
      auto* a = c.attr("type");
      if (!a || !a->has_tp()) c.error("an empty Optional needs the 'type' attribute");
      const ::onnx::TypeProto* t = &a->tp();
      v.sequence = t->has_sequence_type();
      if (v.sequence) t = &t->sequence_type().elem_type();
      if (!t->has_tensor_type()) c.error("only optionals of tensors or sequences of tensors are supported");
      v.elem_type = t->tensor_type().elem_type();
      v.has_element = false;
    }
    set_seq(c, 0, v);
  };
  r["OptionalHasElement"] = [](Ctx& c) {
    // Presence is fixed at import (by the model or by the values fed), so the answer is a constant.
    bool has = false;
    if (c.has_input(0)) {
      auto it = c.composites.find(c.node().input(0));
      has = it == c.composites.end() || !it->second.optional || it->second.has_element;
      if (it == c.composites.end()) (void)c.in(0);  // the tensor must exist
    }
    c.set_output(0, c.scalar(has ? 1 : 0, DType::boolean));
  };
  r["OptionalGetElement"] = [](Ctx& c) {
    Item it = lookup(c, c.node().input(0));
    if (!it.composite) {
      c.set_output(0, it.v);
      return;
    }
    CompositeValue v = it.cv;
    if (v.optional && !v.has_element) c.error("the optional input is empty");
    if (v.sequence) {
      v.optional = false;
      set_seq(c, 0, v);
    } else {
      c.set_output(0, v.elems.at(0));
    }
  };
}

}  // namespace rlx::onnx
