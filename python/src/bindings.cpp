// rlx._rlx: the nanobind layer under `import rlx`. It speaks value ids, strings and numpy arrays
// (through nb::ndarray); the friendlier objects (Value handles, kwargs as attributes) live in
// python/rlx/__init__.py. Arrays are always copied in and out, so no numpy array aliases RLX memory.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "rlx/device.h"
#include "rlx/graph.h"
#include "rlx/npy.h"
#include "rlx/reference.h"
#include "rlx/session.h"
#include "rlx/text.h"
// Training: autodiff transforms, the compiled train step, the MNIST model builders.
#include "autodiff/autodiff.h"
#include "models/bert/bert.h"
#include "models/generate.h"
#include "models/load_model.h"
#include "models/qwen3/qwen3.h"
#include "models/mlp.h"
#include "rlx/builder.h"
#include "train/train.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace rlx {
void bind_sparse(nb::module_& m);  // bind_sparse.cpp: rlx.sparse's Matrix Market and COO helpers
namespace {

// Any C-contiguous CPU array; nanobind makes a contiguous copy of strided input itself.
using InArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
namespace dl = nb::dlpack;

// ---- dtypes and arrays ------------------------------------------------------------------------

dl::dtype to_dl(DType t) {
  auto mk = [](dl::dtype_code c, int bits) {
    return dl::dtype{static_cast<uint8_t>(c), static_cast<uint8_t>(bits), 1};
  };
  switch (t) {
    case DType::f32: return mk(dl::dtype_code::Float, 32);
    case DType::f16: return mk(dl::dtype_code::Float, 16);
    case DType::bf16: return mk(dl::dtype_code::Bfloat, 16);
    case DType::f64: return mk(dl::dtype_code::Float, 64);
    case DType::c64: return mk(dl::dtype_code::Complex, 64);
    case DType::i8: return mk(dl::dtype_code::Int, 8);
    case DType::u8: return mk(dl::dtype_code::UInt, 8);
    case DType::i16: return mk(dl::dtype_code::Int, 16);
    case DType::i32: return mk(dl::dtype_code::Int, 32);
    case DType::i64: return mk(dl::dtype_code::Int, 64);
    case DType::boolean: return mk(dl::dtype_code::Bool, 8);
    case DType::u16: return mk(dl::dtype_code::UInt, 16);
    case DType::u32: return mk(dl::dtype_code::UInt, 32);
    case DType::u64: return mk(dl::dtype_code::UInt, 64);
  }
  return {};
}

// numpy's spelling of a DLPack dtype, for error messages ("float64", "uint32", ...).
std::string numpy_name(dl::dtype d) {
  const char* p = "?";
  switch (static_cast<dl::dtype_code>(d.code)) {
    case dl::dtype_code::Int: p = "int"; break;
    case dl::dtype_code::UInt: p = "uint"; break;
    case dl::dtype_code::Float: p = "float"; break;
    case dl::dtype_code::Bfloat: p = "bfloat"; break;
    case dl::dtype_code::Complex: p = "complex"; break;
    case dl::dtype_code::Bool: return "bool";
    default: break;
  }
  return std::string(p) + std::to_string(d.bits);
}

std::optional<DType> from_dl(dl::dtype d) {
  if (d.lanes != 1) return std::nullopt;
  for (int i = 0; i < kNumDTypes; ++i) {
    auto t = static_cast<DType>(i);
    if (to_dl(t) == d) return t;
  }
  return std::nullopt;
}

DType dtype_of(const std::string& s) {
  DType t;
  if (!parse_dtype(s, &t)) {
    std::string known;
    for (int i = 0; i < kNumDTypes; ++i) known += (i ? " " : "") + std::string(dtype_name(static_cast<DType>(i)));
    fail("[python] unknown dtype '", s, "' (known: ", known, ")");
  }
  return t;
}

DType dtype_arg(nb::handle h) {
  if (nb::isinstance<DType>(h)) return nb::cast<DType>(h);
  return dtype_of(nb::cast<std::string>(nb::str(h)));
}

// Copies an array into a new Tensor. `want` (if set) is the dtype the graph expects; a float32
// array is accepted (and rounded to nearest even) for a bf16 slot because numpy has no bf16.
Tensor to_tensor(const InArray& a, std::optional<DType> want, const std::string& what) {
  auto have = from_dl(a.dtype());
  std::vector<int64_t> shape(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) shape[i] = static_cast<int64_t>(a.shape(i));
  if (want && *want == DType::bf16 && have == DType::f32) {
    Tensor t(DType::bf16, shape);
    const float* src = static_cast<const float*>(a.data());
    auto* dst = t.data<uint16_t>();
    for (int64_t i = 0; i < t.numel(); ++i) dst[i] = f32_to_bf16(src[i]);
    return t;
  }
  if (!have || (want && *want != *have)) {
    std::string hint;
    if (want && *want == DType::bf16) hint = " (bf16 takes float32 arrays)";
    else if (want) hint = " (convert with arr.astype(np." + numpy_name(to_dl(*want)) + "))";
    if (want)
      fail("[python] ", what, ": expected dtype ", dtype_name(*want), ", got numpy ", numpy_name(a.dtype()), hint);
    fail("[python] ", what, ": numpy dtype ", numpy_name(a.dtype()), " has no RLX dtype");
  }
  // A private copy in the Tensor constructor's layout (64-byte aligned), without its zero fill:
  // the copy overwrites every byte.
  size_t bytes = dtype_size(*have);
  for (int64_t d : shape) bytes *= static_cast<size_t>(d);
  void* p = std::aligned_alloc(64, ((bytes + 63) / 64) * 64 + 64);
  if (!p) fail("[python] ", what, ": out of memory copying ", bytes, " bytes");
  if (bytes) std::memcpy(p, a.data(), bytes);
  return Tensor::wrap(*have, shape, std::shared_ptr<void>(p, std::free), p);
}

InArray as_array(nb::handle h, const std::string& what) {
  try {
    return nb::cast<InArray>(h);
  } catch (const nb::cast_error&) {
    fail("[python] ", what, ": expected a numpy array, got ", nb::cast<std::string>(nb::repr(h.type())));
  }
}

// A fresh numpy array holding a copy of `t` (bf16 comes back as float32).
nb::object to_numpy(const Tensor& src) {
  Tensor t;
  if (src.dtype() == DType::bf16) {
    t = Tensor(DType::f32, src.shape());
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = bf16_to_f32(src.data<uint16_t>()[i]);
  } else {
    t = src.numel() == 0 ? Tensor(src.dtype(), src.shape()) : src.clone();
  }
  auto* keep = new Tensor(std::move(t));
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<size_t> shape(keep->shape().begin(), keep->shape().end());
  nb::ndarray<nb::numpy> arr(keep->raw(), shape.size(), shape.data(), owner, nullptr, to_dl(keep->dtype()));
  return arr.cast();
}

nb::list to_list(const std::vector<Tensor>& ts) {
  nb::list l;
  for (auto& t : ts) l.append(to_numpy(t));
  return l;
}

// ---- shapes and attributes -------------------------------------------------------------------

std::string show(nb::handle h) { return nb::cast<std::string>(nb::repr(h)); }

Shape to_shape_py(nb::handle seq, const std::string& what) {
  if (nb::isinstance<nb::str>(seq)) fail("[python] ", what, ": a shape is a list, got ", show(seq));
  Shape s;
  try {
    for (nb::handle d : seq) {
      if (nb::isinstance<nb::str>(d)) s.emplace_back(nb::cast<std::string>(d));
      else if (nb::isinstance<nb::int_>(d) && !nb::isinstance<nb::bool_>(d)) s.emplace_back(nb::cast<int64_t>(d));
      else fail("[python] ", what, ": dimensions are ints or symbol names, got ", show(d));
    }
  } catch (const nb::python_error&) {
    fail("[python] ", what, ": a shape is a list of ints/names, got ", show(seq));
  }
  return s;
}

nb::list shape_to_py(const Shape& s) {
  nb::list l;
  for (auto& d : s) {
    if (d.is_static()) l.append(d.v);
    else l.append(d.sym);
  }
  return l;
}

// Converts a Python value to the attribute kind that `op`'s schema declares for `name`.
Attr to_attr(OpKind op, const std::string& name, nb::handle v) {
  const AttrSpec* spec = nullptr;
  for (auto& s : op_info(op).attrs)
    if (s.name == name) spec = &s;
  if (!spec) {
    std::string known;
    for (auto& s : op_info(op).attrs) known += (known.empty() ? "" : ", ") + s.name;
    fail("[python] op '", op_name(op), "': unknown attribute '", name, "' (known: ",
         known.empty() ? "none" : known, ")");
  }
  std::string what = "op '" + std::string(op_name(op)) + "' attribute '" + name + "'";
  auto bad = [&]() {
    fail("[python] ", what, ": expected ", attr_kind_name(spec->kind), ", got ", show(v));
  };
  auto is_int = [](nb::handle x) { return nb::isinstance<nb::int_>(x) || nb::isinstance<nb::bool_>(x); };
  auto is_num = [&](nb::handle x) { return is_int(x) || nb::isinstance<nb::float_>(x); };
  try {
    switch (spec->kind) {
      case AttrKind::Int:
        if (!is_int(v)) bad();
        return Attr(nb::cast<int64_t>(v));
      case AttrKind::Float:
        if (!is_num(v)) bad();
        return Attr(nb::cast<double>(v));
      case AttrKind::Str:
        if (!nb::isinstance<nb::str>(v)) bad();
        return Attr(nb::cast<std::string>(v));
      case AttrKind::Ints: {
        if (nb::isinstance<nb::str>(v)) bad();
        std::vector<int64_t> r;
        for (nb::handle x : v) {
          if (!is_int(x)) bad();
          r.push_back(nb::cast<int64_t>(x));
        }
        return Attr(r);
      }
      case AttrKind::Floats: {
        if (nb::isinstance<nb::str>(v)) bad();
        std::vector<double> r;
        for (nb::handle x : v) {
          if (!is_num(x)) bad();
          r.push_back(nb::cast<double>(x));
        }
        return Attr(r);
      }
      case AttrKind::Dims: return Attr(to_shape_py(v, what));
      case AttrKind::DTypeK:
        if (!nb::isinstance<DType>(v) && !nb::isinstance<nb::str>(v)) bad();
        return Attr(dtype_arg(v));
      case AttrKind::TensorK: return Attr(to_tensor(as_array(v, what), std::nullopt, what));
    }
  } catch (const nb::python_error&) {  // e.g. iterating something that is not iterable
    bad();
  } catch (const nb::cast_error&) {
    bad();
  }
  return Attr();
}

OpKind op_of(const std::string& name) {
  OpKind k;
  if (!op_by_name(name, &k)) fail("[python] unknown op '", name, "' (rlx.ops() lists them)");
  return k;
}

void check_value(const Graph& g, int64_t v, const std::string& what) {
  if (v < 0 || v >= static_cast<int64_t>(g.values.size()))
    fail("[python] ", what, ": value id ", v, " is not in graph '", g.name, "' (it has ", g.values.size(),
         " values)");
}

// ---- running ----------------------------------------------------------------------------------

std::string output_name(const Graph& g, size_t i) {
  const std::string& n = g.values.at(g.outputs[i]).name;
  if (n.empty()) return "output_" + std::to_string(i);
  // A value listed twice (or two outputs sharing a name) would collide in a dict.
  for (size_t j = 0; j < i; ++j)
    if (g.values.at(g.outputs[j]).name == n) return "output_" + std::to_string(i);
  return n;
}

std::string input_names(const Graph& g) {
  std::string s;
  for (auto id : g.inputs) s += (s.empty() ? "'" : ", '") + g.values.at(id).name + "'";
  return "[" + s + "]";
}

std::vector<Tensor> inputs_from_list(const Graph& g, const nb::list& arrays) {
  if (nb::len(arrays) != g.inputs.size())
    fail("[python] graph '", g.name, "' takes ", g.inputs.size(), " inputs ", input_names(g), ", got ",
         nb::len(arrays));
  std::vector<Tensor> in;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Value& v = g.values.at(g.inputs[i]);
    std::string what = "input '" + v.name + "'";
    in.push_back(to_tensor(as_array(arrays[i], what), v.type.dtype, what));
  }
  return in;
}

std::vector<Tensor> inputs_from_dict(const Graph& g, const nb::dict& arrays) {
  std::string missing, unknown;
  for (auto id : g.inputs) {
    const std::string& n = g.values.at(id).name;
    if (!arrays.contains(n.c_str())) missing += (missing.empty() ? "'" : ", '") + n + "'";
  }
  for (auto [k, v] : arrays) {
    std::string key = nb::cast<std::string>(nb::str(k));
    bool known = false;
    for (auto id : g.inputs) known |= g.values.at(id).name == key;
    if (!known) unknown += (unknown.empty() ? "'" : ", '") + key + "'";
  }
  if (!missing.empty() || !unknown.empty())
    fail("[python] graph '", g.name, "': missing inputs [", missing, "], unknown inputs [", unknown,
         "] (it takes ", input_names(g), ")");
  nb::list ordered;
  for (auto id : g.inputs) ordered.append(arrays[g.values.at(id).name.c_str()]);
  return inputs_from_list(g, ordered);
}

Bindings to_bindings(const nb::handle& h) {
  Bindings b;
  if (h.is_none()) return b;
  for (auto [k, v] : nb::cast<nb::dict>(h)) b[nb::cast<std::string>(k)] = nb::cast<int64_t>(v);
  return b;
}

}  // namespace
void bind_splat(nb::module_& m);  // bind_splat.cpp
}  // namespace rlx

namespace rlx {
void bind_llm(nb::module_& m);  // python/src/bind_llm.cpp
void bind_quant(nb::module_& m);  // python/src/bind_quant.cpp
}

NB_MODULE(_rlx, m) {
  using namespace rlx;
  m.doc() = "RLX tensor compiler and runtime (low-level bindings; use the `rlx` package)";
  nb::exception<Error>(m, "Error", PyExc_RuntimeError);
  bind_sparse(m);
  bind_splat(m);
  bind_quant(m);

  auto dt = nb::enum_<DType>(m, "DType");
  for (int i = 0; i < kNumDTypes; ++i) {
    auto t = static_cast<DType>(i);
    dt.value(std::string(dtype_name(t)).c_str(), t);
  }
  dt.def_prop_ro("itemsize", [](DType t) { return dtype_size(t); })
      .def("__str__", [](DType t) { return std::string(dtype_name(t)); });
  m.def("dtype", &dtype_of, "name"_a, "The DType named 'f32', 'f16', 'bf16', ..., 'bool'.");
  m.def("dtype_names", [] {
    std::vector<std::string> r;
    for (int i = 0; i < kNumDTypes; ++i) r.emplace_back(dtype_name(static_cast<DType>(i)));
    return r;
  });
  m.def("op_names", [] {
    std::vector<std::string> r;
    for (int i = 0; i < num_ops(); ++i) r.emplace_back(op_name(static_cast<OpKind>(i)));
    return r;
  });
  m.def("op_schema", [](const std::string& name) {
    const OpInfo& info = op_info(op_of(name));
    nb::dict d;
    d["name"] = std::string(info.name);
    d["level"] = info.level == Level::Hir ? "hir" : "mir";
    d["min_inputs"] = info.min_inputs;
    d["max_inputs"] = info.max_inputs;
    d["num_outputs"] = info.num_outputs;
    d["dtypes"] = info.dtypes.str();
    nb::dict attrs;
    for (auto& a : info.attrs) attrs[a.name.c_str()] = std::string(attr_kind_name(a.kind));
    d["attrs"] = attrs;
    return d;
  });

  nb::class_<Graph>(m, "Graph")
      .def(nb::init<>())
      .def_rw("name", &Graph::name)
      .def("add_input",
           [](Graph& g, const std::string& name, nb::handle dtype, nb::handle shape) {
             for (auto id : g.inputs)
               if (g.values[id].name == name) fail("[python] graph '", g.name, "' already has an input '", name, "'");
             return static_cast<int64_t>(g.add_input(name, dtype_arg(dtype), to_shape_py(shape, "input '" + name + "'")));
           })
      .def("add_node",
           [](Graph& g, const std::string& op, const std::vector<int64_t>& inputs, const nb::dict& attrs,
              const std::string& node_name) {
             OpKind k = op_of(op);
             std::vector<ValueId> in;
             for (auto v : inputs) {
               check_value(g, v, "op '" + op + "'");
               in.push_back(static_cast<ValueId>(v));
             }
             Attrs a;
             for (auto [key, val] : attrs) {
               std::string kname = nb::cast<std::string>(key);
               a[kname] = to_attr(k, kname, val);
             }
             auto out = g.add_node(k, std::move(in), std::move(a), node_name);
             return std::vector<int64_t>(out.begin(), out.end());
           },
           "op"_a, "inputs"_a, "attrs"_a, "node_name"_a = "")
      .def("add_constant",
           [](Graph& g, nb::handle arr, nb::handle dtype) {
             std::optional<DType> want;
             if (!dtype.is_none()) want = dtype_arg(dtype);
             Tensor t = to_tensor(as_array(arr, "constant"), want, "constant");
             return static_cast<int64_t>(g.add_node(OpKind::Constant, {}, {{"value", t}})[0]);
           },
           "array"_a, "dtype"_a = nb::none())
      .def("add_output",
           [](Graph& g, int64_t v, std::optional<std::string> name) {
             check_value(g, v, "output");
             if (name && !name->empty()) {
               for (size_t i = 0; i < g.values.size(); ++i)
                 if (static_cast<int64_t>(i) != v && g.values[i].name == *name)
                   fail("[python] graph '", g.name, "' already has a value named '", *name, "'");
               g.values[v].name = *name;
             }
             g.outputs.push_back(static_cast<ValueId>(v));
           },
           "value"_a, "name"_a = nb::none())
      .def("value_dtype", [](const Graph& g, int64_t v) {
        check_value(g, v, "dtype");
        return g.values[v].type.dtype;
      })
      .def("value_shape", [](const Graph& g, int64_t v) {
        check_value(g, v, "shape");
        return shape_to_py(g.values[v].type.shape);
      })
      .def("value_name", [](const Graph& g, int64_t v) {
        check_value(g, v, "name");
        return g.values[v].name;
      })
      .def("value_label", [](const Graph& g, int64_t v) {
        check_value(g, v, "label");
        return g.value_label(static_cast<ValueId>(v));
      })
      .def_prop_ro("inputs", [](const Graph& g) { return std::vector<int64_t>(g.inputs.begin(), g.inputs.end()); })
      .def_prop_ro("outputs", [](const Graph& g) { return std::vector<int64_t>(g.outputs.begin(), g.outputs.end()); })
      .def_prop_ro("num_values", [](const Graph& g) { return g.values.size(); })
      .def_prop_ro("num_nodes", [](const Graph& g) { return g.nodes.size(); })
      .def("node_ops", [](const Graph& g) {
        std::vector<std::string> r;
        for (auto& n : g.nodes) r.emplace_back(op_name(n.op));
        return r;
      })
      .def("symbols", &Graph::symbols)
      .def("text", [](const Graph& g) { return print_graph(g); })
      .def("verify", [](const Graph& g, bool mir_only) { verify_graph(g, mir_only); }, "mir_only"_a = false)
      .def("copy", [](const Graph& g) { return Graph(g); });

  m.def("parse", [](const std::string& text, const std::string& filename) { return parse_graph(text, filename); },
        "text"_a, "filename"_a = "<text>");
  m.def("load", &load_graph_file, "path"_a);

  nb::class_<CompiledModel>(m, "CompiledModel")
      .def("__init__",
           [](CompiledModel* self, const Graph& g, const std::string& device,
              const std::vector<std::string>& force_common, const std::vector<std::string>& force_native,
              bool verify, bool fuse, const std::string& fallback) {
             CompileOptions o;
             o.device = device;
             o.dispatch.fallback = fallback;
             o.dispatch.force_common.insert(force_common.begin(), force_common.end());
             o.dispatch.force_native.insert(force_native.begin(), force_native.end());
             o.verify = verify;
             o.fuse = fuse;
             Graph copy = g;
             nb::gil_scoped_release nogil;
             new (self) CompiledModel(std::move(copy), std::move(o));
           },
           "graph"_a, "device"_a = "cpu", "force_common"_a = std::vector<std::string>{},
           "force_native"_a = std::vector<std::string>{}, "verify"_a = true, "fuse"_a = true, "fallback"_a = "")
      .def("run_list",
           [](CompiledModel& cm, const nb::list& arrays) {
             std::vector<Tensor> in = inputs_from_list(cm.graph(), arrays), out;
             {
               nb::gil_scoped_release nogil;
               out = cm.run(in);
             }
             return to_list(out);
           })
      .def("run_dict",
           [](CompiledModel& cm, const nb::dict& arrays) {
             const Graph& g = cm.graph();
             std::vector<Tensor> in = inputs_from_dict(g, arrays), out;
             {
               nb::gil_scoped_release nogil;
               out = cm.run(in);
             }
             nb::dict d;
             for (size_t i = 0; i < out.size() && i < g.outputs.size(); ++i)
               d[output_name(g, i).c_str()] = to_numpy(out[i]);
             return d;
           })
      .def("output_names",
           [](CompiledModel& cm) {
             std::vector<std::string> r;
             for (size_t i = 0; i < cm.graph().outputs.size(); ++i) r.push_back(output_name(cm.graph(), i));
             return r;
           })
      .def("report_table", [](CompiledModel& cm, nb::handle b) { return cm.report(to_bindings(b)).table(); },
           "bindings"_a = nb::none())
      .def("report_rows",
           [](CompiledModel& cm, nb::handle b) {
             nb::list rows;
             for (auto& r : cm.report(to_bindings(b)).rows) {
               nb::dict d;
               d["op"] = r.op;
               d["dtype"] = r.dtype;
               d["path"] = std::string(dispatch_path_name(r.path));
               d["count"] = r.count;
               d["reason"] = r.reason;
               rows.append(d);
             }
             return rows;
           },
           "bindings"_a = nb::none())
      .def("report_notes", [](CompiledModel& cm, nb::handle b) { return cm.report(to_bindings(b)).notes; },
           "bindings"_a = nb::none())
      .def("dump", [](CompiledModel& cm, const std::string& level, nb::handle b) { return cm.dump(level, to_bindings(b)); },
           "level"_a, "bindings"_a = nb::none())
      .def_prop_ro("cache_size", &CompiledModel::cache_size)
      .def_prop_ro("device", [](const CompiledModel& cm) { return cm.options().device; })
      .def("profile", &CompiledModel::profile);

  m.def("devices", [] {
    nb::list l;
    for (auto& name : device_names()) {
      const DeviceInfo& d = device_info(name);
      nb::dict e;
      e["name"] = d.name;
      e["status"] = std::string(device_status_name(d.status));
      e["reason"] = d.reason;
      e["description"] = d.description;
      e["can_execute"] = d.can_execute();
      l.append(e);
    }
    return l;
  });

  m.def("reference_run", [](const Graph& g, const nb::list& arrays) {
    std::vector<Tensor> in = inputs_from_list(g, arrays), out;
    {
      nb::gil_scoped_release nogil;
      out = reference_run(g, in);
    }
    return to_list(out);
  });

  m.def("read_npy", [](const std::string& p) { return to_numpy(read_npy(p)); }, "path"_a);
  m.def("write_npy", [](const std::string& p, nb::handle a) { write_npy(p, to_tensor(as_array(a, p), std::nullopt, p)); },
        "path"_a, "array"_a);
  m.def("read_npz", [](const std::string& p) {
    nb::dict d;
    for (auto& [k, t] : read_npz_ordered(p)) d[k.c_str()] = to_numpy(t);
    return d;
  }, "path"_a);
  m.def("write_npz", [](const std::string& p, const nb::dict& arrays) {
    std::vector<std::pair<std::string, Tensor>> v;
    for (auto [k, a] : arrays) {
      std::string key = nb::cast<std::string>(k);
      std::string what = "array '" + key + "'";
      v.emplace_back(key, to_tensor(as_array(a, what), std::nullopt, what));
    }
    write_npz(p, v);
  }, "path"_a, "arrays"_a);

  // ---- model files ----------------------------------------------------------------------------
  m.def("model_kind", &models::model_kind, "path"_a);
  m.def("load_model",
        [](const std::string& path, const nb::dict& bind, const nb::dict& shapes, int64_t batch, int64_t seq) {
          models::ModelLoadOptions o;
          for (auto [k, v] : bind) o.import.bind[nb::cast<std::string>(k)] = nb::cast<int64_t>(v);
          for (auto [k, v] : shapes) o.import.input_shapes[nb::cast<std::string>(k)] = nb::cast<std::vector<int64_t>>(v);
          o.batch = batch;
          o.seq = seq;
          return models::load_model(path, o);
        },
        "path"_a, "bind"_a, "input_shapes"_a, "batch"_a = 1, "seq"_a = 8);
  m.def("version", [] { return std::string(RLX_VERSION); });

  // ---- model helpers: sentence embeddings (BERT folders) and generation (Qwen3) ---------------
  nb::class_<models::SentenceEmbedder>(m, "SentenceEmbedder")
      .def(nb::init<const std::string&, const std::string&>(), "dir"_a, "device"_a = "cpu")
      .def("embed",
           [](models::SentenceEmbedder& e, const std::vector<std::string>& sentences, int64_t batch) {
             return to_numpy(e.embed(sentences, batch));
           },
           "sentences"_a, "batch_size"_a = 32)
      .def_prop_ro("hidden", [](const models::SentenceEmbedder& e) { return e.config().hidden; })
      .def_prop_ro("max_seq_length", &models::SentenceEmbedder::max_seq_length);
  nb::class_<models::Qwen3Model>(m, "Qwen3Model")
      .def("__init__",
           [](models::Qwen3Model* self, const std::string& path, const std::string& device, bool keep_packed) {
             models::LoadOptions lo;
             lo.keep_packed = keep_packed;
             new (self) models::Qwen3Model(models::load_qwen3(path, lo), device);
           },
           "path"_a, "device"_a = "cpu", "keep_packed"_a = true)
      .def_prop_ro("vocab", &models::Qwen3Model::vocab)
      .def_prop_ro("context", [](const models::Qwen3Model& q) { return q.weights().cfg.context; })
      .def("generate",
           [](models::Qwen3Model& q, const std::vector<std::vector<int64_t>>& prompts, int64_t max_new,
              double temperature, int64_t top_k, double top_p, uint64_t seed, int64_t eos) {
             RLX_CHECK(!prompts.empty() && !prompts[0].empty(), "[python] generate: empty prompt");
             for (auto& p : prompts) {
               RLX_CHECK(p.size() == prompts[0].size(), "[python] generate: prompts must have equal lengths");
               for (auto id : p)
                 RLX_CHECK(id >= 0 && id < q.vocab(), "[python] generate: token id ", id, " is outside the vocabulary (",
                           q.vocab(), " ids)");
             }
             int64_t ctx = q.weights().cfg.context, want = static_cast<int64_t>(prompts[0].size()) + max_new;
             RLX_CHECK(max_new >= 0 && (ctx <= 0 || want <= ctx), "[python] generate: prompt + max_new = ", want,
                       " positions exceeds the model's context of ", ctx);
             RLX_CHECK(temperature >= 0 && top_k >= 0 && top_p > 0 && top_p <= 1,
                       "[python] generate: temperature >= 0, top_k >= 0, 0 < top_p <= 1");
             models::SamplingOptions so;
             so.temperature = temperature;
             so.top_k = top_k;
             so.top_p = top_p;
             so.seed = seed;
             return models::generate(q, prompts, max_new, so, eos);
           },
           "prompts"_a, "max_new"_a = 32, "temperature"_a = 0.0, "top_k"_a = 0, "top_p"_a = 1.0, "seed"_a = 0,
           "eos"_a = -1);

  // ---- training --------------------------------------------------------------------------------
  m.def("jvp", [](const Graph& g) { return ad::jvp(g); }, "graph"_a);
  m.def("vmap", [](const Graph& g, int64_t size, const std::vector<int>& batched) { return ad::vmap(g, size, batched); },
        "graph"_a, "size"_a, "batched"_a = std::vector<int>{});
  m.def("value_and_grad", [](const Graph& g, const std::vector<int>& wrt) { return ad::value_and_grad(g, wrt); },
        "graph"_a, "wrt"_a = std::vector<int>{});
  m.def("grad", [](const Graph& g, const std::vector<int>& wrt) { return ad::grad(g, wrt); }, "graph"_a,
        "wrt"_a = std::vector<int>{});
  m.def("classification_head",
        [](Graph& g, int64_t logits, int64_t labels) {
          check_value(g, logits, "classification_head logits");
          check_value(g, labels, "classification_head labels");
          Builder b(g);
          auto r = models::classification_head(b, static_cast<ValueId>(logits), static_cast<ValueId>(labels));
          return std::vector<int64_t>(r.begin(), r.end());
        },
        "graph"_a, "logits"_a, "labels"_a);
  m.def("mlp_loss_graph", [](const std::vector<int64_t>& sizes, int64_t batch) { return models::mlp_loss_graph(sizes, batch); },
        "sizes"_a, "batch"_a);
  m.def("mlp_init",
        [](const std::vector<int64_t>& sizes, uint64_t seed) { return to_list(models::mlp_init(sizes, seed)); },
        "sizes"_a, "seed"_a = 0);
  nb::class_<train::Trainer>(m, "Trainer")
      .def("__init__",
           [](train::Trainer* self, const Graph& loss, const nb::list& params, const std::string& optimizer, double lr,
              double momentum, bool nesterov, double weight_decay, const std::string& schedule, int64_t warmup,
              int64_t total, const std::string& device, const std::string& amp) {
             std::vector<Tensor> init;
             for (size_t i = 0; i < params.size(); ++i) {
               std::string what = "parameter " + std::to_string(i);
               init.push_back(to_tensor(as_array(params[i], what), std::nullopt, what));
             }
             train::OptimizerConfig o;
             o.kind = optimizer;
             o.lr = lr;
             o.momentum = momentum;
             o.nesterov = nesterov;
             o.weight_decay = weight_decay;
             train::LrSchedule s;
             s.kind = schedule;
             s.warmup = warmup;
             s.total = total;
             CompileOptions co;
             co.device = device;
             train::AmpConfig a;
             RLX_CHECK(amp == "f32" || amp == "bf16" || amp == "f16", "[python] amp must be f32, bf16 or f16, got '", amp, "'");
             a.dtype = dtype_of(amp);
             nb::gil_scoped_release nogil;
             new (self) train::Trainer(loss, std::move(init), o, s, co, a);
           },
           "loss"_a, "params"_a, "optimizer"_a = "sgd", "lr"_a = 0.1, "momentum"_a = 0.0, "nesterov"_a = false,
           "weight_decay"_a = 0.0, "schedule"_a = "constant", "warmup"_a = 0, "total"_a = 0, "device"_a = "cpu", "amp"_a = "f32")
      .def("step",
           [](train::Trainer& t, const nb::list& data) {
             std::vector<Tensor> in;
             for (size_t i = 0; i < data.size(); ++i) {
               std::string what = "data input " + std::to_string(i);
               in.push_back(to_tensor(as_array(data[i], what), std::nullopt, what));
             }
             std::vector<Tensor> out;
             {
               nb::gil_scoped_release nogil;
               out = t.step(in);
             }
             return to_list(out);
           },
           "data"_a)
      .def("advance",  // a step that reads nothing back
           [](train::Trainer& t, const nb::list& data) {
             std::vector<Tensor> in;
             for (size_t i = 0; i < data.size(); ++i) {
               std::string what = "data input " + std::to_string(i);
               in.push_back(to_tensor(as_array(data[i], what), std::nullopt, what));
             }
             nb::gil_scoped_release nogil;
             t.advance(in);
           },
           "data"_a)
      .def("outputs", [](train::Trainer& t) { return to_list(t.outputs()); })
      .def("params", [](const train::Trainer& t) { return to_list(t.params()); })
      .def("state", [](const train::Trainer& t) { return to_list(t.state()); })
      .def_prop_ro("step_count", &train::Trainer::step_count)
      .def_prop_ro("lr", &train::Trainer::current_lr)
      .def("step_graph", [](const train::Trainer& t) { return t.step_graph(); })
      .def("save", [](const train::Trainer& t, const std::string& p) { t.save(p); }, "path"_a)
      .def("load", [](train::Trainer& t, const std::string& p) { t.load(p); }, "path"_a)
      .def("profile", [](train::Trainer& t) { return t.compiled().profile(); })
      .def("amp_report", [](const train::Trainer& t) { return t.amp_report().table(); })
      .def_prop_ro("loss_scale", &train::Trainer::loss_scale)
      .def_prop_ro("skipped_steps", &train::Trainer::skipped_steps);
  bind_llm(m);
}
