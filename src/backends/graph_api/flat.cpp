#include "backends/graph_api/flat.h"

#include <algorithm>

namespace rlx::graph_api {

namespace {
const Attr& get(const FlatNode& n, const char* name) {
  const Attr* a = find_attr(n.op, n.attrs, name);
  RLX_CHECK(a, "[graph-api] ", op_name(n.op), " '", n.origin, "': missing attribute '", name, "'");
  return *a;
}
}  // namespace

int64_t attr_i(const FlatNode& n, const char* name) { return std::get<int64_t>(get(n, name).v); }
double attr_f(const FlatNode& n, const char* name) { return std::get<double>(get(n, name).v); }
std::vector<int64_t> attr_is(const FlatNode& n, const char* name) { return std::get<std::vector<int64_t>>(get(n, name).v); }
std::string attr_s(const FlatNode& n, const char* name) { return std::get<std::string>(get(n, name).v); }
DType attr_dt(const FlatNode& n, const char* name) { return std::get<DType>(get(n, name).v); }
std::vector<int64_t> attr_shape(const FlatNode& n, const char* name) {
  return static_dims(std::get<Shape>(get(n, name).v));
}

std::vector<int64_t> broadcast_dims(size_t in_rank, size_t out_rank) {
  std::vector<int64_t> d(in_rank);
  for (size_t i = 0; i < in_rank; ++i) d[i] = static_cast<int64_t>(out_rank - in_rank + i);
  return d;
}

std::vector<int64_t> reduce_axes(const FlatNode& n, int64_t rank) {
  std::vector<int64_t> ax = attr_is(n, "axes");
  for (auto& a : ax) a = norm_axis(a, rank, op_name(n.op).data());
  std::sort(ax.begin(), ax.end());
  ax.erase(std::unique(ax.begin(), ax.end()), ax.end());
  return ax;
}

FlatProgram flatten_lir(const LirProgram& p, const std::string& device) {
  FlatProgram f;
  // Buffer b is value b; values inside generated bodies come after the buffers.
  for (auto& b : p.buffers) {
    RLX_CHECK(is_static(b.type.shape), "[", device, "] buffer of shape ", shape_str(b.type.shape), " is not static");
    f.values.push_back(b.type);
  }
  f.inputs = p.inputs;
  f.outputs = p.outputs;
  std::vector<bool> ready(p.buffers.size(), false);
  for (auto i : p.inputs) ready[i] = true;
  for (size_t b = 0; b < p.buffers.size(); ++b)
    if (p.buffers[b].kind == BufferKind::Const) {
      f.constants.push_back({static_cast<int>(b), p.buffers[b].value});
      ready[b] = true;
    }
  // A view is a reshape of its base, emitted when first read (its base is defined by then).
  auto use = [&](int b) {
    std::vector<int> chain;
    for (int v = b; !ready[v]; v = p.buffers[v].view_of) {
      RLX_CHECK(p.buffers[v].kind == BufferKind::View, "[", device, "] buffer ", v, " is read before it is written");
      chain.push_back(v);
    }
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      FlatNode r{OpKind::Reshape, {{"shape", p.buffers[*it].type.shape}}, {p.buffers[*it].view_of}, {*it}, "view"};
      f.nodes.push_back(std::move(r));
      ready[*it] = true;
    }
    return b;
  };
  for (auto& k : p.kernels) {
    if (k.kind == KernelKind::Library) {
      FlatNode n{k.op, k.attrs, {}, k.out, k.origin};
      for (auto b : k.in) n.in.push_back(use(b));
      f.nodes.push_back(std::move(n));
    } else {
      const Graph& g = k.body;
      std::vector<int> map(g.values.size(), -1);
      for (size_t i = 0; i < g.inputs.size(); ++i) map[g.inputs[i]] = use(k.in.at(i));
      for (auto& bn : g.nodes) {
        FlatNode n{bn.op, bn.attrs, {}, {}, k.origin};
        for (auto v : bn.inputs) {
          RLX_CHECK(map[v] >= 0, "[", device, "] fused kernel '", k.origin, "' reads an undefined value");
          n.in.push_back(map[v]);
        }
        if (bn.op == OpKind::Constant) {  // a constant inside a body: a constant value
          int id = static_cast<int>(f.values.size());
          f.values.push_back(g.type(bn.outputs[0]));
          f.constants.push_back({id, attr_tensor(bn, "value")});
          map[bn.outputs[0]] = id;
          continue;
        }
        for (auto o : bn.outputs) {
          map[o] = static_cast<int>(f.values.size());
          f.values.push_back(g.type(o));
          n.out.push_back(map[o]);
        }
        f.nodes.push_back(std::move(n));
      }
      RLX_CHECK(g.outputs.size() == k.out.size(), "[", device, "] fused kernel '", k.origin, "' output count");
      for (size_t i = 0; i < k.out.size(); ++i) {  // the kernel's output buffer is its body's output
        FlatNode r{OpKind::Reshape, {{"shape", p.buffers[k.out[i]].type.shape}}, {map[g.outputs[i]]}, {k.out[i]}, k.origin};
        f.nodes.push_back(std::move(r));
      }
    }
    for (auto b : k.out) ready[b] = true;
  }
  for (auto o : p.outputs) use(o);
  return f;
}

}  // namespace rlx::graph_api
