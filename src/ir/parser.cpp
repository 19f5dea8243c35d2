// Reads the .rlx text form (docs/text-format.md): a hand-written lexer and recursive-descent parser.
// Nodes go through Graph::add_node, so every shape rule runs; declared types must equal inferred ones.
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "rlx/text.h"

namespace rlx {

namespace {

enum class Tok {
  End,
  Ident,
  Value,
  Global,
  Int,
  Float,
  Str,
  LParen,
  RParen,
  LBrace,
  RBrace,
  LBrack,
  RBrack,
  Comma,
  Colon,
  Equal
};

const char* tok_name(Tok t) {
  switch (t) {
    case Tok::End:
      return "end of input";
    case Tok::Ident:
      return "identifier";
    case Tok::Value:
      return "%value";
    case Tok::Global:
      return "@name";
    case Tok::Int:
      return "integer";
    case Tok::Float:
      return "float";
    case Tok::Str:
      return "string";
    case Tok::LParen:
      return "'('";
    case Tok::RParen:
      return "')'";
    case Tok::LBrace:
      return "'{'";
    case Tok::RBrace:
      return "'}'";
    case Tok::LBrack:
      return "'['";
    case Tok::RBrack:
      return "']'";
    case Tok::Comma:
      return "','";
    case Tok::Colon:
      return "':'";
    case Tok::Equal:
      return "'='";
  }
  return "?";
}

struct Token {
  Tok kind = Tok::End;
  std::string text;  // identifier / name / decoded string / number spelling
  int64_t i = 0;
  double f = 0;
  int line = 1, col = 1;
};

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_char(char c) { return is_alpha(c) || is_digit(c) || c == '.'; }

class Parser {
 public:
  Parser(const std::string& text, const std::string& file) : src_(text), file_(file) {}

  Graph parse() {
    next();
    expect_ident("graph");
    if (tok_.kind != Tok::Global) error("expected '@name' after 'graph', got " + describe());
    g_.name = tok_.text;
    next();
    expect(Tok::LParen);
    if (tok_.kind != Tok::RParen) {
      for (;;) {
        parse_param();
        if (tok_.kind != Tok::Comma) break;
        next();
      }
    }
    expect(Tok::RParen);
    expect(Tok::LBrace);
    for (;;) {
      if (tok_.kind == Tok::Ident && tok_.text == "return") {
        parse_return();
        break;
      }
      if (tok_.kind == Tok::RBrace) error("missing 'return' before '}'");
      if (tok_.kind == Tok::End) error("missing '}' and 'return' at end of input");
      parse_node();
    }
    if (tok_.kind == Tok::End) error("missing '}' at end of input");
    expect(Tok::RBrace);
    if (tok_.kind != Tok::End) error("unexpected " + describe() + " after the graph's closing '}'");
    return std::move(g_);
  }

 private:
  // ---- errors ----
  [[noreturn]] void error_at(int line, int col, const std::string& msg) const {
    fail("[parse] ", file_, ":", line, ":", col, ": ", msg);
  }
  [[noreturn]] void error(const std::string& msg) const { error_at(tok_.line, tok_.col, msg); }
  std::string describe() const {
    switch (tok_.kind) {
      case Tok::Ident:
        return "'" + tok_.text + "'";
      case Tok::Value:
        return "'%" + tok_.text + "'";
      case Tok::Global:
        return "'@" + tok_.text + "'";
      case Tok::Int:
      case Tok::Float:
        return "number '" + tok_.text + "'";
      case Tok::Str:
        return "string";
      default:
        return tok_name(tok_.kind);
    }
  }

  // ---- lexer ----
  char peek(size_t k = 0) const { return pos_ + k < src_.size() ? src_[pos_ + k] : '\0'; }
  void advance() {
    if (pos_ >= src_.size()) return;
    if (src_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }

  void skip_space() {
    while (pos_ < src_.size()) {
      char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        advance();
      } else if (c == '#') {
        while (pos_ < src_.size() && src_[pos_] != '\n') advance();
      } else {
        break;
      }
    }
  }

  // Body of a "..." literal; the opening quote is at pos_.
  std::string lex_string() {
    int l = line_, c = col_;
    advance();
    std::string s;
    for (;;) {
      if (pos_ >= src_.size() || peek() == '\n') error_at(l, c, "unterminated string");
      char ch = peek();
      if (ch == '"') {
        advance();
        return s;
      }
      if (ch != '\\') {
        s += ch;
        advance();
        continue;
      }
      int el = line_, ec = col_;
      advance();
      char e = peek();
      switch (e) {
        case '"':
          s += '"';
          break;
        case '\\':
          s += '\\';
          break;
        case 'n':
          s += '\n';
          break;
        case 't':
          s += '\t';
          break;
        case 'r':
          s += '\r';
          break;
        case 'x': {
          auto hex = [](char h) {
            if (h >= '0' && h <= '9') return h - '0';
            if (h >= 'a' && h <= 'f') return h - 'a' + 10;
            if (h >= 'A' && h <= 'F') return h - 'A' + 10;
            return -1;
          };
          int hi = hex(peek(1)), lo = hex(peek(2));
          if (hi < 0 || lo < 0) error_at(el, ec, "bad escape '\\x' in string (needs two hex digits)");
          s += static_cast<char>(hi * 16 + lo);
          advance();
          advance();
          break;
        }
        default:
          if (pos_ >= src_.size() || e == '\n') error_at(l, c, "unterminated string");
          error_at(el, ec, std::string("bad escape '\\") + e + "' in string");
      }
      advance();
    }
  }

  void lex_number() {
    size_t start = pos_;
    bool is_float = false;
    if (peek() == '-') advance();
    if (peek() == 'i' && peek(1) == 'n' && peek(2) == 'f' && !is_name_char(peek(3))) {  // "-inf"
      advance();
      advance();
      advance();
      tok_.kind = Tok::Float;
      tok_.text = "-inf";
      tok_.f = -std::numeric_limits<double>::infinity();
      return;
    }
    if (!is_digit(peek())) error("bad number: '-' must be followed by digits or 'inf'");
    while (is_digit(peek())) advance();
    if (peek() == '.') {
      is_float = true;
      advance();
      while (is_digit(peek())) advance();
    }
    if (peek() == 'e' || peek() == 'E') {
      is_float = true;
      advance();
      if (peek() == '+' || peek() == '-') advance();
      if (!is_digit(peek())) error("bad number: exponent needs digits");
      while (is_digit(peek())) advance();
    }
    if (is_name_char(peek())) error("bad number: unexpected '" + std::string(1, peek()) + "' in number");
    tok_.text = src_.substr(start, pos_ - start);
    const char* b = src_.data() + start;
    const char* e = src_.data() + pos_;
    if (is_float) {
      tok_.kind = Tok::Float;
      auto r = std::from_chars(b, e, tok_.f);
      if (r.ec != std::errc() || r.ptr != e)
        error("bad number '" + tok_.text + "': out of range for a double");
    } else {
      tok_.kind = Tok::Int;
      auto r = std::from_chars(b, e, tok_.i);
      uint64_t u = 0;
      if (r.ec == std::errc::result_out_of_range && *b != '-' && std::from_chars(b, e, u).ptr == e &&
          std::from_chars(b, e, u).ec == std::errc()) {
        // Beyond int64 but within uint64 (u64 tensor data): lexed as a float token; a u64 tensor
        // re-reads the exact digits, everywhere else it is not an integer.
        tok_.kind = Tok::Float;
        std::from_chars(b, e, tok_.f);
        return;
      }
      if (r.ec != std::errc() || r.ptr != e) error("bad number '" + tok_.text + "': integer out of range");
      std::from_chars(b, e, tok_.f);  // the same spelling as a double: keeps "-0" negative in float data
    }
  }

  // `%name`, `%"name"`, `@name`, `@"name"`.
  std::string lex_sigil_name(char sigil) {
    advance();
    if (peek() == '"') {
      std::string s = lex_string();
      if (s.empty() && sigil == '%') error("empty value name");
      return s;
    }
    size_t start = pos_;
    while (is_name_char(peek())) advance();
    if (pos_ == start) error(std::string("expected a name after '") + sigil + "'");
    return src_.substr(start, pos_ - start);
  }

  void next() {
    skip_space();
    tok_ = Token{};
    tok_.line = line_;
    tok_.col = col_;
    if (pos_ >= src_.size()) return;
    char c = peek();
    auto single = [&](Tok k) {
      tok_.kind = k;
      advance();
    };
    switch (c) {
      case '(':
        return single(Tok::LParen);
      case ')':
        return single(Tok::RParen);
      case '{':
        return single(Tok::LBrace);
      case '}':
        return single(Tok::RBrace);
      case '[':
        return single(Tok::LBrack);
      case ']':
        return single(Tok::RBrack);
      case ',':
        return single(Tok::Comma);
      case ':':
        return single(Tok::Colon);
      case '=':
        return single(Tok::Equal);
      case '"':
        tok_.text = lex_string();
        tok_.kind = Tok::Str;
        return;
      case '%':
        tok_.text = lex_sigil_name('%');
        tok_.kind = Tok::Value;
        return;
      case '@':
        tok_.text = lex_sigil_name('@');
        tok_.kind = Tok::Global;
        return;
      default:
        break;
    }
    if (c == '-' || is_digit(c)) return lex_number();
    if (is_alpha(c)) {
      size_t start = pos_;
      while (is_alpha(peek()) || is_digit(peek())) advance();
      tok_.kind = Tok::Ident;
      tok_.text = src_.substr(start, pos_ - start);
      return;
    }
    unsigned char uc = static_cast<unsigned char>(c);
    if (uc >= 0x20 && uc < 0x7f) error(std::string("bad token '") + c + "'");
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%02x", uc);
    error(std::string("bad token (byte ") + buf + ")");
  }

  // ---- helpers ----
  void expect(Tok k) {
    if (tok_.kind != k) error(std::string("expected ") + tok_name(k) + ", got " + describe());
    next();
  }
  void expect_ident(const char* word) {
    if (tok_.kind != Tok::Ident || tok_.text != word)
      error(std::string("expected '") + word + "', got " + describe());
    next();
  }

  DType parse_dtype_tok() {
    if (tok_.kind != Tok::Ident) error("expected a dtype, got " + describe());
    DType t;
    if (!parse_dtype(tok_.text, &t)) error("bad dtype '" + tok_.text + "'");
    next();
    return t;
  }

  // `[d, ...]` of a value type: ints >= 0, identifiers or strings (symbolic).
  Shape parse_type_shape() {
    expect(Tok::LBrack);
    Shape s;
    int64_t prod = 1;
    if (tok_.kind != Tok::RBrack) {
      for (;;) {
        if (tok_.kind == Tok::Int) {
          if (tok_.i < 0) error("negative dimension " + tok_.text);
          if (__builtin_mul_overflow(prod, tok_.i, &prod)) error("shape has too many elements");
          s.push_back(Dim(tok_.i));
        } else if (tok_.kind == Tok::Ident || tok_.kind == Tok::Str) {
          if (tok_.text.empty()) error("empty symbolic dimension");
          s.push_back(Dim(tok_.text));
        } else {
          error("expected a dimension (integer or symbol), got " + describe());
        }
        next();
        if (tok_.kind != Tok::Comma) break;
        next();
      }
    }
    expect(Tok::RBrack);
    return s;
  }

  ValueType parse_type() {
    ValueType t;
    t.dtype = parse_dtype_tok();
    if (tok_.kind != Tok::LBrack) error("expected '[' after dtype, got " + describe());
    t.shape = parse_type_shape();
    return t;
  }

  void define(const std::string& name, ValueId v, int line, int col) {
    auto [it, fresh] = names_.emplace(name, v);
    if (!fresh) error_at(line, col, "redefinition of value '%" + name + "'");
  }

  ValueId use() {
    if (tok_.kind != Tok::Value) error("expected a %value, got " + describe());
    auto it = names_.find(tok_.text);
    if (it == names_.end()) error("unknown value '%" + tok_.text + "'");
    next();
    return it->second;
  }

  void parse_param() {
    if (tok_.kind != Tok::Value) error("expected a graph input '%name', got " + describe());
    std::string name = tok_.text;
    int l = tok_.line, c = tok_.col;
    if (names_.count(name)) error("redefinition of value '%" + name + "'");
    next();
    expect(Tok::Colon);
    ValueType t = parse_type();
    ValueId v = g_.add_input(name, t.dtype, t.shape);
    define(name, v, l, c);
  }

  // ---- attributes ----
  bool at_float_word() const { return tok_.kind == Tok::Ident && (tok_.text == "inf" || tok_.text == "nan"); }
  double float_word() const {
    return tok_.text == "inf" ? std::numeric_limits<double>::infinity()
                              : std::numeric_limits<double>::quiet_NaN();
  }

  Attr parse_list() {
    expect(Tok::LBrack);
    enum { kInts, kFloats, kDims } mode = kInts;
    std::vector<int64_t> ints;
    std::vector<double> floats;
    Shape dims;
    if (tok_.kind != Tok::RBrack) {
      for (;;) {
        if (tok_.kind == Tok::Int) {
          ints.push_back(tok_.i);
          floats.push_back(tok_.f);
          dims.push_back(Dim(tok_.i));
        } else if (tok_.kind == Tok::Float || at_float_word()) {
          if (mode == kDims) error("list mixes symbolic dims and floats");
          mode = kFloats;
          floats.push_back(tok_.kind == Tok::Float ? tok_.f : float_word());
        } else if (tok_.kind == Tok::Ident || tok_.kind == Tok::Str) {
          if (mode == kFloats) error("list mixes symbolic dims and floats");
          if (tok_.text.empty()) error("empty symbolic dimension");
          mode = kDims;
          dims.push_back(Dim(tok_.text));
        } else {
          error("expected a list element (number or symbol), got " + describe());
        }
        next();
        if (tok_.kind != Tok::Comma) break;
        next();
      }
    }
    expect(Tok::RBrack);
    if (mode == kFloats) return Attr(floats);
    if (mode == kDims) return Attr(dims);
    return Attr(ints);
  }

  // `dtype[shape] [data]`; the data count is checked before any allocation.
  Attr parse_tensor(DType dt) {
    int l = tok_.line, c = tok_.col;
    expect(Tok::LBrack);
    std::vector<int64_t> shape;
    int64_t n = 1;
    if (tok_.kind != Tok::RBrack) {
      for (;;) {
        if (tok_.kind != Tok::Int) error("tensor dimensions must be static integers, got " + describe());
        if (tok_.i < 0) error("negative dimension " + tok_.text);
        if (__builtin_mul_overflow(n, tok_.i, &n)) error("tensor has too many elements");
        shape.push_back(tok_.i);
        next();
        if (tok_.kind != Tok::Comma) break;
        next();
      }
    }
    expect(Tok::RBrack);
    if (tok_.kind != Tok::LBrack) error("expected '[' starting the tensor data, got " + describe());
    next();
    struct Elem {
      bool is_int;
      int64_t i;  // u64 data: the value's 64 bits
      double f;
      float f32;  // read straight from the spelling, so shortest float text round-trips exactly
      int line, col;
      bool neg = false;  // spelled with a leading '-'
    };
    std::vector<Elem> data;
    if (tok_.kind != Tok::RBrack) {
      for (;;) {
        Elem e{false, 0, 0, 0, tok_.line, tok_.col};
        if (tok_.kind == Tok::Int || tok_.kind == Tok::Float) {
          e.is_int = tok_.kind == Tok::Int;
          e.i = tok_.i;
          e.f = tok_.f;
          e.neg = !tok_.text.empty() && tok_.text[0] == '-';
          uint64_t u = 0;
          const char* tb = tok_.text.data();
          if (dt == DType::u64 && !e.is_int && std::from_chars(tb, tb + tok_.text.size(), u).ptr == tb + tok_.text.size()) {
            e.is_int = true;  // a u64 literal past INT64_MAX
            e.i = static_cast<int64_t>(u);
          }
          const char* b = tok_.text.data();
          auto r = std::from_chars(b, b + tok_.text.size(), e.f32);
          if (r.ec != std::errc()) e.f32 = static_cast<float>(e.f);  // beyond float range: inf or 0
        } else if (at_float_word()) {
          e.f = float_word();
          e.f32 = static_cast<float>(e.f);
        } else if (tok_.kind == Tok::Ident && (tok_.text == "true" || tok_.text == "false")) {
          if (dt != DType::boolean)
            error("'" + tok_.text + "' in a " + std::string(dtype_name(dt)) + " tensor");
          e.is_int = true;
          e.i = tok_.text == "true";
          e.f = e.f32 = static_cast<float>(e.i);
        } else {
          error("expected a tensor element, got " + describe());
        }
        data.push_back(e);
        next();
        if (tok_.kind != Tok::Comma) break;
        next();
      }
    }
    expect(Tok::RBrack);
    if (dt == DType::c64 && n > INT64_MAX / 2) error_at(l, c, "tensor has too many elements");
    int64_t want = dt == DType::c64 ? 2 * n : n;
    if (static_cast<int64_t>(data.size()) != want)
      error_at(l, c,
               "tensor " + std::string(dtype_name(dt)) + " needs " + std::to_string(want) + " values, got " +
                   std::to_string(data.size()));
    Tensor t(dt, shape);
    for (int64_t k = 0; k < n; ++k) {
      const Elem& e = data[static_cast<size_t>(dt == DType::c64 ? 2 * k : k)];
      if (dt == DType::c64) {
        const Elem& im = data[static_cast<size_t>(2 * k + 1)];
        t.setc(k, {e.f32, im.f32});
      } else if (dt == DType::f64) {
        t.set(k, e.f);
      } else if (is_float(dt)) {
        t.set(k, e.f32);
      } else {
        if (!e.is_int)
          error_at(e.line, e.col, "non-integer value in a " + std::string(dtype_name(dt)) + " tensor");
        int64_t lo = 0, hi = 1;
        switch (dt) {
          case DType::i8:
            lo = INT8_MIN, hi = INT8_MAX;
            break;
          case DType::u8:
            lo = 0, hi = UINT8_MAX;
            break;
          case DType::i16:
            lo = INT16_MIN, hi = INT16_MAX;
            break;
          case DType::i32:
            lo = INT32_MIN, hi = INT32_MAX;
            break;
          case DType::i64:
            lo = INT64_MIN, hi = INT64_MAX;
            break;
          case DType::u16:
            lo = 0, hi = UINT16_MAX;
            break;
          case DType::u32:
            lo = 0, hi = UINT32_MAX;
            break;
          case DType::u64:  // e.i holds the 64 bits; a '-' spelling is out of range
            lo = INT64_MIN, hi = INT64_MAX;
            if (e.neg && e.i != 0) lo = 0;
            break;
          default:
            break;  // bool: 0 or 1
        }
        if (e.i < lo || e.i > hi)
          error_at(e.line, e.col,
                   "value " + std::to_string(e.i) + " out of range for " + std::string(dtype_name(dt)));
        t.set_int(k, e.i);
      }
    }
    return Attr(std::move(t));
  }

  Attr parse_attr_value() {
    switch (tok_.kind) {
      case Tok::Int: {
        Attr a(tok_.i);
        next();
        return a;
      }
      case Tok::Float: {
        Attr a(tok_.f);
        next();
        return a;
      }
      case Tok::Str: {
        Attr a(tok_.text);
        next();
        return a;
      }
      case Tok::LBrack:
        return parse_list();
      case Tok::Ident: {
        if (at_float_word()) {
          Attr a(float_word());
          next();
          return a;
        }
        DType t = parse_dtype_tok();
        if (tok_.kind == Tok::LBrack) return parse_tensor(t);
        return Attr(t);
      }
      default:
        error("expected an attribute value, got " + describe());
    }
  }

  Attrs parse_attrs() {
    Attrs attrs;
    expect(Tok::LBrace);
    if (tok_.kind == Tok::RBrace) {
      next();
      return attrs;
    }
    for (;;) {
      if (tok_.kind != Tok::Ident) error("expected an attribute name, got " + describe());
      std::string key = tok_.text;
      int l = tok_.line, c = tok_.col;
      next();
      expect(Tok::Equal);
      Attr a = parse_attr_value();
      if (!attrs.emplace(key, std::move(a)).second) error_at(l, c, "duplicate attribute '" + key + "'");
      if (tok_.kind != Tok::Comma) break;
      next();
    }
    if (tok_.kind != Tok::RBrace) error("expected ',' or '}' in attributes, got " + describe());
    next();
    return attrs;
  }

  // ---- statements ----
  void parse_node() {
    int line = tok_.line, col = tok_.col;
    struct Result {
      std::string name;
      int line, col;
    };
    std::vector<Result> results;
    for (;;) {
      if (tok_.kind != Tok::Value) error("expected '%name = op(...)' or 'return', got " + describe());
      results.push_back({tok_.text, tok_.line, tok_.col});
      next();
      if (tok_.kind != Tok::Comma) break;
      next();
    }
    expect(Tok::Equal);
    if (tok_.kind != Tok::Ident) error("expected an op name, got " + describe());
    OpKind op;
    if (!op_by_name(tok_.text, &op)) error("unknown op '" + tok_.text + "'");
    const OpInfo& info = op_info(op);
    int op_line = tok_.line, op_col = tok_.col;
    next();
    expect(Tok::LParen);
    std::vector<ValueId> ins;
    if (tok_.kind != Tok::RParen) {
      for (;;) {
        ins.push_back(use());
        if (tok_.kind != Tok::Comma) break;
        next();
      }
    }
    expect(Tok::RParen);
    int n_in = static_cast<int>(ins.size());
    if (n_in < info.min_inputs || (info.max_inputs >= 0 && n_in > info.max_inputs)) {
      std::string want = std::to_string(info.min_inputs);
      if (info.max_inputs != info.min_inputs)
        want += info.max_inputs < 0 ? " or more" : " to " + std::to_string(info.max_inputs);
      error_at(op_line, op_col,
               "wrong arity: '" + std::string(info.name) + "' takes " + want + " inputs, got " +
                   std::to_string(n_in));
    }
    if (static_cast<int>(results.size()) != info.num_outputs)
      error_at(line, col,
               "wrong arity: '" + std::string(info.name) + "' produces " + std::to_string(info.num_outputs) +
                   " results, got " + std::to_string(results.size()));
    Attrs attrs;
    if (tok_.kind == Tok::LBrace) attrs = parse_attrs();
    expect(Tok::Colon);
    std::vector<std::pair<ValueType, std::pair<int, int>>> declared;
    for (;;) {
      int l = tok_.line, c = tok_.col;
      declared.push_back({parse_type(), {l, c}});
      if (tok_.kind != Tok::Comma) break;
      next();
    }
    std::string loc;
    if (tok_.kind == Tok::Ident && tok_.text == "loc") {
      next();
      expect(Tok::LParen);
      if (tok_.kind != Tok::Str) error("expected a string in loc(...), got " + describe());
      loc = tok_.text;
      next();
      expect(Tok::RParen);
    }
    if (declared.size() != results.size())
      error_at(declared.front().second.first, declared.front().second.second,
               std::to_string(results.size()) + " results but " + std::to_string(declared.size()) +
                   " types declared");
    for (auto& r : results)
      if (names_.count(r.name)) error_at(r.line, r.col, "redefinition of value '%" + r.name + "'");
    for (size_t i = 0; i < results.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (results[i].name == results[j].name)
          error_at(results[i].line, results[i].col, "redefinition of value '%" + results[i].name + "'");

    std::vector<ValueId> outs;
    try {
      outs = g_.add_node(op, std::move(ins), std::move(attrs), loc);
    } catch (const Error& e) {
      error_at(op_line, op_col, e.what());
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      const ValueType& inf = g_.values[outs[i]].type;
      const ValueType& dec = declared[i].first;
      if (inf.dtype != dec.dtype || inf.shape != dec.shape) {
        auto ts = [](const ValueType& t) { return std::string(dtype_name(t.dtype)) + shape_str(t.shape); };
        error_at(
            declared[i].second.first, declared[i].second.second,
            "type mismatch for '%" + results[i].name + "': declared " + ts(dec) + ", inferred " + ts(inf));
      }
      g_.values[outs[i]].name = results[i].name;
      define(results[i].name, outs[i], results[i].line, results[i].col);
    }
  }

  void parse_return() {
    next();
    if (tok_.kind != Tok::Value) error("'return' needs at least one %value, got " + describe());
    for (;;) {
      g_.outputs.push_back(use());
      if (tok_.kind != Tok::Comma) break;
      next();
    }
  }

  const std::string& src_;
  std::string file_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
  Token tok_;
  Graph g_;
  std::map<std::string, ValueId> names_;
};

}  // namespace

Graph parse_graph(const std::string& text, const std::string& filename) {
  return Parser(text, filename).parse();
}

Graph load_graph_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail("[parse] cannot read '", path, "': is a directory");
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("[parse] cannot open '", path, "': ", std::strerror(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) fail("[parse] cannot read '", path, "'");
  return parse_graph(ss.str(), path);
}

}  // namespace rlx
