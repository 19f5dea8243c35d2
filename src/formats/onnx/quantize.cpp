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
#include "quant/calibrate.h"
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
  Tensor wt;           // f32 [K, N] (MatMul, Gemm) or [N, K] (Gemm transB)
  bool trans = false;  // Gemm transB: the output channel is axis 0
  int64_t K() const { return wt.shape()[trans ? 1 : 0]; }
  int64_t N() const { return wt.shape()[trans ? 0 : 1]; }
  float at(int64_t k, int64_t j) const { return wt.data<float>()[trans ? j * K() + k : k * N() + j]; }
};

struct ActParams {
  float scale = 1;
  uint8_t zp = 0;
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

// u8 asymmetric (scale, zero point) covering the calibrated range (and 0).
ActParams activation_params(Range& r, const QuantizeOptions& o) {
  quant::ClipRange c = quant::calibrate_range(r.samples, r.lo, r.hi, o.method, o.percentile);
  ActParams p;
  p.scale = static_cast<float>((c.hi - c.lo) / 255.0);
  p.zp = static_cast<uint8_t>(std::clamp(std::nearbyint(-c.lo / p.scale), 0.0, 255.0));
  return p;
}

// Symmetric i8 weights, per output channel or per tensor: scales and the [K, N] or [N, K] values.
void quantize_weight(const Candidate& c, const QuantizeOptions& o, std::vector<float>* ws, Tensor* wq) {
  const int64_t K = c.K(), N = c.N(), qmax = o.reduce_range == "on" ? 64 : 127;
  ws->assign(o.per_channel ? static_cast<size_t>(N) : 1, 0.0f);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) {
      float& s = (*ws)[o.per_channel ? static_cast<size_t>(j) : 0];
      s = std::max(s, std::abs(c.at(k, j)));
    }
  for (auto& s : *ws) s = s > 0 ? s / static_cast<float>(qmax) : 1.0f;
  *wq = Tensor(DType::i8, c.wt.shape());
  const int32_t lo = static_cast<int32_t>(-qmax), hi = static_cast<int32_t>(qmax);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) {
      int64_t i = c.trans ? j * K + k : k * N + j;
      wq->data<int8_t>()[i] = static_cast<int8_t>(quant::quantize(c.at(k, j), (*ws)[o.per_channel ? static_cast<size_t>(j) : 0], 0, lo, hi));
    }
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


// The layer alone on (up to 32 rows of) its batch-0 activation x: quantized x and w against float.
double local_sqnr(const Candidate& c, const Tensor& x, const ActParams& ap, const QuantizeOptions& o) {
  const int64_t K = c.K(), N = c.N(), rows = std::min<int64_t>(32, x.numel() / std::max<int64_t>(K, 1));
  std::vector<float> ws;
  Tensor wq;
  quantize_weight(c, o, &ws, &wq);
  Tensor yf(DType::f32, {rows, N}), yq(DType::f32, {rows, N});
  std::vector<float> xr(static_cast<size_t>(K)), xd(static_cast<size_t>(K));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < K; ++k) {
      xr[static_cast<size_t>(k)] = static_cast<float>(x.get(r * K + k));
      xd[static_cast<size_t>(k)] = quant::dequantize(quant::quantize(xr[static_cast<size_t>(k)], ap.scale, ap.zp, 0, 255), ap.zp, ap.scale);
    }
    for (int64_t j = 0; j < N; ++j) {
      double f = 0, q = 0;
      float sw = ws[o.per_channel ? static_cast<size_t>(j) : 0];
      for (int64_t k = 0; k < K; ++k) {
        int64_t wi = c.trans ? j * K + k : k * N + j;
        f += static_cast<double>(xr[static_cast<size_t>(k)]) * c.at(k, j);
        q += static_cast<double>(xd[static_cast<size_t>(k)]) * (wq.data<int8_t>()[wi] * sw);
      }
      yf.data<float>()[r * N + j] = static_cast<float>(f), yq.data<float>()[r * N + j] = static_cast<float>(q);
    }
  }
  double cos = 0;
  return sqnr_db(yf, yq, &cos);
}

// The QDQ model: every candidate but those in `keep` reads a quantized activation and weight.
ModelProto build_qdq(const ModelProto& m, const std::vector<Candidate>& cands, const std::map<std::string, ActParams>& act,
                     const QuantizeOptions& o, const std::set<std::string>& keep) {
  ModelProto q = m;
  auto* g = q.mutable_graph();
  g->clear_node();
  std::set<std::string> xq_done, w_used;
  std::map<int, const Candidate*> by_node;
  for (auto& c : cands)
    if (!keep.count(c.name)) by_node[c.node] = &c;
  for (int i = 0; i < m.graph().node_size(); ++i) {
    const auto& n = m.graph().node(i);
    auto it = by_node.find(i);
    if (it == by_node.end()) {
      for (auto& s : n.input()) w_used.insert(s);
      *g->add_node() = n;
      continue;
    }
    const Candidate& c = *it->second;
    for (int k = 2; k < n.input_size(); ++k) w_used.insert(n.input(k));  // a Gemm's bias
    std::string xs = c.x + "_scale", xz = c.x + "_zero_point", xq = c.x + "_quantized", xd = c.x + "_dequantized";
    if (xq_done.insert(c.x).second) {
      const ActParams& ap = act.at(c.x);
      *g->add_initializer() = make_init(xs, Tensor::from(DType::f32, {}, std::vector<float>{ap.scale}));
      *g->add_initializer() = make_init(xz, Tensor::from(DType::u8, {}, std::vector<int>{ap.zp}));
      auto* qn = g->add_node();
      qn->set_op_type("QuantizeLinear"), qn->set_name(c.x + "_QuantizeLinear");
      qn->add_input(c.x), qn->add_input(xs), qn->add_input(xz), qn->add_output(xq);
      auto* dn = g->add_node();
      dn->set_op_type("DequantizeLinear"), dn->set_name(c.x + "_DequantizeLinear");
      dn->add_input(xq), dn->add_input(xs), dn->add_input(xz), dn->add_output(xd);
    }
    std::vector<float> ws;
    Tensor wq;
    quantize_weight(c, o, &ws, &wq);
    std::string wn = c.name + "_" + c.w, wqn = wn + "_quantized", wsn = wn + "_scale", wzn = wn + "_zero_point", wd = wn + "_dequantized";
    std::vector<int64_t> ps = o.per_channel ? std::vector<int64_t>{c.N()} : std::vector<int64_t>{};
    *g->add_initializer() = make_init(wqn, wq);
    *g->add_initializer() = make_init(wsn, Tensor::from(DType::f32, ps, ws));
    *g->add_initializer() = make_init(wzn, Tensor(DType::i8, ps));
    auto* dw = g->add_node();
    dw->set_op_type("DequantizeLinear"), dw->set_name(wn + "_DequantizeLinear");
    dw->add_input(wqn), dw->add_input(wsn), dw->add_input(wzn), dw->add_output(wd);
    if (o.per_channel) {
      auto* at = dw->add_attribute();
      at->set_name("axis"), at->set_type(::onnx::AttributeProto::INT), at->set_i(c.trans ? 0 : 1);
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
  return q;
}

struct Evaluation {
  std::vector<Tensor> out;
  std::map<std::string, int> index;
  std::string notes;
  size_t n_outputs = 0;  // the model's own outputs come first
};

// The quantized model (int8 through fuse-qdq), with every candidate's output as an extra output,
// on the first calibration batch.
Evaluation evaluate(const ModelProto& q, const std::vector<Candidate>& cands, const std::string& base, const Bindings& bind,
                    const CompileOptions& co, const std::vector<Tensor>& in) {
  ModelProto qprobe = q;
  for (auto& c : cands) add_output(qprobe, c.y);
  Graph qg = import_model_proto(qprobe, base, bind);
  CompiledModel qm(qg, co);
  Evaluation e;
  e.out = qm.run(in);
  for (size_t i = 0; i < qg.outputs.size(); ++i) e.index[qg.values[qg.outputs[i]].name] = static_cast<int>(i);
  for (auto& l : qm.report().notes) e.notes += l + "\n";
  e.n_outputs = q.graph().output_size();
  return e;
}

std::vector<std::string> split_names(const std::string& s) {
  std::vector<std::string> r;
  size_t p = 0;
  while (p <= s.size()) {
    size_t e = s.find(',', p);
    if (e == std::string::npos) e = s.size();
    if (e > p) r.push_back(s.substr(p, e - p));
    p = e + 1;
  }
  return r;
}

}  // namespace

bool reduce_range_default() {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx2") && !__builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

QuantizeReport quantize_onnx(const std::string& in_path, const std::string& out_path, const QuantizeOptions& opts) {
  QuantizeOptions o = opts;
  RLX_CHECK(o.reduce_range == "auto" || o.reduce_range == "on" || o.reduce_range == "off",
            "[quantize] --reduce-range must be auto, on or off, not '", o.reduce_range, "'");
  if (o.reduce_range == "auto") o.reduce_range = reduce_range_default() ? "on" : "off";
  RLX_CHECK(quant::known_calibration(o.method), "[quantize] --method must be minmax, percentile, mse or entropy, not '", o.method, "'");
  RLX_CHECK(o.percentile > 50 && o.percentile <= 100, "[quantize] percentile must be in (50, 100]");
  RLX_CHECK(o.budget > 0 && o.budget <= 1, "[quantize] the cosine budget must be in (0, 1]");
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
  auto attr_i = [](const ::onnx::NodeProto& n, const char* name, int64_t dflt) {
    for (auto& a : n.attribute())
      if (a.name() == name) return static_cast<int64_t>(a.i());
    return dflt;
  };
  auto attr_f = [](const ::onnx::NodeProto& n, const char* name, double dflt) {
    for (auto& a : n.attribute())
      if (a.name() == name) return static_cast<double>(a.f());
    return dflt;
  };
  for (int i = 0; i < m.graph().node_size(); ++i) {
    const auto& n = m.graph().node(i);
    bool gemm = n.op_type() == "Gemm";
    if ((n.op_type() != "MatMul" && !gemm) || !n.domain().empty()) continue;
    std::string name = n.name().empty() ? n.output(0) : n.name();
    auto it = inits.find(n.input(1));
    LayerError le{name, false, "", 0, 0, 0};
    if (it == inits.end()) le.why = "weight is not a constant";
    else if (it->second->data_type() != TensorProto::FLOAT || it->second->dims_size() != 2) le.why = "weight is not an f32 matrix";
    else if (inits.count(n.input(0))) le.why = "activation is a constant";
    else if (gemm && (attr_i(n, "transA", 0) != 0 || attr_f(n, "alpha", 1.0) != 1.0)) le.why = "Gemm with transA or alpha != 1";
    if (!le.why.empty()) {
      rep.layers.push_back(le);
      continue;
    }
    cands.push_back({i, name, n.input(0), n.input(1), n.output(0), tensor_from_proto(*it->second, base, "quantize"),
                     gemm && attr_i(n, "transB", 0) != 0});
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
  rep.reduce_range = o.reduce_range == "on";
  std::map<std::string, ActParams> act;
  for (auto& c : cands)
    if (!act.count(c.x)) act[c.x] = activation_params(ranges[c.x], o);
  std::map<std::string, double> local;
  for (auto& c : cands) local[c.name] = local_sqnr(c, first_out.at(out_index.at(c.x)), act.at(c.x), o);

  // Which layers stay float.
  std::set<std::string> keep;
  auto out_cosine = [&](const Evaluation& e) {
    double cos = 1;
    if (!pg.outputs.empty() && e.n_outputs > 0) sqnr_db(first_out[0], e.out[0], &cos);
    return cos;
  };
  Evaluation ev = evaluate(build_qdq(m, cands, act, o, keep), cands, base, bind, co, first_in);
  rep.evaluations = 1;
  rep.all_int8_cosine = out_cosine(ev);
  if (o.keep_float == "auto") {
    std::vector<const Candidate*> order;
    for (auto& c : cands) order.push_back(&c);
    std::stable_sort(order.begin(), order.end(), [&](const Candidate* a, const Candidate* b) { return local[a->name] < local[b->name]; });
    auto first_k = [&](size_t k) {
      std::set<std::string> s;
      for (size_t i = 0; i < k; ++i) s.insert(order[i]->name);
      return s;
    };
    if (rep.all_int8_cosine < o.budget) {
      // Bisection on k (the k worst layers in float): lo fails, hi passes (all float does).
      size_t lo = 0, hi = order.size();
      Evaluation best;
      bool have = false;
      while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        Evaluation e = evaluate(build_qdq(m, cands, act, o, first_k(mid)), cands, base, bind, co, first_in);
        ++rep.evaluations;
        if (out_cosine(e) >= o.budget) hi = mid, best = std::move(e), have = true;
        else lo = mid;
      }
      keep = first_k(hi);
      if (have) ev = std::move(best);
      else ev = evaluate(build_qdq(m, cands, act, o, keep), cands, base, bind, co, first_in), ++rep.evaluations;
    }
  } else if (!o.keep_float.empty()) {
    for (auto& nm : split_names(o.keep_float)) {
      bool found = false;
      for (auto& c : cands) found |= c.name == nm;
      RLX_CHECK(found, "[quantize] --keep-float: no quantizable MatMul/Gemm named '", nm, "'");
      keep.insert(nm);
    }
    ev = evaluate(build_qdq(m, cands, act, o, keep), cands, base, bind, co, first_in);
    ++rep.evaluations;
  }
  ModelProto q = build_qdq(m, cands, act, o, keep);
  std::string bytes;
  RLX_CHECK(q.SerializeToString(&bytes), "[quantize] cannot serialize the quantized model");
  formats::write_file_atomic(out_path, bytes, "quantize");

  for (auto& c : cands) {
    bool kept = keep.count(c.name) > 0;
    LayerError le{c.name, !kept && ev.notes.find("fuse-qdq: int8 '" + c.name + "'") != std::string::npos, "", 0, 0,
                  local[c.name]};
    if (kept) le.why = o.keep_float == "auto" ? "kept float (auto, cosine budget)" : "kept float (--keep-float)";
    else if (!le.int8) le.why = "quantized in the model; RLX runs it emulated in float";
    le.sqnr_db = sqnr_db(first_out.at(out_index.at(c.y)), ev.out.at(ev.index.at(c.y)), &le.cosine);
    rep.layers.push_back(le);
    if (kept) rep.kept_float.push_back(c.name);
  }
  if (!pg.outputs.empty() && ev.n_outputs > 0) rep.output_sqnr_db = sqnr_db(first_out[0], ev.out[0], &rep.output_cosine);
  return rep;
}

}  // namespace rlx::onnx
