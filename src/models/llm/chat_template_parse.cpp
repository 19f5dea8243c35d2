// Chat-template lexer (tags, whitespace control, trim_blocks/lstrip_blocks) and recursive-descent
// parser to the AST in chat_template_ast.h.
#include <algorithm>
#include <cstring>

#include "models/llm/chat_template_ast.h"
#include "rlx/error.h"

namespace rlx::models::jinja {

void fail_at(Pos p, const std::string& msg) { fail("[chat-template] ", p.line, ":", p.col, ": ", msg); }

namespace {

// ---- lexer ---------------------------------------------------------------------------------------

struct Tok {
  enum Kind { Name, Str, Int, Float, Op, End } kind = End;
  std::string s;
  double num = 0;
  Pos pos;
};

struct Segment {
  enum Kind { Text, Expr, Stmt } kind;
  std::string text;
  std::vector<Tok> toks;
  Pos pos;
};

class Lexer {
 public:
  explicit Lexer(const std::string& s) : s_(s) {}

  std::vector<Segment> run() {
    std::vector<Segment> out;
    bool strip_next = false, trim_nl = false;
    while (i_ < s_.size()) {
      size_t open = find_open(i_);
      std::string text = s_.substr(i_, open - i_);
      Pos tpos = pos_;
      advance_to(open);
      if (trim_nl && !text.empty() && text[0] == '\n') text.erase(0, 1);
      if (strip_next) text.erase(0, text.find_first_not_of(" \t\r\n") == std::string::npos ? text.size() : text.find_first_not_of(" \t\r\n"));
      strip_next = trim_nl = false;
      if (open >= s_.size()) {
        push_text(out, text, tpos);
        break;
      }
      char kind = s_[open + 1];
      bool lstrip = open + 2 < s_.size() && s_[open + 2] == '-';
      if (lstrip) {
        size_t e = text.find_last_not_of(" \t\r\n");
        text.erase(e == std::string::npos ? 0 : e + 1);
      } else if (kind == '%' || kind == '#') {
        // lstrip_blocks: spaces and tabs between a line start (in the source) and a block tag go.
        size_t p = open;
        while (p > 0 && (s_[p - 1] == ' ' || s_[p - 1] == '\t')) --p;
        if (p == 0 || s_[p - 1] == '\n') text.erase(text.size() - std::min(text.size(), open - p));
      }
      push_text(out, text, tpos);
      Pos tag = pos_;
      advance_to(open + 2 + (lstrip ? 1 : 0));
      std::string close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
      if (kind == '#') {
        size_t e = s_.find(close, i_);
        if (e == std::string::npos) fail_at(tag, "unterminated comment");
        strip_next = e > 0 && s_[e - 1] == '-';
        advance_to(e + 2);
        trim_nl = true;
        continue;
      }
      Segment seg{kind == '{' ? Segment::Expr : Segment::Stmt, "", {}, tag};
      for (;;) {
        skip_space();
        if (i_ >= s_.size()) fail_at(tag, "unterminated tag (expected '" + close + "')");
        if (s_[i_] == '-' && s_.compare(i_ + 1, 2, close) == 0) {
          strip_next = true;
          advance_to(i_ + 3);
          break;
        }
        if (s_.compare(i_, 2, close) == 0) {
          advance_to(i_ + 2);
          break;
        }
        seg.toks.push_back(token());
      }
      seg.toks.push_back(Tok{Tok::End, "", 0, pos_});
      trim_nl = kind == '%';
      out.push_back(std::move(seg));
    }
    return out;
  }

 private:
  size_t find_open(size_t from) const {
    for (size_t p = s_.find('{', from); p != std::string::npos; p = s_.find('{', p + 1))
      if (p + 1 < s_.size() && (s_[p + 1] == '{' || s_[p + 1] == '%' || s_[p + 1] == '#')) return p;
    return s_.size();
  }
  void push_text(std::vector<Segment>& out, const std::string& t, Pos p) {
    if (!t.empty()) out.push_back(Segment{Segment::Text, t, {}, p});
  }
  void advance_to(size_t j) {
    for (; i_ < j && i_ < s_.size(); ++i_) {
      if (s_[i_] == '\n') ++pos_.line, pos_.col = 1;
      else ++pos_.col;
    }
  }
  void skip_space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) advance_to(i_ + 1);
  }
  Tok token() {
    Tok t;
    t.pos = pos_;
    char c = s_[i_];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i_;
      while (j < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[j])) || s_[j] == '_')) ++j;
      t.kind = Tok::Name;
      t.s = s_.substr(i_, j - i_);
      advance_to(j);
      return t;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i_;
      bool fl = false;
      while (j < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[j])) || (s_[j] == '.' && !fl && j + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[j + 1])))))
        fl |= s_[j++] == '.';
      t.kind = fl ? Tok::Float : Tok::Int;
      t.s = s_.substr(i_, j - i_);
      t.num = std::stod(t.s);
      advance_to(j);
      return t;
    }
    if (c == '\'' || c == '"') {
      size_t j = i_ + 1;
      std::string v;
      while (j < s_.size() && s_[j] != c) {
        if (s_[j] == '\\' && j + 1 < s_.size()) {
          char e = s_[++j];
          v += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
        } else {
          v += s_[j];
        }
        ++j;
      }
      if (j >= s_.size()) fail_at(pos_, "unterminated string");
      t.kind = Tok::Str;
      t.s = v;
      advance_to(j + 1);
      return t;
    }
    static const char* ops[] = {"==", "!=", "<=", ">=", "//", "**", "<", ">", "+", "-", "*", "/", "%", "~", "(",
                                ")", "[", "]", "{", "}", ",", ".", ":", "|", "="};
    for (const char* o : ops)
      if (s_.compare(i_, std::strlen(o), o) == 0) {
        t.kind = Tok::Op;
        t.s = o;
        advance_to(i_ + std::strlen(o));
        return t;
      }
    fail_at(pos_, std::string("unexpected character '") + c + "'");
  }

  const std::string& s_;
  size_t i_ = 0;
  Pos pos_;
};

class Parser {
 public:
  explicit Parser(std::vector<Segment> segs) : segs_(std::move(segs)) {}

  std::vector<StmtP> parse_all() {
    std::vector<StmtP> out = block({});
    if (seg_ < segs_.size()) fail_at(segs_[seg_].pos, "unexpected '" + keyword(segs_[seg_]) + "'");
    return out;
  }

 private:
  static std::string keyword(const Segment& s) { return s.toks.empty() ? "" : s.toks[0].s; }

  // Parses statements until a Stmt segment whose keyword is in `stops` (left unconsumed).
  std::vector<StmtP> block(const std::vector<std::string>& stops) {
    std::vector<StmtP> out;
    while (seg_ < segs_.size()) {
      Segment& s = segs_[seg_];
      if (s.kind == Segment::Text) {
        auto st = std::make_unique<Stmt>();
        st->kind = Stmt::Text;
        st->text = s.text;
        out.push_back(std::move(st));
        ++seg_;
        continue;
      }
      toks_ = &s.toks;
      t_ = 0;
      if (s.kind == Segment::Expr) {
        auto st = std::make_unique<Stmt>();
        st->kind = Stmt::Out;
        st->pos = s.pos;
        st->expr = expr();
        expect_end();
        out.push_back(std::move(st));
        ++seg_;
        continue;
      }
      std::string kw = keyword(s);
      for (auto& stop : stops)
        if (kw == stop) return out;
      ++seg_;
      next();
      if (kw == "if" || kw == "for") {
        if (open_.size() >= 100) fail_at(s.pos, "statements nested too deeply");
        open_.push_back(s.pos);
        out.push_back(kw == "if" ? parse_if(s.pos) : parse_for(s.pos));
        open_.pop_back();
      }
      else if (kw == "set") out.push_back(parse_set(s.pos));
      else if (kw == "generation" || kw == "endgeneration") expect_end();
      else fail_at(s.pos, "unsupported statement '" + kw + "'");
    }
    if (!stops.empty()) fail_at(open_.back(), "missing '{% " + stops.back() + " %}'");
    return out;
  }

  void enter_stmt() {  // positions on the current (stop) segment's tokens, after its keyword
    toks_ = &segs_[seg_].toks;
    t_ = 1;
    ++seg_;
  }

  StmtP parse_if(Pos p) {
    auto st = std::make_unique<Stmt>();
    st->kind = Stmt::If;
    st->pos = p;
    NodeP cond = expr();
    expect_end();
    for (;;) {
      std::vector<StmtP> body = block({"elif", "else", "endif"});
      st->branches.emplace_back(std::move(cond), std::move(body));
      std::string kw = keyword(segs_[seg_]);
      enter_stmt();
      if (kw == "endif") {
        expect_end();
        return st;
      }
      if (kw == "else") {
        expect_end();
        st->branches.emplace_back(nullptr, block({"endif"}));
        enter_stmt();
        expect_end();
        return st;
      }
      cond = expr();
      expect_end();
    }
  }

  StmtP parse_for(Pos p) {
    auto st = std::make_unique<Stmt>();
    st->kind = Stmt::For;
    st->pos = p;
    st->vars.push_back(name());
    while (accept(",")) st->vars.push_back(name());
    if (!(peek().kind == Tok::Name && peek().s == "in")) fail_at(peek().pos, "expected 'in' in for loop");
    next();
    st->expr = or_expr();
    if (peek().kind == Tok::Name && peek().s == "if") {
      next();
      st->filter = or_expr();
    }
    expect_end();
    st->body = block({"else", "endfor"});
    std::string kw = keyword(segs_[seg_]);
    enter_stmt();
    expect_end();
    if (kw == "else") {
      st->else_body = block({"endfor"});
      enter_stmt();
      expect_end();
    }
    return st;
  }

  StmtP parse_set(Pos p) {
    auto st = std::make_unique<Stmt>();
    st->kind = Stmt::Set;
    st->pos = p;
    st->vars.push_back(name());
    if (accept(".")) st->vars.push_back(name());
    if (!accept("=")) fail_at(peek().pos, "block {% set %} ... {% endset %} is not supported; expected '='");
    st->expr = expr();
    expect_end();
    return st;
  }

  const Tok& peek() const { return (*toks_)[t_]; }
  const Tok& next() { return (*toks_)[t_ < toks_->size() - 1 ? t_++ : t_]; }
  bool is_op(const char* o) const { return peek().kind == Tok::Op && peek().s == o; }
  bool is_kw(const char* k) const { return peek().kind == Tok::Name && peek().s == k; }
  bool accept(const char* o) {
    if (!is_op(o)) return false;
    next();
    return true;
  }
  void expect(const char* o) {
    if (!accept(o)) fail_at(peek().pos, std::string("expected '") + o + "', found '" + peek().s + "'");
  }
  void expect_end() {
    if (peek().kind != Tok::End) fail_at(peek().pos, "unexpected '" + peek().s + "'");
  }
  std::string name() {
    if (peek().kind != Tok::Name) fail_at(peek().pos, "expected a name, found '" + peek().s + "'");
    return next().s;
  }
  NodeP mk(Node::Kind k, Pos p, std::string n = "") {
    auto x = std::make_unique<Node>();
    x->kind = k;
    x->pos = p;
    x->name = std::move(n);
    return x;
  }
  NodeP bin(const std::string& op, Pos p, NodeP a, NodeP b) {
    NodeP x = mk(Node::Binary, p, op);
    x->kids.push_back(std::move(a));
    x->kids.push_back(std::move(b));
    return x;
  }

  // Nesting is bounded so a hostile template fails cleanly instead of exhausting the stack.
  struct Depth {
    Parser& p;
    explicit Depth(Parser& q) : p(q) {
      if (++p.depth_ > 200) fail_at(p.peek().pos, "expression nested too deeply");
    }
    ~Depth() { --p.depth_; }
  };

  NodeP expr() {
    Depth guard(*this);
    NodeP a = or_expr();
    if (is_kw("if")) {
      Pos p = next().pos;
      NodeP c = or_expr();
      NodeP e;
      if (is_kw("else")) {
        next();
        e = expr();
      } else {
        e = mk(Node::Lit, p);  // undefined-ish: renders as ""
        e->lit = "";
      }
      NodeP x = mk(Node::Cond, p);
      x->kids.push_back(std::move(c));
      x->kids.push_back(std::move(a));
      x->kids.push_back(std::move(e));
      return x;
    }
    return a;
  }
  NodeP or_expr() {
    NodeP a = and_expr();
    while (is_kw("or")) {
      Pos p = next().pos;
      a = bin("or", p, std::move(a), and_expr());
    }
    return a;
  }
  NodeP and_expr() {
    NodeP a = not_expr();
    while (is_kw("and")) {
      Pos p = next().pos;
      a = bin("and", p, std::move(a), not_expr());
    }
    return a;
  }
  NodeP not_expr() {
    Depth guard(*this);
    if (is_kw("not")) {
      Pos p = next().pos;
      NodeP x = mk(Node::Unary, p, "not");
      x->kids.push_back(not_expr());
      return x;
    }
    return compare();
  }
  NodeP compare() {
    NodeP a = concat();
    for (;;) {
      Pos p = peek().pos;
      if (peek().kind == Tok::Op && (peek().s == "==" || peek().s == "!=" || peek().s == "<" || peek().s == ">" ||
                                     peek().s == "<=" || peek().s == ">=")) {
        std::string op = next().s;
        a = bin(op, p, std::move(a), concat());
      } else if (is_kw("in")) {
        next();
        a = bin("in", p, std::move(a), concat());
      } else if (is_kw("not") && t_ + 1 < toks_->size() && (*toks_)[t_ + 1].s == "in") {
        next();
        next();
        a = bin("not in", p, std::move(a), concat());
      } else {
        return a;
      }
    }
  }
  NodeP concat() {
    NodeP a = sum();
    while (is_op("~")) {
      Pos p = next().pos;
      a = bin("~", p, std::move(a), sum());
    }
    return a;
  }
  NodeP sum() {
    NodeP a = product();
    while (is_op("+") || is_op("-")) {
      Pos p = peek().pos;
      std::string op = next().s;
      a = bin(op, p, std::move(a), product());
    }
    return a;
  }
  NodeP product() {
    NodeP a = unary();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      Pos p = peek().pos;
      std::string op = next().s;
      a = bin(op, p, std::move(a), unary());
    }
    return a;
  }
  NodeP unary() {
    Depth guard(*this);
    if (is_op("-")) {
      Pos p = next().pos;
      NodeP x = mk(Node::Unary, p, "-");
      x->kids.push_back(unary());
      return x;
    }
    NodeP a = postfix(primary());
    for (;;) {
      if (is_op("|")) {
        next();
        Pos p = peek().pos;
        NodeP f = mk(Node::Filter, p, name());
        f->kids.push_back(std::move(a));
        if (accept("(")) call_args(*f);
        a = std::move(f);
      } else if (is_kw("is")) {
        next();
        Pos p = peek().pos;
        bool neg = false;
        if (is_kw("not")) next(), neg = true;
        NodeP f = mk(Node::Test, p, name());
        f->negate = neg;
        f->kids.push_back(std::move(a));
        if (accept("(")) call_args(*f);
        else if (peek().kind == Tok::Str || peek().kind == Tok::Int) f->kids.push_back(primary()), f->kw.push_back("");
        a = std::move(f);
      } else {
        return a;
      }
    }
  }
  void call_args(Node& n) {
    while (!accept(")")) {
      std::string kw;
      if (peek().kind == Tok::Name && t_ + 1 < toks_->size() && (*toks_)[t_ + 1].s == "=") {
        kw = next().s;
        next();
      }
      n.kids.push_back(expr());
      n.kw.push_back(kw);
      if (!is_op(")")) expect(",");
    }
  }
  NodeP postfix(NodeP a) {
    for (;;) {
      Pos p = peek().pos;
      if (accept(".")) {
        NodeP x = mk(Node::Attr, p, name());
        x->kids.push_back(std::move(a));
        a = std::move(x);
      } else if (accept("[")) {
        NodeP lo, hi;
        if (!is_op(":")) lo = expr();
        if (accept(":")) {
          if (!is_op("]") && !is_op(":")) hi = expr();
          NodeP step;
          if (accept(":") && !is_op("]")) step = expr();
          expect("]");
          NodeP x = mk(Node::Slice, p);
          x->kids.push_back(std::move(a));
          x->kids.push_back(std::move(lo));
          x->kids.push_back(std::move(hi));
          x->kids.push_back(std::move(step));
          a = std::move(x);
        } else {
          expect("]");
          a = bin("[]", p, std::move(a), std::move(lo));
          a->kind = Node::Index;
        }
      } else if (accept("(")) {
        NodeP x = mk(Node::Call, p);
        x->kids.push_back(std::move(a));
        x->kw.push_back("");
        call_args(*x);
        a = std::move(x);
      } else {
        return a;
      }
    }
  }
  NodeP primary() {
    const Tok& t = peek();
    Pos p = t.pos;
    if (t.kind == Tok::Str) {
      NodeP x = mk(Node::Lit, p);
      x->lit = next().s;
      while (peek().kind == Tok::Str) x->lit = x->lit.get<std::string>() + next().s;  // adjacent literals join
      return x;
    }
    if (t.kind == Tok::Int || t.kind == Tok::Float) {
      NodeP x = mk(Node::Lit, p);
      x->lit = t.kind == Tok::Int ? json(static_cast<int64_t>(t.num)) : json(t.num);
      next();
      return x;
    }
    if (t.kind == Tok::Name) {
      std::string n = next().s;
      NodeP x = mk(Node::Lit, p);
      if (n == "true" || n == "True") x->lit = true;
      else if (n == "false" || n == "False") x->lit = false;
      else if (n == "none" || n == "None") x->lit = nullptr;
      else x = mk(Node::Name, p, n);
      return x;
    }
    if (accept("(")) {
      NodeP x = expr();
      if (is_op(",")) fail_at(p, "tuples are not supported");
      expect(")");
      return x;
    }
    if (accept("[")) {
      NodeP x = mk(Node::List, p);
      while (!accept("]")) {
        x->kids.push_back(expr());
        if (!is_op("]")) expect(",");
      }
      return x;
    }
    if (accept("{")) {
      NodeP x = mk(Node::Dict, p);
      while (!accept("}")) {
        x->kids.push_back(expr());
        expect(":");
        x->kids.push_back(expr());
        if (!is_op("}")) expect(",");
      }
      return x;
    }
    fail_at(p, t.kind == Tok::End ? "unexpected end of expression" : "unexpected '" + t.s + "'");
  }

  std::vector<Segment> segs_;
  std::vector<Pos> open_;
  int depth_ = 0;  // the if/for statements being parsed, for "missing endif" errors
  size_t seg_ = 0;
  const std::vector<Tok>* toks_ = nullptr;
  size_t t_ = 0;
};

}  // namespace

std::vector<StmtP> parse_template(const std::string& source) { return Parser(Lexer(source).run()).parse_all(); }

}  // namespace rlx::models::jinja
