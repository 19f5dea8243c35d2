// LIR text form. Node-shaped lines (library kernels, constants, fused bodies) are printed and
// parsed by the graph printer/parser, so the three levels share one syntax for ops and attributes.
#include <regex>
#include <sstream>

#include "rlx/lir.h"
#include "rlx/text.h"

namespace rlx {

namespace {

std::string bname(int b) { return "b" + std::to_string(b); }

// The body lines of a printed graph (between the header and `return`).
std::vector<std::string> node_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream is(text);
  std::string line;
  while (std::getline(is, line)) {
    auto p = line.find_first_not_of(' ');
    if (p == std::string::npos) continue;
    std::string t = line.substr(p);
    if (t.rfind("graph ", 0) == 0 || t.rfind("return", 0) == 0 || t == "}" || t[0] == '#') continue;
    out.push_back(t);
  }
  return out;
}

std::string type_str(const ValueType& t) {
  Graph g;
  g.add_input("x", t.dtype, t.shape);
  g.outputs.push_back(0);
  std::string s = print_graph(g);  // graph @main(%x: TYPE) {
  auto a = s.find("%x: ") + 4, b = s.find(") {");
  return s.substr(a, b - a);
}

std::string library_line(const LirProgram& p, const LirKernel& k) {
  Graph g;
  std::vector<ValueId> ins;
  for (int b : k.in) {
    bool dup = false;
    for (size_t i = 0; i < ins.size(); ++i)
      if (k.in[i] == b) {
        ins.push_back(ins[i]);
        dup = true;
        break;
      }
    if (!dup) ins.push_back(g.add_input(bname(b), p.buffers[b].type.dtype, p.buffers[b].type.shape));
  }
  auto outs = g.add_node(k.op, ins, k.attrs, k.origin);
  for (size_t i = 0; i < outs.size(); ++i) g.values[outs[i]].name = bname(k.out[i]);
  g.outputs = outs;
  return node_lines(print_graph(g)).at(0);
}

// A kernel a backend's LIR pass rewrote (attrs cpu_* / cuda_*; lir_*: a request to the memory
// planner): its inputs follow the backend's kernel, so it prints as-is (not through the op table);
// parse_lir does not read it back.
bool backend_form(const LirKernel& k) {
  for (auto& [key, v] : k.attrs)
    if (key.rfind("cpu_", 0) == 0 || key.rfind("cuda_", 0) == 0 || key.rfind("lir_", 0) == 0) return true;
  return false;
}

std::string attr_text(const Attr& a) {
  std::ostringstream os;
  switch (a.kind()) {
    case AttrKind::Int: os << std::get<int64_t>(a.v); break;
    case AttrKind::Float: os << std::get<double>(a.v); break;
    case AttrKind::Str: os << '"' << std::get<std::string>(a.v) << '"'; break;
    case AttrKind::Ints: {
      os << '[';
      const auto& v = std::get<std::vector<int64_t>>(a.v);
      for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
      os << ']';
      break;
    }
    default: os << '<' << attr_kind_name(a.kind()) << '>';
  }
  return os.str();
}

std::string backend_line(const LirProgram& p, const LirKernel& k) {
  std::ostringstream os;
  os << "backend " << (k.kind == KernelKind::Library ? std::string(op_name(k.op)) : std::string("fused")) << " (";
  for (size_t i = 0; i < k.in.size(); ++i) os << (i ? ", " : "") << "%" << bname(k.in[i]);
  os << ") -> (";
  for (size_t i = 0; i < k.out.size(); ++i)
    os << (i ? ", " : "") << "%" << bname(k.out[i]) << ": " << type_str(p.buffers[k.out[i]].type);
  os << ") {";
  bool first = true;
  for (auto& [key, v] : k.attrs) {
    if (v.kind() == AttrKind::TensorK) continue;
    os << (first ? "" : ", ") << key << "=" << attr_text(v);
    first = false;
  }
  os << "}" << (k.in_place ? " in_place" : "");
  if (!k.origin.empty()) os << "  # " << k.origin;
  return os.str();
}

}  // namespace

std::string print_lir(const LirProgram& p, bool elide) {
  std::ostringstream os;
  os << "lir @" << p.name << " arena_bytes=" << p.arena_bytes << " unplanned_bytes=" << p.naive_bytes << " {\n";
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const LirBuffer& lb = p.buffers[b];
    std::string ty = type_str(lb.type);
    os << "  buffer ";
    switch (lb.kind) {
      case BufferKind::Input: os << "%" << bname(b) << " = input \"" << lb.name << "\" : " << ty; break;
      case BufferKind::Output: os << "%" << bname(b) << " = output \"" << lb.name << "\" : " << ty; break;
      case BufferKind::Arena:
        os << "%" << bname(b) << " = arena offset=" << lb.offset << " live=" << lb.def << ".." << lb.last << " : " << ty;
        break;
      case BufferKind::View: os << "%" << bname(b) << " = view %" << bname(lb.view_of) << " : " << ty; break;
      case BufferKind::Const:
        if (elide) {
          os << "%" << bname(b) << " = const <" << lb.value.numel() << " elements elided> : " << ty;
        } else {
          Graph g;
          auto v = g.add_node(OpKind::Constant, {}, {{"value", lb.value}})[0];
          g.values[v].name = bname(b);
          g.outputs = {v};
          os << "const " << node_lines(print_graph(g)).at(0);
        }
        break;
    }
    os << "\n";
  }
  for (auto& k : p.kernels) {
    if (backend_form(k)) {
      os << "  kernel " << backend_line(p, k) << "\n";
      if (k.kind == KernelKind::Library && k.body.nodes.empty()) continue;
      os << "  {\n";
      std::istringstream body(print_graph(k.body));
      std::string line;
      while (std::getline(body, line)) os << "    " << line << "\n";
      os << "  }\n";
      continue;
    }
    if (k.kind == KernelKind::Library) {
      os << "  kernel " << library_line(p, k) << "\n";
      continue;
    }
    os << "  kernel fused" << (k.in_place ? " in_place" : "") << " (";
    for (size_t i = 0; i < k.in.size(); ++i) os << (i ? ", " : "") << "%" << bname(k.in[i]);
    os << ") -> (%" << bname(k.out[0]) << ") {\n";
    std::istringstream body(print_graph(k.body));
    std::string line;
    while (std::getline(body, line)) os << "    " << line << "\n";
    os << "  }\n";
  }
  os << "}\n";
  return os.str();
}

LirProgram parse_lir(const std::string& text) {
  LirProgram p;
  std::istringstream is(text);
  std::string line;
  int ln = 0;
  auto err = [&](const std::string& m) { fail("[parse] lir line ", ln, ": ", m); };
  auto buf_id = [&](const std::string& s) {
    RLX_CHECK(s.size() > 2 && s[0] == '%' && s[1] == 'b', "[parse] lir line ", ln, ": bad buffer name '", s, "'");
    int id = std::stoi(s.substr(2));
    RLX_CHECK(id >= 0 && id < static_cast<int>(p.buffers.size()), "[parse] lir line ", ln, ": unknown buffer ", s);
    return id;
  };
  auto ids_in = [&](const std::string& s) {
    std::vector<int> r;
    static const std::regex re("%b[0-9]+");
    for (auto it = std::sregex_iterator(s.begin(), s.end(), re); it != std::sregex_iterator(); ++it) r.push_back(buf_id(it->str()));
    return r;
  };
  auto parse_type = [&](const std::string& ty) {
    Graph g = parse_graph("graph @t(%x: " + ty + ") {\n  return %x\n}\n");
    return g.type(0);
  };
  static const std::regex head(R"(lir @([A-Za-z0-9_.]+) arena_bytes=(\d+) unplanned_bytes=(\d+) \{)");
  static const std::regex bufre(R"(buffer %b(\d+) = (input|output) \"([^\"]*)\" : (.+))");
  static const std::regex arenare(R"(buffer %b(\d+) = arena offset=(\d+) live=(-?\d+)\.\.(-?\d+) : (.+))");
  static const std::regex viewre(R"(buffer %b(\d+) = view (%b\d+) : (.+))");
  static const std::regex fusedre(R"(kernel fused( in_place)? \(([^)]*)\) -> \((%b\d+)\) \{)");
  bool closed = false;
  while (std::getline(is, line)) {
    ++ln;
    auto p0 = line.find_first_not_of(' ');
    if (p0 == std::string::npos) continue;
    std::string t = line.substr(p0);
    std::smatch m;
    auto expect_next = [&](int id) {
      if (id != static_cast<int>(p.buffers.size())) err("buffers must be declared in order");
      p.buffers.emplace_back();
      return &p.buffers.back();
    };
    if (ln == 1) {
      if (!std::regex_match(t, m, head)) err("expected 'lir @name arena_bytes=N unplanned_bytes=N {'");
      p.name = m[1];
      p.arena_bytes = std::stoll(m[2]);
      p.naive_bytes = std::stoll(m[3]);
    } else if (std::regex_match(t, m, bufre)) {
      LirBuffer* b = expect_next(std::stoi(m[1]));
      b->kind = m[2] == "input" ? BufferKind::Input : BufferKind::Output;
      b->name = m[3];
      b->type = parse_type(m[4]);
      (b->kind == BufferKind::Input ? p.inputs : p.outputs).push_back(static_cast<int>(p.buffers.size() - 1));
    } else if (std::regex_match(t, m, arenare)) {
      LirBuffer* b = expect_next(std::stoi(m[1]));
      b->kind = BufferKind::Arena;
      b->offset = std::stoll(m[2]);
      b->def = std::stoi(m[3]);
      b->last = std::stoi(m[4]);
      b->type = parse_type(m[5]);
    } else if (std::regex_match(t, m, viewre)) {
      int base = buf_id(m[2]);
      LirBuffer* b = expect_next(std::stoi(m[1]));
      b->kind = BufferKind::View;
      b->view_of = base;
      b->type = parse_type(m[3]);
    } else if (t.rfind("buffer const ", 0) == 0) {
      std::string node = t.substr(13);
      if (node.find("elided") != std::string::npos) err("constants were elided in this dump; it cannot be parsed back");
      auto eq = node.find(" = ");
      int id = std::stoi(node.substr(2, eq - 2));
      Graph g = parse_graph("graph @c() {\n  " + node + "\n  return %" + bname(id) + "\n}\n");
      LirBuffer* b = expect_next(id);
      b->kind = BufferKind::Const;
      b->value = attr_tensor(g.nodes.at(0), "value");
      b->type = g.type(g.outputs[0]);
    } else if (std::regex_match(t, m, fusedre)) {
      LirKernel k;
      k.kind = KernelKind::Generated;
      k.in_place = m[1].matched;
      k.in = ids_in(m[2]);
      k.out = {buf_id(m[3])};
      std::string body;
      while (std::getline(is, line)) {
        ++ln;
        if (line == "  }") break;
        body += line + "\n";
      }
      k.body = parse_graph(body, "lir body");
      for (auto& n : k.body.nodes) k.origin += (k.origin.empty() ? "" : ",") + n.name;
      p.kernels.push_back(std::move(k));
    } else if (t.rfind("kernel ", 0) == 0) {
      std::string node = t.substr(7);
      auto eq = node.find(" = ");
      auto lp = node.find('(', eq == std::string::npos ? 0 : eq);
      auto rp = node.find(')', lp == std::string::npos ? 0 : lp);
      if (eq == std::string::npos || lp == std::string::npos || rp == std::string::npos) err("malformed kernel line");
      auto outs = ids_in(node.substr(0, eq));
      auto ins = ids_in(node.substr(lp, rp - lp));
      std::string hdr, seen;
      for (int b : ins) {
        if (seen.find("," + bname(b) + ",") != std::string::npos) continue;
        seen += "," + bname(b) + ",";
        hdr += (hdr.empty() ? "%" : ", %") + bname(b) + ": " + type_str(p.buffers[b].type);
      }
      std::string ret;
      for (int b : outs) ret += (ret.empty() ? "%" : ", %") + bname(b);
      Graph g = parse_graph("graph @k(" + hdr + ") {\n  " + node + "\n  return " + ret + "\n}\n");
      const Node& n = g.nodes.at(0);
      LirKernel k;
      k.op = n.op;
      k.attrs = n.attrs;
      k.origin = n.name;
      k.in = ins;
      k.out = outs;
      p.kernels.push_back(std::move(k));
    } else if (t == "}") {
      closed = true;
      break;
    } else {
      err("unexpected '" + t.substr(0, 40) + "'");
    }
  }
  if (!closed) fail("[parse] lir: missing closing '}'");
  return p;
}

}  // namespace rlx
