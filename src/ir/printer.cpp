// Prints a Graph in the .rlx text form (docs/text-format.md); parse_graph reads it back exactly.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

#include "rlx/text.h"

namespace rlx {

namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

// Value and graph names print bare when they match [A-Za-z0-9_.]+, otherwise quoted.
bool is_bare_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!is_name_char(c)) return false;
  return true;
}

// A symbolic dim prints bare when it is an identifier the parser cannot take for a float.
bool is_bare_sym(const std::string& s) {
  if (s.empty() || s == "inf" || s == "nan") return false;
  if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_')) return false;
  for (char c : s)
    if (!is_name_char(c) || c == '.') return false;
  return true;
}

std::string quote(const std::string& s) {
  std::string r = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        r += "\\\"";
        break;
      case '\\':
        r += "\\\\";
        break;
      case '\n':
        r += "\\n";
        break;
      case '\t':
        r += "\\t";
        break;
      case '\r':
        r += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          r += buf;
        } else {
          r += static_cast<char>(c);
        }
    }
  }
  return r + "\"";
}

// Shortest text that reads back as exactly the same double; always spelled as a float ('.', 'e',
// inf, nan) so the parser keeps the attribute's kind.
std::string fmt_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// Tensor data: shortest exact text of the element (the dtype says how to read it back).
template <class F>
std::string fmt_elem(F v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string fmt_dim(const Dim& d) {
  return d.is_static() ? std::to_string(d.v) : (is_bare_sym(d.sym) ? d.sym : quote(d.sym));
}

std::string fmt_shape(const Shape& s, const char* sep) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += sep;
    r += fmt_dim(s[i]);
  }
  return r + "]";
}

std::string fmt_type(const ValueType& t) {
  return std::string(dtype_name(t.dtype)) + fmt_shape(t.shape, ",");
}

std::string fmt_tensor(const Tensor& t) {
  std::string r(dtype_name(t.dtype()));
  r += "[";
  for (size_t i = 0; i < t.shape().size(); ++i) r += (i ? "," : "") + std::to_string(t.shape()[i]);
  r += "] [";
  if (t.defined()) {
    int64_t n = t.numel();
    for (int64_t i = 0; i < n; ++i) {
      if (i) r += ", ";
      switch (t.dtype()) {
        case DType::f32:
        case DType::f16:
        case DType::bf16:
          r += fmt_elem(static_cast<float>(t.get(i)));
          break;
        case DType::f64:
          r += fmt_elem(t.get(i));
          break;
        case DType::c64: {
          auto c = t.getc(i);
          r += fmt_elem(static_cast<float>(c.real())) + ", " + fmt_elem(static_cast<float>(c.imag()));
          break;
        }
        case DType::i64:
          r += std::to_string(t.get_int(i));
          break;
        case DType::u32:
        case DType::u64:
          r += std::to_string(t.get_uint(i));
          break;
        default:
          r += std::to_string(static_cast<int64_t>(t.get(i)));
          break;
      }
    }
  }
  return r + "]";
}

std::string fmt_attr(const Attr& a) {
  std::string r;
  switch (a.kind()) {
    case AttrKind::Int:
      return std::to_string(std::get<int64_t>(a.v));
    case AttrKind::Float:
      return fmt_double(std::get<double>(a.v));
    case AttrKind::Str:
      return quote(std::get<std::string>(a.v));
    case AttrKind::Ints: {
      const auto& v = std::get<std::vector<int64_t>>(a.v);
      r = "[";
      for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + std::to_string(v[i]);
      return r + "]";
    }
    case AttrKind::Floats: {
      const auto& v = std::get<std::vector<double>>(a.v);
      r = "[";
      for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + fmt_double(v[i]);
      return r + "]";
    }
    case AttrKind::Dims:
      return fmt_shape(std::get<Shape>(a.v), ", ");
    case AttrKind::DTypeK:
      return std::string(dtype_name(std::get<DType>(a.v)));
    case AttrKind::TensorK:
      return fmt_tensor(std::get<Tensor>(a.v));
  }
  return "?";
}

}  // namespace

std::string print_graph(const Graph& g) {
  // Labels are unique so the text always re-parses; a name clash gets a ".k" suffix.
  std::vector<std::string> label(g.values.size());
  std::set<std::string> used;
  auto define = [&](ValueId v) {
    if (v < 0 || v >= static_cast<ValueId>(g.values.size()) || !label[v].empty()) return;
    const auto& nm = g.values[v].name;
    std::string base = nm.empty() ? std::to_string(v) : nm;
    std::string l = base;
    for (int k = 1; used.count(l); ++k) l = base + "." + std::to_string(k);
    used.insert(l);
    label[v] = l;
  };
  auto ref = [&](ValueId v) -> std::string {
    if (v < 0 || v >= static_cast<ValueId>(g.values.size())) return "%<bad:" + std::to_string(v) + ">";
    std::string l =
        label[v].empty() ? (g.values[v].name.empty() ? std::to_string(v) : g.values[v].name) : label[v];
    return "%" + (is_bare_name(l) ? l : quote(l));
  };
  for (auto v : g.inputs) define(v);
  for (auto& n : g.nodes)
    for (auto v : n.outputs) define(v);

  std::ostringstream os;
  os << "graph @" << (is_bare_name(g.name) ? g.name : quote(g.name)) << "(";
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    ValueId v = g.inputs[i];
    os << (i ? ", " : "") << ref(v) << ": ";
    os << (v >= 0 && v < static_cast<ValueId>(g.values.size()) ? fmt_type(g.values[v].type) : "?");
  }
  os << ") {\n";
  for (auto& n : g.nodes) {
    os << "  ";
    for (size_t i = 0; i < n.outputs.size(); ++i) os << (i ? ", " : "") << ref(n.outputs[i]);
    bool known = static_cast<int>(n.op) < num_ops();
    os << " = " << (known ? std::string(op_name(n.op)) : "<op" + std::to_string(static_cast<int>(n.op)) + ">")
       << "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", " : "") << ref(n.inputs[i]);
    os << ")";
    if (!n.attrs.empty()) {
      os << " {";
      bool first = true;
      for (auto& [k, a] : n.attrs) {
        os << (first ? "" : ", ") << k << "=" << fmt_attr(a);
        first = false;
      }
      os << "}";
    }
    os << " :";
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      ValueId v = n.outputs[i];
      os << (i ? ", " : " ")
         << (v >= 0 && v < static_cast<ValueId>(g.values.size()) ? fmt_type(g.values[v].type) : "?");
    }
    if (!n.name.empty()) os << " loc(" << quote(n.name) << ")";
    os << "\n";
  }
  os << "  return";
  for (size_t i = 0; i < g.outputs.size(); ++i) os << (i ? ", " : " ") << ref(g.outputs[i]);
  os << "\n}\n";
  return os.str();
}

}  // namespace rlx
