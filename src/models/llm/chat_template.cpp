// Chat-template renderer: walks the AST (chat_template_ast.h) over nlohmann::json values, with
// Jinja's truthiness, loop variables, scoping (a for body's `set` stays inside it; namespace()
// objects carry values out) and the filters/tests/methods the common templates use.
#include "models/llm/chat_template.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "models/llm/chat_template_ast.h"
#include "rlx/error.h"

namespace rlx::models {

using namespace jinja;

namespace {

// A value, or Jinja's undefined (a missing name, key or attribute).
struct Val {
  json j;
  bool undef = false;
  static Val undefined() { return Val{json(), true}; }
};

bool truthy(const Val& v) {
  if (v.undef) return false;
  const json& j = v.j;
  if (j.is_null()) return false;
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_number()) return j.get<double>() != 0;
  if (j.is_string()) return !j.get_ref<const std::string&>().empty();  // json::empty() is false for any string
  if (j.is_array() || j.is_object()) return !j.empty();
  return true;
}

std::string py_float(double d) {
  if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e16) {
    char b[64];
    std::snprintf(b, sizeof b, "%.1f", d);
    return b;
  }
  char b[64];
  std::snprintf(b, sizeof b, "%.17g", d);
  return b;
}

// Python json.dumps style (", " and ": " separators, non-ASCII kept).
std::string to_json(const json& j) {
  if (j.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < j.size(); ++i) s += (i ? ", " : "") + to_json(j[i]);
    return s + "]";
  }
  if (j.is_object()) {
    std::string s = "{";
    bool first = true;
    for (auto& [k, v] : j.items()) {
      s += (first ? "" : ", ") + json(k).dump(-1, ' ', false) + ": " + to_json(v);
      first = false;
    }
    return s + "}";
  }
  if (j.is_number_float()) return py_float(j.get<double>());
  return j.dump(-1, ' ', false);
}

std::string str(const Val& v) {
  if (v.undef) return "";
  const json& j = v.j;
  if (j.is_string()) return j.get<std::string>();
  if (j.is_null()) return "None";
  if (j.is_boolean()) return j.get<bool>() ? "True" : "False";
  if (j.is_number_integer()) return std::to_string(j.get<int64_t>());
  if (j.is_number_float()) return py_float(j.get<double>());
  return to_json(j);
}

std::string trim(const std::string& s, const std::string& chars = " \t\r\n\f\v") {
  size_t a = s.find_first_not_of(chars);
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(chars) - a + 1);
}

class Renderer {
 public:
  explicit Renderer(const json& ctx) {
    scopes_.emplace_back();
    for (auto& [k, v] : ctx.items()) scopes_[0][k] = Val{v};
  }

  void run(const std::vector<StmtP>& body, std::string& out) {
    for (const StmtP& s : body) exec(*s, out);
  }

 private:
  void exec(const Stmt& s, std::string& out) {
    switch (s.kind) {
      case Stmt::Text:
        out += s.text;
        return;
      case Stmt::Out:
        out += str(eval(*s.expr));
        return;
      case Stmt::If:
        for (auto& [cond, body] : s.branches)
          if (!cond || truthy(eval(*cond))) return run(body, out);
        return;
      case Stmt::Set: {
        Val v = eval(*s.expr);
        if (s.vars.size() == 1) {
          scopes_.back()[s.vars[0]] = v;
          return;
        }
        Val* ns = lookup(s.vars[0]);
        if (!ns || !ns->j.is_object()) fail_at(s.pos, "'" + s.vars[0] + "' is not a namespace");
        ns->j[s.vars[1]] = v.j;
        return;
      }
      case Stmt::For: {
        Val seq = eval(*s.expr);
        std::vector<json> items;
        if (seq.j.is_array()) items.assign(seq.j.begin(), seq.j.end());
        else if (seq.j.is_object())
          for (auto& [k, v] : seq.j.items()) items.push_back(k);
        else if (seq.j.is_string())
          for (char c : seq.j.get<std::string>()) items.push_back(std::string(1, c));
        else if (!seq.undef && !seq.j.is_null())
          fail_at(s.pos, "cannot loop over " + std::string(seq.j.type_name()));
        scopes_.emplace_back();
        if (s.filter) {
          std::vector<json> kept;
          for (const json& it : items) {
            bind(s, it);
            if (truthy(eval(*s.filter))) kept.push_back(it);
          }
          items.swap(kept);
        }
        int64_t n = static_cast<int64_t>(items.size());
        for (int64_t i = 0; i < n; ++i) {
          bind(s, items[i]);
          json loop = {{"index0", i},          {"index", i + 1},       {"first", i == 0},
                       {"last", i == n - 1},   {"length", n},          {"revindex", n - i},
                       {"revindex0", n - i - 1}};
          loop["previtem"] = i > 0 ? items[i - 1] : json();
          loop["nextitem"] = i + 1 < n ? items[i + 1] : json();
          scopes_.back()["loop"] = Val{loop};
          run(s.body, out);
        }
        scopes_.pop_back();
        if (n == 0) run(s.else_body, out);
        return;
      }
    }
  }

  void bind(const Stmt& s, const json& item) {
    if (s.vars.size() == 1) {
      scopes_.back()[s.vars[0]] = Val{item};
      return;
    }
    if (!item.is_array() || item.size() != s.vars.size())
      fail_at(s.pos, "cannot unpack into " + std::to_string(s.vars.size()) + " names");
    for (size_t k = 0; k < s.vars.size(); ++k) scopes_.back()[s.vars[k]] = Val{item[k]};
  }

  Val* lookup(const std::string& n) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(n);
      if (f != it->end()) return &f->second;
    }
    return nullptr;
  }

  static int64_t as_int(const Val& v, Pos p) {
    if (!v.j.is_number()) fail_at(p, "expected a number, got " + str(v));
    return static_cast<int64_t>(v.j.get<double>());
  }

  Val eval(const Node& n) {
    switch (n.kind) {
      case Node::Lit:
        return Val{n.lit};
      case Node::Name: {
        Val* v = lookup(n.name);
        return v ? *v : Val::undefined();
      }
      case Node::List: {
        json a = json::array();
        for (auto& k : n.kids) a.push_back(eval(*k).j);
        return Val{a};
      }
      case Node::Dict: {
        json o = json::object();
        for (size_t i = 0; i + 1 < n.kids.size(); i += 2) o[str(eval(*n.kids[i]))] = eval(*n.kids[i + 1]).j;
        return Val{o};
      }
      case Node::Attr: {
        Val o = eval(*n.kids[0]);
        if (o.j.is_object() && o.j.contains(n.name)) return Val{o.j[n.name]};
        return Val::undefined();
      }
      case Node::Index: {
        Val o = eval(*n.kids[0]), k = eval(*n.kids[1]);
        if (o.j.is_object()) {
          std::string key = str(k);
          return o.j.contains(key) ? Val{o.j[key]} : Val::undefined();
        }
        if (o.j.is_array() || o.j.is_string()) {
          int64_t len = o.j.is_array() ? static_cast<int64_t>(o.j.size()) : static_cast<int64_t>(o.j.get<std::string>().size());
          int64_t i = as_int(k, n.pos);
          if (i < 0) i += len;
          if (i < 0 || i >= len) return Val::undefined();
          if (o.j.is_array()) return Val{o.j[static_cast<size_t>(i)]};
          return Val{std::string(1, o.j.get<std::string>()[static_cast<size_t>(i)])};
        }
        return Val::undefined();
      }
      case Node::Slice:
        return slice(n);
      case Node::Unary: {
        Val a = eval(*n.kids[0]);
        if (n.name == "not") return Val{!truthy(a)};
        if (a.j.is_number_integer()) return Val{-a.j.get<int64_t>()};
        if (a.j.is_number()) return Val{-a.j.get<double>()};
        fail_at(n.pos, "cannot negate " + str(a));
      }
      case Node::Binary:
        return binary(n);
      case Node::Cond:
        return truthy(eval(*n.kids[0])) ? eval(*n.kids[1]) : eval(*n.kids[2]);
      case Node::Call:
        return call(n);
      case Node::Filter:
        return filter(n);
      case Node::Test:
        return Val{test(n) != n.negate};
    }
    fail_at(n.pos, "bad expression");
  }

  Val slice(const Node& n) {
    Val o = eval(*n.kids[0]);
    bool is_str = o.j.is_string();
    if (!is_str && !o.j.is_array()) fail_at(n.pos, "cannot slice " + str(o));
    std::string s = is_str ? o.j.get<std::string>() : "";
    int64_t len = is_str ? static_cast<int64_t>(s.size()) : static_cast<int64_t>(o.j.size());
    int64_t step = n.kids[3] ? as_int(eval(*n.kids[3]), n.pos) : 1;
    if (step == 0) fail_at(n.pos, "slice step cannot be zero");
    auto norm = [&](const NodeP& k, int64_t def) {
      if (!k) return def;
      int64_t i = as_int(eval(*k), n.pos);
      if (i < 0) i += len;
      return step > 0 ? std::clamp<int64_t>(i, 0, len) : std::clamp<int64_t>(i, -1, len - 1);
    };
    int64_t lo = norm(n.kids[1], step > 0 ? 0 : len - 1), hi = norm(n.kids[2], step > 0 ? len : -1);
    json a = json::array();
    std::string r;
    for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) {
      if (is_str) r += s[static_cast<size_t>(i)];
      else a.push_back(o.j[static_cast<size_t>(i)]);
    }
    return is_str ? Val{r} : Val{a};
  }

  Val binary(const Node& n) {
    const std::string& op = n.name;
    if (op == "and") {
      Val a = eval(*n.kids[0]);
      return truthy(a) ? eval(*n.kids[1]) : a;
    }
    if (op == "or") {
      Val a = eval(*n.kids[0]);
      return truthy(a) ? a : eval(*n.kids[1]);
    }
    Val a = eval(*n.kids[0]), b = eval(*n.kids[1]);
    if (op == "~") return Val{str(a) + str(b)};
    if (op == "==") return Val{a.undef == b.undef && a.j == b.j};
    if (op == "!=") return Val{!(a.undef == b.undef && a.j == b.j)};
    if (op == "in" || op == "not in") {
      bool r = false;
      if (b.j.is_string()) r = b.j.get<std::string>().find(str(a)) != std::string::npos;
      else if (b.j.is_array()) r = std::find(b.j.begin(), b.j.end(), a.j) != b.j.end();
      else if (b.j.is_object()) r = b.j.contains(str(a));
      else if (!b.undef) fail_at(n.pos, "'in' needs a string, list or mapping on the right");
      return Val{op == "in" ? r : !r};
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      bool comparable = (a.j.is_number() && b.j.is_number()) || (a.j.is_string() && b.j.is_string());
      if (!comparable) fail_at(n.pos, "cannot compare " + str(a) + " " + op + " " + str(b));
      bool lt = a.j < b.j, gt = b.j < a.j;
      return Val{op == "<" ? lt : op == ">" ? gt : op == "<=" ? !gt : !lt};
    }
    if (op == "+") {
      if (a.j.is_string() && b.j.is_string()) return Val{a.j.get<std::string>() + b.j.get<std::string>()};
      if (a.j.is_array() && b.j.is_array()) {
        json r = a.j;
        r.insert(r.end(), b.j.begin(), b.j.end());
        return Val{r};
      }
    }
    if (a.j.is_number() && b.j.is_number()) {
      bool ints = a.j.is_number_integer() && b.j.is_number_integer();
      double x = a.j.get<double>(), y = b.j.get<double>();
      if ((op == "/" || op == "//" || op == "%") && y == 0) fail_at(n.pos, "division by zero");
      if (op == "+") return ints ? Val{a.j.get<int64_t>() + b.j.get<int64_t>()} : Val{x + y};
      if (op == "-") return ints ? Val{a.j.get<int64_t>() - b.j.get<int64_t>()} : Val{x - y};
      if (op == "*") return ints ? Val{a.j.get<int64_t>() * b.j.get<int64_t>()} : Val{x * y};
      if (op == "/") return Val{x / y};
      if (op == "//") return ints ? Val{static_cast<int64_t>(std::floor(x / y))} : Val{std::floor(x / y)};
      if (op == "%") {
        if (ints) {
          int64_t m = a.j.get<int64_t>() % b.j.get<int64_t>();
          if (m != 0 && ((m < 0) != (b.j.get<int64_t>() < 0))) m += b.j.get<int64_t>();
          return Val{m};
        }
        return Val{x - y * std::floor(x / y)};
      }
    }
    if (op == "*" && a.j.is_string() && b.j.is_number_integer()) {
      if (static_cast<double>(a.j.get_ref<const std::string&>().size()) * static_cast<double>(b.j.get<int64_t>()) > 1e7)
        fail_at(n.pos, "string repetition longer than 10 MB");
      std::string r;
      for (int64_t i = 0; i < b.j.get<int64_t>(); ++i) r += a.j.get<std::string>();
      return Val{r};
    }
    fail_at(n.pos, "unsupported operands for '" + op + "': " + str(a) + ", " + str(b));
  }

  std::vector<Val> args(const Node& n, size_t from) {
    std::vector<Val> v;
    for (size_t i = from; i < n.kids.size(); ++i) v.push_back(eval(*n.kids[i]));
    return v;
  }

  Val call(const Node& n) {
    const Node& fn = *n.kids[0];
    std::vector<Val> a = args(n, 1);
    if (fn.kind == Node::Name) {
      if (fn.name == "raise_exception")
        fail_at(fn.pos, "template raised an exception: " + (a.empty() ? std::string() : str(a[0])));
      if (fn.name == "range") {
        int64_t lo = 0, hi = 0, st = 1;
        if (a.size() == 1) hi = as_int(a[0], n.pos);
        else if (a.size() >= 2) lo = as_int(a[0], n.pos), hi = as_int(a[1], n.pos);
        if (a.size() == 3) st = as_int(a[2], n.pos);
        if (st == 0) fail_at(n.pos, "range() step cannot be zero");
        if ((hi - lo) / st > 1000000) fail_at(n.pos, "range() longer than 1000000");
        json r = json::array();
        for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) r.push_back(i);
        return Val{r};
      }
      if (fn.name == "namespace") {
        json o = json::object();
        for (size_t i = 1; i < n.kids.size(); ++i)
          if (!n.kw[i].empty()) o[n.kw[i]] = a[i - 1].j;
        return Val{o};
      }
      if (fn.name == "strftime_now") fail_at(n.pos, "strftime_now() is not supported (no clock in templates)");
      fail_at(n.pos, "unknown function '" + fn.name + "'");
    }
    if (fn.kind == Node::Attr) {
      Val self = eval(*fn.kids[0]);
      const std::string& m = fn.name;
      if (self.j.is_string()) {
        std::string s = self.j.get<std::string>();
        if (m == "strip") return Val{a.empty() ? trim(s) : trim(s, str(a[0]))};
        if (m == "lstrip") {
          size_t p = s.find_first_not_of(a.empty() ? std::string(" \t\r\n") : str(a[0]));
          return Val{p == std::string::npos ? std::string() : s.substr(p)};
        }
        if (m == "rstrip") {
          size_t p = s.find_last_not_of(a.empty() ? std::string(" \t\r\n") : str(a[0]));
          return Val{p == std::string::npos ? std::string() : s.substr(0, p + 1)};
        }
        if (m == "upper" || m == "lower") {
          for (char& c : s) c = static_cast<char>(m == "upper" ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
          return Val{s};
        }
        if ((m == "startswith" || m == "endswith") && a.size() == 1) {
          std::string x = str(a[0]);
          bool r = s.size() >= x.size() && (m == "startswith" ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0);
          return Val{r};
        }
        if (m == "split") {
          json r = json::array();
          if (a.empty()) {
            size_t i = 0;
            while ((i = s.find_first_not_of(" \t\r\n", i)) != std::string::npos) {
              size_t e = s.find_first_of(" \t\r\n", i);
              r.push_back(s.substr(i, e - i));
              i = e;
            }
          } else {
            std::string sep = str(a[0]);
            if (sep.empty()) fail_at(n.pos, "empty separator");
            size_t i = 0, e;
            while ((e = s.find(sep, i)) != std::string::npos) r.push_back(s.substr(i, e - i)), i = e + sep.size();
            r.push_back(s.substr(i));
          }
          return Val{r};
        }
        if (m == "replace" && a.size() == 2) {
          std::string from = str(a[0]), to = str(a[1]);
          if (!from.empty())
            for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size()) s.replace(p, from.size(), to);
          return Val{s};
        }
      }
      if (self.j.is_object()) {
        if (m == "items") {
          json r = json::array();
          for (auto& [k, v] : self.j.items()) r.push_back(json::array({k, v}));
          return Val{r};
        }
        if (m == "keys" || m == "values") {
          json r = json::array();
          for (auto& [k, v] : self.j.items()) r.push_back(m == "keys" ? json(k) : v);
          return Val{r};
        }
        if (m == "get" && !a.empty()) {
          std::string k = str(a[0]);
          return self.j.contains(k) ? Val{self.j[k]} : a.size() > 1 ? a[1] : Val{json()};
        }
      }
      fail_at(fn.pos, "unsupported method '" + m + "' on " + (self.undef ? std::string("undefined") : self.j.type_name()));
    }
    fail_at(n.pos, "this expression cannot be called");
  }

  Val filter(const Node& n) {
    Val v = eval(*n.kids[0]);
    std::vector<Val> a = args(n, 1);
    const std::string& f = n.name;
    if (f == "trim") return Val{trim(str(v))};
    if (f == "length" || f == "count") {
      if (v.j.is_string()) return Val{static_cast<int64_t>(v.j.get<std::string>().size())};
      if (v.j.is_array() || v.j.is_object()) return Val{static_cast<int64_t>(v.j.size())};
      if (v.undef) return Val{int64_t{0}};
      fail_at(n.pos, "length of " + str(v));
    }
    if (f == "upper" || f == "lower" || f == "capitalize" || f == "title") {
      std::string s = str(v);
      bool start = true;
      for (size_t i = 0; i < s.size(); ++i) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        bool up = f == "upper" || ((f == "capitalize" && i == 0) || (f == "title" && start));
        s[i] = static_cast<char>(up ? std::toupper(c) : std::tolower(c));
        start = !std::isalnum(c);
      }
      return Val{s};
    }
    if (f == "default" || f == "d") {
      bool use = v.undef || (a.size() > 1 && truthy(a[1]) && !truthy(v));
      return use ? (a.empty() ? Val{""} : a[0]) : v;
    }
    if (f == "tojson") return Val{to_json(v.j)};
    if (f == "string") return Val{str(v)};
    if (f == "safe") return v;
    if (f == "int") return Val{v.j.is_number() ? static_cast<int64_t>(v.j.get<double>()) : int64_t{0}};
    if (f == "list") return v.j.is_array() ? v : Val{json::array()};
    if ((f == "first" || f == "last") && v.j.is_array()) {
      if (v.j.empty()) return Val::undefined();
      return Val{f == "first" ? v.j.front() : v.j.back()};
    }
    if (f == "join" && v.j.is_array()) {
      std::string sep = a.empty() ? "" : str(a[0]), r;
      for (size_t i = 0; i < v.j.size(); ++i) r += (i ? sep : "") + str(Val{v.j[i]});
      return Val{r};
    }
    if (f == "reverse" && v.j.is_array()) {
      json r = v.j;
      std::reverse(r.begin(), r.end());
      return Val{r};
    }
    if (f == "replace" && a.size() == 2) {
      std::string s = str(v), from = str(a[0]), to = str(a[1]);
      if (!from.empty())
        for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size()) s.replace(p, from.size(), to);
      return Val{s};
    }
    fail_at(n.pos, "unsupported filter '" + f + "'");
  }

  bool test(const Node& n) {
    Val v = eval(*n.kids[0]);
    std::vector<Val> a = args(n, 1);
    const std::string& t = n.name;
    if (t == "defined") return !v.undef;
    if (t == "undefined") return v.undef;
    if (t == "none") return !v.undef && v.j.is_null();
    if (t == "string") return v.j.is_string();
    if (t == "number") return v.j.is_number();
    if (t == "integer") return v.j.is_number_integer();
    if (t == "boolean") return v.j.is_boolean();
    if (t == "true" || t == "false") return v.j.is_boolean() && v.j.get<bool>() == (t == "true");
    if (t == "mapping") return v.j.is_object();
    if (t == "sequence" || t == "iterable") return v.j.is_array() || v.j.is_string() || v.j.is_object();
    if (t == "odd" || t == "even") return v.j.is_number_integer() && (v.j.get<int64_t>() % 2 != 0) == (t == "odd");
    if ((t == "equalto" || t == "eq" || t == "sameas") && a.size() == 1) return v.j == a[0].j;
    fail_at(n.pos, "unsupported test '" + t + "'");
  }

  std::vector<std::map<std::string, Val>> scopes_;
};

}  // namespace

struct ChatTemplate::Impl {
  std::vector<StmtP> body;
};

ChatTemplate::ChatTemplate(const std::string& source) : impl_(std::make_unique<Impl>()) {
  impl_->body = parse_template(source);
}
ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const nlohmann::json& context) const {
  std::string out;
  Renderer(context).run(impl_->body, out);
  return out;
}

}  // namespace rlx::models
