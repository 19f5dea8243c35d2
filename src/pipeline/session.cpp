// CompiledModel: specialize -> graph pattern passes -> verify -> legalize (dispatch) -> fold/DCE -> lower to LIR -> the
// backend's LIR passes -> plan (once) -> executable, cached per concrete binding of the symbolic dims.
// The program the entry holds is the one the executable runs (dump("lir") prints it).
#include <map>

#include "dist/graph_hash.h"
#include "lir/plan.h"
#include "pipeline/placement.h"
#include "passes/passes.h"
#include "rlx/lir.h"
#include "rlx/session.h"
#include "rlx/text.h"
#include "runtime/backend.h"
#include "runtime/env.h"

namespace rlx {

namespace {
std::string key_of(const Bindings& b) {
  std::string k;
  for (auto& [s, v] : b) k += (k.empty() ? "" : ",") + s + "=" + std::to_string(v);
  return k.empty() ? "(static)" : k;
}
}  // namespace

struct CompiledModel::Impl {
  Graph g;
  CompileOptions opts;
  struct Entry {
    Graph hir;  // specialized
    Legalized mir;
    LirProgram lir;
    std::vector<Segment> segs;  // --fallback placed nodes on another device: the graph in segments
    std::unique_ptr<Executable> exe;
  };
  std::map<std::string, Entry> cache;
  std::vector<std::string> notes;
  DispatchReport last_report;
  Executable* last_exe = nullptr;

  Entry& get(const Bindings& b) {
    std::string key = key_of(b);
    auto it = cache.find(key);
    if (it != cache.end()) {
      notes.push_back("specialization " + key + ": cache hit");
      return it->second;
    }
    Entry e;
    e.hir = specialize_shapes(g, b);
    if (opts.fuse_qdq) {
      std::vector<std::string> lines;
      e.hir = fuse_qdq(e.hir, &lines);
      for (auto& l : lines) notes.push_back("specialization " + key + ": " + l);
    }
    run_graph_passes(e.hir, key);
    if (opts.verify) verify_graph(e.hir);
    dist::check_graph_on_all_ranks(e.hir);  // ranks must agree before the first collective
    e.mir = legalize(e.hir, opts.device, opts.dispatch);
    if (!e.mir.placement.empty()) return compile_segments(key, std::move(e));
    e.mir.graph = eliminate_dead_code(fold_constants(e.mir.graph));
    if (opts.verify) verify_graph(e.mir.graph);
    e.lir = lower_to_lir(e.mir.graph, opts.fuse, /*plan=*/false);
    LirSchedule sched = backend_schedule(opts.device);
    schedule_lir(e.lir, sched);
    if (opts.verify) verify_lir(e.lir);
    if (sched.placement) notes.push_back("specialization " + key + ": " + sched.placement(e.lir));
    std::string changed;
    for (auto& [pass, n] : e.lir.passes)
      if (n) changed += (changed.empty() ? "" : ", ") + pass + " x" + std::to_string(n);
    if (!changed.empty()) notes.push_back("specialization " + key + ": LIR passes that changed the schedule: " + changed);
    notes.push_back("specialization " + key + ": compiled (" + std::to_string(e.lir.kernels.size()) + " kernels, arena " +
                    std::to_string(e.lir.arena_bytes) + " B vs " + std::to_string(e.lir.naive_bytes) +
                    " B unplanned); cache now " + std::to_string(cache.size() + 1));
    return cache.emplace(key, std::move(e)).first->second;
  }

  // The graph pattern passes (passes.h: an exporter's attention, erf GELU -> the builders' ops);
  // RLX_GRAPH_PATTERNS=0 leaves the graph as imported. `upto`: stop after that pass.
  void run_graph_passes(Graph& h, const std::string& key, const std::string& upto = "") {
    if (!env_on("RLX_GRAPH_PATTERNS", true)) return;
    std::string changed;
    for (auto& p : graph_passes()) {
      int n = 0;
      h = p.run(h, &n);
      if (n) changed += (changed.empty() ? "" : ", ") + std::string(p.name) + " x" + std::to_string(n);
      if (upto == p.name) return;
    }
    if (!changed.empty() && !key.empty())
      notes.push_back("specialization " + key + ": graph passes that changed the graph: " + changed);
  }

  // Each segment compiles as a program of its own device (fold, DCE, lower, that device's passes).
  Entry& compile_segments(const std::string& key, Entry e) {
    e.segs = cut_segments(e.mir.graph, e.mir.placement, opts.device);
    int kernels = 0;
    for (auto& s : e.segs) {
      s.graph = eliminate_dead_code(fold_constants(s.graph));
      if (opts.verify) verify_graph(s.graph);
      s.lir = lower_to_lir(s.graph, opts.fuse, /*plan=*/false);
      LirSchedule sched = backend_schedule(s.device);
      schedule_lir(s.lir, sched);
      if (opts.verify) verify_lir(s.lir);
      kernels += static_cast<int>(s.lir.kernels.size());
      if (sched.placement) notes.push_back("specialization " + key + ": segment on " + s.device + ": " + sched.placement(s.lir));
    }
    notes.push_back("specialization " + key + ": --fallback " + opts.dispatch.fallback + ": " +
                    segments_summary(e.segs, e.mir.graph));
    notes.push_back("specialization " + key + ": compiled (" + std::to_string(kernels) + " kernels in " +
                    std::to_string(e.segs.size()) + " segments); cache now " + std::to_string(cache.size() + 1));
    return cache.emplace(key, std::move(e)).first->second;
  }

  // The executable of an entry: the device's, or the segments' when a fallback cut the graph.
  Executable& exe_of(Entry& e) {
    if (!e.exe) e.exe = e.segs.empty() ? make_executable(opts.device, e.lir) : make_segmented_executable(e.segs, e.mir.graph);
    last_exe = e.exe.get();
    return *e.exe;
  }

  Bindings default_bindings(Bindings b) const {
    for (auto& s : g.symbols())
      if (!b.count(s)) b[s] = 1;
    return b;
  }
};

CompiledModel::CompiledModel(Graph g, CompileOptions opts) : impl_(std::make_unique<Impl>()) {
  impl_->g = std::move(g);
  impl_->opts = std::move(opts);
  device_info(impl_->opts.device);  // unknown device names fail here
  if (impl_->opts.verify) verify_graph(impl_->g);
}
CompiledModel::~CompiledModel() = default;
CompiledModel::CompiledModel(CompiledModel&&) noexcept = default;
CompiledModel& CompiledModel::operator=(CompiledModel&&) noexcept = default;

const Graph& CompiledModel::graph() const { return impl_->g; }
const CompileOptions& CompiledModel::options() const { return impl_->opts; }
int CompiledModel::cache_size() const { return static_cast<int>(impl_->cache.size()); }

std::vector<Tensor> CompiledModel::run(const std::vector<Tensor>& inputs) {
  Bindings b = bind_inputs(impl_->g, inputs);
  auto& e = impl_->get(b);
  return impl_->exe_of(e).run(inputs);
}

// run_into: see session.h.
void CompiledModel::run_into(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
  Bindings b = bind_inputs(impl_->g, inputs);
  auto& e = impl_->get(b);
  Executable& exe = impl_->exe_of(e);
  const size_t nout = e.segs.empty() ? e.lir.outputs.size() : e.mir.graph.outputs.size();
  RLX_CHECK(outputs.size() == nout, "[run_into] expected ", nout, " outputs, got ", outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const ValueType& t = e.segs.empty() ? e.lir.buffers[e.lir.outputs[i]].type : e.mir.graph.type(e.mir.graph.outputs[i]);
    RLX_CHECK(outputs[i].dtype() == t.dtype && outputs[i].shape() == static_dims(t.shape), "[run_into] output ", i,
              " is ", dtype_name(outputs[i].dtype()), " with ", outputs[i].numel(), " elements, expected ",
              dtype_name(t.dtype), shape_str(t.shape));
    for (auto& in : inputs)
      RLX_CHECK(in.raw() == nullptr || in.raw() != outputs[i].raw(), "[run_into] output ", i, " aliases an input");
  }
  exe.run_into(inputs, outputs);
}

// executable: see session.h.
Executable& CompiledModel::executable(const Bindings& b) {
  auto& e = impl_->get(impl_->default_bindings(b));
  return impl_->exe_of(e);
}

std::map<std::string, Tensor> CompiledModel::run(const std::map<std::string, Tensor>& inputs) {
  std::vector<Tensor> in;
  for (auto i : impl_->g.inputs) {
    const std::string& name = impl_->g.values[i].name;
    auto it = inputs.find(name);
    RLX_CHECK(it != inputs.end(), "[run] missing input '", name, "'");
    in.push_back(it->second);
  }
  for (auto& [k, v] : inputs) {
    bool known = false;
    for (auto i : impl_->g.inputs) known |= impl_->g.values[i].name == k;
    RLX_CHECK(known, "[run] unknown input '", k, "'");
  }
  auto outs = run(in);
  std::map<std::string, Tensor> r;
  for (size_t i = 0; i < outs.size(); ++i) {
    std::string name = impl_->g.values[impl_->g.outputs[i]].name;
    if (name.empty() || r.count(name)) name = "output_" + std::to_string(i);
    r[name] = outs[i];
  }
  return r;
}

std::string CompiledModel::dump(const std::string& level, const Bindings& b) {
  auto& e = impl_->get(impl_->default_bindings(b));
  if (level == "hir") return print_graph(e.hir);
  if (level == "mir") return print_graph(e.mir.graph);
  if (level == "lir" && !e.segs.empty()) {
    std::string s;
    for (size_t k = 0; k < e.segs.size(); ++k)
      s += "# segment " + std::to_string(k) + " on " + e.segs[k].device + "\n" + print_lir(e.segs[k].lir, true);
    return s;
  }
  if (level == "lir") return print_lir(e.lir, true);
  fail("[compile] unknown dump level '", level, "' (hir|mir|lir)");
}

const LirProgram& CompiledModel::lir(const Bindings& b) {
  auto& e = impl_->get(impl_->default_bindings(b));
  RLX_CHECK(e.segs.empty(), "[compile] the program was cut into ", e.segs.size(), " segments (--fallback): no single schedule");
  return e.lir;
}

std::string CompiledModel::dump_after(const std::string& pass, const Bindings& b) {
  if (find_graph_pass(pass)) {  // a graph pass: the specialized graph right after it
    Graph h = specialize_shapes(impl_->g, impl_->default_bindings(b));
    impl_->run_graph_passes(h, "", pass);
    return print_graph(h);
  }
  auto& e = impl_->get(impl_->default_bindings(b));
  LirProgram p = lower_to_lir(e.mir.graph, impl_->opts.fuse, /*plan=*/false);
  if (pass == "lower") {
    plan_memory(p);
    return print_lir(p, true);
  }
  LirSchedule s = backend_schedule(impl_->opts.device);
  std::string text, names = "lower";
  for (auto& g : graph_passes()) names += std::string(", ") + g.name;
  for (auto& n : s.passes) names += ", " + n;
  bool listed = false;
  for (auto& n : s.passes) listed |= n == pass;
  if (!listed)
    fail("[compile] --dump-after: '", pass, "' is not a pass of device '", impl_->opts.device, "' (its passes: ", names,
         ")");
  schedule_lir(p, s, [&](const std::string& name, int, const LirProgram& q) {
    if (name != pass) return;
    LirProgram planned = q;  // passes before plan_memory see an unplanned arena: plan a copy to print
    if (!find_lir_pass(name)->after_plan) plan_memory(planned);
    text = print_lir(planned, true);
  });
  return text;
}

const DispatchReport& CompiledModel::report(const Bindings& b) {
  Bindings full = impl_->default_bindings(b);
  auto& e = impl_->get(full);
  impl_->last_report = e.mir.report;
  impl_->last_report.notes = impl_->notes;
  return impl_->last_report;
}

std::string CompiledModel::profile() const { return impl_->last_exe ? impl_->last_exe->profile() : ""; }

}  // namespace rlx
