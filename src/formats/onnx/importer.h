// Internals of the ONNX importer shared by the per-family op converters (ops_*.cpp).
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "onnx/onnx.pb.h"
#include "rlx/builder.h"
#include "rlx/graph.h"

namespace rlx::onnx {

using V = ValueId;

// Control flow, sequences, optionals: control_flow.cpp, sequences.cpp.
// A sequence- or optional-typed ONNX value at import: a static list of ordinary graph values.
// Its length (and, for an optional, whether it holds an element) is fixed at import; at the graph
// boundary each element is its own graph input/output, named NAME[i].
struct CompositeValue {
  bool optional = false;     // optional<T>
  bool has_element = true;   // optional only: does it hold a T?
  bool sequence = true;      // T (or the value itself) is a sequence; false: optional<tensor>
  int elem_type = 1;         // ONNX TensorProto dtype of the elements (for empty sequences)
  std::vector<ValueId> elems;
};

// ONNX TensorProto.DataType -> rlx dtype; false for types rlx lacks (string, uint16/32/64, float8, ...).
bool onnx_dtype(int t, DType* out);
std::string onnx_dtype_name(int t);
// TensorProto -> Tensor; `base_dir` resolves external data. Throws "[onnx] <where>: ...".
Tensor tensor_from_proto(const ::onnx::TensorProto& t, const std::string& base_dir, const std::string& where);

// One node being converted: typed access to its inputs, attributes and the graph under construction.
// Values whose contents are known at import time (initializers, constants, shapes of static
// tensors, and anything computed from those) are folded with the reference interpreter, so the
// shape computations ONNX models carry (Shape -> Gather -> Concat -> Reshape) become static attributes.
class Ctx {
 public:
  Ctx(Graph& g, int64_t opset) : g_(g), b_(g), opset_(opset) {}

  // --- the current node
  void begin(const ::onnx::NodeProto* n);
  const ::onnx::NodeProto& node() const { return *node_; }
  int64_t opset() const { return opset_; }
  [[noreturn]] void error(const std::string& why) const;
  std::string where() const;

  int num_inputs() const { return node_->input_size(); }
  bool has_input(int i) const { return i < node_->input_size() && !node_->input(i).empty(); }
  V in(int i) const;
  std::optional<V> opt_in(int i) const { return has_input(i) ? std::optional<V>(in(i)) : std::nullopt; }
  // A constant input's values; fails naming the input when it is only known at run time.
  const Tensor& const_in(int i, const char* what) const;
  std::vector<int64_t> ints_in(int i, const char* what) const;
  // A scalar (or one-element) integer input known at import.
  int64_t int_in(int i, const char* what) const;
  int num_outputs() const { return node_->output_size(); }
  bool wants_output(int i) const { return i < node_->output_size() && !node_->output(i).empty(); }
  void set_output(int i, V v);

  // --- attributes (defaults as the ONNX spec gives them)
  const ::onnx::AttributeProto* attr(const char* name) const;
  bool has_attr(const char* name) const { return attr(name) != nullptr; }
  int64_t attr_i(const char* name, int64_t def) const;
  double attr_f(const char* name, double def) const;
  std::string attr_s(const char* name, const std::string& def) const;
  std::vector<int64_t> attr_ints(const char* name, std::vector<int64_t> def = {}) const;
  std::vector<double> attr_floats(const char* name) const;
  Tensor attr_tensor(const char* name) const;

  // --- emitting
  Builder& b() { return b_; }
  Graph& g() { return g_; }
  const ValueType& type(V v) const { return g_.type(v); }
  DType dtype(V v) const { return g_.type(v).dtype; }
  const Shape& shape(V v) const { return g_.type(v).shape; }
  int64_t rank(V v) const { return static_cast<int64_t>(shape(v).size()); }
  std::vector<int64_t> static_shape(V v, const char* what) const;  // fails on symbolic dims
  const Tensor* cval(V v) const {
    auto it = consts_.find(v);
    return it == consts_.end() ? nullptr : &it->second;
  }
  // fold = false keeps the node even when its inputs are known (dequantize_affine of int8 weights:
  // the fuse-qdq pass reads the integer weight).
  std::vector<V> op(OpKind k, std::vector<V> ins, Attrs attrs = {}, bool fold = true);
  V op1(OpKind k, std::vector<V> ins, Attrs attrs = {}) { return op(k, std::move(ins), std::move(attrs))[0]; }
  V constant(const Tensor& t);
  V scalar(double v, DType dt);
  V ints_const(const std::vector<int64_t>& v);  // i64 [n]
  V convert(V v, DType to) { return dtype(v) == to ? v : op1(OpKind::Convert, {v}, {{"to", to}}); }
  V reshape(V v, std::vector<int64_t> s);
  V reshape_dims(V v, Shape s);
  V transpose(V v, std::vector<int64_t> perm);
  V broadcast_to(V v, Shape s);  // numpy broadcast to s (by value: emitting may move graph storage)
  // numpy-broadcasting binary op (operands brought to a common shape as the op table requires).
  V bin(OpKind k, V a, V c);
  V unary(OpKind k, V a) { return op1(k, {a}); }
  V reduce(OpKind k, V a, std::vector<int64_t> axes, bool keep) {
    return op1(k, {a}, {{"axes", std::move(axes)}, {"keepdims", int64_t{keep}}});
  }
  V slice_axis(V v, int64_t axis, int64_t start, int64_t limit, int64_t stride = 1);
  V select(V p, V a, V c);

  std::map<std::string, V> env;  // ONNX value name -> rlx value

 private:
  Graph& g_;
  Builder b_;
  int64_t opset_;
  const ::onnx::NodeProto* node_ = nullptr;
  std::map<V, Tensor> consts_;
  std::map<V, Tensor> pinned_;  // graph inputs specialized by value (ImportOptions::input_values)
  friend class Importer;
 public:
  void set_const(V v, Tensor t) { consts_[v] = std::move(t); }
  void pin(V v, Tensor t) { pinned_[v] = std::move(t); }
  // sequence/optional-typed ONNX names (disjoint from env) and fed-value lookup.
  std::map<std::string, CompositeValue> composites;
  const Tensor* pinned_value(V v) const {
    auto it = pinned_.find(v);
    return it == pinned_.end() ? nullptr : &it->second;
  }
  // Storage-only ONNX types (float8, float4, int4, int2) travel in f32/i32
  // (storage_formats.h); this remembers which format a value holds, so CastLike/QuantizeLinear know
  // the target grid. 0 = the value's own dtype.
  int storage_type(V v) const {
    auto it = storage_types_.find(v);
    return it == storage_types_.end() ? 0 : it->second;
  }
  void set_storage_type(V v, int onnx_type) { storage_types_[v] = onnx_type; }
  // The value of `v` at import: a constant, a pinned input (ImportOptions::input_values), or computed
  // from those by the reference interpreter (values not folded eagerly because they depend on pinned
  // inputs). nullptr when it depends on a run-time value. The one import-time evaluator: control
  // flow (Loop trip counts/conditions, If), SplitToSequence and const_in all use it.
  const Tensor* try_const(V v) const;

 private:
  std::map<V, int> storage_types_;
  mutable std::map<V, Tensor> lazy_consts_;  // try_const's results (values are immutable once emitted)
  mutable std::set<V> not_const_;            // values try_const found to depend on run-time inputs
};

bool is_supported_op(const std::string& op);
struct ImportOptions;
Graph import_model(const ::onnx::ModelProto& m, const std::string& base_dir, const std::string& where,
                   const ImportOptions& opts);

using Converter = std::function<void(Ctx&)>;
// Registries filled by ops_*.cpp.
void register_elementwise_ops(std::map<std::string, Converter>& r);
void register_tensor_ops(std::map<std::string, Converter>& r);
void register_nn_ops(std::map<std::string, Converter>& r);
void register_attention_ops(std::map<std::string, Converter>& r);
void register_resize_ops(std::map<std::string, Converter>& r);
void register_misc_ops(std::map<std::string, Converter>& r);
void register_conv_transpose(std::map<std::string, Converter>& r);

// ---- control flow / sequences / training ops ------------------------------------------------------
// Converts one node (domain check, registry lookup, composite-value hooks); the main node loop and
// subgraph bodies (If/Loop/Scan/SequenceMap) both go through it.
void import_node(Ctx& c, const ::onnx::NodeProto& n);
// sequences.cpp: ops on composite values that tensor converters do not handle (Identity); true when done.
bool convert_composite_node(Ctx& c);
bool is_composite_type(const ::onnx::TypeProto& t);
// Graph inputs/outputs of sequence/optional type, flattened to one graph value per element.
void bind_composite_input(Ctx& c, const ::onnx::ValueInfoProto& vi, const ImportOptions& o);
void add_composite_output(Ctx& c, const ::onnx::ValueInfoProto& vi, std::set<V>& used);
void register_control_flow_ops(std::map<std::string, Converter>& r);
void register_sequence_ops(std::map<std::string, Converter>& r);
void register_training_ops(std::map<std::string, Converter>& r);
// ---- ops_signal/ops_extra/ops_rnn/ops_vision/ops_qlinear.cpp -----------------------------------------
void register_signal_ops(std::map<std::string, Converter>& r);
void register_extra_ops(std::map<std::string, Converter>& r);
void register_rnn_ops(std::map<std::string, Converter>& r);
void register_vision_ops(std::map<std::string, Converter>& r);
void register_qlinear_ops(std::map<std::string, Converter>& r);

}  // namespace rlx::onnx
