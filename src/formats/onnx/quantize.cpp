// Post-training static int8 quantization of ONNX models (quantize.h).
#include "formats/onnx/quantize.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <cstring>
#include <set>

#include "formats/file_io.h"
#include "formats/onnx/importer.h"
#include "formats/onnx/onnx.h"
#include "quant/fixed_point.h"
#include "rlx/npy.h"
#include "rlx/session.h"

namespace rlx::onnx {

namespace {

using ::onnx::ModelProto;
using ::onnx::TensorProto;

constexpr size_t kMaxSamples = size_t{1} << 20;  // values kept per tensor for percentiles

struct Candidate {
  int node = -1;
  std::string name, x, w, y;
  Tensor wt;  // f32 [K, N]
};

struct Range {
  double lo = 0, hi = 0;
  bool seen = false;
  std::vector<float> samples;
};

ModelProto read_model(const std::string& path) {
  ModelProto m;
  RLX_CHECK(m.ParseFromString(formats::read_file_bytes(path, "quantize")), "[quantize] '", path,
            "' is not an ONNX model");
  return m;
}

void add_output(ModelProto& m, const std::string& name) {
  for (auto& o : m.graph().output())
    if (o.name() == name) return;
  auto* vi = m.mutable_graph()->add_output();
  vi->set_name(name);
  vi->mutable_type()->mutable_tensor_type()->set_elem_type(TensorProto::FLOAT);
}

Graph import_model_proto(const ModelProto& m, const std::string& base_dir, const Bindings& bind) {
  std::string bytes;
  RLX_CHECK(m.SerializeToString(&bytes), "[quantize] cannot serialize the model");
  ImportOptions io;
  io.bind = bind;
  return import_onnx(bytes, base_dir, "quantize", io);
}

std::vector<Tensor> random_inputs(const Graph& g, std::mt19937_64& rng) {
  std::vector<Tensor> r;
  std::normal_distribution<float> nd;
  for (ValueId v : g.inputs) {
    const ValueType& t = g.type(v);
    RLX_CHECK(is_static(t.shape), "[quantize] input '", g.values[v].name, "' has symbolic dims: bind them with --bind");
    Tensor x(t.dtype, static_dims(t.shape));
    const std::string& n = g.values[v].name;
    bool mask = n.find("mask") != std::string::npos, type = n.find("type") != std::string::npos;
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (is_float(t.dtype)) x.set(i, nd(rng));
      else if (t.dtype == DType::boolean || mask) x.set(i, 1);
      else if (type) x.set(i, 0);
      else x.set(i, static_cast<double>(rng() % 1000));
    }
    r.push_back(x);
  }
  return r;
}

// Batch b of the calibration file: per input NAME an array [batches, ...].
std::vector<Tensor> file_inputs(const Graph& g, const std::map<std::string, Tensor>& f, int b) {
  std::vector<Tensor> r;
  for (ValueId v : g.inputs) {
    const std::string& n = g.values[v].name;
    auto it = f.find(n);
    RLX_CHECK(it != f.end(), "[quantize] the calibration file has no array '", n, "'");
    const Tensor& a = it->second;
    std::vector<int64_t> s(a.shape().begin() + 1, a.shape().end());
    Tensor x(a.dtype(), s);
    std::memcpy(x.raw(), static_cast<const char*>(a.raw()) + static_cast<size_t>(b) * x.nbytes(), x.nbytes());
    if (g.type(v).dtype != x.dtype()) {
      Tensor c(g.type(v).dtype, s);
      for (int64_t i = 0; i < x.numel(); ++i) c.set(i, x.get(i));
      x = c;
    }
    r.push_back(x);
  }
  return r;
}

void observe(Range& r, const Tensor& t, int batches) {
  size_t stride = std::max<size_t>(1, static_cast<size_t>(t.numel()) * static_cast<size_t>(batches) / kMaxSamples);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = t.get(i);
    if (!r.seen) r.lo = r.hi = v, r.seen = true;
    r.lo = std::min(r.lo, v), r.hi = std::max(r.hi, v);
    if (static_cast<size_t>(i) % stride == 0 && r.samples.size() < kMaxSamples) r.samples.push_back(static_cast<float>(v));
  }
}

// u8 asymmetric (scale, zero point) covering [lo, hi] and 0.
void activation_params(Range& r, const QuantizeOptions& o, float* scale, uint8_t* zp) {
  double lo = r.lo, hi = r.hi;
  if (o.method == "percentile" && r.samples.size() > 1) {
    std::sort(r.samples.begin(), r.samples.end());
    double q = (100.0 - o.percentile) / 200.0, n1 = static_cast<double>(r.samples.size() - 1);
    lo = r.samples[static_cast<size_t>(std::floor(q * n1))];
    hi = r.samples[static_cast<size_t>(std::ceil((1 - q) * n1))];
  }
  lo = std::min(lo, 0.0), hi = std::max(hi, 0.0);
  if (hi - lo < 1e-12) hi = lo + 1e-6;
  *scale = static_cast<float>((hi - lo) / 255.0);
  *zp = static_cast<uint8_t>(std::clamp(std::nearbyint(-lo / *scale), 0.0, 255.0));
}

double sqnr_db(const Tensor& f, const Tensor& q, double* cosine) {
  double s = 0, e = 0, fq = 0, qq = 0;
  for (int64_t i = 0; i < f.numel(); ++i) {
    double a = f.get(i), b = q.get(i);
    s += a * a, e += (a - b) * (a - b), fq += a * b, qq += b * b;
  }
  *cosine = s > 0 && qq > 0 ? fq / std::sqrt(s * qq) : 1.0;
  return e > 0 ? 10 * std::log10(s / e) : 200.0;
}

TensorProto make_init(const std::string& name, const Tensor& t) {
  TensorProto p;
  p.set_name(name);
  for (int64_t d : t.shape()) p.add_dims(d);
  switch (t.dtype()) {
    case DType::f32: p.set_data_type(TensorProto::FLOAT); break;
    case DType::i8: p.set_data_type(TensorProto::INT8); break;
    case DType::u8: p.set_data_type(TensorProto::UINT8); break;
    default: fail("[quantize] internal: initializer dtype ", dtype_name(t.dtype()));
  }
  p.set_raw_data(std::string(static_cast<const char*>(t.raw()), t.nbytes()));
  return p;
}

int64_t opset_of(const ModelProto& m) {
  for (auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  return 0;
}

}  // namespace

QuantizeReport quantize_onnx(const std::string& in_path, const std::string& out_path, const QuantizeOptions& o) {
  RLX_CHECK(o.method == "minmax" || o.method == "percentile", "[quantize] --method must be minmax or percentile, not '", o.method, "'");
  RLX_CHECK(o.percentile > 50 && o.percentile <= 100, "[quantize] percentile must be in (50, 100]");
  ModelProto m = read_model(in_path);
  std::string base = std::filesystem::path(in_path).parent_path().string();
  RLX_CHECK(opset_of(m) >= 13, "[quantize] needs opset >= 13 (per-axis DequantizeLinear); the model has opset ", opset_of(m));
  std::map<std::string, const TensorProto*> inits;
  for (auto& t : m.graph().initializer()) {
    RLX_CHECK(t.data_location() != TensorProto::EXTERNAL, "[quantize] initializer '", t.name(),
              "' uses external data, which this writer does not carry over");
    inits[t.name()] = &t;
  }
  // Symbolic input dims: bound as given, the rest to 1.
  Bindings bind = o.bind;
  {
    std::set<std::string> dims;
    ImportOptions io;
    io.dim_params = &dims;
    io.bind = bind;
    load_onnx(in_path, io);
    for (auto& d : dims)
      if (!bind.count(d)) bind[d] = 1;
  }
  QuantizeReport rep;
  std::vector<Candidate> cands;
  for (int i = 0; i < m.graph().node_size(); ++i) {
    const auto& n = m.graph().node(i);
    if (n.op_type() != "MatMul" || !n.domain().empty()) continue;
    std::string name = n.name().empty() ? n.output(0) : n.name();
    auto it = inits.find(n.input(1));
    LayerError le{name, false, "", 0, 0};
    if (it == inits.end()) le.why = "weight is not a constant";
    else if (it->second->data_type() != TensorProto::FLOAT || it->second->dims_size() != 2) le.why = "weight is not an f32 matrix";
    else if (inits.count(n.input(0))) le.why = "activation is a constant";
    if (!le.why.empty()) {
      rep.layers.push_back(le);
      continue;
    }
    cands.push_back({i, name, n.input(0), n.input(1), n.output(0), tensor_from_proto(*it->second, base, "quantize")});
  }
  // Calibration: the float model with every candidate's activation and output as extra outputs.
  ModelProto probe = m;
  for (auto& c : cands) add_output(probe, c.x), add_output(probe, c.y);
  Graph pg = import_model_proto(probe, base, bind);
  CompileOptions co;
  co.device = o.device;
  CompiledModel fm(pg, co);
  std::map<std::string, Tensor> file;
  int batches = o.calib_batches;
  if (!o.calib_file.empty()) {
    file = read_npz(o.calib_file);
    RLX_CHECK(!file.empty(), "[quantize] the calibration file is empty");
    batches = static_cast<int>(file.begin()->second.shape().at(0));
  }
  RLX_CHECK(batches >= 1, "[quantize] needs at least one calibration batch");
  std::map<std::string, int> out_index;
  for (size_t i = 0; i < pg.outputs.size(); ++i) out_index[pg.values[pg.outputs[i]].name] = static_cast<int>(i);
  std::map<std::string, Range> ranges;
  std::mt19937_64 rng(o.seed);
  std::vector<Tensor> first_in, first_out;
  for (int b = 0; b < batches; ++b) {
    std::vector<Tensor> in = o.calib_file.empty() ? random_inputs(pg, rng) : file_inputs(pg, file, b);
    std::vector<Tensor> out = fm.run(in);
    if (b == 0) first_in = in, first_out = out;
    for (auto& c : cands) observe(ranges[c.x], out.at(out_index.at(c.x)), batches);
    if (o.progress) o.progress(b + 1, batches);
  }
  rep.batches = batches;
  // The QDQ model.
  ModelProto q = m;
  auto* g = q.mutable_graph();
  g->clear_node();
  std::set<std::string> xq_done, w_used;
  std::map<int, const Candidate*> by_node;
  for (auto& c : cands) by_node[c.node] = &c;
  for (int i = 0; i < m.graph().node_size(); ++i) {
    const auto& n = m.graph().node(i);
    auto it = by_node.find(i);
    if (it == by_node.end()) {
      for (auto& s : n.input()) w_used.insert(s);
      *g->add_node() = n;
      continue;
    }
    const Candidate& c = *it->second;
    std::string xs = c.x + "_scale", xz = c.x + "_zero_point", xq = c.x + "_quantized", xd = c.x + "_dequantized";
    if (xq_done.insert(c.x).second) {
      float s = 1;
      uint8_t z = 0;
      activation_params(ranges[c.x], o, &s, &z);
      *g->add_initializer() = make_init(xs, Tensor::from(DType::f32, {}, std::vector<float>{s}));
      *g->add_initializer() = make_init(xz, Tensor::from(DType::u8, {}, std::vector<int>{z}));
      auto* qn = g->add_node();
      qn->set_op_type("QuantizeLinear"), qn->set_name(c.x + "_QuantizeLinear");
      qn->add_input(c.x), qn->add_input(xs), qn->add_input(xz), qn->add_output(xq);
      auto* dn = g->add_node();
      dn->set_op_type("DequantizeLinear"), dn->set_name(c.x + "_DequantizeLinear");
      dn->add_input(xq), dn->add_input(xs), dn->add_input(xz), dn->add_output(xd);
    }
    int64_t K = c.wt.shape()[0], N = c.wt.shape()[1];
    std::vector<float> ws(o.per_channel ? static_cast<size_t>(N) : 1, 0.0f);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) {
        float& s = ws[o.per_channel ? static_cast<size_t>(j) : 0];
        s = std::max(s, std::abs(c.wt.data<float>()[k * N + j]));
      }
    for (auto& s : ws) s = s > 0 ? s / 127.0f : 1.0f;
    Tensor wq(DType::i8, {K, N});
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j)
        wq.data<int8_t>()[k * N + j] = static_cast<int8_t>(
            quant::quantize(c.wt.data<float>()[k * N + j], ws[o.per_channel ? static_cast<size_t>(j) : 0], 0, -127, 127));
    std::string wn = c.name + "_" + c.w, wqn = wn + "_quantized", wsn = wn + "_scale", wzn = wn + "_zero_point", wd = wn + "_dequantized";
    std::vector<int64_t> ps = o.per_channel ? std::vector<int64_t>{N} : std::vector<int64_t>{};
    *g->add_initializer() = make_init(wqn, wq);
    *g->add_initializer() = make_init(wsn, Tensor::from(DType::f32, ps, ws));
    *g->add_initializer() = make_init(wzn, Tensor(DType::i8, ps));
    auto* dw = g->add_node();
    dw->set_op_type("DequantizeLinear"), dw->set_name(wn + "_DequantizeLinear");
    dw->add_input(wqn), dw->add_input(wsn), dw->add_input(wzn), dw->add_output(wd);
    if (o.per_channel) {
      auto* at = dw->add_attribute();
      at->set_name("axis"), at->set_type(::onnx::AttributeProto::INT), at->set_i(1);
    }
    ::onnx::NodeProto mm = n;
    mm.set_input(0, xd), mm.set_input(1, wd);
    *g->add_node() = mm;
  }
  // Float weights no other node reads are dropped.
  for (const auto& gi : m.graph().output()) w_used.insert(gi.name());
  auto* ini = g->mutable_initializer();
  for (int i = ini->size() - 1; i >= 0; --i) {
    bool cand_w = false;
    for (auto& c : cands) cand_w |= c.w == ini->Get(i).name();
    if (cand_w && !w_used.count(ini->Get(i).name())) ini->DeleteSubrange(i, 1);
  }
  std::string bytes;
  RLX_CHECK(q.SerializeToString(&bytes), "[quantize] cannot serialize the quantized model");
  formats::write_file_atomic(out_path, bytes, "quantize");

  // Per-layer error: the quantized model (int8 through fuse-qdq) against float on the first batch.
  ModelProto qprobe = q;
  for (auto& c : cands) add_output(qprobe, c.y);
  Graph qg = import_model_proto(qprobe, base, bind);
  CompiledModel qm(qg, co);
  std::vector<Tensor> qout = qm.run(first_in);
  std::map<std::string, int> qidx;
  for (size_t i = 0; i < qg.outputs.size(); ++i) qidx[qg.values[qg.outputs[i]].name] = static_cast<int>(i);
  std::string notes;
  for (auto& l : qm.report().notes) notes += l + "\n";
  for (auto& c : cands) {
    LayerError le{c.name, notes.find("fuse-qdq: int8 '" + c.name + "'") != std::string::npos, "", 0, 0};
    if (!le.int8) le.why = "quantized in the model; RLX runs it emulated in float";
    le.sqnr_db = sqnr_db(first_out.at(out_index.at(c.y)), qout.at(qidx.at(c.y)), &le.cosine);
    rep.layers.push_back(le);
  }
  if (!pg.outputs.empty() && !qg.outputs.empty())
    rep.output_sqnr_db = sqnr_db(first_out[0], qout[0], &rep.output_cosine);
  return rep;
}

}  // namespace rlx::onnx
