// Segments of a graph placed on more than one device, and the executable that runs them in order.
#include "pipeline/placement.h"

#include <map>
#include <set>
#include <sstream>

#include "runtime/backend.h"

namespace rlx {

namespace {

// Devices whose buffers are host memory: a value moving between two of them is not copied.
bool host_device(const std::string& d) { return d == "cpu" || d == "oneapi"; }

bool is_source_constant(const Node& n) { return n.inputs.empty() && n.op == OpKind::Constant; }

}  // namespace

std::vector<Segment> cut_segments(const Graph& g, const std::vector<std::string>& placement, const std::string& device) {
  const size_t nn = g.nodes.size();
  // liveness: nodes an output depends on
  std::vector<bool> live(nn, false);
  std::vector<std::vector<size_t>> readers(g.values.size());
  for (size_t i = 0; i < nn; ++i)
    for (ValueId v : g.nodes[i].inputs) readers[v].push_back(i);
  std::vector<ValueId> stack(g.outputs.begin(), g.outputs.end());
  while (!stack.empty()) {
    ValueId v = stack.back();
    stack.pop_back();
    int p = g.values[v].producer;
    if (p < 0 || live[p]) continue;
    live[p] = true;
    for (ValueId x : g.nodes[p].inputs) stack.push_back(x);
  }
  auto dev_of = [&](size_t i) { return i < placement.size() && !placement[i].empty() ? placement[i] : device; };
  std::vector<std::string> dev(nn);
  for (size_t i = 0; i < nn; ++i) {
    dev[i] = dev_of(i);
    if (!is_source_constant(g.nodes[i])) continue;
    for (ValueId o : g.nodes[i].outputs)  // a constant goes with its first live reader
      for (size_t r : readers[o])
        if (live[r]) {
          dev[i] = dev_of(r);
          goto placed;
        }
  placed:;
  }
  // maximal runs of live nodes on one device
  std::vector<std::pair<std::string, std::vector<size_t>>> runs;
  for (size_t i = 0; i < nn; ++i) {
    if (!live[i]) continue;
    if (runs.empty() || runs.back().first != dev[i]) runs.push_back({dev[i], {}});
    runs.back().second.push_back(i);
  }
  std::vector<int> seg_of(nn, -1);
  for (size_t s = 0; s < runs.size(); ++s)
    for (size_t i : runs[s].second) seg_of[i] = static_cast<int>(s);
  std::set<ValueId> graph_out(g.outputs.begin(), g.outputs.end());

  std::vector<Segment> segs;
  for (size_t s = 0; s < runs.size(); ++s) {
    Segment seg;
    seg.device = runs[s].first;
    seg.graph.name = g.name + "." + std::to_string(s);
    std::map<ValueId, ValueId> m;  // whole-graph id -> segment id
    auto bring = [&](ValueId v) -> ValueId {
      auto it = m.find(v);
      if (it != m.end()) return it->second;
      int p = g.values[v].producer;
      if (p >= 0 && is_source_constant(g.nodes[p])) {  // repeated here rather than passed between segments
        const Node& c = g.nodes[p];
        auto outs = seg.graph.add_node(c.op, {}, c.attrs, c.name);
        for (size_t k = 0; k < outs.size(); ++k) m[c.outputs[k]] = outs[k];
        return m.at(v);
      }
      const ValueType& t = g.type(v);
      std::string name = g.values[v].name.empty() ? "v" + std::to_string(v) : g.values[v].name;
      ValueId x = seg.graph.add_input(name, t.dtype, t.shape);
      seg.ins.push_back(v);
      return m[v] = x;
    };
    for (size_t i : runs[s].second) {
      const Node& n = g.nodes[i];
      if (is_source_constant(n) && m.count(n.outputs[0])) continue;
      std::vector<ValueId> ins;
      for (ValueId v : n.inputs) ins.push_back(bring(v));
      auto outs = seg.graph.add_node(n.op, ins, n.attrs, n.name);
      for (size_t k = 0; k < outs.size(); ++k) m[n.outputs[k]] = outs[k];
    }
    // outputs: values made here that a later segment or the graph's result reads
    for (size_t i : runs[s].second) {
      for (ValueId o : g.nodes[i].outputs) {
        bool later = graph_out.count(o) > 0;
        for (size_t r : readers[o]) later |= live[r] && seg_of[r] > static_cast<int>(s) && !is_source_constant(g.nodes[i]);
        if (!later) continue;
        seg.outs.push_back(o);
        seg.graph.outputs.push_back(m.at(o));
        if (seg.graph.values[m.at(o)].name.empty()) seg.graph.values[m.at(o)].name = g.values[o].name;
      }
    }
    segs.push_back(std::move(seg));
  }
  return segs;
}

std::string segments_summary(const std::vector<Segment>& segs, const Graph& g) {
  std::map<std::string, std::pair<int, int>> per_dev;  // device -> (segments, nodes)
  std::map<ValueId, std::string> made_on;
  for (auto& s : segs) {
    auto& e = per_dev[s.device];
    e.first += 1;
    e.second += static_cast<int>(s.graph.nodes.size());
    for (ValueId o : s.outs) made_on[o] = s.device;
  }
  int64_t d2h = 0, h2d = 0, d2h_bytes = 0, h2d_bytes = 0;
  std::set<ValueId> downloaded;
  for (auto& s : segs)
    for (ValueId v : s.ins) {
      auto it = made_on.find(v);
      if (it == made_on.end()) continue;  // a graph input: uploaded as without the fallback
      int64_t bytes = numel(g.type(v).shape) * static_cast<int64_t>(dtype_size(g.type(v).dtype));
      if (!host_device(it->second) && downloaded.insert(v).second) ++d2h, d2h_bytes += bytes;
      if (!host_device(s.device)) ++h2d, h2d_bytes += bytes;
    }
  std::ostringstream os;
  os << "placed in " << segs.size() << " segments (";
  bool first = true;
  for (auto& [d, e] : per_dev) {
    os << (first ? "" : ", ") << d << ": " << e.first << " segments, " << e.second << " nodes";
    first = false;
  }
  os << "); copies per run at segment boundaries: " << d2h << " device->host (" << d2h_bytes << " B), " << h2d
     << " host->device (" << h2d_bytes << " B)";
  return os.str();
}

namespace {

class SegmentedExecutable : public Executable {
 public:
  SegmentedExecutable(const std::vector<Segment>& segs, const Graph& g) : segs_(segs), in_(g.inputs), out_(g.outputs) {
    for (auto& s : segs_) exes_.push_back(make_executable(s.device, s.lir));
  }
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) override {
    RLX_CHECK(inputs.size() == in_.size(), "[run] expected ", in_.size(), " inputs, got ", inputs.size());
    std::map<ValueId, Tensor> vals;
    for (size_t i = 0; i < in_.size(); ++i) vals[in_[i]] = inputs[i];
    for (size_t k = 0; k < segs_.size(); ++k) {
      std::vector<Tensor> ins;
      for (ValueId v : segs_[k].ins) ins.push_back(vals.at(v));
      auto outs = exes_[k]->run(ins);
      for (size_t i = 0; i < outs.size(); ++i) vals[segs_[k].outs[i]] = outs[i];
    }
    std::vector<Tensor> r;
    for (ValueId o : out_) r.push_back(vals.at(o));
    return r;
  }
  std::string profile() const override {
    std::string s;
    for (size_t k = 0; k < segs_.size(); ++k) {
      std::string p = exes_[k]->profile();
      if (!p.empty()) s += "segment " + std::to_string(k) + " (" + segs_[k].device + "):\n" + p;
    }
    return s;
  }

 private:
  std::vector<Segment> segs_;
  std::vector<ValueId> in_, out_;
  std::vector<std::unique_ptr<Executable>> exes_;
};

}  // namespace

std::unique_ptr<Executable> make_segmented_executable(const std::vector<Segment>& segs, const Graph& g) {
  return std::make_unique<SegmentedExecutable>(segs, g);
}

}  // namespace rlx
