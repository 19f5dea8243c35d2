// Builders for the small ONNX models the tests/unit/test_onnx*.cpp suites make in memory with the
// ONNX protos, and import-and-run on cpu. One copy here instead of one per test file.
#pragma once
#include <cctype>
#include <string>
#include <vector>

#include "formats/onnx/onnx.h"
#include "onnx/onnx.pb.h"
#include "rlx/session.h"

namespace onnx_test {

using TP = ::onnx::TensorProto;

// One dim of a value info: a size (2), or text: digits are a size ("3"), anything else a dim_param ("batch").
struct DimArg {
  int64_t size = -1;
  std::string param;
  DimArg(int64_t v) : size(v) {}  // NOLINT
  DimArg(int v) : size(v) {}      // NOLINT
  DimArg(const char* s) {         // NOLINT
    if (std::isdigit(static_cast<unsigned char>(s[0]))) size = std::stoll(s);
    else param = s;
  }
};

inline ::onnx::ValueInfoProto vi(const std::string& name, int dt, const std::vector<DimArg>& dims) {
  ::onnx::ValueInfoProto v;
  v.set_name(name);
  auto* tt = v.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(dt);
  auto* sh = tt->mutable_shape();
  for (auto& d : dims) {
    if (d.param.empty()) sh->add_dim()->set_dim_value(d.size);
    else sh->add_dim()->set_dim_param(d.param);
  }
  return v;
}
inline std::vector<DimArg> dims_of(const std::vector<int64_t>& d) { return {d.begin(), d.end()}; }

// A sequence-of-tensors value info.
inline ::onnx::ValueInfoProto seq_vi(const std::string& name, int dt) {
  ::onnx::ValueInfoProto v;
  v.set_name(name);
  v.mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(dt);
  return v;
}

// Appends node `op` named "<op>_<first output>".
inline ::onnx::NodeProto* add_node(::onnx::GraphProto* g, const std::string& op, const std::vector<std::string>& in,
                                   const std::vector<std::string>& out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(op + "_" + (out.empty() ? std::string() : out[0]));
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

inline ::onnx::AttributeProto* add_attr(::onnx::NodeProto* n, const std::string& name, ::onnx::AttributeProto::AttributeType t) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(t);
  return a;
}
inline void attr_i(::onnx::NodeProto* n, const std::string& name, int64_t v) { add_attr(n, name, ::onnx::AttributeProto::INT)->set_i(v); }
inline void attr_f(::onnx::NodeProto* n, const std::string& name, float v) { add_attr(n, name, ::onnx::AttributeProto::FLOAT)->set_f(v); }
inline void attr_s(::onnx::NodeProto* n, const std::string& name, const std::string& v) {
  add_attr(n, name, ::onnx::AttributeProto::STRING)->set_s(v);
}
inline void attr_ints(::onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = add_attr(n, name, ::onnx::AttributeProto::INTS);
  for (auto x : v) a->add_ints(x);
}
// A graph attribute (If branches, Loop/Scan bodies); returns the empty body to fill.
inline ::onnx::GraphProto* attr_g(::onnx::NodeProto* n, const std::string& name) {
  auto* a = add_attr(n, name, ::onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name(name);
  return a->mutable_g();
}

// A Constant node producing a FLOAT, INT64 or (other integer/bool types) int32_data tensor.
inline void constant(::onnx::GraphProto* g, const std::string& out, int dt, const std::vector<int64_t>& dims,
                     const std::vector<double>& vals) {
  auto* t = add_attr(add_node(g, "Constant", {}, {out}), "value", ::onnx::AttributeProto::TENSOR)->mutable_t();
  t->set_data_type(dt);
  for (auto d : dims) t->add_dims(d);
  for (double v : vals) {
    if (dt == TP::FLOAT) t->add_float_data(static_cast<float>(v));
    else if (dt == TP::INT64) t->add_int64_data(static_cast<int64_t>(v));
    else t->add_int32_data(static_cast<int32_t>(v));
  }
}

// An empty model importing the default domain at `opset`.
inline ::onnx::ModelProto model(int opset, int ir_version = 8) {
  ::onnx::ModelProto m;
  m.set_ir_version(ir_version);
  auto* os = m.add_opset_import();
  os->set_domain("");
  os->set_version(opset);
  return m;
}

inline rlx::Graph import(const ::onnx::ModelProto& m, const rlx::onnx::ImportOptions& o = {}) {
  return rlx::onnx::import_onnx(m.SerializeAsString(), "", "mem", o);
}
// The error importing `bytes` raises ("" when it imports).
inline std::string import_error(const std::string& bytes, const rlx::onnx::ImportOptions& o = {}) {
  try {
    rlx::onnx::import_onnx(bytes, "", "m.onnx", o);
  } catch (const rlx::Error& e) {
    return e.what();
  }
  return "";
}
inline std::string import_error(const ::onnx::ModelProto& m, const rlx::onnx::ImportOptions& o = {}) {
  return import_error(m.SerializeAsString(), o);
}

// Compiles for cpu and runs.
inline std::vector<rlx::Tensor> run(rlx::Graph g, std::vector<rlx::Tensor> ins) {
  rlx::CompiledModel cm(std::move(g), rlx::CompileOptions{});
  return cm.run(ins);
}
inline std::vector<rlx::Tensor> run(const ::onnx::ModelProto& m, std::vector<rlx::Tensor> ins) {
  return run(import(m), std::move(ins));
}

}  // namespace onnx_test
