// Reading the node suite's .pb value files (tensors, sequences, optionals); see pb_values.h.
#include "formats/onnx/pb_values.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "formats/file_io.h"
#include "formats/onnx/importer.h"
#ifdef RLX_ONNX_DATA_PROTO
#include "onnx/onnx-data.pb.h"
#endif

namespace rlx::onnx {

namespace {

Tensor tensor_of(const ::onnx::TensorProto& t, const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return tensor_from_proto(t, dir.empty() ? "." : dir, path);
}

PbValue read_one(const ::onnx::ValueInfoProto& vi, const std::string& path) {
  PbValue v;
  v.name = vi.name();
  std::string bytes = formats::read_file_bytes(path, "onnx");
  const auto& t = vi.type();
  if (!t.has_sequence_type() && !t.has_optional_type()) {
    ::onnx::TensorProto tp;
    RLX_CHECK(tp.ParseFromString(bytes), "[onnx] ", path, ": not a TensorProto");
    v.elems.push_back(tensor_of(tp, path));
    return v;
  }
  v.composite = true;
#ifdef RLX_ONNX_DATA_PROTO
  auto read_seq = [&](const ::onnx::SequenceProto& s) {
    RLX_CHECK(s.elem_type() == ::onnx::SequenceProto::TENSOR || s.tensor_values_size() > 0 ||
                  s.elem_type() == ::onnx::SequenceProto::UNDEFINED,
              "[onnx] ", path, ": only sequences of tensors are supported");
    for (auto& e : s.tensor_values()) v.elems.push_back(tensor_of(e, path));
  };
  if (t.has_sequence_type()) {
    ::onnx::SequenceProto s;
    RLX_CHECK(s.ParseFromString(bytes), "[onnx] ", path, ": not a SequenceProto");
    read_seq(s);
    return v;
  }
  ::onnx::OptionalProto op;
  RLX_CHECK(op.ParseFromString(bytes), "[onnx] ", path, ": not an OptionalProto");
  if (op.has_tensor_value()) v.elems.push_back(tensor_of(op.tensor_value(), path));
  else if (op.has_sequence_value()) read_seq(op.sequence_value());
  else {
    RLX_CHECK(op.elem_type() == ::onnx::OptionalProto::UNDEFINED, "[onnx] ", path,
              ": only optionals of tensors or sequences are supported");
    v.has_element = false;
  }
  return v;
#else
  fail("[onnx] ", path, ": sequence/optional values need onnx-data.proto, which this build lacks");
#endif
}

}  // namespace

std::vector<PbValue> read_pb_values(const std::string& model_path, const std::vector<std::string>& files, bool outputs) {
  ::onnx::ModelProto m;
  RLX_CHECK(m.ParseFromString(formats::read_file_bytes(model_path, "onnx")), "[onnx] ", model_path, ": not a valid ONNX model");
  std::vector<const ::onnx::ValueInfoProto*> vis;
  if (outputs) {
    for (auto& vi : m.graph().output()) vis.push_back(&vi);
  } else {
    std::set<std::string> inits;
    for (auto& t : m.graph().initializer()) inits.insert(t.name());
    for (auto& vi : m.graph().input())
      if (!inits.count(vi.name())) vis.push_back(&vi);
  }
  RLX_CHECK(files.size() <= vis.size(), "[onnx] ", model_path, ": ", files.size(), " data files for ", vis.size(),
            outputs ? " outputs" : " inputs");
  std::vector<PbValue> r;
  for (size_t i = 0; i < files.size(); ++i) r.push_back(read_one(*vis[i], files[i]));
  return r;
}

std::vector<std::pair<std::string, Tensor>> flatten_pb_values(const std::vector<PbValue>& vs) {
  std::vector<std::pair<std::string, Tensor>> r;
  for (auto& v : vs) {
    if (!v.composite) {
      r.emplace_back(v.name, v.elems[0]);
      continue;
    }
    for (size_t i = 0; i < v.elems.size(); ++i) r.emplace_back(v.name + "[" + std::to_string(i) + "]", v.elems[i]);
  }
  return r;
}

void feed_pb_value(const PbValue& v, std::vector<Tensor>* ins, ImportOptions* o) {
  if (v.composite) o->sequence_lengths[v.name] = v.has_element ? static_cast<int64_t>(v.elems.size()) : -1;
  for (auto& [name, t] : flatten_pb_values({v})) {
    ins->push_back(t);
    o->input_shapes[name] = t.shape();
    if (t.numel() <= 64) o->input_values[name] = t;
  }
}

}  // namespace rlx::onnx

namespace rlx::onnx {

namespace {
// The value range of an ONNX fixed-point element type; false for floats, bool and strings.
bool fixed_point_range(int t, double* lo, double* hi) {
  using TP = ::onnx::TensorProto;
  switch (t) {
    case TP::INT2: *lo = -2, *hi = 1; return true;
    case TP::UINT2: *lo = 0, *hi = 3; return true;
    case TP::INT4: *lo = -8, *hi = 7; return true;
    case TP::UINT4: *lo = 0, *hi = 15; return true;
    case TP::INT8: *lo = -128, *hi = 127; return true;
    case TP::UINT8: *lo = 0, *hi = 255; return true;
    case TP::INT16: *lo = -32768, *hi = 32767; return true;
    case TP::UINT16: *lo = 0, *hi = 65535; return true;
    case TP::INT32: *lo = -2147483648.0, *hi = 2147483647.0; return true;
    case TP::UINT32: *lo = 0, *hi = 4294967295.0; return true;
    case TP::INT64: *lo = -9223372036854775808.0, *hi = 9223372036854775807.0; return true;
    case TP::UINT64: *lo = 0, *hi = 18446744073709551615.0; return true;
    default: return false;
  }
}

bool float_type(int t) {
  using TP = ::onnx::TensorProto;
  return t == TP::FLOAT || t == TP::DOUBLE || t == TP::FLOAT16 || t == TP::BFLOAT16;
}
}  // namespace

std::vector<std::vector<bool>> undefined_output_elements(const std::string& model_path, const std::vector<PbValue>& inputs) {
  ::onnx::ModelProto m;
  RLX_CHECK(m.ParseFromString(formats::read_file_bytes(model_path, "onnx")), "[onnx] ", model_path, ": not a valid ONNX model");
  const auto& g = m.graph();
  std::map<std::string, const Tensor*> fed;
  std::map<std::string, int> elem_type;
  for (auto& v : inputs)
    if (!v.composite) fed[v.name] = &v.elems[0];
  for (auto& vi : g.input())
    if (vi.type().has_tensor_type()) elem_type[vi.name()] = vi.type().tensor_type().elem_type();
  std::vector<std::vector<bool>> masks(g.output_size());
  for (int o = 0; o < g.output_size(); ++o) {
    for (auto& n : g.node()) {
      if (n.output_size() < 1 || n.output(0) != g.output(o).name()) continue;
      if ((n.op_type() != "Cast" && n.op_type() != "CastLike") || !n.domain().empty() || n.input_size() < 1) break;
      int to = 0;
      if (n.op_type() == "Cast") {
        for (auto& a : n.attribute())
          if (a.name() == "to") to = static_cast<int>(a.i());
      } else if (n.input_size() > 1 && elem_type.count(n.input(1))) {
        to = elem_type[n.input(1)];
      }
      double lo, hi;
      auto x = fed.find(n.input(0));
      if (!fixed_point_range(to, &lo, &hi) || x == fed.end() || !float_type(elem_type[n.input(0)])) break;
      // Float to fixed point is undefined out of range (ONNX Cast): NaN, inf, or trunc(x) outside [lo, hi].
      const Tensor& t = *x->second;
      std::vector<bool> mask(t.numel(), false);
      bool any = false;
      for (int64_t i = 0; i < t.numel(); ++i) {
        double v = t.get(i);
        mask[i] = !std::isfinite(v) || std::trunc(v) < lo || std::trunc(v) > hi;
        any = any || mask[i];
      }
      if (any) masks[o] = std::move(mask);
      break;
    }
  }
  return masks;
}

}  // namespace rlx::onnx
