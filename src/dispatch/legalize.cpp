// The dispatch contract. For each node, in order: native (the device claims op x dtype), common-IR
// (the op table's decomposition, whose parts are dispatched in turn), rewritten (a structural
// rewrite: promote a low-precision dtype the device lacks for this op to f32, or narrow i64 to i32
// on a device without 64-bit integer arithmetic), or a compile error
// that names the node, the device, what was tried, and which devices could run it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <sstream>

#include "rlx/builder.h"
#include "rlx/device.h"

namespace rlx {

namespace {

struct Verdict {
  bool ok = false;
  DispatchPath path = DispatchPath::Unsupported;
  std::string why;  // reason it works, or everything that was tried
  bool narrow = false;  // the rewrite is the i64 -> i32 narrowing (not a promotion)
};

DType key_dtype(const Node& n, const std::vector<ValueType>& in, const std::vector<ValueType>& out) {
  return in.empty() ? out.at(0).dtype : in[0].dtype;
}

std::string dtypes_str(const std::vector<ValueType>& in) {
  std::string s;
  for (auto& t : in) s += (s.empty() ? "" : ",") + std::string(dtype_name(t.dtype));
  return s.empty() ? "-" : s;
}

// Emits a decomposition of `n` into a scratch graph whose inputs have the types `in`.
Graph decompose_scratch(const Node& n, const std::vector<ValueType>& in, std::vector<ValueId>* outs) {
  Graph s;
  Builder b(s);
  b.set_origin(n.name);
  std::vector<ValueId> ins;
  for (size_t i = 0; i < in.size(); ++i) ins.push_back(s.add_input("in" + std::to_string(i), in[i].dtype, in[i].shape));
  *outs = op_info(n.op).decompose(b, n, ins);
  return s;
}

// The dtype-moving rewrite: halves compute in f32, narrow integers in i32 (integer results wrap
// modulo the narrow width either way, so converting back is exact).
DType promotion_target(DType t) {
  if (t == DType::f16 || t == DType::bf16) return DType::f32;
  if (t == DType::i8 || t == DType::u8 || t == DType::i16) return DType::i32;
  return t;
}
bool promotable(DType t) { return promotion_target(t) != t; }

// The i64 -> i32 narrowing: a device that stores i64 but has no 64-bit integer
// arithmetic (GLSL on vulkan/opengl: it claims convert for i64 and nothing else) computes every
// i64 op in i32. i64 values are converted to i32 where they enter (graph inputs: the low word,
// an exact wrap-around) and back where i64 leaves (sign extension: exact). Unlike the promotions
// this is exact only while every i64 value fits in 32 bits (token ids, positions, indices,
// labels); the report says so in a note. Constants are known here, so one that does not fit makes
// the rewrite fail (narrowing_loss) instead of being truncated.
bool narrows_i64(const DeviceInfo& d) {
  return d.caps.storage.has(DType::i64) && d.caps.has(OpKind::Convert, DType::i64) && !d.caps.has(OpKind::Add, DType::i64);
}
// The converts at the edge of the narrowed region run natively.
bool narrowing_boundary(const Node& n, const std::vector<ValueType>& in, const std::vector<ValueType>& out) {
  if (n.op != OpKind::Convert) return false;
  DType a = in.at(0).dtype, b = out.at(0).dtype;
  return (a == DType::i64 && b == DType::i32) || (a == DType::i32 && b == DType::i64);
}
Node narrowed(const Node& n) {
  Node p = n;
  for (auto& [k, a] : p.attrs) {
    if (std::holds_alternative<DType>(a.v) && std::get<DType>(a.v) == DType::i64) a = Attr(DType::i32);
    if (std::holds_alternative<Tensor>(a.v) && std::get<Tensor>(a.v).dtype() == DType::i64) {
      const Tensor& t = std::get<Tensor>(a.v);
      Tensor w(DType::i32, t.shape());
      for (int64_t i = 0; i < t.numel(); ++i) w.set_int(i, static_cast<int32_t>(t.get_int(i)));
      a = Attr(w);
    }
  }
  return p;
}
// The first constant of `n` that narrowing would change: an i64 tensor attribute (a constant's
// value) or a float attribute (a pad value, an rng bound) outside int32. Empty when all fit: the
// rewrite is refused rather than truncating a constant silently.
std::string narrowing_loss(const Node& n) {
  constexpr int64_t lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
  for (auto& [k, a] : n.attrs) {
    if (std::holds_alternative<Tensor>(a.v) && std::get<Tensor>(a.v).dtype() == DType::i64) {
      const Tensor& t = std::get<Tensor>(a.v);
      for (int64_t i = 0; i < t.numel(); ++i)
        if (t.get_int(i) < lo || t.get_int(i) > hi)
          return "attribute '" + k + "' holds " + std::to_string(t.get_int(i)) + " (element " + std::to_string(i) +
                 "), which does not fit in int32";
    }
    if (std::holds_alternative<double>(a.v)) {
      double v = std::get<double>(a.v);
      if (std::isfinite(v) && (v < static_cast<double>(lo) || v > static_cast<double>(hi))) {
        std::ostringstream os;
        os << "attribute '" << k << "' = " << v << " does not fit in int32";
        return os.str();
      }
    }
  }
  return "";
}
std::vector<ValueType> narrow_types(std::vector<ValueType> in) {
  for (auto& t : in)
    if (t.dtype == DType::i64) t.dtype = DType::i32;
  return in;
}
// Whether narrowing changes the node: it reads i64, or an i64 result becomes i32. Ops whose i64
// result is fixed (argmax indices) keep writing i64 natively (sign-extended, exact).
bool narrowing_applies(const Node& n, const std::vector<ValueType>& in, const std::vector<ValueType>& out) {
  for (auto& t : in)
    if (t.dtype == DType::i64) return true;
  bool any = false;
  for (auto& t : out) any |= t.dtype == DType::i64;
  if (!any) return false;
  Node p = narrowed(n);
  std::vector<ValueType> nout;
  try {
    nout = infer_types(p.op, narrow_types(in), p.attrs, "[dispatch]");
  } catch (const Error&) {
    return false;  // the op insists on i64: no narrowing
  }
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].dtype == DType::i64 && nout[i].dtype != DType::i64) return true;
  return false;
}

class Legalizer {
 public:
  Legalizer(const DeviceInfo& dev, const DispatchOptions& opts) : dev_(dev), opts_(opts), narrow_i64_(narrows_i64(dev)) {}

  // Whether (and how) the node can run, without emitting anything.
  Verdict check(const Node& n, const std::vector<ValueType>& in, int depth = 0) {
    const auto& info = op_info(n.op);
    std::vector<ValueType> out = infer_types(n.op, in, n.attrs, "[dispatch]");
    DType dt = key_dtype(n, in, out);
    std::string name(info.name), dn(dtype_name(dt));
    for (auto& t : out)
      if (!dev_.caps.storage.has(t.dtype))
        return {false, DispatchPath::Unsupported,
                "every path produces " + std::string(dtype_name(t.dtype)) + " values and " + dev_.name + " has no " +
                    std::string(dtype_name(t.dtype)) + " buffers (no rewrite moves an output dtype)"};
    if (narrow_i64_ && !narrowing_boundary(n, in, out) && narrowing_applies(n, in, out)) {
      std::string loss = narrowing_loss(n);
      if (!loss.empty())
        return {false, DispatchPath::Unsupported,
                dev_.name + " has no 64-bit integer arithmetic and narrowing i64 -> i32 is refused: " + loss};
      Verdict v = check(narrowed(n), narrow_types(in), depth + 1);
      if (!v.ok) return {false, DispatchPath::Unsupported, "rewritten: narrowed i64 -> i32 still fails (" + v.why + ")"};
      return {true, DispatchPath::Rewritten,
              "narrowed i64 -> i32 (" + dev_.name + " has no 64-bit integer arithmetic; exact within int32 range)", true};
    }
    std::vector<std::string> tried;
    bool force_common = opts_.force_common.count(name) > 0;
    if (!force_common && dev_.caps.has(n.op, dt)) return {true, DispatchPath::Native, dev_.name + " kernel"};
    tried.push_back(force_common ? "native skipped (--force-common)" : "native: no " + name + " kernel for " + dn);
    if (opts_.force_native.count(name))
      return {false, DispatchPath::Unsupported, "native forced (--force-native) but " + tried.back()};
    if (depth > 24) return {false, DispatchPath::Unsupported, "decomposition too deep"};
    if (info.decompose) {
      std::vector<ValueId> outs;
      Graph s = decompose_scratch(n, in, &outs);
      std::string bad;
      for (auto& part : s.nodes) {
        std::vector<ValueType> pin;
        for (auto v : part.inputs) pin.push_back(s.type(v));
        Verdict v = check(part, pin, depth + 1);
        if (!v.ok) {
          bad = std::string(op_name(part.op)) + " " + dtypes_str(pin) + " (" + v.why + ")";
          break;
        }
      }
      if (bad.empty())
        return {true, DispatchPath::CommonIR, "decomposed into " + std::to_string(s.nodes.size()) + " ops"};
      tried.push_back("common-IR: part " + bad);
    } else {
      tried.push_back("common-IR: " + name + " is a primitive (no decomposition)");
    }
    if (n.op == OpKind::Convert) {
      // Promoting a convert would insert a convert from the same dtype: the rewrite is circular.
      tried.push_back("rewritten: a convert of " + dn + " cannot be rewritten through another convert");
    } else if (promotable(dt)) {
      DType to = promotion_target(dt);
      Verdict v = check(promoted(n, to), promote_types(in, dt), depth + 1);
      std::string tn(dtype_name(to));
      if (v.ok) return {true, DispatchPath::Rewritten, "promoted " + dn + " -> " + tn + " (" + tried[0].substr(8) + ")"};
      tried.push_back("rewritten: promoted to " + tn + " still fails (" + v.why + ")");
    } else {
      tried.push_back("rewritten: no rewrite applies to " + dn);
    }
    std::string all;
    for (auto& t : tried) all += (all.empty() ? "" : "; ") + t;
    return {false, DispatchPath::Unsupported, all};
  }

  std::vector<ValueId> emit(Builder& b, const Node& n, const std::vector<ValueId>& ins) {
    std::vector<ValueType> in;
    for (auto v : ins) in.push_back(b.type(v));
    Verdict v = check(n, in);
    if (!v.ok && fallback_) return emit_fallback(b, n, ins, in, v);
    if (!v.ok) unsupported(n, in, v);
    std::vector<ValueType> out = infer_types(n.op, in, n.attrs, "[dispatch]");
    DType dt = key_dtype(n, in, out);
    record(n.op, dt, v.path, v.why);
    b.set_origin(n.name);
    switch (v.path) {
      case DispatchPath::Native: return b.op(n.op, ins, n.attrs);
      case DispatchPath::CommonIR: {
        std::vector<ValueId> souts;
        Graph s = decompose_scratch(n, in, &souts);
        std::map<ValueId, ValueId> m;
        for (size_t i = 0; i < s.inputs.size(); ++i) m[s.inputs[i]] = ins[i];
        for (auto& part : s.nodes) {
          std::vector<ValueId> pin;
          for (auto x : part.inputs) pin.push_back(m.at(x));
          auto pout = emit(b, part, pin);
          for (size_t i = 0; i < pout.size(); ++i) m[part.outputs[i]] = pout[i];
        }
        std::vector<ValueId> r;
        for (auto o : souts) r.push_back(m.at(o));
        return r;
      }
      case DispatchPath::Rewritten: {
        if (v.narrow) return emit_narrowed(b, n, ins, out);
        std::vector<ValueId> cin;
        DType to = promotion_target(dt);
        for (auto x : ins) cin.push_back(b.type(x).dtype == dt ? emit_convert(b, x, to, n.name) : x);
        auto cout = emit(b, promoted(n, to), cin);
        for (size_t i = 0; i < cout.size(); ++i)
          if (out[i].dtype == dt) cout[i] = emit_convert(b, cout[i], dt, n.name);
        return cout;
      }
      default: break;
    }
    unsupported(n, in, v);
  }

  DispatchReport report;
  // Node index ranges of the output graph placed on the fallback device.
  std::vector<std::pair<size_t, size_t>> fallback_ranges;
  std::unique_ptr<Legalizer> fallback_;  // the fallback device's legalizer (null: no fallback)

 private:
  // The node runs on the fallback device, legalized there; the report row says why and where.
  std::vector<ValueId> emit_fallback(Builder& b, const Node& n, const std::vector<ValueId>& ins,
                                     const std::vector<ValueType>& in, const Verdict& v) {
    Verdict f = fallback_->check(n, in);
    if (!f.ok) unsupported(n, in, {false, DispatchPath::Unsupported, v.why + "; fallback " + fallback_->dev_.name + ": " + f.why});
    size_t first = b.graph().nodes.size();
    auto r = fallback_->emit(b, n, ins);
    fallback_ranges.push_back({first, b.graph().nodes.size()});
    std::vector<ValueType> out = infer_types(n.op, in, n.attrs, "[dispatch]");
    record(n.op, key_dtype(n, in, out), DispatchPath::Fallback,
           "placed on " + fallback_->dev_.name + " (--fallback): " + v.why);
    return r;
  }

  // Rewrites insert converts through emit like any node, so they are checked and reported.
  ValueId emit_convert(Builder& b, ValueId x, DType t, const std::string& origin) {
    Node c{OpKind::Convert, {}, {}, {{"to", t}}, origin};
    return emit(b, c, {x})[0];
  }

  // i64 -> i32 narrowing: inputs enter as i32 (reusing the i32 twin of a value this rewrite
  // widened), the op runs narrowed, i64 results are widened back (dead widenings are DCE'd).
  std::vector<ValueId> emit_narrowed(Builder& b, const Node& n, const std::vector<ValueId>& ins,
                                     const std::vector<ValueType>& out) {
    if (!noted_narrowing_) {
      noted_narrowing_ = true;
      report.notes.push_back("i64 narrowed to i32 on " + dev_.name +
                             " (no 64-bit integer arithmetic): exact while every i64 value (ids, positions, indices) "
                             "fits in int32; i64 buffers are read by their low word and written sign-extended");
    }
    std::vector<ValueId> cin;
    for (auto x : ins) {
      if (b.type(x).dtype != DType::i64) {
        cin.push_back(x);
        continue;
      }
      auto it = narrow_of_.find(x);
      if (it == narrow_of_.end()) it = narrow_of_.emplace(x, emit_convert(b, x, DType::i32, n.name)).first;
      cin.push_back(it->second);
    }
    auto cout = emit(b, narrowed(n), cin);
    for (size_t i = 0; i < cout.size(); ++i) {
      if (out[i].dtype != DType::i64 || b.type(cout[i]).dtype != DType::i32) continue;
      ValueId w = emit_convert(b, cout[i], DType::i64, n.name);
      narrow_of_[w] = cout[i];
      cout[i] = w;
    }
    return cout;
  }

  static Node promoted(const Node& n, DType to) {
    Node p = n;
    auto it = p.attrs.find("dtype");  // constant-like ops that name their dtype
    if (it != p.attrs.end() && std::holds_alternative<DType>(it->second.v)) it->second = Attr(to);
    auto c = p.attrs.find("value");
    if (c != p.attrs.end() && std::holds_alternative<Tensor>(c->second.v)) {
      const Tensor& t = std::get<Tensor>(c->second.v);
      Tensor f(to, t.shape());
      for (int64_t i = 0; i < t.numel(); ++i) f.set(i, t.get(i));
      c->second = Attr(f);
    }
    return p;
  }
  static std::vector<ValueType> promote_types(std::vector<ValueType> in, DType dt) {
    for (auto& t : in)
      if (t.dtype == dt) t.dtype = promotion_target(dt);
    return in;
  }

  void record(OpKind op, DType dt, DispatchPath p, const std::string& why) {
    std::string name(op_name(op)), d(dtype_name(dt));
    for (auto& r : report.rows) {
      if (r.op == name && r.dtype == d && r.path == p) {
        ++r.count;
        return;
      }
    }
    report.rows.push_back(DispatchRow{name, d, p, 1, why});
  }

  [[noreturn]] void unsupported(const Node& n, const std::vector<ValueType>& in, const Verdict& v) {
    // From the static capability tables (device_caps): probing every device here would
    // load Mesa/PoCL (and their LLVM) into a process that only compiled for one. Where a driver
    // decides a dtype (OpenCL's f64), the hint says so instead of asking the driver.
    std::vector<std::string> can;
    std::vector<ValueType> io = in;
    for (auto& t : infer_types(n.op, in, n.attrs, "[dispatch]")) io.push_back(t);
    const DispatchOptions none;  // (a named object: Legalizer keeps a reference to it)
    for (auto& name : device_names()) {
      if (name == dev_.name) continue;
      DTypeSet driver_decides;
      DeviceInfo caps_only{name, "", DeviceStatus::CodegenOnly, "not probed", device_caps(name, &driver_decides)};
      Legalizer other(caps_only, none);
      if (!other.check(n, in).ok) continue;
      std::string needs;
      for (auto& t : io)
        if (driver_decides.has(t.dtype) && needs.find(dtype_name(t.dtype)) == std::string::npos)
          needs += (needs.empty() ? "" : ", ") + std::string(dtype_name(t.dtype));
      can.push_back(needs.empty() ? name : name + " (if its driver supports " + needs + ")");
    }
    std::string who = n.name.empty() ? "<unnamed>" : n.name;
    std::string types;
    for (auto& t : in) types += (types.empty() ? "" : ", ") + std::string(dtype_name(t.dtype)) + shape_str(t.shape);
    std::string sugg;
    for (auto& c : can) sugg += (sugg.empty() ? "" : ", ") + c;
    fail("[dispatch] cannot legalize node '", who, "' (op ", op_name(n.op), ", inputs ", types.empty() ? "none" : types,
         ") for device '", dev_.name, "'\n  tried: ", v.why,
         "\n  devices that could run it: ", sugg.empty() ? "none" : sugg);
  }

  const DeviceInfo& dev_;
  const DispatchOptions& opts_;
  bool narrow_i64_ = false, noted_narrowing_ = false;
  std::map<ValueId, ValueId> narrow_of_;  // i64 value -> its i32 twin
};

}  // namespace

std::string_view dispatch_path_name(DispatchPath p) {
  switch (p) {
    case DispatchPath::Native: return "native";
    case DispatchPath::CommonIR: return "common-IR";
    case DispatchPath::Rewritten: return "rewritten";
    case DispatchPath::Fallback: return "fallback";
    case DispatchPath::Unsupported: return "unsupported";
  }
  return "?";
}

Legalized legalize(const Graph& g, const std::string& device, const DispatchOptions& opts) {
  const DeviceInfo& dev = device_info(device);
  for (auto& o : opts.force_common) {
    OpKind k;
    RLX_CHECK(op_by_name(o, &k), "[dispatch] --force-common names unknown op '", o, "'");
  }
  for (auto& o : opts.force_native) {
    OpKind k;
    RLX_CHECK(op_by_name(o, &k), "[dispatch] --force-native names unknown op '", o, "'");
  }
  Legalizer L(dev, opts);
  const DispatchOptions none;  // the fallback device legalizes its nodes with no forcing and no fallback
  if (!opts.fallback.empty() && opts.fallback != device) {
    RLX_CHECK(opts.fallback == "cpu", "[dispatch] --fallback: only 'cpu' can take nodes another device cannot run, not '",
              opts.fallback, "'");
    L.fallback_ = std::make_unique<Legalizer>(device_info(opts.fallback), none);
  }
  Legalized r;
  r.graph.name = g.name;
  Builder b(r.graph);
  std::map<ValueId, ValueId> m;
  for (auto i : g.inputs) m[i] = r.graph.add_input(g.values[i].name, g.type(i).dtype, g.type(i).shape);
  for (auto& n : g.nodes) {
    std::vector<ValueId> ins;
    for (auto v : n.inputs) ins.push_back(m.at(v));
    auto outs = L.emit(b, n, ins);
    for (size_t i = 0; i < outs.size(); ++i) m[n.outputs[i]] = outs[i];
  }
  for (auto o : g.outputs) {
    ValueId v = m.at(o);
    r.graph.outputs.push_back(v);
    if (r.graph.values[v].name.empty()) r.graph.values[v].name = g.values[o].name;
  }
  L.report.device = device;
  if (!L.fallback_ranges.empty()) {
    r.placement.assign(r.graph.nodes.size(), "");
    for (auto [a, e] : L.fallback_ranges)
      for (size_t i = a; i < e; ++i) r.placement[i] = opts.fallback;
  }
  r.report = std::move(L.report);
  return r;
}

std::string DispatchReport::table() const {
  std::ostringstream os;
  os << "dispatch report: device " << device << "\n";
  char buf[512];
  std::snprintf(buf, sizeof buf, "  %-18s %-6s %-11s %5s  %s\n", "op", "dtype", "path", "nodes", "reason");
  os << buf;
  std::vector<DispatchRow> sorted = rows;
  std::stable_sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.path < b.path; });
  for (auto& r : sorted) {
    std::snprintf(buf, sizeof buf, "  %-18s %-6s %-11s %5d  %s\n", r.op.c_str(), r.dtype.c_str(),
                  std::string(dispatch_path_name(r.path)).c_str(), r.count, r.reason.c_str());
    os << buf;
  }
  int counts[5] = {0, 0, 0, 0, 0};
  for (auto& r : rows) counts[static_cast<int>(r.path)] += r.count;
  os << "  total: " << counts[0] << " native, " << counts[1] << " common-IR, " << counts[2] << " rewritten";
  if (counts[3]) os << ", " << counts[3] << " fallback";
  os << "\n";
  for (auto& n : notes) os << "  note: " << n << "\n";
  return os.str();
}

}  // namespace rlx
