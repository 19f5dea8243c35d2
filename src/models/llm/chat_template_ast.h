// Internal to the chat-template interpreter: the AST the parser builds and the renderer walks.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace rlx::models::jinja {

using json = nlohmann::json;

struct Pos {
  int line = 1, col = 1;
};

[[noreturn]] void fail_at(Pos p, const std::string& msg);

struct Node;
using NodeP = std::unique_ptr<Node>;
struct Node {
  enum Kind { Lit, Name, Attr, Index, Slice, Call, Filter, Test, Unary, Binary, Cond, List, Dict } kind;
  Pos pos;
  json lit;
  std::string name;          // Name / Attr / Filter / Test / operator
  std::vector<NodeP> kids;   // operands, call args
  std::vector<std::string> kw;  // keyword names for the trailing call args ("" = positional)
  bool negate = false;
};

struct Stmt;
using StmtP = std::unique_ptr<Stmt>;
struct Stmt {
  enum Kind { Text, Out, If, For, Set } kind;
  Pos pos;
  std::string text;
  NodeP expr;                           // Out / Set value / For iterable
  std::vector<std::pair<NodeP, std::vector<StmtP>>> branches;  // If: (cond or null for else, body)
  std::vector<std::string> vars;        // For targets / Set target (name[, attr])
  NodeP filter;                         // For ... if cond
  std::vector<StmtP> body, else_body;   // For
};

// Lexes and parses a template; throws "[chat-template] line:col: ..." on a syntax error.
std::vector<StmtP> parse_template(const std::string& source);

}  // namespace rlx::models::jinja
