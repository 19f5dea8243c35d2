// WGSL compute (webgpu). The kernel families write C-like text (declarations, ternaries, function
// macros, GLSL-style casts); WGSL has none of these, so finish() translates the body: a macro
// expander, a parser for the C subset the families emit, and a WGSL writer (`var`/`let`
// declarations, `select` for ?:, braces on every branch, i32/f32 spellings). The prelude is WGSL
// from the start. Buffers are `array<u32>` (32-bit dtypes by bitcast) or, when written with
// 8/16-bit elements, `array<atomic<u32>>` (neighbours share a word: atomicAnd/atomicOr), so no
// 8/16-bit storage feature is needed; arithmetic is f32/i32 (WGSL has no f64 or 64-bit integers:
// i64 buffers are word pairs read through the low word, convert only, as GLSL).
#include <cctype>
#include <map>
#include <set>
#include <sstream>

#include "codegen/renderer.h"

namespace rlx::codegen {

namespace {

const char* kHelpers = R"(fn isnan_(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn nan_f() -> f32 { var u = 0x7fc00000u; return bitcast<f32>(u); }
fn inf_f() -> f32 { var u = 0x7f800000u; return bitcast<f32>(u); }
fn erf_(x: f32) -> f32 {  // Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), as the GLSL kernels
  let t = 1.0 / (1.0 + 0.3275911 * abs(x));
  let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-x * x);
  return select(y, -y, x < 0.0);
}
fn fmod_(a: f32, b: f32) -> f32 {  // C fmod: truncated quotient, result has the sign of a
  var r = fma(-b, trunc(a / b), a);
  if (r != 0.0 && sign(r) != sign(a)) { r += abs(b) * sign(a); }
  if (abs(r) >= abs(b)) { r -= abs(b) * sign(a); }
  return r;
}
fn f2h(f: f32) -> u32 {  // f32 -> f16 bits, round to nearest even
  let x = bitcast<u32>(f);
  let s = (x >> 16u) & 0x8000u;
  let e = (x >> 23u) & 0xffu;
  var m = x & 0x7fffffu;
  if (e == 255u) { return s | 0x7c00u | select(0u, 0x200u, m != 0u); }
  let ee = i32(e) - 112;
  if (ee >= 31) { return s | 0x7c00u; }
  if (ee <= 0) {
    if (ee < -10) { return s; }
    m |= 0x800000u;
    let sh = u32(14 - ee);
    var h = m >> sh;
    let rem = m & ((1u << sh) - 1u);
    let hf = 1u << (sh - 1u);
    if (rem > hf || (rem == hf && (h & 1u) != 0u)) { h++; }
    return s | h;
  }
  var h = (u32(ee) << 10u) | (m >> 13u);
  let rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u)) { h++; }
  return s | h;
}
fn f2bf(f: f32) -> u32 {  // f32 -> bf16 bits, round to nearest even
  let x = bitcast<u32>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) { return (x >> 16u) | 0x40u; }
  return (x + 0x7fffu + ((x >> 16u) & 1u)) >> 16u;
}
)";

std::string wtype(const std::string& c) {
  if (c == "int") return "i32";
  if (c == "float") return "f32";
  if (c == "uint") return "u32";
  if (c == "bool") return "bool";
  fail("[codegen] wgsl has no type '", c, "' (no f64 or 64-bit integers)");
}

// ---- the C-subset translator ----

struct Tok {
  enum Kind { Id, Num, Punct } kind;
  std::string s;
};

std::vector<Tok> lex(const std::string& src) {
  static const char* kMulti[] = {"<<=", ">>=", "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=",
                                 "<<",  ">>",  "<=", ">=", "==", "!=", "&&", "||"};
  std::vector<Tok> out;
  size_t i = 0;
  while (i < src.size()) {
    char c = src[i];
    if (std::isspace(static_cast<unsigned char>(c))) { ++i; continue; }
    if (c == '/' && i + 1 < src.size() && src[i + 1] == '/') {
      while (i < src.size() && src[i] != '\n') ++i;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < src.size() && (std::isalnum(static_cast<unsigned char>(src[j])) || src[j] == '_')) ++j;
      out.push_back({Tok::Id, src.substr(i, j - i)});
      i = j;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || (c == '.' && i + 1 < src.size() && std::isdigit(static_cast<unsigned char>(src[i + 1])))) {
      size_t j = i;
      while (j < src.size() && (std::isalnum(static_cast<unsigned char>(src[j])) || src[j] == '.' ||
                                ((src[j] == '+' || src[j] == '-') && (src[j - 1] == 'e' || src[j - 1] == 'E') &&
                                 src.compare(i, 2, "0x") != 0)))
        ++j;
      out.push_back({Tok::Num, src.substr(i, j - i)});
      i = j;
      continue;
    }
    std::string p(1, c);
    for (const char* m : kMulti)
      if (src.compare(i, std::char_traits<char>::length(m), m) == 0) {
        p = m;
        break;
      }
    out.push_back({Tok::Punct, p});
    i += p.size();
  }
  return out;
}

struct Macro {
  bool func = false;
  std::vector<std::string> params;
  std::vector<Tok> body;
};

std::vector<Tok> expand(const std::vector<Tok>& in, const std::map<std::string, Macro>& macros, int depth = 0) {
  RLX_CHECK(depth < 32, "[codegen] wgsl: macro expansion too deep");
  std::vector<Tok> out;
  for (size_t i = 0; i < in.size(); ++i) {
    auto it = in[i].kind == Tok::Id ? macros.find(in[i].s) : macros.end();
    if (it == macros.end()) { out.push_back(in[i]); continue; }
    const Macro& m = it->second;
    if (!m.func) {
      auto e = expand(m.body, macros, depth + 1);
      out.insert(out.end(), e.begin(), e.end());
      continue;
    }
    if (i + 1 >= in.size() || in[i + 1].s != "(") { out.push_back(in[i]); continue; }
    std::vector<std::vector<Tok>> args(1);
    int lvl = 0;
    size_t j = i + 2;
    for (; j < in.size(); ++j) {
      const std::string& s = in[j].s;
      if (in[j].kind == Tok::Punct && (s == "(" || s == "[")) ++lvl;
      if (in[j].kind == Tok::Punct && (s == ")" || s == "]")) {
        if (lvl == 0) break;
        --lvl;
      }
      if (lvl == 0 && in[j].kind == Tok::Punct && s == ",") args.emplace_back();
      else args.back().push_back(in[j]);
    }
    RLX_CHECK(j < in.size() && args.size() == m.params.size(), "[codegen] wgsl: bad use of macro ", it->first);
    std::vector<Tok> sub;
    for (auto& t : m.body) {
      size_t p = 0;
      while (p < m.params.size() && !(t.kind == Tok::Id && t.s == m.params[p])) ++p;
      if (p < m.params.size()) {
        sub.push_back({Tok::Punct, "("});
        sub.insert(sub.end(), args[p].begin(), args[p].end());
        sub.push_back({Tok::Punct, ")"});
      } else {
        sub.push_back(t);
      }
    }
    auto e = expand(sub, macros, depth + 1);
    out.insert(out.end(), e.begin(), e.end());
    i = j;
  }
  return out;
}

bool is_ctype(const std::string& s) { return s == "int" || s == "float" || s == "uint" || s == "bool" || s == "double" || s == "long"; }

class Translator {
 public:
  Translator(std::vector<Tok> t, int local) : t_(std::move(t)), local_(local) {
    static const char* kAssign[] = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=", "++", "--"};
    for (size_t i = 0; i < t_.size(); ++i) {
      if (t_[i].kind != Tok::Punct) continue;
      for (const char* a : kAssign) {
        if (t_[i].s != a) continue;
        const bool declared = t_[i].s == "=" && i > 1 && t_[i - 2].kind == Tok::Id && is_ctype(t_[i - 2].s);  // `T x = e`
        if (i > 0 && t_[i - 1].kind == Tok::Id && !declared) assigned_.insert(t_[i - 1].s);
        if ((t_[i].s == "++" || t_[i].s == "--") && i + 1 < t_.size() && t_[i + 1].kind == Tok::Id) assigned_.insert(t_[i + 1].s);
      }
    }
    // a `T x;` declaration without initializer is assigned later
    for (size_t i = 0; i + 2 < t_.size(); ++i)
      if (t_[i].kind == Tok::Id && is_ctype(t_[i].s) && t_[i + 1].kind == Tok::Id && t_[i + 2].s == ";") assigned_.insert(t_[i + 1].s);
  }
  std::string run() {
    std::string s;
    while (p_ < t_.size()) s += stmt(1);
    return s;
  }

 private:
  std::vector<Tok> t_;
  size_t p_ = 0;
  int local_;
  std::set<std::string> assigned_;

  const std::string& peek(size_t k = 0) const {
    static const std::string end;
    return p_ + k < t_.size() ? t_[p_ + k].s : end;
  }
  bool accept(const std::string& s) {
    if (p_ < t_.size() && t_[p_].kind != Tok::Num && t_[p_].s == s) { ++p_; return true; }
    return false;
  }
  void expect(const std::string& s) {
    RLX_CHECK(accept(s), "[codegen] wgsl: expected '", s, "' near token ", p_, " ('", peek(), "')");
  }
  static std::string name(const std::string& s) {
    static const std::set<std::string> kReserved = {"in", "ref", "var", "let", "fn", "loop", "mod", "type", "self", "set",
                                                    "target", "filter", "match", "from", "get", "meta", "move", "new",
                                                    "of", "pass", "patch", "use", "where", "with", "shared", "const"};
    return kReserved.count(s) ? s + "_" : s;
  }
  std::string grp() const { return "i32(rlx_wg.x + rlx_wg.y * rlx_nwg.x)"; }

  std::string decl(bool in_for) {
    std::string ty = wtype(t_[p_++].s), out;
    for (;;) {
      RLX_CHECK(p_ < t_.size() && t_[p_].kind == Tok::Id, "[codegen] wgsl: expected a name after a type");
      std::string n = t_[p_++].s;
      std::string kw = assigned_.count(n) || in_for ? "var " : "let ";
      if (accept("=")) out += kw + name(n) + ": " + ty + " = " + expr();
      else out += "var " + name(n) + ": " + ty;
      if (!accept(",")) break;
      RLX_CHECK(!in_for, "[codegen] wgsl: one declaration per for-init");
      out += "; ";
    }
    return out;
  }
  // assignment, increment, or call (no trailing ';')
  std::string simple() {
    if (peek() == "++" || peek() == "--") {
      std::string op = t_[p_++].s;
      return unary() + op;
    }
    std::string lhs = unary();
    static const char* kOps[] = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="};
    for (const char* o : kOps)
      if (accept(o)) return lhs + " " + o + " " + expr();
    if (accept("++")) return lhs + "++";
    if (accept("--")) return lhs + "--";
    return lhs;  // a call
  }
  std::string block_of(int ind) {  // a statement as a braced block
    if (peek() == "{") return stmt(ind);
    std::string pad(static_cast<size_t>(ind) * 2, ' ');
    std::string inner = stmt(ind + 1);
    return "{\n" + inner + pad + "}\n";
  }
  std::string stmt(int ind) {
    std::string pad(static_cast<size_t>(ind) * 2, ' ');
    if (accept(";")) return "";
    if (accept("{")) {
      std::string s = "{\n";
      while (!accept("}")) {
        RLX_CHECK(p_ < t_.size(), "[codegen] wgsl: unbalanced braces");
        s += stmt(ind + 1);
      }
      return s + pad + "}\n";
    }
    if (accept("if")) {
      expect("(");
      std::string c = expr();
      expect(")");
      std::string s = "if (" + c + ") " + block_of(ind);
      if (accept("else")) {
        if (!s.empty() && s.back() == '\n') s.pop_back();
        s += " else " + block_of(ind);
      }
      return pad + s;
    }
    if (accept("for")) {
      expect("(");
      std::string init, cond, step;
      if (!accept(";")) {
        init = is_ctype(peek()) ? decl(true) : simple();
        expect(";");
      }
      if (!accept(";")) {
        cond = expr();
        expect(";");
      }
      if (!accept(")")) {
        step = simple();
        expect(")");
      }
      return pad + "for (" + init + "; " + cond + "; " + step + ") " + block_of(ind);
    }
    if (accept("return")) {
      expect(";");
      return pad + "return;\n";
    }
    if (accept("BARRIER")) {
      expect(";");
      return pad + "workgroupBarrier();\n";
    }
    std::string s = is_ctype(peek()) && p_ + 1 < t_.size() && t_[p_ + 1].kind == Tok::Id ? decl(false) : simple();
    expect(";");
    return pad + s + ";\n";
  }

  // ---- expressions, fully parenthesized (WGSL forbids mixing some operators without them) ----
  std::string expr() {
    std::string c = binary(0);
    if (!accept("?")) return c;
    std::string a = expr();
    expect(":");
    std::string b = expr();
    return "select(" + b + ", " + a + ", " + c + ")";
  }
  static int prec(const std::string& op) {
    static const std::map<std::string, int> p = {{"||", 1}, {"&&", 2}, {"|", 3},  {"^", 4},  {"&", 5},  {"==", 6},
                                                 {"!=", 6}, {"<", 7},  {"<=", 7}, {">", 7},  {">=", 7}, {"<<", 8},
                                                 {">>", 8}, {"+", 9},  {"-", 9},  {"*", 10}, {"/", 10}, {"%", 10}};
    auto it = p.find(op);
    return it == p.end() ? -1 : it->second;
  }
  std::string binary(int min) {
    std::string l = unary();
    for (;;) {
      if (p_ >= t_.size() || t_[p_].kind != Tok::Punct) return l;
      int pr = prec(peek());
      if (pr < 0 || pr <= min - 1 || pr < min) return l;
      std::string op = t_[p_++].s;
      std::string r = binary(pr + 1);
      l = "(" + l + " " + op + " " + r + ")";
    }
  }
  std::string unary() {
    for (const char* u : {"-", "!", "~", "+"})
      if (accept(u)) {
        std::string x = unary();
        return std::string(u) == "+" ? x : "(" + std::string(u) + x + ")";
      }
    std::string e = primary();
    while (accept("[")) {
      std::string i = expr();
      expect("]");
      e += "[" + i + "]";
    }
    return e;
  }
  std::vector<std::string> args() {
    std::vector<std::string> a;
    expect("(");
    if (accept(")")) return a;
    do a.push_back(expr());
    while (accept(","));
    expect(")");
    return a;
  }
  static std::string join(const std::vector<std::string>& a) {
    std::string s;
    for (size_t i = 0; i < a.size(); ++i) s += (i ? ", " : "") + a[i];
    return s;
  }
  std::string primary() {
    RLX_CHECK(p_ < t_.size(), "[codegen] wgsl: unexpected end of kernel");
    Tok t = t_[p_++];
    if (t.kind == Tok::Num) {
      RLX_CHECK(t.s.back() != 'L' && t.s.back() != 'l', "[codegen] wgsl has no 64-bit integer literal ", t.s);
      return t.s;
    }
    if (t.kind == Tok::Punct) {
      RLX_CHECK(t.s == "(", "[codegen] wgsl: unexpected '", t.s, "'");
      std::string e = expr();
      expect(")");
      return "(" + e + ")";
    }
    const std::string& s = t.s;
    if (s == "GRP") return grp();
    if (s == "LID") return "i32(rlx_li.x)";
    if (s == "GID") return "(" + grp() + " * " + std::to_string(local_) + " + i32(rlx_li.x))";
    if (s == "NAN_F") return "nan_f()";
    if (s == "INF_F") return "inf_f()";
    if (s == "true" || s == "false") return s;
    if (peek() != "(") return name(s);
    if (is_ctype(s)) {
      auto a = args();
      RLX_CHECK(a.size() == 1, "[codegen] wgsl: a conversion takes one value");
      return wtype(s) + "(" + a[0] + ")";
    }
    static const std::map<std::string, std::string> kFn = {
        {"rsqrt", "inverseSqrt"}, {"rint", "round"}, {"fabs", "abs"}, {"isnan", "isnan_"}, {"erf", "erf_"}, {"fmod", "fmod_"}};
    auto it = kFn.find(s);
    return (it == kFn.end() ? s : it->second) + "(" + join(args()) + ")";
  }
};

// the C-like body (after the entry point's opening line) as WGSL
std::string translate(const std::string& body, int local) {
  std::map<std::string, Macro> macros;
  std::string code;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("#define ", 0) != 0) {
      code += line + "\n";
      continue;
    }
    auto toks = lex(line.substr(8));
    RLX_CHECK(!toks.empty() && toks[0].kind == Tok::Id, "[codegen] wgsl: bad #define");
    Macro m;
    size_t i = 1;
    // function-like only when '(' follows the name directly
    size_t after = 8 + toks[0].s.size();
    if (after < line.size() && line[after] == '(') {
      m.func = true;
      for (i = 2; i < toks.size() && toks[i].s != ")"; ++i)
        if (toks[i].s != ",") m.params.push_back(toks[i].s);
      ++i;
    }
    m.body.assign(toks.begin() + static_cast<std::ptrdiff_t>(i), toks.end());
    macros[toks[0].s] = m;
  }
  return Translator(expand(lex(code), macros), local).run();
}

const char* kBodyMark = "// body\n";

class WgslRenderer : public CLikeRenderer {
 public:
  std::string language() const override { return "wgsl"; }
  std::string ctype(DType t) const override {
    switch (t) {
      case DType::f32: case DType::f16: case DType::bf16: return "float";
      case DType::i8: case DType::u8: case DType::i16: case DType::i32: case DType::boolean: case DType::i64: return "int";
      default: return "";
    }
  }

 protected:
  std::string cast(const std::string& type, const std::string& e) const override { return type + "(" + e + ")"; }

  static bool narrow(DType t) { return dtype_size(t) < 4; }

  std::string prelude(const std::vector<KernelArg>& args) const override {
    std::ostringstream os;
    os << kHelpers;
    for (size_t i = 0; i < args.size(); ++i) {
      const DType t = args[i].dtype;
      const bool w = args[i].written, atomic = w && narrow(t);
      std::string b = "rlx_b" + std::to_string(i), I = std::to_string(i);
      os << "@group(0) @binding(" << i << ") var<storage, " << (w ? "read_write" : "read") << "> " << b << ": array<"
         << (atomic ? "atomic<u32>" : "u32") << ">;\n";
      const std::string word = atomic ? "atomicLoad(&" + b + "[i >> 1u])" : b + "[i >> 1u]";
      const std::string byte = atomic ? "atomicLoad(&" + b + "[i >> 2u])" : b + "[i >> 2u]";
      auto ld = [&](const std::string& ty, const std::string& e) {
        os << "fn LD" << I << "(i: i32) -> " << ty << " { return " << e << "; }\n";
      };
      auto st_narrow = [&](int shift, const char* mask, const char* width, const std::string& v, const std::string& vt) {
        if (!w) return;
        os << "fn ST" << I << "(i: i32, v: " << vt << ") { let s = u32(i & " << ((1 << shift) - 1) << ") * " << width
           << "; atomicAnd(&" << b << "[i >> " << shift << "u], ~(" << mask << " << s)); atomicOr(&" << b << "[i >> "
           << shift << "u], (" << v << " & " << mask << ") << s); }\n";
      };
      switch (t) {
        case DType::f32:
          ld("f32", "bitcast<f32>(" + b + "[i])");
          if (w) os << "fn ST" << I << "(i: i32, v: f32) { " << b << "[i] = bitcast<u32>(v); }\n";
          break;
        case DType::i32:
          ld("i32", "bitcast<i32>(" + b + "[i])");
          if (w) os << "fn ST" << I << "(i: i32, v: i32) { " << b << "[i] = bitcast<u32>(v); }\n";
          break;
        case DType::i64:
          ld("i32", "bitcast<i32>(" + b + "[2 * i])");
          if (w)
            os << "fn ST" << I << "(i: i32, v: i32) { " << b << "[2 * i] = bitcast<u32>(v); " << b
               << "[2 * i + 1] = bitcast<u32>(v >> 31u); }\n";
          break;
        case DType::f16:
          ld("f32", "unpack2x16float(" + word + ")[u32(i & 1)]");
          st_narrow(1, "0xffffu", "16u", "f2h(v)", "f32");
          break;
        case DType::bf16:
          ld("f32", "bitcast<f32>(((" + word + " >> (u32(i & 1) * 16u)) & 0xffffu) << 16u)");
          st_narrow(1, "0xffffu", "16u", "f2bf(v)", "f32");
          break;
        case DType::i16:
          ld("i32", "bitcast<i32>(" + word + " << (16u - u32(i & 1) * 16u)) >> 16u");
          st_narrow(1, "0xffffu", "16u", "bitcast<u32>(v)", "i32");
          break;
        case DType::i8:
          ld("i32", "bitcast<i32>(" + byte + " << (24u - u32(i & 3) * 8u)) >> 24u");
          st_narrow(2, "0xffu", "8u", "bitcast<u32>(v)", "i32");
          break;
        case DType::u8: case DType::boolean:
          ld("i32", "i32((" + byte + " >> (u32(i & 3) * 8u)) & 0xffu)");
          st_narrow(2, "0xffu", "8u", "bitcast<u32>(v)", "i32");
          break;
        default: fail("[codegen] wgsl has no ", dtype_name(t), " buffers");
      }
    }
    return os.str();
  }
  std::string kernel_open(const RenderedKernel& k, const std::string& shared) const override {
    return shared + "@compute @workgroup_size(" + std::to_string(k.local) +
           ")\nfn main(@builtin(workgroup_id) rlx_wg: vec3<u32>, @builtin(num_workgroups) rlx_nwg: vec3<u32>, "
           "@builtin(local_invocation_id) rlx_li: vec3<u32>) {\n" + kBodyMark;
  }
  std::string shared_decl(const std::string& type, const std::string& name, int n) const override {
    return "var<workgroup> " + name + ": array<" + wtype(type) + ", " + std::to_string(n) + ">;\n";
  }
  bool shared_in_body() const override { return false; }

  void finish(RenderedKernel& k) const override {
    size_t at = k.source.find(kBodyMark);
    RLX_CHECK(at != std::string::npos, "[codegen] wgsl: kernel without a body mark");
    at += std::char_traits<char>::length(kBodyMark);
    std::string body = k.source.substr(at);
    size_t close = body.rfind('}');  // the entry point's closing brace
    body = body.substr(0, close);
    k.source = k.source.substr(0, at) + translate(body, k.local) + "}\n";
  }
};

}  // namespace

std::unique_ptr<CLikeRenderer> make_wgsl_renderer() { return std::make_unique<WgslRenderer>(); }

}  // namespace rlx::codegen
