#include "train/pipeline_parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <sstream>

#include "autodiff/autodiff.h"
#include "dist/communicator.h"
#include "passes/passes.h"
#include "rlx/builder.h"
#include "rlx/error.h"

namespace rlx::train {

PipelineSchedule parse_pipeline_schedule(const std::string& s) {
  if (s == "gpipe") return PipelineSchedule::GPipe;
  if (s == "1f1b") return PipelineSchedule::OneFOneB;
  fail("[pipeline] unknown schedule '", s, "' (gpipe or 1f1b)");
}

const char* pipeline_schedule_name(PipelineSchedule s) { return s == PipelineSchedule::GPipe ? "gpipe" : "1f1b"; }

namespace {

int64_t type_bytes(const ValueType& t) {
  int64_t n = 1;
  for (int64_t d : static_dims(t.shape)) n *= d;
  return n * static_cast<int64_t>(dtype_size(t.dtype));
}

double node_flops(const Graph& f, const Node& n) {
  double out = 0;
  for (ValueId o : n.outputs) out += static_cast<double>(type_bytes(f.type(o))) / dtype_size(f.type(o).dtype);
  if (n.op == OpKind::DotGeneral) {
    auto lhs = static_dims(f.type(n.inputs[0]).shape);
    double k = 1;
    for (int64_t a : attr_ints(n, "lhs_contract")) k *= static_cast<double>(lhs[static_cast<size_t>(a)]);
    return 2 * out * k;
  }
  return out;
}

}  // namespace

std::vector<PipelineStage> split_pipeline(const Graph& loss_fn, int num_params, int stages) {
  RLX_CHECK(stages >= 1, "[pipeline] stage count ", stages, " must be at least 1");
  Graph f = ad::decompose_for_ad(loss_fn);
  const int N = static_cast<int>(f.nodes.size()), V = static_cast<int>(f.values.size());
  RLX_CHECK(num_params >= 0 && num_params <= static_cast<int>(f.inputs.size()), "[pipeline] bad parameter count ",
            num_params);
  auto is_free = [&](int i) { return f.nodes[static_cast<size_t>(i)].inputs.empty(); };  // constants, iota
  std::vector<int> def(static_cast<size_t>(V), -1), last(static_cast<size_t>(V), -1);
  for (int i = 0; i < N; ++i) {
    for (ValueId o : f.nodes[static_cast<size_t>(i)].outputs) def[static_cast<size_t>(o)] = i;
    for (ValueId in : f.nodes[static_cast<size_t>(i)].inputs) last[static_cast<size_t>(in)] = std::max(last[static_cast<size_t>(in)], i);
  }
  for (ValueId o : f.outputs) last[static_cast<size_t>(o)] = N;
  auto carried = [&](ValueId v) { return def[static_cast<size_t>(v)] >= 0 && !is_free(def[static_cast<size_t>(v)]); };
  // cross[p]: bytes live across the cut before node p; cum[p]: FLOPs of nodes before p.
  std::vector<int64_t> diff(static_cast<size_t>(N) + 2, 0), cross(static_cast<size_t>(N) + 1, 0);
  for (ValueId v = 0; v < V; ++v)
    if (carried(v) && last[static_cast<size_t>(v)] > def[static_cast<size_t>(v)]) {
      diff[static_cast<size_t>(def[static_cast<size_t>(v)] + 1)] += type_bytes(f.type(v));
      diff[static_cast<size_t>(last[static_cast<size_t>(v)] + 1)] -= type_bytes(f.type(v));
    }
  std::vector<double> cum(static_cast<size_t>(N) + 1, 0);
  for (int p = 0; p < N; ++p) {
    cross[static_cast<size_t>(p + 1)] = cross[static_cast<size_t>(p)] + diff[static_cast<size_t>(p + 1)];
    cum[static_cast<size_t>(p + 1)] = cum[static_cast<size_t>(p)] + node_flops(f, f.nodes[static_cast<size_t>(p)]);
  }
  int real = 0;
  for (int i = 0; i < N; ++i) real += !is_free(i);
  RLX_CHECK(real >= stages, "[pipeline] ", stages, " stages need at least as many operations; the graph has ", real);
  // Cuts: near each k/S share of the FLOPs (within 15% of the total), the one with the fewest bytes
  // crossing; every stage keeps at least one operation.
  const double total = cum.back();
  std::vector<int> cuts{0};
  for (int k = 1; k < stages; ++k) {
    double target = total * k / stages;
    int lo = cuts.back() + 1, hi = N - (stages - k), best = -1;
    auto better = [&](int p, int q) {
      if (q < 0) return true;
      if (cross[static_cast<size_t>(p)] != cross[static_cast<size_t>(q)]) return cross[static_cast<size_t>(p)] < cross[static_cast<size_t>(q)];
      return std::abs(cum[static_cast<size_t>(p)] - target) < std::abs(cum[static_cast<size_t>(q)] - target);
    };
    for (int p = lo; p <= hi; ++p)
      if (!is_free(p - 1) && std::abs(cum[static_cast<size_t>(p)] - target) <= 0.15 * total && better(p, best)) best = p;
    if (best < 0)  // no cut near the target: the nearest one
      for (int p = lo; p <= hi; ++p)
        if (best < 0 || std::abs(cum[static_cast<size_t>(p)] - target) < std::abs(cum[static_cast<size_t>(best)] - target)) best = p;
    cuts.push_back(best);
  }
  cuts.push_back(N);
  auto crossing = [&](int p) {
    std::vector<ValueId> out;
    for (ValueId v = 0; v < V; ++v)
      if (carried(v) && def[static_cast<size_t>(v)] < p && last[static_cast<size_t>(v)] >= p) out.push_back(v);
    return out;
  };
  std::vector<int> owner(static_cast<size_t>(num_params), -1);
  std::vector<PipelineStage> out(static_cast<size_t>(stages));
  for (int s = 0; s < stages; ++s) {
    const int a = cuts[static_cast<size_t>(s)], b = cuts[static_cast<size_t>(s) + 1];
    PipelineStage& st = out[static_cast<size_t>(s)];
    Graph& g = st.fwd;
    g.name = f.name + "_stage" + std::to_string(s);
    std::vector<char> used(static_cast<size_t>(V), 0);
    for (int i = a; i < b; ++i)
      if (!is_free(i))
        for (ValueId in : f.nodes[static_cast<size_t>(i)].inputs) used[static_cast<size_t>(in)] = 1;
    if (s == stages - 1)
      for (ValueId o : f.outputs) used[static_cast<size_t>(o)] = 1;
    std::map<ValueId, ValueId> m;
    for (int i = 0; i < num_params; ++i) {
      ValueId v = f.inputs[static_cast<size_t>(i)];
      if (!used[static_cast<size_t>(v)]) continue;
      RLX_CHECK(owner[static_cast<size_t>(i)] < 0, "[pipeline] parameter '", f.values[static_cast<size_t>(v)].name,
                "' is used by stages ", owner[static_cast<size_t>(i)], " and ", s, " (tied weights cannot be split)");
      owner[static_cast<size_t>(i)] = s;
      st.params.push_back(i);
      m[v] = g.add_input(f.values[static_cast<size_t>(v)].name, f.type(v).dtype, f.type(v).shape);
    }
    if (s > 0)
      for (ValueId v : crossing(a)) {
        m[v] = g.add_input("act_" + std::to_string(v), f.type(v).dtype, f.type(v).shape);
        ++st.acts_in;
      }
    for (size_t i = static_cast<size_t>(num_params); i < f.inputs.size(); ++i) {
      ValueId v = f.inputs[i];
      if (!used[static_cast<size_t>(v)]) continue;
      st.data.push_back(static_cast<int>(i));
      m[v] = g.add_input(f.values[static_cast<size_t>(v)].name, f.type(v).dtype, f.type(v).shape);
    }
    std::function<ValueId(ValueId)> get = [&](ValueId v) -> ValueId {
      if (auto it = m.find(v); it != m.end()) return it->second;
      int d = def[static_cast<size_t>(v)];
      RLX_CHECK(d >= 0 && is_free(d), "[pipeline] internal: value ", f.value_label(v), " is not available in stage ", s);
      const Node& n = f.nodes[static_cast<size_t>(d)];  // a constant: copied into this stage
      auto outs = g.add_node(n.op, {}, n.attrs, n.name);
      for (size_t k = 0; k < outs.size(); ++k) m[n.outputs[k]] = outs[k];
      return m.at(v);
    };
    for (int i = a; i < b; ++i) {
      const Node& n = f.nodes[static_cast<size_t>(i)];
      if (is_free(i)) continue;
      std::vector<ValueId> ins;
      for (ValueId in : n.inputs) ins.push_back(get(in));
      auto outs = g.add_node(n.op, ins, n.attrs, n.name);
      for (size_t k = 0; k < outs.size(); ++k) m[n.outputs[k]] = outs[k];
      ++st.nodes;
      st.flops += node_flops(f, n);
    }
    if (s < stages - 1) {
      for (ValueId v : crossing(b)) {
        g.outputs.push_back(get(v));
        st.bytes_out += type_bytes(f.type(v));
        ++st.acts_out;
      }
    } else {
      for (ValueId o : f.outputs) g.outputs.push_back(get(o));
      st.acts_out = static_cast<int>(f.outputs.size());
    }
  }
  return out;
}

std::string pipeline_table(const std::vector<PipelineStage>& stages) {
  std::ostringstream os;
  double total = 0;
  for (auto& s : stages) total += s.flops;
  os << "stage  ops  params  acts in/out  MFLOP (share)  bytes sent per micro-batch\n";
  for (size_t i = 0; i < stages.size(); ++i) {
    auto& s = stages[i];
    char line[160];
    std::snprintf(line, sizeof line, "%5zu %4lld %7zu %6d/%-4d %8.2f (%4.1f%%)  %lld\n", i, static_cast<long long>(s.nodes),
                  s.params.size(), s.acts_in, i + 1 < stages.size() ? s.acts_out : 0, s.flops / 1e6,
                  total > 0 ? 100 * s.flops / total : 0, static_cast<long long>(s.bytes_out));
    os << line;
  }
  return os.str();
}

namespace {

// Tags: forward activations even, cotangents odd; MPI guarantees tags up to 32767.
int tag_of(int m, int j, bool backward) { return (m * 64 + j) * 2 + (backward ? 1 : 0); }

Tensor alloc(const ValueType& t) { return Tensor(t.dtype, static_dims(t.shape)); }

void recv_into(Tensor& t, int peer, int tag) {
  dist::InFlight f("pipeline recv", static_cast<int64_t>(t.nbytes()), {peer});
  dist::current().recv(t.raw(), static_cast<int64_t>(t.nbytes()), peer, tag);
}

void send_of(const Tensor& t, int peer, int tag) {
  dist::InFlight f("pipeline send", static_cast<int64_t>(t.nbytes()), {peer});
  dist::current().send(t.raw(), static_cast<int64_t>(t.nbytes()), peer, tag);
}

void add_into(Tensor& acc, const Tensor& g) {
  RLX_CHECK(acc.numel() == g.numel() && acc.dtype() == g.dtype(), "[pipeline] internal: gradient shape changed");
  if (acc.dtype() == DType::f32) {
    float* a = acc.data<float>();
    const float* b = g.data<float>();
    for (int64_t i = 0; i < acc.numel(); ++i) a[i] += b[i];
  } else {
    for (int64_t i = 0; i < acc.numel(); ++i) acc.set(i, acc.get(i) + g.get(i));
  }
}

}  // namespace

PipelineTrainer::PipelineTrainer(const Graph& loss_fn, const std::vector<Tensor>& init, OptimizerConfig opt,
                                 PipelineConfig cfg, LrSchedule sched, CompileOptions copts)
    : opt_(std::move(opt)), cfg_(cfg), sched_(std::move(sched)) {
  dist::Communicator& comm = dist::current();
  RLX_CHECK(cfg_.data_parallel >= 1 && comm.size() % cfg_.data_parallel == 0, "[pipeline] ", comm.size(),
            " ranks do not form ", cfg_.data_parallel, " data-parallel replicas of a pipeline");
  const int S = comm.size() / cfg_.data_parallel;
  stage_ = comm.rank() % S;
  replica_ = comm.rank() / S;
  RLX_CHECK(cfg_.microbatches >= 1 && cfg_.microbatches <= 255, "[pipeline] micro-batches must be 1..255, got ",
            cfg_.microbatches);
  const int num_params = static_cast<int>(init.size());
  plan_ = split_pipeline(loss_fn, num_params, S);
  for (int d = 0; d < cfg_.data_parallel; ++d) {  // the mesh's two partitions of the world
    pipeline_groups_.groups.emplace_back();
    for (int st = 0; st < S; ++st) pipeline_groups_.groups.back().push_back(d * S + st);
  }
  for (int st = 0; st < S; ++st) {
    replica_groups_.groups.emplace_back();
    for (int d = 0; d < cfg_.data_parallel; ++d) replica_groups_.groups.back().push_back(d * S + st);
  }
  num_outputs_ = static_cast<int>(loss_fn.outputs.size());
  num_params_ = num_params;
  num_data_ = static_cast<int>(loss_fn.inputs.size()) - num_params;
  for (ValueId o : loss_fn.outputs) out_dtypes_.push_back(loss_fn.type(o).dtype);
  for (ValueId o : loss_fn.outputs)
    RLX_CHECK(loss_fn.type(o).shape.empty(), "[pipeline] loss_fn outputs must be scalars (output ",
              loss_fn.value_label(o), " is not)");
  const PipelineStage& P = plan_[static_cast<size_t>(stage_)];
  RLX_CHECK(P.acts_in < 64 && P.acts_out < 64, "[pipeline] more than 63 activations cross a stage boundary");
  const Graph& F = P.fwd;
  const int np = static_cast<int>(P.params.size());
  const bool last = stage_ == S - 1;
  for (int i : P.params) params_.push_back(init.at(static_cast<size_t>(i)));
  for (int i = 0; i < np; ++i) {
    grads_.emplace_back(params_[static_cast<size_t>(i)].dtype(), params_[static_cast<size_t>(i)].shape());
    for (int j = 0; j < state_per_param(opt_); ++j)
      state_.emplace_back(params_[static_cast<size_t>(i)].dtype(), params_[static_cast<size_t>(i)].shape());
  }
  for (int j = 0; j < P.acts_in; ++j)
    if (is_float(F.type(F.inputs[static_cast<size_t>(np + j)]).dtype)) float_in_.push_back(j);
  for (ValueId o : F.outputs) out_types_.push_back(F.type(o));
  if (!last) fwd_.emplace_back(F, copts);
  {  // backward: the stage's forward recomputed from its stashed inputs, then its VJP
    Graph g;
    g.name = F.name + "_backward";
    Builder b(g);
    std::vector<ValueId> ins, seeds(F.outputs.size(), -1);
    for (ValueId v : F.inputs) ins.push_back(b.input(F.values[static_cast<size_t>(v)].name, F.type(v).dtype, F.type(v).shape));
    if (last) {
      seeds[0] = b.scalar(1, out_types_[0].dtype);
    } else {
      for (size_t j = 0; j < F.outputs.size(); ++j)
        if (is_float(out_types_[j].dtype)) seeds[j] = b.input("ct_" + std::to_string(j), out_types_[j].dtype, out_types_[j].shape);
    }
    std::vector<int> wrt;
    for (int i = 0; i < np; ++i) wrt.push_back(i);
    for (int j : float_in_) wrt.push_back(np + j);
    auto r = ad::emit_vjp(b, F, ins, seeds, wrt);
    size_t first = last ? 0 : F.outputs.size();  // the last stage also returns loss_fn's outputs
    for (size_t k = first; k < r.size(); ++k) g.outputs.push_back(r[k]);
    bwd_.emplace_back(eliminate_dead_code(decompose_all(g)), copts);
  }
  if (np > 0) {  // the optimizer update of this stage's parameters
    Graph g;
    g.name = F.name + "_update";
    Builder b(g);
    const int SP = state_per_param(opt_);
    std::vector<ValueId> p, gr, st, np_out, ns_out;
    for (int i = 0; i < np; ++i)
      p.push_back(b.input("param_" + std::to_string(i), params_[static_cast<size_t>(i)].dtype(), to_shape(params_[static_cast<size_t>(i)].shape())));
    for (int i = 0; i < np; ++i)
      gr.push_back(b.input("grad_" + std::to_string(i), params_[static_cast<size_t>(i)].dtype(), to_shape(params_[static_cast<size_t>(i)].shape())));
    for (int i = 0; i < np * SP; ++i)
      st.push_back(b.input("state_" + std::to_string(i), params_[static_cast<size_t>(i / SP)].dtype(),
                           to_shape(params_[static_cast<size_t>(i / SP)].shape())));
    ValueId lr = b.input("lr", DType::f32, Shape{}), lr_hat = b.input("lr_hat", DType::f32, Shape{}),
            eps_hat = b.input("eps_hat", DType::f32, Shape{});
    for (int i = 0; i < np; ++i) {
      auto cvt = [&](ValueId v) { return b.dtype(v) == b.dtype(p[static_cast<size_t>(i)]) ? v : b.convert(v, b.dtype(p[static_cast<size_t>(i)])); };
      std::vector<ValueId> s(st.begin() + i * SP, st.begin() + (i + 1) * SP);
      auto u = emit_update(b, opt_, p[static_cast<size_t>(i)], gr[static_cast<size_t>(i)], s, cvt(lr), cvt(lr_hat), cvt(eps_hat));
      np_out.push_back(u[0]);
      for (int j = 0; j < SP; ++j) ns_out.push_back(u[static_cast<size_t>(1 + j)]);
    }
    for (ValueId v : np_out) g.outputs.push_back(v);
    for (ValueId v : ns_out) g.outputs.push_back(v);
    update_.emplace_back(eliminate_dead_code(decompose_all(g)), copts);
  }
}

std::vector<Tensor> PipelineTrainer::inputs_of(int m, const std::vector<std::vector<Tensor>>& micro) const {
  std::vector<Tensor> in = params_;
  for (auto& a : stash_[static_cast<size_t>(m)]) in.push_back(a);
  for (auto& d : micro[static_cast<size_t>(m)]) in.push_back(d);
  return in;
}

void PipelineTrainer::forward(int m, const std::vector<std::vector<Tensor>>& micro) {
  const PipelineStage& P = plan_[static_cast<size_t>(stage_)];
  const Graph& F = P.fwd;
  const size_t np = P.params.size();
  auto& acts = stash_[static_cast<size_t>(m)];
  acts.clear();
  for (int j = 0; j < P.acts_in; ++j) {
    acts.push_back(alloc(F.type(F.inputs[np + static_cast<size_t>(j)])));
    recv_into(acts.back(), peer(stage_ - 1), tag_of(m, j, false));
  }
  if (!fwd_.empty()) {
    auto outs = fwd_[0].run(inputs_of(m, micro));
    for (int j = 0; j < P.acts_out; ++j) send_of(outs[static_cast<size_t>(j)], peer(stage_ + 1), tag_of(m, j, false));
  }
  order_ += "F" + std::to_string(m) + " ";
}

void PipelineTrainer::backward(int m, const std::vector<std::vector<Tensor>>& micro) {
  const PipelineStage& P = plan_[static_cast<size_t>(stage_)];
  const bool last = stage_ == stages() - 1;
  std::vector<Tensor> in = inputs_of(m, micro);
  if (!last)
    for (int j = 0; j < P.acts_out; ++j)
      if (is_float(out_types_[static_cast<size_t>(j)].dtype)) {
        in.push_back(alloc(out_types_[static_cast<size_t>(j)]));
        recv_into(in.back(), peer(stage_ + 1), tag_of(m, j, true));
      }
  auto r = bwd_[0].run(in);
  size_t at = 0;
  if (last)
    for (int k = 0; k < num_outputs_; ++k) outs_sum_[static_cast<size_t>(k)] += r[at++].get(0);
  for (auto& g : grads_) add_into(g, r[at++]);
  for (int j : float_in_) send_of(r[at++], peer(stage_ - 1), tag_of(m, j, true));
  stash_[static_cast<size_t>(m)].clear();
  order_ += "B" + std::to_string(m) + " ";
}

// The stage's gradients summed over its replicas in ONE all_reduce (every rank of the mesh calls it
// once per step, whatever its stage owns): packed into one buffer of their dtype (f64 if they differ).
void PipelineTrainer::all_reduce_gradients() {
  bool same = true;
  int64_t n = 0;
  for (auto& g : grads_) {
    same = same && g.dtype() == grads_[0].dtype();
    n += g.numel();
  }
  const DType dt = grads_.empty() ? DType::f32 : same ? grads_[0].dtype() : DType::f64;
  Tensor buf(dt, {n});
  int64_t at = 0;
  for (auto& g : grads_) {
    if (dt == g.dtype()) std::memcpy(static_cast<char*>(buf.raw()) + at * dtype_size(dt), g.raw(), g.nbytes());
    else
      for (int64_t i = 0; i < g.numel(); ++i) buf.set(at + i, g.get(i));
    at += g.numel();
  }
  {
    dist::InFlight f("pipeline gradient all_reduce", static_cast<int64_t>(buf.nbytes()), {});
    dist::current().all_reduce(buf.raw(), buf.raw(), n, dt, dist::ReduceOp::Sum, replica_groups_);
  }
  at = 0;
  for (auto& g : grads_) {
    if (dt == g.dtype()) std::memcpy(g.raw(), static_cast<const char*>(buf.raw()) + at * dtype_size(dt), g.nbytes());
    else
      for (int64_t i = 0; i < g.numel(); ++i) g.set(i, buf.get(at + i));
    at += g.numel();
  }
}

std::vector<Tensor> PipelineTrainer::step(const std::vector<Tensor>& data) {
  const PipelineStage& P = plan_[static_cast<size_t>(stage_)];
  const int M = cfg_.microbatches, S = stages(), DP = cfg_.data_parallel;
  const Graph& F = P.fwd;
  const size_t np = P.params.size();
  RLX_CHECK(static_cast<int>(data.size()) == num_data_, "[pipeline] step expects ", num_data_, " data inputs, got ",
            data.size());
  // Micro-batches of the data inputs this stage reads: rows [m·b, (m+1)·b) along axis 0.
  std::vector<std::vector<Tensor>> micro(static_cast<size_t>(M));
  for (size_t k = 0; k < P.data.size(); ++k) {
    const ValueType& t = F.type(F.inputs[np + static_cast<size_t>(P.acts_in) + k]);
    const Tensor& whole = data[static_cast<size_t>(P.data[k] - num_params_)];
    auto dims = static_dims(t.shape);
    RLX_CHECK(!dims.empty() && whole.dtype() == t.dtype && !whole.shape().empty() && whole.shape()[0] == dims[0] * M * DP,
              "[pipeline] data input '", F.values[static_cast<size_t>(F.inputs[np + static_cast<size_t>(P.acts_in) + k])].name,
              "' must be ", dtype_name(t.dtype), " with ", dims.empty() ? 0 : dims[0] * M * DP,
              " rows (micro-batch ", dims.empty() ? 0 : dims[0], " x ", M, " micro-batches x ", DP, " replica(s))");
    const size_t part = whole.nbytes() / static_cast<size_t>(M * DP);
    for (int m = 0; m < M; ++m) {
      Tensor piece(t.dtype, dims);
      std::memcpy(piece.raw(), static_cast<const char*>(whole.raw()) + part * static_cast<size_t>(replica_ * M + m), part);
      micro[static_cast<size_t>(m)].push_back(piece);
    }
  }
  for (auto& g : grads_) std::memset(g.raw(), 0, g.nbytes());
  outs_sum_.assign(static_cast<size_t>(num_outputs_), 0.0);
  stash_.assign(static_cast<size_t>(M), {});
  order_.clear();
  if (cfg_.schedule == PipelineSchedule::GPipe) {  // every forward, then every backward (last first)
    for (int m = 0; m < M; ++m) forward(m, micro);
    for (int m = M - 1; m >= 0; --m) backward(m, micro);
  } else {  // 1F1B: S-1-stage forwards to fill the pipe, then one forward and one backward in turn
    const int warm = std::min(S - 1 - stage_, M);
    for (int m = 0; m < warm; ++m) forward(m, micro);
    for (int m = 0; m + warm < M; ++m) {
      forward(m + warm, micro);
      backward(m, micro);
    }
    for (int m = std::max(M - warm, 0); m < M; ++m) backward(m, micro);
  }
  if (!order_.empty()) order_.pop_back();
  // The whole batch's gradient: the mean of the micro-batches' (each loss is a micro-batch mean),
  // over this replica's M and, with data parallelism, summed over the stage's replicas first.
  if (DP > 1) all_reduce_gradients();
  for (auto& g : grads_) {
    if (g.dtype() == DType::f32) {
      float* a = g.data<float>();
      for (int64_t i = 0; i < g.numel(); ++i) a[i] /= static_cast<float>(M * DP);
    } else {
      for (int64_t i = 0; i < g.numel(); ++i) g.set(i, g.get(i) / (M * DP));
    }
  }
  if (!update_.empty()) {
    double lr = sched_.at(opt_.lr, step_), t = static_cast<double>(step_ + 1);
    double c1 = 1 - std::pow(opt_.beta1, t), c2 = 1 - std::pow(opt_.beta2, t);
    Tensor lr_t(DType::f32, {}), lr_hat(DType::f32, {}), eps_hat(DType::f32, {});
    lr_t.data<float>()[0] = static_cast<float>(lr);
    lr_hat.data<float>()[0] = static_cast<float>(opt_.kind == "sgd" ? lr : lr * std::sqrt(c2) / c1);
    eps_hat.data<float>()[0] = static_cast<float>(opt_.eps * std::sqrt(c2));
    std::vector<Tensor> in = params_;
    in.insert(in.end(), grads_.begin(), grads_.end());
    in.insert(in.end(), state_.begin(), state_.end());
    in.push_back(lr_t), in.push_back(lr_hat), in.push_back(eps_hat);
    auto r = update_[0].run(in);
    for (size_t i = 0; i < params_.size(); ++i) params_[i] = r[i];
    for (size_t i = 0; i < state_.size(); ++i) state_[i] = r[params_.size() + i];
  }
  ++step_;
  // loss_fn's outputs, from the last stage to every rank of its pipeline, then summed over the
  // replicas: the loss averaged, the others summed.
  std::vector<double> outs(outs_sum_);
  const int64_t out_bytes = static_cast<int64_t>(outs.size() * sizeof(double));
  if (S > 1 && !outs.empty()) {
    dist::InFlight f("pipeline outputs", out_bytes, {peer(S - 1)});
    dist::current().broadcast(outs.data(), out_bytes, S - 1, pipeline_groups_);
  }
  if (DP > 1 && !outs.empty()) {
    dist::InFlight f("pipeline outputs all_reduce", out_bytes, {});
    dist::current().all_reduce(outs.data(), outs.data(), static_cast<int64_t>(outs.size()), DType::f64,
                               dist::ReduceOp::Sum, replica_groups_);
  }
  if (!outs.empty()) outs[0] /= M * DP;
  std::vector<Tensor> result;
  for (size_t k = 0; k < outs.size(); ++k) {
    Tensor t(out_dtypes_[k], {});
    t.set(0, outs[k]);
    result.push_back(t);
  }
  return result;
}

}  // namespace rlx::train
