// nanobind module `rlx._rlx`. Arrays cross as (bytes, dtype name, shape) triples; python/rlx/__init__.py
// turns them into numpy arrays, so this file stays free of numpy's C API.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <memory>

#include "rlx/builder.h"
#include "rlx/device.h"
#include "rlx/reference.h"
#include "rlx/session.h"
#include "rlx/text.h"

namespace nb = nanobind;
using namespace rlx;

namespace {

using Array = std::tuple<nb::bytes, std::string, std::vector<int64_t>>;

DType to_dtype(const std::string& s) {
  DType t;
  RLX_CHECK(parse_dtype(s, &t), "[python] unknown dtype '", s, "'");
  return t;
}

Tensor to_tensor(const Array& a) {
  const auto& [data, dt, shape] = a;
  Tensor t(to_dtype(dt), shape);
  RLX_CHECK(data.size() == t.nbytes(), "[python] array of ", data.size(), " bytes for ", dt, " with ", t.numel(),
            " elements");
  if (t.nbytes()) std::memcpy(t.raw(), data.c_str(), t.nbytes());
  return t;
}

Array from_tensor(const Tensor& t) {
  return {nb::bytes(static_cast<const char*>(t.raw()), t.nbytes()), std::string(dtype_name(t.dtype())), t.shape()};
}

Shape to_shape_py(const nb::list& l) {
  Shape s;
  for (auto h : l) {
    if (nb::isinstance<nb::str>(h)) s.push_back(Dim(nb::cast<std::string>(h)));
    else s.push_back(Dim(nb::cast<int64_t>(h)));
  }
  return s;
}

Attr to_attr(OpKind op, const std::string& name, nb::handle v) {
  const AttrSpec* spec = nullptr;
  for (auto& s : op_info(op).attrs)
    if (s.name == name) spec = &s;
  RLX_CHECK(spec, "[python] ", op_name(op), ": unknown attribute '", name, "'");
  switch (spec->kind) {
    case AttrKind::Int: return Attr(nb::cast<int64_t>(v));
    case AttrKind::Float: return Attr(nb::cast<double>(v));
    case AttrKind::Str: return Attr(nb::cast<std::string>(v));
    case AttrKind::Ints: return Attr(nb::cast<std::vector<int64_t>>(v));
    case AttrKind::Floats: return Attr(nb::cast<std::vector<double>>(v));
    case AttrKind::Dims: return Attr(to_shape_py(nb::cast<nb::list>(v)));
    case AttrKind::DTypeK: return Attr(to_dtype(nb::cast<std::string>(nb::str(v))));
    case AttrKind::TensorK: return Attr(to_tensor(nb::cast<Array>(v)));
  }
  fail("[python] bad attribute");
}

struct PyGraph {
  std::shared_ptr<Graph> g = std::make_shared<Graph>();
};

struct PyModel {
  std::shared_ptr<CompiledModel> m;
};

Bindings to_bindings(const std::map<std::string, int64_t>& b) { return Bindings(b.begin(), b.end()); }

}  // namespace

NB_MODULE(_rlx, m) {
  nb::exception<Error>(m, "Error", PyExc_RuntimeError);

  nb::class_<PyGraph>(m, "Graph")
      .def(nb::init<>())
      .def_prop_rw("name", [](PyGraph& p) { return p.g->name; }, [](PyGraph& p, std::string n) { p.g->name = n; })
      .def("input", [](PyGraph& p, const std::string& name, const std::string& dt, const nb::list& shape) {
        return p.g->add_input(name, to_dtype(dt), to_shape_py(shape));
      })
      .def("op", [](PyGraph& p, const std::string& name, const std::vector<int32_t>& ins, const nb::dict& kw) {
        OpKind k;
        RLX_CHECK(op_by_name(name, &k), "[python] unknown op '", name, "'");
        Attrs a;
        for (auto [key, v] : kw) a[nb::cast<std::string>(key)] = to_attr(k, nb::cast<std::string>(key), v);
        return p.g->add_node(k, ins, a);
      })
      .def("constant", [](PyGraph& p, const Array& a) {
        return p.g->add_node(OpKind::Constant, {}, {{"value", to_tensor(a)}})[0];
      })
      .def("output", [](PyGraph& p, int32_t v, const std::string& name) {
        RLX_CHECK(v >= 0 && v < static_cast<int32_t>(p.g->values.size()), "[python] bad value id ", v);
        if (!name.empty()) p.g->values[v].name = name;
        p.g->outputs.push_back(v);
      }, nb::arg("value"), nb::arg("name") = "")
      .def("type", [](PyGraph& p, int32_t v) {
        auto& t = p.g->type(v);
        return std::make_tuple(std::string(dtype_name(t.dtype)), shape_str(t.shape));
      })
      .def("text", [](PyGraph& p) { return print_graph(*p.g); })
      .def("verify", [](PyGraph& p) { verify_graph(*p.g); })
      .def("input_dtypes", [](PyGraph& p) {
        std::vector<std::string> r;
        for (auto i : p.g->inputs) r.push_back(std::string(dtype_name(p.g->type(i).dtype)));
        return r;
      })
      .def("input_names", [](PyGraph& p) {
        std::vector<std::string> r;
        for (auto i : p.g->inputs) r.push_back(p.g->values[i].name);
        return r;
      });

  m.def("parse", [](const std::string& text) { return PyGraph{std::make_shared<Graph>(parse_graph(text))}; });
  m.def("load", [](const std::string& path) { return PyGraph{std::make_shared<Graph>(load_graph_file(path))}; });

  nb::class_<PyModel>(m, "CompiledModel")
      .def("run", [](PyModel& p, const std::vector<Array>& ins) {
        std::vector<Tensor> in;
        for (auto& a : ins) in.push_back(to_tensor(a));
        std::vector<Array> out;
        for (auto& t : p.m->run(in)) out.push_back(from_tensor(t));
        return out;
      })
      .def("output_names", [](PyModel& p) {
        std::vector<std::string> r;
        const Graph& g = p.m->graph();
        for (size_t i = 0; i < g.outputs.size(); ++i) {
          std::string n = g.values[g.outputs[i]].name;
          r.push_back(n.empty() ? "output_" + std::to_string(i) : n);
        }
        return r;
      })
      .def("report", [](PyModel& p, const std::map<std::string, int64_t>& b) { return p.m->report(to_bindings(b)).table(); })
      .def("report_rows", [](PyModel& p, const std::map<std::string, int64_t>& b) {
        std::vector<std::map<std::string, std::string>> rows;
        for (auto& r : p.m->report(to_bindings(b)).rows)
          rows.push_back({{"op", r.op}, {"dtype", r.dtype}, {"path", std::string(dispatch_path_name(r.path))},
                          {"count", std::to_string(r.count)}, {"reason", r.reason}});
        return rows;
      })
      .def("dump", [](PyModel& p, const std::string& level, const std::map<std::string, int64_t>& b) {
        return p.m->dump(level, to_bindings(b));
      })
      .def_prop_ro("cache_size", [](PyModel& p) { return p.m->cache_size(); });

  m.def("compile", [](const PyGraph& g, const std::string& device, const std::vector<std::string>& fc,
                      const std::vector<std::string>& fn, bool fuse) {
    CompileOptions o;
    o.device = device;
    o.dispatch.force_common.insert(fc.begin(), fc.end());
    o.dispatch.force_native.insert(fn.begin(), fn.end());
    o.fuse = fuse;
    return PyModel{std::make_shared<CompiledModel>(*g.g, o)};
  });

  m.def("reference_run", [](const PyGraph& g, const std::vector<Array>& ins) {
    std::vector<Tensor> in;
    for (auto& a : ins) in.push_back(to_tensor(a));
    std::vector<Array> out;
    for (auto& t : reference_run(*g.g, in)) out.push_back(from_tensor(t));
    return out;
  });

  m.def("devices", [] {
    std::vector<std::map<std::string, std::string>> r;
    for (auto& n : device_names()) {
      const DeviceInfo& d = device_info(n);
      r.push_back({{"name", n}, {"status", std::string(device_status_name(d.status))}, {"reason", d.reason},
                   {"description", d.description}});
    }
    return r;
  });
}
