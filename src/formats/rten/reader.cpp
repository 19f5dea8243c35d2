// .rten files: the header, flatbuffer verification, graphs and constants -> an ONNX ModelProto, inspect.
// Built only when CMake found flatc (RLX_HAVE_RTEN); otherwise every entry point explains why not.
#include "formats/rten/rten.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <queue>
#include <sstream>

#include "formats/file_io.h"
#include "rlx/error.h"

#ifdef RLX_HAVE_RTEN
#include "formats/onnx/importer.h"
#include "formats/rten/translate.h"
#endif

namespace rlx::rten {

bool is_rten_path(const std::string& path) { return path.size() > 5 && path.substr(path.size() - 5) == ".rten"; }

#ifndef RLX_HAVE_RTEN

bool available() { return false; }
std::string unavailable_reason() {
#ifdef RLX_RTEN_MISSING
  return RLX_RTEN_MISSING;
#else
  return "this build has no rten reader";
#endif
}
[[noreturn]] static void unavailable(const std::string& where) {
  fail("[rten] ", where, ": cannot read .rten files: ", unavailable_reason());
}
Graph load_rten(const std::string& path, const onnx::ImportOptions&) { unavailable(path); }
Graph import_rten(const std::string&, const std::string& where, const onnx::ImportOptions&) { unavailable(where); }
std::string rten_to_onnx(const std::string&, const std::string& where, const onnx::ImportOptions&) { unavailable(where); }
std::string inspect_rten(const std::string& path) { unavailable(path); }

#else

bool available() { return true; }
std::string unavailable_reason() { return ""; }

namespace {

uint64_t le64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// Largest tensor the reader accepts, in elements (as the ONNX importer: 2^40).
constexpr uint64_t kMaxElems = uint64_t{1} << 40;

size_t const_elem_size(fb::ConstantDataType t) {
  switch (t) {
    case fb::ConstantDataType::Int32:
    case fb::ConstantDataType::Float32: return 4;
    case fb::ConstantDataType::Int8:
    case fb::ConstantDataType::UInt8: return 1;
  }
  return 0;
}

int const_onnx_type(fb::ConstantDataType t) {
  switch (t) {
    case fb::ConstantDataType::Int32: return ::onnx::TensorProto::INT32;
    case fb::ConstantDataType::Float32: return ::onnx::TensorProto::FLOAT;
    case fb::ConstantDataType::Int8: return ::onnx::TensorProto::INT8;
    case fb::ConstantDataType::UInt8: return ::onnx::TensorProto::UINT8;
  }
  return -1;
}

const char* dtype_str(fb::DataType t) {
  switch (t) {
    case fb::DataType::Int32: return "i32";
    case fb::DataType::Float: return "f32";
    case fb::DataType::Int8: return "i8";
    case fb::DataType::UInt8: return "u8";
  }
  return "?";
}

}  // namespace

int onnx_elem_type(fb::DataType t) {
  switch (t) {
    case fb::DataType::Int32: return ::onnx::TensorProto::INT32;
    case fb::DataType::Float: return ::onnx::TensorProto::FLOAT;
    case fb::DataType::Int8: return ::onnx::TensorProto::INT8;
    case fb::DataType::UInt8: return ::onnx::TensorProto::UINT8;
  }
  return -1;
}

RtenFile open_rten(std::string bytes, const std::string& where) {
  RtenFile f;
  f.bytes = std::move(bytes);
  const std::string& b = f.bytes;
  RLX_CHECK(!b.empty(), "[rten] ", where, ": empty file");
  const uint8_t* model = reinterpret_cast<const uint8_t*>(b.data());
  size_t model_len = b.size();
  if (b.size() >= 4 && std::memcmp(b.data(), "RTEN", 4) == 0) {
    // Version 2: "RTEN", u32 version, u64 model offset, u64 model length, u64 tensor-data offset.
    RLX_CHECK(b.size() >= 32, "[rten] ", where, ": truncated header (", b.size(), " bytes, the header has 32)");
    uint32_t version = static_cast<uint32_t>(le64(b.data() + 4) & 0xffffffffu);
    RLX_CHECK(version == 2, "[rten] ", where, ": unsupported file version ", version, " (this reader knows 1 and 2)");
    uint64_t mo = le64(b.data() + 8), ml = le64(b.data() + 16), to = le64(b.data() + 24);
    RLX_CHECK(mo >= 32 && mo <= b.size() && ml <= b.size() - mo, "[rten] ", where, ": model data [", mo, ", +", ml,
              ") lies outside the file (", b.size(), " bytes; truncated?)");
    RLX_CHECK(to >= mo + ml && to <= b.size(), "[rten] ", where, ": tensor data offset ", to,
              " lies outside the file (", b.size(), " bytes; truncated?) or overlaps the model data");
    f.version = 2;
    model += mo;
    model_len = static_cast<size_t>(ml);
    f.tensor_data = reinterpret_cast<const uint8_t*>(b.data()) + to;
    f.tensor_len = b.size() - static_cast<size_t>(to);
  } else {
    f.version = 1;  // the bare flatbuffer
  }
  RLX_CHECK(model_len >= 8, "[rten] ", where, ": not a .rten model (", model_len, " bytes of model data)");
  RLX_CHECK(model_len < FLATBUFFERS_MAX_BUFFER_SIZE, "[rten] ", where, ": model data too large");
  if (reinterpret_cast<uintptr_t>(model) % 8 != 0) {  // flatbuffers reads scalars in place
    f.aligned.resize((model_len + 7) / 8);
    std::memcpy(f.aligned.data(), model, model_len);
    model = reinterpret_cast<const uint8_t*>(f.aligned.data());
  }
  flatbuffers::Verifier v(model, model_len, /*max_depth=*/64, /*max_tables=*/10'000'000);
  RLX_CHECK(v.VerifyBuffer<fb::Model>(nullptr), "[rten] ", where,
            ": not a valid .rten model (the flatbuffer failed verification: truncated or corrupt)");
  f.model = flatbuffers::GetRoot<fb::Model>(model);
  f.model_len = model_len;
  RLX_CHECK(f.model->schema_version() <= 1, "[rten] ", where, ": schema version ", f.model->schema_version(),
            " is newer than this reader (1)");
  RLX_CHECK(f.model->graph(), "[rten] ", where, ": the model has no graph");
  return f;
}

// ---- Translator: rten graph -> ONNX GraphProto ------------------------------------------------------

void Translator::error(const std::string& why) const { fail("[rten] ", where_, ": ", why); }

std::string Translator::fresh(const std::string& base) {
  std::string n = base;
  while (names_.count(n)) n = base + "_" + std::to_string(++counter_);
  names_.insert(n);
  return n;
}

std::string Translator::as_bool(const std::string& v, ::onnx::GraphProto* gp) {
  if (v.empty()) return v;
  auto it = bool_.find(v);
  if (it != bool_.end()) return it->second;
  std::string b = fresh(v + "_bool");
  auto* n = gp->add_node();
  n->set_op_type("Cast");
  n->add_input(v);
  n->add_output(b);
  auto* a = n->add_attribute();
  a->set_name("to");
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(::onnx::TensorProto::BOOL);
  bool_[v] = b;
  return b;
}

namespace {

enum class Kind { op, constant, value };

void fill_constant(::onnx::TensorProto* t, const fb::ConstantNode* c, const RtenFile& f, const std::string& what,
                   const Translator& tr) {
  uint64_t n = 1;
  if (c->shape())
    for (uint32_t d : *c->shape()) {
      t->add_dims(d);
      if (d && n > kMaxElems / d) tr.error(what + ": constant too large");
      n *= d;
    }
  if (n > kMaxElems) tr.error(what + ": constant too large");
  auto inline_data = [&](auto* vec, int type, size_t esize) {
    if (!vec) tr.error(what + ": inline data table without values");
    if (vec->size() != n)
      tr.error(what + ": " + std::to_string(vec->size()) + " inline values for " + std::to_string(n) + " elements");
    t->set_data_type(type);
    t->set_raw_data(reinterpret_cast<const char*>(vec->data()), n * esize);
  };
  switch (c->data_type()) {
    case fb::ConstantData::FloatData: {
      auto* d = c->data_as_FloatData();
      inline_data(d ? d->data() : nullptr, ::onnx::TensorProto::FLOAT, 4);
      return;
    }
    case fb::ConstantData::Int32Data: {
      auto* d = c->data_as_Int32Data();
      inline_data(d ? d->data() : nullptr, ::onnx::TensorProto::INT32, 4);
      return;
    }
    case fb::ConstantData::Int8Data: {
      auto* d = c->data_as_Int8Data();
      inline_data(d ? d->data() : nullptr, ::onnx::TensorProto::INT8, 1);
      return;
    }
    case fb::ConstantData::UInt8Data: {
      auto* d = c->data_as_UInt8Data();
      inline_data(d ? d->data() : nullptr, ::onnx::TensorProto::UINT8, 1);
      return;
    }
    case fb::ConstantData::NONE: break;
    default: tr.error(what + ": unknown inline data kind " + std::to_string(static_cast<int>(c->data_type())));
  }
  if (!c->data_offset().has_value()) tr.error(what + ": constant has neither inline data nor a data offset");
  if (!c->dtype().has_value()) tr.error(what + ": constant in the tensor-data segment has no dtype");
  fb::ConstantDataType dt = c->dtype().value();
  size_t es = const_elem_size(dt);
  if (!es) tr.error(what + ": unknown constant dtype " + std::to_string(static_cast<int>(dt)));
  if (f.version < 2) tr.error(what + ": data offset in a version-1 file (no tensor-data segment)");
  uint64_t off = c->data_offset().value(), len = n * es;
  if (off > f.tensor_len || len > f.tensor_len - off)
    tr.error(what + ": data [" + std::to_string(off) + ", +" + std::to_string(len) + ") exceeds the tensor-data segment (" +
             std::to_string(f.tensor_len) + " bytes; truncated?)");
  t->set_data_type(const_onnx_type(dt));
  t->set_raw_data(reinterpret_cast<const char*>(f.tensor_data + off), static_cast<size_t>(len));
}

void fill_value_info(::onnx::ValueInfoProto* vi, const fb::ValueNode* v, bool need_type, bool need_shape,
                     const Translator& tr) {
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  if (v && v->dtype().has_value()) {
    int et = onnx_elem_type(v->dtype().value());
    if (et < 0) tr.error("value '" + vi->name() + "': unknown dtype " + std::to_string(static_cast<int>(v->dtype().value())));
    tt->set_elem_type(et);
  } else if (need_type) {
    tr.error("graph input '" + vi->name() + "' declares no dtype");
  }
  if (v && v->shape()) {
    auto* sh = tt->mutable_shape();
    for (const fb::Dim* d : *v->shape()) {
      auto* od = sh->add_dim();
      if (d && d->name() && d->name()->size()) od->set_dim_param(d->name()->str());
      else if (d && d->value()) od->set_dim_value(d->value());
      // neither: an unknown size (converters write 0 for dims the ONNX model left open)
    }
  } else if (need_shape) {
    tr.error("graph input '" + vi->name() + "' declares no shape; feed it (rlx run --input) so its shape is known");
  }
}

}  // namespace

void Translator::graph(const fb::Graph* g, ::onnx::GraphProto* gp, int depth, const std::string& label) {
  if (depth > 32) error("subgraphs nested deeper than 32");
  const auto* nodes = g->nodes();
  size_t n = nodes ? nodes->size() : 0;
  std::vector<Kind> kind(n);
  std::vector<std::string> name(n);
  std::set<std::string> local;
  auto node_label = [&](size_t i) {
    const fb::Node* nd = nodes->Get(static_cast<flatbuffers::uoffset_t>(i));
    std::string s = nd->name() && nd->name()->size() ? nd->name()->str() : std::to_string(i);
    return nd->name() && nd->name()->size() ? s.insert(0, 1, '\'').append(1, '\'') : s.insert(0, 1, '#');
  };
  std::set<uint32_t> captures;
  if (g->captures())
    for (uint32_t c : *g->captures()) {
      if (depth == 0) error("the main graph lists captured values");
      if (c >= n) error(label + ": capture index " + std::to_string(c) + " out of range");
      captures.insert(c);
    }
  // Pass 1: kinds and value names; constants become initializers.
  for (size_t i = 0; i < n; ++i) {
    const fb::Node* nd = nodes->Get(static_cast<flatbuffers::uoffset_t>(i));
    std::string nm = nd->name() ? nd->name()->str() : "";
    switch (nd->data_type()) {
      case fb::NodeKind::OperatorNode:
        if (!nd->data_as_OperatorNode()) error(label + ": operator node " + node_label(i) + " has no body");
        kind[i] = Kind::op;
        name[i] = nm;
        continue;
      case fb::NodeKind::ConstantNode: kind[i] = Kind::constant; break;
      case fb::NodeKind::ValueNode: kind[i] = Kind::value; break;
      default: error(label + ": node " + node_label(i) + " has unknown kind " + std::to_string(static_cast<int>(nd->data_type())));
    }
    if (!nd->data()) error(label + ": node " + node_label(i) + " has no body");
    if (captures.count(static_cast<uint32_t>(i))) {
      if (kind[i] != Kind::value || nm.empty() || !names_.count(nm))
        error(label + ": captured value " + node_label(i) + " is not a value of an enclosing graph");
      name[i] = nm;
      continue;
    }
    if (!local.insert(nm).second && !nm.empty()) error(label + ": two values are named '" + nm + "'");
    name[i] = fresh(nm.empty() ? "rten_value_" + std::to_string(i) : nm);
    if (kind[i] == Kind::constant) {
      auto* t = gp->add_initializer();
      t->set_name(name[i]);
      fill_constant(t, nd->data_as_ConstantNode(), f_, label + ": constant '" + name[i] + "'", *this);
    }
  }
  // Graph inputs and outputs.
  std::set<uint32_t> is_input;
  if (g->inputs())
    for (uint32_t i : *g->inputs()) {
      if (i >= n) error(label + ": input index " + std::to_string(i) + " out of range");
      if (kind[i] != Kind::value) error(label + ": graph input " + node_label(i) + " is not a value node");
      if (!is_input.insert(i).second) error(label + ": graph input " + node_label(i) + " listed twice");
      auto* vi = gp->add_input();
      vi->set_name(name[i]);
      bool shape_known = depth > 0 || opts_.input_shapes.count(name[i]);
      fill_value_info(vi, nodes->Get(i)->data_as_ValueNode(), true, !shape_known, *this);
    }
  // Operators: check their slots, then order them so every input is produced first.
  std::vector<size_t> ops;
  std::vector<int64_t> producer(n, -1);
  for (size_t i = 0; i < n; ++i) {
    if (kind[i] != Kind::op) continue;
    const fb::OperatorNode* op = nodes->Get(static_cast<flatbuffers::uoffset_t>(i))->data_as_OperatorNode();
    if (op->outputs())
      for (int32_t o : *op->outputs()) {
        if (o < 0) continue;
        if (static_cast<size_t>(o) >= n) error(label + ": operator " + node_label(i) + ": output index " + std::to_string(o) + " out of range");
        if (kind[o] != Kind::value) error(label + ": operator " + node_label(i) + " writes " + node_label(o) + ", which is not a value node");
        if (is_input.count(o) || captures.count(o)) error(label + ": operator " + node_label(i) + " overwrites graph input " + node_label(o));
        if (producer[o] >= 0) error(label + ": value " + node_label(o) + " is produced by two operators");
        producer[o] = static_cast<int64_t>(i);
      }
    ops.push_back(i);
  }
  std::map<size_t, std::vector<size_t>> users;
  std::map<size_t, int> pending;
  for (size_t i : ops) {
    const fb::OperatorNode* op = nodes->Get(static_cast<flatbuffers::uoffset_t>(i))->data_as_OperatorNode();
    std::set<size_t> deps;
    if (op->inputs())
      for (int32_t in : *op->inputs()) {
        if (in < 0) continue;
        if (static_cast<size_t>(in) >= n) error(label + ": operator " + node_label(i) + ": input index " + std::to_string(in) + " out of range");
        if (kind[in] == Kind::op) error(label + ": operator " + node_label(i) + " reads operator node " + node_label(in) + " as a value");
        if (kind[in] == Kind::value && producer[in] < 0 && !is_input.count(in) && !captures.count(in))
          error(label + ": operator " + node_label(i) + " reads value " + node_label(in) +
                ", which is neither a graph input, a constant nor an operator output");
        if (producer[in] >= 0) deps.insert(static_cast<size_t>(producer[in]));
      }
    pending[i] = static_cast<int>(deps.size());
    for (size_t d : deps) users[d].push_back(i);
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;  // file order among the ready
  for (size_t i : ops)
    if (pending[i] == 0) ready.push(i);
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t u : users[i])
      if (--pending[u] == 0) ready.push(u);
  }
  if (order.size() != ops.size()) {
    std::string stuck;
    int k = 0;
    for (size_t i : ops)
      if (pending[i] > 0 && k++ < 4) stuck += (stuck.empty() ? "" : ", ") + node_label(i);
    error(label + ": the graph has a cycle: " + std::to_string(ops.size() - order.size()) +
          " operators wait on each other (" + stuck + (k > 4 ? ", ..." : "") + ")");
  }
  for (size_t i : order) {
    const fb::OperatorNode* op = nodes->Get(static_cast<flatbuffers::uoffset_t>(i))->data_as_OperatorNode();
    std::vector<std::string> ins, outs;
    if (op->inputs())
      for (int32_t in : *op->inputs()) ins.push_back(in < 0 ? "" : name[in]);
    if (op->outputs())
      for (int32_t o : *op->outputs()) outs.push_back(o < 0 ? "" : name[o]);
    translate_op(op, name[i], std::move(ins), std::move(outs), gp, depth);
  }
  if (g->outputs())
    for (uint32_t o : *g->outputs()) {
      if (o >= n) error(label + ": output index " + std::to_string(o) + " out of range");
      if (kind[o] == Kind::op) error(label + ": graph output " + node_label(o) + " is an operator node");
      auto* vi = gp->add_output();
      vi->set_name(name[o]);
      fill_value_info(vi, kind[o] == Kind::value ? nodes->Get(o)->data_as_ValueNode() : nullptr, false, false, *this);
      if (kind[o] == Kind::constant) {  // an output that is a constant: give it the constant's type
        for (auto& t : gp->initializer())
          if (t.name() == name[o]) vi->mutable_type()->mutable_tensor_type()->set_elem_type(t.data_type());
      }
    }
}

::onnx::ModelProto Translator::model() {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("rlx rten reader");
  // Opset 18: rten operators follow ONNX semantics of that era (axes as inputs for every Reduce*,
  // Split's num_outputs, single-axis Softmax); attributes the format stores are rewritten to match.
  auto* os = m.add_opset_import();
  os->set_domain("");
  os->set_version(18);
  auto* gp = m.mutable_graph();
  gp->set_name("main");
  graph(f_.model->graph(), gp, 0, "main graph");
  return m;
}

// ---- entry points ---------------------------------------------------------------------------------

std::string rten_to_onnx(const std::string& bytes, const std::string& where, const onnx::ImportOptions& opts) {
  RtenFile f = open_rten(bytes, where);
  Translator t(f, where, opts);
  return t.model().SerializeAsString();
}

Graph import_rten(const std::string& bytes, const std::string& where, const onnx::ImportOptions& opts) {
  RtenFile f = open_rten(bytes, where);
  ::onnx::ModelProto m = Translator(f, where, opts).model();
  return onnx::import_model(m, "", where, opts);
}

Graph load_rten(const std::string& path, const onnx::ImportOptions& opts) {
  return import_rten(formats::read_file_bytes(path, "rten"), path, opts);
}

std::string inspect_rten(const std::string& path) {
  RtenFile f = open_rten(formats::read_file_bytes(path, "rten"), path);
  const fb::Model* m = f.model;
  const fb::Graph* g = m->graph();
  std::ostringstream os;
  os << "model: " << path << "\nformat: rten v" << f.version << " (schema " << m->schema_version() << "), flatbuffer "
     << f.model_len << " bytes, tensor data " << f.tensor_len << " bytes\n";
  if (const fb::Metadata* md = m->metadata()) {
    auto field = [&](const char* k, const flatbuffers::String* s) {
      if (s && s->size()) os << "  " << k << ": " << s->str() << "\n";
    };
    os << "metadata:\n";
    field("onnx_hash", md->onnx_hash());
    field("description", md->description());
    field("license", md->license());
    field("commit", md->commit());
    field("code_repository", md->code_repository());
    field("model_repository", md->model_repository());
    field("run_id", md->run_id());
    field("run_url", md->run_url());
  }
  const auto* nodes = g->nodes();
  size_t n = nodes ? nodes->size() : 0;
  auto value_str = [&](uint32_t i) {
    if (i >= n) return std::string("<index out of range>");
    const fb::Node* nd = nodes->Get(i);
    std::string s = nd->name() ? nd->name()->str() : std::to_string(i).insert(0, 1, '#');
    s += ": ";
    const fb::ValueNode* v = nd->data_as_ValueNode();
    if (!v) return s + (nd->data_as_ConstantNode() ? "constant" : "not a value");
    s += v->dtype().has_value() ? dtype_str(v->dtype().value()) : "?";
    s += "[";
    if (v->shape())
      for (flatbuffers::uoffset_t k = 0; k < v->shape()->size(); ++k) {
        const fb::Dim* d = v->shape()->Get(k);
        if (k) s += ",";
        s += d->name() && d->name()->size() ? d->name()->str() : d->value() ? std::to_string(d->value()) : "?";
      }
    return s + "]";
  };
  os << "inputs:\n";
  if (g->inputs())
    for (uint32_t i : *g->inputs()) os << "  " << value_str(i) << "\n";
  os << "outputs:\n";
  if (g->outputs())
    for (uint32_t i : *g->outputs()) os << "  " << value_str(i) << "\n";
  int64_t consts = 0, inline_consts = 0, ops = 0;
  uint64_t const_bytes = 0;
  std::map<std::string, int> hist;
  for (size_t i = 0; i < n; ++i) {
    const fb::Node* nd = nodes->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (const fb::ConstantNode* c = nd->data_as_ConstantNode()) {
      ++consts;
      uint64_t e = 1;
      if (c->shape())
        for (uint32_t d : *c->shape()) e = d && e > kMaxElems / d ? kMaxElems : e * d;
      inline_consts += c->data_type() != fb::ConstantData::NONE;
      uint64_t nb = e * (c->dtype().has_value() ? std::max<size_t>(const_elem_size(c->dtype().value()), 1) : 4);
      const_bytes += nb;
      if (c->data_type() == fb::ConstantData::NONE && c->data_offset().has_value()) {  // as import would
        uint64_t off = c->data_offset().value();
        RLX_CHECK(off <= f.tensor_len && nb <= f.tensor_len - off, "[rten] ", path, ": constant ", i, " [", off, ", +", nb,
                  ") exceeds the tensor-data segment (", f.tensor_len, " bytes; truncated?)");
      }
    } else if (const fb::OperatorNode* op = nd->data_as_OperatorNode()) {
      ++ops;
      std::string nm = fb::EnumNameOperatorType(op->type());
      hist[nm.empty() ? "op#" + std::to_string(static_cast<int>(op->type())) : nm]++;
    }
  }
  os << "constants: " << consts << " (" << const_bytes << " bytes; " << inline_consts << " inline, "
     << consts - inline_consts << " in the tensor-data segment)\n";
  os << "operators: " << ops << "\nop histogram:\n";
  std::vector<std::pair<std::string, int>> h(hist.begin(), hist.end());
  std::stable_sort(h.begin(), h.end(), [](auto& a, auto& b) { return a.second > b.second; });
  for (auto& [op, k] : h) os << "  " << op << " " << k << (onnx::is_supported_op(op) ? "" : "  (unsupported)") << "\n";
  return os.str();
}

#endif  // RLX_HAVE_RTEN

}  // namespace rlx::rten
