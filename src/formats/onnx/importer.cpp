// ONNX ModelProto -> rlx::Graph: tensors, value infos, the node loop, constant folding, inspect.
#include "formats/onnx/importer.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <set>
#include <sstream>

#include "formats/file_io.h"
#include "formats/onnx/onnx.h"
#include "formats/onnx/storage_formats.h"
#include "passes/passes.h"
#include "rlx/reference.h"

namespace rlx::onnx {

namespace fs = std::filesystem;
using ::onnx::TensorProto;

bool onnx_dtype(int t, DType* out) {
  switch (t) {
    case TensorProto::FLOAT: *out = DType::f32; return true;
    case TensorProto::UINT8: *out = DType::u8; return true;
    case TensorProto::INT8: *out = DType::i8; return true;
    case TensorProto::INT16: *out = DType::i16; return true;
    case TensorProto::INT32: *out = DType::i32; return true;
    case TensorProto::INT64: *out = DType::i64; return true;
    case TensorProto::BOOL: *out = DType::boolean; return true;
    case TensorProto::FLOAT16: *out = DType::f16; return true;
    case TensorProto::DOUBLE: *out = DType::f64; return true;
    case TensorProto::COMPLEX64: *out = DType::c64; return true;
    case TensorProto::BFLOAT16: *out = DType::bf16; return true;
    case TensorProto::UINT16: *out = DType::u16; return true;
    case TensorProto::UINT32: *out = DType::u32; return true;
    case TensorProto::UINT64: *out = DType::u64; return true;
    default: return is_narrow_type(t, out);  // float8/float4/int4/int2 in f32/i32
  }
}

std::string onnx_dtype_name(int t) {
  if (::onnx::TensorProto_DataType_IsValid(t))
    return ::onnx::TensorProto_DataType_Name(static_cast<::onnx::TensorProto_DataType>(t));
  return "dtype#" + std::to_string(t);
}

namespace {

// Checked element count: dims must be non-negative and the product must not overflow.
int64_t checked_numel(const std::vector<int64_t>& d, const std::string& where) {
  int64_t n = 1;
  for (auto x : d) {
    RLX_CHECK(x >= 0, "[onnx] ", where, ": negative dimension ", x);
    RLX_CHECK(x == 0 || n <= (int64_t{1} << 40) / std::max<int64_t>(x, 1), "[onnx] ", where, ": tensor too large");
    n *= x;
  }
  return n;
}

std::string read_external(const TensorProto& t, const std::string& base_dir, const std::string& where, size_t want) {
  std::string loc;
  int64_t offset = 0, length = -1;
  for (auto& kv : t.external_data()) {
    if (kv.key() == "location") loc = kv.value();
    else if (kv.key() == "offset") offset = std::stoll(kv.value());
    else if (kv.key() == "length") length = std::stoll(kv.value());
  }
  RLX_CHECK(!base_dir.empty(), "[onnx] ", where, ": external data '", loc, "' but the model was not loaded from a file");
  RLX_CHECK(!loc.empty(), "[onnx] ", where, ": external data without a location");
  fs::path p(loc);
  RLX_CHECK(p.is_relative() && std::none_of(p.begin(), p.end(), [](const fs::path& c) { return c == ".."; }),
            "[onnx] ", where, ": external data location '", loc, "' must stay inside the model's folder");
  fs::path full = fs::path(base_dir) / p;
  std::ifstream f(full, std::ios::binary);
  RLX_CHECK(f.good(), "[onnx] ", where, ": cannot open external data file ", full.string());
  f.seekg(0, std::ios::end);
  int64_t size = f.tellg();
  if (length < 0) length = size - offset;
  RLX_CHECK(offset >= 0 && length >= 0 && offset + length <= size, "[onnx] ", where, ": external data range [", offset,
            ", +", length, ") exceeds ", full.string(), " (", size, " bytes)");
  RLX_CHECK(static_cast<size_t>(length) == want, "[onnx] ", where, ": external data has ", length, " bytes, expected ", want);
  std::string buf(static_cast<size_t>(length), '\0');
  f.seekg(offset);
  f.read(buf.data(), length);
  RLX_CHECK(f.good() || length == 0, "[onnx] ", where, ": short read from ", full.string());
  return buf;
}

}  // namespace

Tensor tensor_from_proto(const TensorProto& t, const std::string& base_dir, const std::string& where0) {
  std::string where = where0 + (t.name().empty() ? "" : " tensor '" + t.name() + "'");
  DType dt;
  RLX_CHECK(onnx_dtype(t.data_type(), &dt), "[onnx] ", where, ": unsupported dtype ", onnx_dtype_name(t.data_type()));
  std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  int64_t n = checked_numel(dims, where);
  if (is_narrow_type(t.data_type())) {  // packed codes -> f32/i32 carrier
    std::string bytes;
    size_t want = static_cast<size_t>((n * narrow_bits(t.data_type()) + 7) / 8);
    if (t.data_location() == TensorProto::EXTERNAL) bytes = read_external(t, base_dir, where, want);
    else if (t.has_raw_data()) bytes = t.raw_data();
    else
      for (auto v : t.int32_data()) bytes.push_back(static_cast<char>(v & 0xff));
    return narrow_tensor_from_bytes(t.data_type(), dims, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), where);
  }
  // Check that the data is there before allocating: a malformed file must not make us allocate what
  // its dims claim (up to 2^40 elements) and only then notice the data is missing.
  if (t.data_location() == TensorProto::EXTERNAL) {
    std::string buf = read_external(t, base_dir, where, static_cast<size_t>(n) * dtype_size(dt));
    Tensor out(dt, dims);
    if (!buf.empty()) std::memcpy(out.raw(), buf.data(), buf.size());
    return out;
  }
  if (t.has_raw_data()) {
    size_t want = static_cast<size_t>(n) * dtype_size(dt);
    RLX_CHECK(t.raw_data().size() == want, "[onnx] ", where, ": raw_data has ", t.raw_data().size(), " bytes, expected ",
              want);
  } else {
    int64_t avail = static_cast<int64_t>(t.float_data_size()) + t.int32_data_size() + t.int64_data_size() +
                    t.double_data_size() + t.uint64_data_size();
    RLX_CHECK(avail >= n, "[onnx] ", where, ": ", avail, " values for ", n, " elements");
  }
  Tensor out(dt, dims);
  size_t nb = out.nbytes();
  auto need = [&](int64_t have) {
    RLX_CHECK(have == n, "[onnx] ", where, ": ", have, " values for ", n, " elements");
  };
  if (t.has_raw_data()) {
    RLX_CHECK(t.raw_data().size() == nb, "[onnx] ", where, ": raw_data has ", t.raw_data().size(), " bytes, expected ", nb);
    if (nb) std::memcpy(out.raw(), t.raw_data().data(), nb);
    return out;
  }
  switch (dt) {
    case DType::f32: need(t.float_data_size()); std::copy(t.float_data().begin(), t.float_data().end(), out.data<float>()); break;
    case DType::c64: need(t.float_data_size() / 2); std::copy(t.float_data().begin(), t.float_data().end(), out.data<float>()); break;
    case DType::f64: need(t.double_data_size()); std::copy(t.double_data().begin(), t.double_data().end(), out.data<double>()); break;
    case DType::i64: need(t.int64_data_size()); std::copy(t.int64_data().begin(), t.int64_data().end(), out.data<int64_t>()); break;
    case DType::u32:  // uint32/uint64 travel in uint64_data
      need(t.uint64_data_size());
      for (int64_t i = 0; i < n; ++i) out.data<uint32_t>()[i] = static_cast<uint32_t>(t.uint64_data(i));
      break;
    case DType::u64: need(t.uint64_data_size()); std::copy(t.uint64_data().begin(), t.uint64_data().end(), out.data<uint64_t>()); break;
    case DType::u16:
      need(t.int32_data_size());
      for (int64_t i = 0; i < n; ++i) out.data<uint16_t>()[i] = static_cast<uint16_t>(t.int32_data(i));
      break;
    case DType::f16:
    case DType::bf16:
      need(t.int32_data_size());
      for (int64_t i = 0; i < n; ++i) out.data<uint16_t>()[i] = static_cast<uint16_t>(t.int32_data(i));
      break;
    default:  // i32 i16 i8 u8 bool travel in int32_data
      need(t.int32_data_size());
      for (int64_t i = 0; i < n; ++i) out.set_int(i, t.int32_data(i));
      break;
  }
  return out;
}

// ---- Ctx ------------------------------------------------------------------------------------------

void Ctx::begin(const ::onnx::NodeProto* n) {
  node_ = n;
  b_.set_origin(n->name().empty() ? (n->output_size() ? n->output(0) : n->op_type()) : n->name());
}

std::string Ctx::where() const {
  std::string nm = node_->name().empty() ? (node_->output_size() ? node_->output(0) : "") : node_->name();
  return "node '" + nm + "' (" + node_->op_type() + ")";
}

void Ctx::error(const std::string& why) const { fail("[onnx] ", where(), ": ", why); }

V Ctx::in(int i) const {
  if (!has_input(i)) error("missing required input " + std::to_string(i));
  auto it = env.find(node_->input(i));
  if (it == env.end()) error("input '" + node_->input(i) + "' is not defined before use");
  return it->second;
}

const Tensor& Ctx::const_in(int i, const char* what) const {
  const Tensor* t = try_const(in(i));  // a constant, a pinned input, or computed from them
  if (!t) error(std::string("input '") + what + "' must be known at import time (computed at run time is unsupported)");
  return *t;
}

// Lazy import-time evaluation of values computed from constants and pinned inputs (a Range limit
// derived from a window-size input, a Loop trip count or condition, an If condition): only where the
// importer needs the value, so the rest of the graph still computes at run time. An iterative walk
// over the producers (an unrolled loop makes deep chains); values and failures are remembered, so
// asking again each loop iteration only evaluates the new nodes.
const Tensor* Ctx::try_const(V v) const {
  auto known = [&](V x) -> const Tensor* {
    if (const Tensor* t = cval(x)) return t;
    if (auto it = pinned_.find(x); it != pinned_.end()) return &it->second;
    if (auto it = lazy_consts_.find(x); it != lazy_consts_.end()) return &it->second;
    return nullptr;
  };
  // Whether x's producer could be evaluated here at all (graph inputs and rng cannot).
  auto foldable = [&](V x) {
    int32_t p = g_.values[x].producer;
    if (p < 0 || g_.nodes[p].op == OpKind::RngUniform) return false;
    for (V o : g_.nodes[p].outputs)
      if (!is_static(type(o).shape) || numel(type(o).shape) > (int64_t{1} << 22)) return false;
    return true;
  };
  if (const Tensor* t = known(v)) return t;
  if (not_const_.count(v)) return nullptr;
  std::vector<std::pair<V, size_t>> stack;  // (value, next producer input to visit)
  // Every value on the stack depends on the one that failed.
  auto give_up = [&]() -> const Tensor* {
    for (auto& [x, i] : stack) not_const_.insert(x);
    return nullptr;
  };
  if (!foldable(v)) return not_const_.insert(v), nullptr;
  stack.push_back({v, 0});
  while (!stack.empty()) {
    V x = stack.back().first;
    const Node& n = g_.nodes[g_.values[x].producer];
    if (stack.back().second < n.inputs.size()) {
      V in = n.inputs[stack.back().second++];
      if (known(in)) continue;
      if (not_const_.count(in) || !foldable(in)) return not_const_.insert(in), give_up();
      stack.push_back({in, 0});
      continue;
    }
    std::vector<Tensor> vals;
    for (V in : n.inputs) vals.push_back(*known(in));
    std::vector<ValueType> ot;
    for (V o : n.outputs) ot.push_back(type(o));
    std::vector<Tensor> r;
    try {
      r = reference_eval(n, vals, ot);
    } catch (const Error&) {
      return give_up();
    }
    for (size_t i = 0; i < n.outputs.size(); ++i) lazy_consts_[n.outputs[i]] = std::move(r[i]);
    stack.pop_back();
  }
  return known(v);
}

int64_t Ctx::int_in(int i, const char* what) const {
  auto v = ints_in(i, what);
  if (v.size() != 1) error(std::string(what) + " must hold exactly one value");
  return v[0];
}

std::vector<int64_t> Ctx::ints_in(int i, const char* what) const {
  const Tensor& t = const_in(i, what);
  std::vector<int64_t> r(static_cast<size_t>(t.numel()));
  for (int64_t k = 0; k < t.numel(); ++k) r[k] = t.get_int(k);
  return r;
}

void Ctx::set_output(int i, V v) {
  if (i < node_->output_size() && !node_->output(i).empty()) env[node_->output(i)] = v;
}

const ::onnx::AttributeProto* Ctx::attr(const char* name) const {
  for (auto& a : node_->attribute())
    if (a.name() == name) {
      if (!a.ref_attr_name().empty()) error(std::string("attribute '") + name + "' refers to a function attribute");
      return &a;
    }
  return nullptr;
}
int64_t Ctx::attr_i(const char* name, int64_t def) const {
  auto* a = attr(name);
  return a ? a->i() : def;
}
double Ctx::attr_f(const char* name, double def) const {
  auto* a = attr(name);
  return a ? a->f() : def;
}
std::string Ctx::attr_s(const char* name, const std::string& def) const {
  auto* a = attr(name);
  return a ? a->s() : def;
}
std::vector<int64_t> Ctx::attr_ints(const char* name, std::vector<int64_t> def) const {
  auto* a = attr(name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : def;
}
std::vector<double> Ctx::attr_floats(const char* name) const {
  auto* a = attr(name);
  return a ? std::vector<double>(a->floats().begin(), a->floats().end()) : std::vector<double>{};
}
Tensor Ctx::attr_tensor(const char* name) const {
  auto* a = attr(name);
  if (!a || !a->has_t()) error(std::string("missing tensor attribute '") + name + "'");
  return tensor_from_proto(a->t(), "", where());
}

std::vector<int64_t> Ctx::static_shape(V v, const char* what) const {
  const Shape& s = shape(v);
  for (auto& d : s)
    if (!d.is_static()) error(std::string(what) + " has symbolic dim '" + d.sym + "'; bind it (--bind) to import");
  return static_dims(s);
}

std::vector<V> Ctx::op(OpKind k, std::vector<V> ins, Attrs attrs, bool fold) {
  std::vector<V> outs;
  try {
    outs = g_.add_node(k, ins, std::move(attrs), b_.graph().nodes.empty() ? "" : "");
  } catch (const Error& e) {
    error(e.what());
  }
  Node& n = g_.nodes.back();
  n.name = node_ ? (node_->name().empty() ? (node_->output_size() ? node_->output(0) : "") : node_->name()) : "";
  if (k == OpKind::RngUniform || !fold) return outs;
  std::vector<Tensor> vals;
  for (V v : ins) {
    const Tensor* t = cval(v);
    if (!t) return outs;
    vals.push_back(*t);
  }
  std::vector<ValueType> ot;
  for (V o : outs) {
    if (!is_static(type(o).shape) || numel(type(o).shape) > (int64_t{1} << 22)) return outs;
    ot.push_back(type(o));
  }
  std::vector<Tensor> r;
  try {
    r = reference_eval(n, vals, ot);
  } catch (const Error& e) {
    error(e.what());
  }
  for (size_t i = 0; i < outs.size(); ++i) consts_[outs[i]] = r[i];
  return outs;
}

V Ctx::constant(const Tensor& t) {
  V v = g_.add_node(OpKind::Constant, {}, {{"value", t}}, node_ ? node_->name() : "")[0];
  consts_[v] = t;
  return v;
}
V Ctx::scalar(double v, DType dt) {
  Tensor t(dt, {});
  t.set(0, v);
  return constant(t);
}
V Ctx::ints_const(const std::vector<int64_t>& v) {
  Tensor t(DType::i64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.set_int(static_cast<int64_t>(i), v[i]);
  return constant(t);
}
V Ctx::reshape(V v, std::vector<int64_t> s) { return reshape_dims(v, to_shape(s)); }
V Ctx::reshape_dims(V v, Shape s) {
  if (shape(v) == s) return v;
  return op1(OpKind::Reshape, {v}, {{"shape", std::move(s)}});
}
V Ctx::transpose(V v, std::vector<int64_t> perm) {
  bool id = true;
  for (size_t i = 0; i < perm.size(); ++i) id = id && perm[i] == static_cast<int64_t>(i);
  return id ? v : op1(OpKind::Transpose, {v}, {{"perm", std::move(perm)}});
}
V Ctx::broadcast_to(V v, Shape s) {
  if (shape(v) == s) return v;
  int64_t r = static_cast<int64_t>(s.size()), rv = rank(v);
  if (rv > r) error("cannot broadcast " + shape_str(shape(v)) + " to " + shape_str(s));
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < rv; ++i) dims.push_back(r - rv + i);
  return op1(OpKind::BroadcastInDim, {v}, {{"shape", s}, {"dims", dims}});
}
V Ctx::bin(OpKind k, V a, V c) { return op1(k, {a, c}); }
V Ctx::slice_axis(V v, int64_t axis, int64_t start, int64_t limit, int64_t stride) {
  int64_t r = rank(v);
  std::vector<int64_t> st(r, 0), li(r, int64_t{1} << 62), sd(r, 1);
  st[axis] = start;
  li[axis] = limit;
  sd[axis] = stride;
  return op1(OpKind::Slice, {v}, {{"start", st}, {"limit", li}, {"stride", sd}});
}
V Ctx::select(V p, V a, V c) { return op1(OpKind::Select, {p, a, c}); }

// ---- model import ---------------------------------------------------------------------------------

namespace {

const std::map<std::string, Converter>& registry() {
  static const std::map<std::string, Converter> r = [] {
    std::map<std::string, Converter> m;
    register_elementwise_ops(m);
    register_tensor_ops(m);
    register_nn_ops(m);
    register_attention_ops(m);
    register_resize_ops(m);
    register_misc_ops(m);
    register_conv_transpose(m);
    register_control_flow_ops(m);  // If, Loop, Scan
    register_sequence_ops(m);      // Sequence*, SplitToSequence, Optional*
    register_training_ops(m);      // ai.onnx.preview.training optimizers, training-mode BN/Dropout
    register_signal_ops(m);        // DFT, STFT, windows, MelWeightMatrix
    register_extra_ops(m);         // Einsum, trig inverses, RotaryEmbedding, LinearAttention, ...
    register_rnn_ops(m);           // RNN, GRU, LSTM (unrolled)
    register_vision_ops(m);        // GridSample, Col2Im, NMS, RoiAlign, ...
    register_qlinear_ops(m);       // QLinearMatMul/Conv, ConvInteger, DynamicQuantizeLinear
    return m;
  }();
  return r;
}

Shape shape_of(const ::onnx::ValueInfoProto& vi, const ImportOptions& o, const std::string& where) {
  Shape s;
  const auto& tt = vi.type().tensor_type();
  if (o.dim_params)
    for (auto& d : tt.shape().dim())
      if (d.has_dim_param() && !d.dim_param().empty()) o.dim_params->insert(d.dim_param());
  auto it = o.input_shapes.find(vi.name());
  if (it != o.input_shapes.end()) {
    // The array about to be fed must fit the declared input (as ONNX Runtime checks) before any
    // node sees it, so a mismatch names the input rather than the first node that trips on it.
    if (tt.has_shape()) {
      const std::vector<int64_t>& got = it->second;
      std::string decl;
      for (auto& d : tt.shape().dim())
        decl += (decl.empty() ? "" : ",") + (d.has_dim_value() ? std::to_string(d.dim_value())
                                              : d.has_dim_param() && !d.dim_param().empty() ? d.dim_param() : "?");
      std::string given;
      for (auto v : got) given += (given.empty() ? "" : ",") + std::to_string(v);
      auto mismatch = [&](const std::string& why) {
        fail("[onnx] input '", vi.name(), "': shape [", given, "] does not match the model's [", decl, "] (", why, ")");
      };
      if (static_cast<int>(got.size()) != tt.shape().dim_size())
        mismatch("rank " + std::to_string(got.size()) + " vs " + std::to_string(tt.shape().dim_size()));
      for (int i = 0; i < tt.shape().dim_size(); ++i) {
        const auto& d = tt.shape().dim(i);
        if (d.has_dim_value() && d.dim_value() != got[static_cast<size_t>(i)])
          mismatch("dim " + std::to_string(i) + " is " + std::to_string(d.dim_value()));
        if (d.has_dim_param() && !d.dim_param().empty()) {
          auto b = o.bind.find(d.dim_param());
          if (b != o.bind.end() && b->second != got[static_cast<size_t>(i)])
            mismatch("dim " + std::to_string(i) + " is " + d.dim_param() + " = " + std::to_string(b->second));
        }
      }
    }
    return to_shape(it->second);
  }
  int i = 0;
  for (auto& d : tt.shape().dim()) {
    if (d.has_dim_value()) {
      RLX_CHECK(d.dim_value() >= 0, "[onnx] ", where, ": negative dim");
      s.push_back(Dim(d.dim_value()));
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      auto b = o.bind.find(d.dim_param());
      s.push_back(b != o.bind.end() ? Dim(b->second) : Dim(d.dim_param()));
    } else {
      s.push_back(Dim(vi.name() + "_dim" + std::to_string(i)));
    }
    ++i;
  }
  return s;
}

void check_tensor_type(const ::onnx::ValueInfoProto& vi, const std::string& what) {
  const auto& t = vi.type();
  if (t.has_sequence_type()) fail("[onnx] ", what, " '", vi.name(), "' is a sequence; sequence types are unsupported");
  if (t.has_optional_type()) fail("[onnx] ", what, " '", vi.name(), "' is optional-typed; optional types are unsupported");
  if (t.has_map_type()) fail("[onnx] ", what, " '", vi.name(), "' is a map; map types are unsupported");
  if (t.has_sparse_tensor_type()) fail("[onnx] ", what, " '", vi.name(), "' is a sparse tensor; unsupported");
  RLX_CHECK(t.has_tensor_type(), "[onnx] ", what, " '", vi.name(), "' has no tensor type");
}

}  // namespace

bool is_supported_op(const std::string& op) { return registry().count(op) > 0; }

// One node of the main graph or of a subgraph body: import_model's loop and control_flow.cpp's
// If/Loop/Scan bodies both call it; ops on composite (sequence/optional) values go first.
void import_node(Ctx& c, const ::onnx::NodeProto& n) {
  const auto& reg = registry();
  c.begin(&n);
  if (!n.domain().empty() && n.domain() != "ai.onnx" && n.domain() != "ai.onnx.preview.training" &&
      n.domain() != "ai.onnx.ml")  // ml ops registered by name (Binarizer, ...)
    c.error("unsupported domain '" + n.domain() + "'");
  if (!convert_composite_node(c)) {
    auto it = reg.find(n.op_type());
    if (it == reg.end()) c.error("unsupported op " + n.op_type());
    // A converter that trips over malformed input (a library exception rather than our Error) still
    // fails with the node named, never as an anonymous internal error.
    try {
      it->second(c);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      c.error(std::string("malformed node (") + e.what() + ")");
    }
  }
  for (int i = 0; i < n.output_size(); ++i)
    if (!n.output(i).empty() && !c.env.count(n.output(i)) && !c.composites.count(n.output(i)))
      c.error("output " + std::to_string(i) + " ('" + n.output(i) + "') is not supported");
}

Graph import_model(const ::onnx::ModelProto& m, const std::string& base_dir, const std::string& where,
                   const ImportOptions& opts) {
  const auto& gp = m.graph();
  int64_t opset = -1;
  for (auto& os : m.opset_import()) {
    if (os.domain().empty() || os.domain() == "ai.onnx") opset = os.version();
    else if (os.domain() != "ai.onnx.ml" && os.domain() != "ai.onnx.preview.training")
      fail("[onnx] ", where, ": unsupported opset domain '", os.domain(), "'");
  }
  if (opset < 0) opset = m.ir_version() >= 3 ? 1 : 1;
  RLX_CHECK(opset >= 1, "[onnx] ", where, ": bad default-domain opset ", opset);

  Graph g;
  g.name = gp.name().empty() ? "main" : gp.name();
  Ctx c(g, opset);
  std::set<std::string> inits;
  for (auto& t : gp.initializer()) {
    inits.insert(t.name());
    Tensor v = tensor_from_proto(t, base_dir, where);
    V id = c.constant(v);
    if (is_narrow_type(t.data_type())) c.set_storage_type(id, t.data_type());
    g.values[id].name = t.name();
    c.env[t.name()] = id;
  }
  RLX_CHECK(gp.sparse_initializer_size() == 0, "[onnx] ", where, ": sparse initializers are unsupported");
  for (auto& vi : gp.input()) {
    if (inits.count(vi.name())) continue;  // IR < 4 lists initializers as inputs too
    if (is_composite_type(vi.type())) {  // sequence/optional input: one graph input per element
      bind_composite_input(c, vi, opts);
      continue;
    }
    check_tensor_type(vi, "graph input");
    DType dt;
    int et = vi.type().tensor_type().elem_type();
    RLX_CHECK(onnx_dtype(et, &dt), "[onnx] graph input '", vi.name(), "': unsupported dtype ", onnx_dtype_name(et));
    V id = g.add_input(vi.name(), dt, shape_of(vi, opts, "graph input '" + vi.name() + "'"));
    c.env[vi.name()] = id;
    auto pv = opts.input_values.find(vi.name());
    if (pv != opts.input_values.end()) c.pin(id, pv->second);
    if (is_narrow_type(et)) c.set_storage_type(id, et);
  }
  for (auto& vi : gp.output())
    if (!is_composite_type(vi.type())) check_tensor_type(vi, "graph output");  // composites flatten below
  for (auto& n : gp.node()) import_node(c, n);
  std::set<V> used;
  for (auto& vi : gp.output()) {
    if (is_composite_type(vi.type())) {  // one graph output NAME[i] per element
      add_composite_output(c, vi, used);
      continue;
    }
    auto it = c.env.find(vi.name());
    RLX_CHECK(it != c.env.end(), "[onnx] graph output '", vi.name(), "' is never produced");
    V v = it->second;
    // Graph inputs and repeated outputs get a copy so each output is its own named value.
    bool is_in = std::find(g.inputs.begin(), g.inputs.end(), v) != g.inputs.end();
    if (is_in || used.count(v) || (!g.values[v].name.empty() && g.values[v].name != vi.name() && inits.count(g.values[v].name))) {
      v = g.add_node(OpKind::Reshape, {v}, {{"shape", g.type(v).shape}}, vi.name())[0];
    }
    used.insert(v);
    g.values[v].name = vi.name();
    g.outputs.push_back(v);
  }
  return eliminate_dead_code(g);
}

}  // namespace rlx::onnx

namespace rlx::onnx {

namespace {
::onnx::ModelProto parse_model(const std::string& bytes, const std::string& where) {
  ::onnx::ModelProto m;
  RLX_CHECK(!bytes.empty(), "[onnx] ", where, ": empty file");
  RLX_CHECK(m.ParseFromString(bytes), "[onnx] ", where, ": not a valid ONNX model (protobuf parse failed; truncated?)");
  RLX_CHECK(m.has_graph(), "[onnx] ", where, ": model has no graph");
  return m;
}
}  // namespace

Graph import_onnx(const std::string& bytes, const std::string& base_dir, const std::string& where,
                  const ImportOptions& opts) {
  return import_model(parse_model(bytes, where), base_dir, where, opts);
}

Graph load_onnx(const std::string& path, const ImportOptions& opts) {
  std::string bytes = formats::read_file_bytes(path, "onnx");
  std::string dir = fs::path(path).parent_path().string();
  return import_onnx(bytes, dir.empty() ? "." : dir, path, opts);
}

bool is_onnx_path(const std::string& path) { return path.size() > 5 && path.substr(path.size() - 5) == ".onnx"; }

Tensor read_tensor_pb(const std::string& path) {
  std::string bytes = formats::read_file_bytes(path, "onnx");
  TensorProto t;
  RLX_CHECK(t.ParseFromString(bytes), "[onnx] ", path, ": not a TensorProto");
  std::string dir = fs::path(path).parent_path().string();
  return tensor_from_proto(t, dir.empty() ? "." : dir, path);
}

std::string inspect_onnx(const std::string& path) {
  std::string bytes = formats::read_file_bytes(path, "onnx");
  ::onnx::ModelProto m = parse_model(bytes, path);
  std::ostringstream os;
  os << "model: " << path << "\n";
  os << "ir_version: " << m.ir_version() << "  producer: " << m.producer_name() << " " << m.producer_version() << "\n";
  os << "opsets:";
  for (auto& o : m.opset_import()) os << " " << (o.domain().empty() ? "ai.onnx" : o.domain()) << "=" << o.version();
  os << "\n";
  auto type_str = [](const ::onnx::TypeProto& t) {
    if (!t.has_tensor_type()) return std::string(t.has_sequence_type() ? "sequence" : t.has_optional_type() ? "optional" : "other");
    std::string s = onnx_dtype_name(t.tensor_type().elem_type()) + "[";
    bool first = true;
    for (auto& d : t.tensor_type().shape().dim()) {
      s += (first ? "" : ",") + (d.has_dim_value() ? std::to_string(d.dim_value()) : d.dim_param().empty() ? "?" : d.dim_param());
      first = false;
    }
    return s + "]";
  };
  std::set<std::string> inits;
  int64_t init_bytes = 0;
  for (auto& t : m.graph().initializer()) {
    inits.insert(t.name());
    int64_t n = 1;
    for (auto d : t.dims()) n *= d;
    DType dt;
    if (onnx_dtype(t.data_type(), &dt)) init_bytes += n * static_cast<int64_t>(dtype_size(dt));
  }
  os << "inputs:\n";
  for (auto& vi : m.graph().input())
    if (!inits.count(vi.name())) os << "  " << vi.name() << ": " << type_str(vi.type()) << "\n";
  os << "outputs:\n";
  for (auto& vi : m.graph().output()) os << "  " << vi.name() << ": " << type_str(vi.type()) << "\n";
  os << "initializers: " << m.graph().initializer_size() << " (" << init_bytes << " bytes)\n";
  std::map<std::string, int> hist;
  for (auto& n : m.graph().node()) hist[(n.domain().empty() ? "" : n.domain() + ":") + n.op_type()]++;
  os << "nodes: " << m.graph().node_size() << "\nop histogram:\n";
  std::vector<std::pair<std::string, int>> h(hist.begin(), hist.end());
  std::stable_sort(h.begin(), h.end(), [](auto& a, auto& b) { return a.second > b.second; });
  for (auto& [op, k] : h)
    os << "  " << op << " " << k << (is_supported_op(op) ? "" : "  (unsupported)") << "\n";
  return os.str();
}

}  // namespace rlx::onnx

namespace rlx::onnx {
std::vector<std::string> onnx_input_names(const std::string& path) {
  ::onnx::ModelProto m = parse_model(formats::read_file_bytes(path, "onnx"), path);
  std::set<std::string> inits;
  for (auto& t : m.graph().initializer()) inits.insert(t.name());
  std::vector<std::string> r;
  for (auto& vi : m.graph().input())
    if (!inits.count(vi.name())) {
      check_tensor_type(vi, "graph input");
      r.push_back(vi.name());
    }
  return r;
}
}  // namespace rlx::onnx
