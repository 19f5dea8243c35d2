// The command-line parser behind tools/cli_table.cpp: CLI11 splits the words (--flag value,
// --flag=value, "--", repeated flags) and runs a checker per value built from the table; the
// help texts and README table are rendered from the same table.
#include "cli.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <list>
#include <sstream>

namespace rlx::cli {

namespace fs = std::filesystem;

#ifndef RLX_VERSION
#define RLX_VERSION "unknown"
#endif
const char* version() { return RLX_VERSION; }

// ---- the table's building blocks --------------------------------------------------------------

Flag flag(std::string name, std::string help) {
  Flag f;
  f.name = std::move(name), f.help = std::move(help);
  return f;
}
static Flag valued(Type t, std::string name, std::string value, std::string help, std::string def) {
  Flag f = flag(std::move(name), std::move(help));
  f.type = t, f.value = std::move(value), f.def = std::move(def);
  return f;
}
Flag integer(std::string name, std::string value, std::string help, std::string def, Range r) {
  return valued(Type::Int, std::move(name), std::move(value), std::move(help), std::move(def)).in(r);
}
Flag real(std::string name, std::string value, std::string help, std::string def, Range r) {
  return valued(Type::Float, std::move(name), std::move(value), std::move(help), std::move(def)).in(r);
}
Flag text(std::string name, std::string value, std::string help, std::string def) {
  return valued(Type::String, std::move(name), std::move(value), std::move(help), std::move(def));
}
Flag choice(std::string name, std::string help, std::string def, std::vector<std::string> choices) {
  std::string v;
  for (auto& c : choices) v += (v.empty() ? "" : "|") + c;
  Flag f = valued(Type::String, std::move(name), v, std::move(help), std::move(def));
  f.choices = std::move(choices);
  return f;
}
Flag path(std::string name, std::string value, std::string help, std::string def) {
  return valued(Type::Path, std::move(name), std::move(value), std::move(help), std::move(def));
}
Flag list(std::string name, std::string value, std::string help, Item item, std::string def) {
  return valued(Type::List, std::move(name), std::move(value), std::move(help), std::move(def)).items(item);
}

const Flag* Command::find(const std::string& n) const {
  for (auto& f : flags)
    if (f.name == n) return &f;
  return nullptr;
}

const Command* find_command(const std::string& name) {
  for (auto& c : commands())
    if (c.name == name) return &c;
  return nullptr;
}

static std::string num(double v) {
  if (v == std::floor(v) && std::abs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string Range::str() const {
  bool has_lo = std::isfinite(lo), has_hi = std::isfinite(hi);
  if (has_lo && has_hi)
    return std::string("in ") + (lo_open ? "(" : "[") + num(lo) + ", " + num(hi) + (hi_open ? ")" : "]");
  if (has_lo) return (lo_open ? "> " : ">= ") + num(lo);
  if (has_hi) return (hi_open ? "< " : "<= ") + num(hi);
  return "";
}

// ---- values -----------------------------------------------------------------------------------

std::optional<int64_t> to_int(const std::string& s) {
  int64_t v = 0;
  const char* b = s.data() + (!s.empty() && s[0] == '+');
  auto [p, ec] = std::from_chars(b, s.data() + s.size(), v, 10);
  if (ec != std::errc() || p != s.data() + s.size() || b == s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<double> to_number(const std::string& s) {
  double v = 0;
  const char* b = s.data() + (!s.empty() && s[0] == '+');
  auto [p, ec] = std::from_chars(b, s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || b == s.data() + s.size() || !std::isfinite(v))
    return std::nullopt;
  return v;
}

static bool in_range(const Range& r, double v) {
  return (r.lo_open ? v > r.lo : v >= r.lo) && (r.hi_open ? v < r.hi : v <= r.hi);
}

static std::string joined(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

static bool ends_with(const std::string& s, const std::string& e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}

static std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> r;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) r.push_back(item);
  return r;
}

// "" when `v` is a good value of `f`, else what is wrong with it.
static std::string check_int(const Flag& f, const std::string& v) {
  auto i = to_int(v);
  if (!i) return "'" + v + "' is not an integer";
  if (f.range && !in_range(*f.range, static_cast<double>(*i)))
    return v + " is out of range: it must be " + f.range->str();
  return "";
}

static std::string check_item(const Flag& f, const std::string& v) {
  switch (f.item) {
    case Item::Int:
      return check_int(f, v);
    case Item::NameInt:
    case Item::NamePath: {
      auto eq = v.find('=');
      std::string what = f.item == Item::NameInt ? "name=integer" : "name=path";
      if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
        return "expects " + what + ", got '" + v + "'";
      if (f.item == Item::NamePath) return "";
      std::string e = check_int(f, v.substr(eq + 1));
      return e.empty() ? "" : v + ": " + e;
    }
    case Item::Plain:
      if (!f.choices.empty() && std::find(f.choices.begin(), f.choices.end(), v) == f.choices.end())
        return "unknown " + (f.noun.empty() ? std::string("value") : f.noun) + " '" + v + "'" +
               closest(v, f.choices) + "; one of " + joined(f.choices);
      return "";
  }
  return "";
}

static std::string check_value(const Flag& f, const std::string& v) {
  if (v.empty() && !f.implicit.empty()) return "";
  if (v.empty()) return "needs a value (" + f.value + ")";
  if (v.rfind("--", 0) == 0 && !(f.type == Type::Int || f.type == Type::Float))
    return "needs a value (" + f.value + "), got the flag '" + v + "'";
  switch (f.type) {
    case Type::Bool:
      return "";
    case Type::Int:
      return check_int(f, v);
    case Type::Float: {
      auto d = to_number(v);
      if (!d) return "'" + v + "' is not a number";
      if (f.range && !in_range(*f.range, *d)) return v + " is out of range: it must be " + f.range->str();
      return "";
    }
    case Type::String:
      return check_item(f, v);
    case Type::Path:
      if (!f.off.empty() && v == f.off) return "";
      if (f.item == Item::NamePath) return check_item(f, v);
      if (f.must_exist && !fs::exists(v)) return "'" + v + "' does not exist";
      if (!f.extensions.empty() &&
          std::none_of(f.extensions.begin(), f.extensions.end(), [&](auto& e) { return ends_with(v, e); }))
        return "'" + v + "' must end in " + joined(f.extensions, " or ");
      return "";
    case Type::List: {
      auto parts = split_commas(v);
      if (parts.empty()) return "needs a value (" + f.value + ")";
      for (auto& p : parts)
        if (std::string e = check_item(f, p); !e.empty()) return e;
      return "";
    }
  }
  return "";
}

// The folder of an output file must exist and be writable, and the path must not be a folder.
static void check_output_path(const Command& c, const Flag& f, const std::string& v) {
  if (v.empty() || (!f.off.empty() && v == f.off)) return;
  fs::path p(v), dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    usage_fail(c.name, " --", f.name, ": cannot write '", v, "': folder '", dir.string(), "' does not exist");
  if (::access(dir.c_str(), W_OK) != 0)
    usage_fail(c.name, " --", f.name, ": cannot write '", v, "': folder '", dir.string(),
               "' is not writable");
  if (fs::is_directory(p, ec)) usage_fail(c.name, " --", f.name, ": cannot write '", v, "': it is a folder");
}

void check_output(const Args& a, const std::string& name) {
  const Flag& f = a.spec(name);
  check_output_path(*a.cmd, f, a.get(name));
}

// ---- Args -------------------------------------------------------------------------------------

const Flag& Args::spec(const std::string& k) const {
  const Flag* f = cmd ? cmd->find(k) : nullptr;
  if (!f) fail("[cli] internal: '", cmd ? cmd->name : "?", "' has no flag --", k, " in the command table");
  return *f;
}
bool Args::has(const std::string& k) const {
  spec(k);
  return flags.count(k) > 0;
}
std::string Args::get(const std::string& k) const {
  const Flag& f = spec(k);
  auto it = flags.find(k);
  if (it == flags.end() || it->second.empty()) return f.def;
  const std::string& v = it->second.back();
  return v.empty() && !f.implicit.empty() ? f.implicit : v;
}
int64_t Args::integer(const std::string& k) const {
  std::string v = get(k);
  auto i = to_int(v);
  if (!i) fail("[cli] internal: --", k, " has no integer value ('", v, "')");
  return *i;
}
double Args::number(const std::string& k) const {
  std::string v = get(k);
  auto d = to_number(v);
  if (!d) fail("[cli] internal: --", k, " has no numeric value ('", v, "')");
  return *d;
}
std::vector<std::string> Args::all(const std::string& k) const {
  spec(k);
  auto it = flags.find(k);
  return it == flags.end() ? std::vector<std::string>{} : it->second;
}
std::vector<std::string> Args::items(const std::string& k) const {
  std::vector<std::string> r;
  auto vals = all(k);
  if (vals.empty() && !spec(k).def.empty()) vals.push_back(spec(k).def);
  for (auto& v : vals)
    for (auto& p : split_commas(v)) r.push_back(p);
  return r;
}

// ---- parsing ----------------------------------------------------------------------------------

static size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> d(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) d[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t prev = d[0];
    d[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cur = d[j];
      d[j] = std::min({d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1)});
      prev = cur;
    }
  }
  return d[b.size()];
}

std::string closest(const std::string& s, const std::vector<std::string>& names) {
  std::string best;
  size_t bd = 3;  // suggest only close spellings
  for (auto& n : names) {
    size_t d = edit_distance(s, n);
    if (s.size() >= 3 && (n.rfind(s, 0) == 0 || s.rfind(n, 0) == 0)) d = std::min<size_t>(d, 1);
    if (d < bd) bd = d, best = n;
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

// A one-letter flag is also spelled with one dash (`rlx launch -n 4`, as mpirun spells it).
std::string flag_names(const Flag& f) { return f.name.size() == 1 ? "-" + f.name + ",--" + f.name : "--" + f.name; }

Args parse_args(const Command& cmd, int argc, char** argv, int first) {
  Args a;
  a.cmd = &cmd;
  CLI::App app;
  app.set_help_flag();
  app.allow_extras(true);  // unknown words are reported below, with a suggestion
  app.add_flag("-h,--help", a.help);
  // CLI11 binds each option to storage that outlives the parse.
  std::list<std::vector<std::string>> values;
  std::list<bool> bools;
  std::vector<std::pair<const Flag*, CLI::Option*>> opts;
  for (const Flag& f : cmd.flags) {
    CLI::Option* o;
    if (f.type == Type::Bool) {
      o = app.add_flag(flag_names(f), bools.emplace_back(false))->disable_flag_override();
    } else {
      o = app.add_option(flag_names(f), values.emplace_back())
              ->allow_extra_args(false)
              ->take_all()
              ->type_name(f.value)
              ->check(CLI::Validator([&f](std::string& v) { return check_value(f, v); }, ""));
      if (!f.implicit.empty()) o->expected(0, 1);
    }
    opts.emplace_back(&f, o);
  }
  app.add_option("args", a.positional);
  std::vector<std::string> words;  // CLI11 takes them last-first
  for (int i = argc - 1; i >= first; --i) words.emplace_back(argv[i]);
  try {
    app.parse(words);
  } catch (const CLI::ArgumentMismatch& e) {
    // CLI11's message starts with the option's name: "--max-new: 1 required ... missing",
    // "report was given a disallowed flag override".
    std::string m = e.what();
    std::string name = m.substr(0, m.find_first_of(": "));
    name = name.substr(name.find_first_not_of('-') == std::string::npos ? 0 : name.find_first_not_of('-'));
    const Flag* f = cmd.find(name);
    if (f && f->type == Type::Bool) usage_fail(cmd.name, " --", name, " takes no value");
    if (f) usage_fail(cmd.name, " --", name, " needs a value (", f->value, ")");
    usage_fail(cmd.name, ": ", m);
  } catch (const CLI::ParseError& e) {
    usage_fail(cmd.name, " ", e.what());
  }
  if (a.help) return a;
  std::vector<std::string> known;
  for (auto& f : cmd.flags) known.push_back("--" + f.name);
  for (auto& w : app.remaining()) {
    if (w == "--") continue;
    std::string name = w.substr(0, w.find('='));
    usage_fail(cmd.name, ": unknown flag '", name, "'", closest(name, known));
  }
  for (auto& [f, o] : opts) {
    if (f->type == Type::Bool) {
      if (o->count() > 0) a.flags[f->name].push_back("");
      continue;
    }
    if (o->count() == 0) continue;
    std::vector<std::string> given = o->as<std::vector<std::string>>();
    if (given.empty()) given.push_back("");  // a bare --flag with an implicit value
    if (given.size() > 1 && !f->repeatable)
      usage_fail(cmd.name, " --", f->name, " given ", given.size(), " times; it takes one value");
    a.flags[f->name] = given;
  }
  for (auto& f : cmd.flags)
    if (f.required && !a.flags.count(f.name)) usage_fail(cmd.name, " needs --", f.name, " ", f.value);
  // Positional counts: a single catch-all list, split by the table.
  int lo = 0, hi = 0;
  for (auto& p : cmd.args) lo += p.min, hi = (hi < 0 || p.max < 0) ? -1 : hi + p.max;
  int n = static_cast<int>(a.positional.size());
  if (n < lo) {
    int k = 0;  // the first positional not given
    for (auto& p : cmd.args)
      if ((k += p.min) > n) usage_fail(cmd.name, " needs ", p.name, " (", p.help, ")");
  }
  if (hi >= 0 && n > hi) {
    const std::string& extra = a.positional[static_cast<size_t>(hi)];
    if (extra.rfind("-", 0) == 0) usage_fail(cmd.name, ": unknown flag '", extra, "'");
    std::string takes = hi == 0   ? std::string("no arguments")
                        : hi == 1 ? "one argument (" + cmd.args[0].name + ")"
                                  : "at most " + std::to_string(hi) + " arguments";
    usage_fail(cmd.name, " takes ", takes, "; got '", extra, "' too");
  }
  for (auto& [name, vals] : a.flags) {
    const Flag& f = *cmd.find(name);
    if (f.output)
      for (auto& v : vals) check_output_path(cmd, f, v.empty() ? f.implicit : v);
  }
  return a;
}

// ---- help -------------------------------------------------------------------------------------

static std::string flag_head(const Flag& f) {
  std::string h = "--" + f.name;
  if (f.type == Type::Bool) return h;
  if (!f.implicit.empty()) return h + "[=" + f.value + "]";
  return h + " " + f.value;
}

static std::string flag_facts(const Flag& f) {
  std::vector<std::string> facts;
  std::string r = f.range ? f.range->str() : "";
  switch (f.type) {
    case Type::Int:
      facts.push_back("integer" + (r.empty() ? "" : " " + r));
      break;
    case Type::Float:
      facts.push_back("number" + (r.empty() ? "" : " " + r));
      break;
    case Type::List:
      if (f.item == Item::Int)
        facts.push_back("integers" + (r.empty() ? "" : " " + r));
      else if (f.item == Item::NameInt)
        facts.push_back("each N " + r);
      else
        facts.push_back("comma-separated");
      break;
    default:
      break;
  }
  if (!f.choices.empty() && f.value.find('|') == std::string::npos)
    facts.push_back("one of " + joined(f.choices, " "));
  if (!f.extensions.empty()) facts.push_back(joined(f.extensions, " or "));
  if (f.required) facts.push_back("required");
  if (!f.def.empty()) facts.push_back("default " + f.def);
  if (!f.implicit.empty()) facts.push_back("bare: " + f.implicit);
  if (!f.off.empty()) facts.push_back(f.off + ": not written");
  if (f.repeatable) facts.push_back("repeatable");
  return facts.empty() ? "" : " [" + joined(facts, "; ") + "]";
}

static void wrapped(std::ostringstream& os, const std::string& head, const std::string& body, size_t col) {
  std::string line = "  " + head;
  line += line.size() + 1 < col ? std::string(col - line.size(), ' ') : "\n" + std::string(col, ' ');
  size_t width = 100, at = line.size() - line.rfind('\n') - 1;
  std::istringstream words(body);
  std::string w;
  bool first = true;
  while (words >> w) {
    if (!first && at + 1 + w.size() > width) {
      line += "\n" + std::string(col, ' ');
      at = col;
    } else if (!first) {
      line += " ";
      ++at;
    }
    line += w;
    at += w.size();
    first = false;
  }
  os << line << "\n";
}

std::string command_help(const Command& c) {
  std::ostringstream os;
  os << "rlx " << c.name << ": " << c.summary << "\n\nusage: " << c.usage << "\n";
  if (!c.args.empty()) {
    os << "\narguments:\n";
    for (auto& p : c.args) wrapped(os, p.name + (p.max < 0 ? " ..." : ""), p.help, 26);
  }
  os << "\nflags:\n";
  for (auto& f : c.flags) wrapped(os, flag_head(f), f.help + flag_facts(f), 26);
  wrapped(os, "-h, --help", "this help", 26);
  if (!c.notes.empty()) os << "\n" << c.notes << "\n";
  if (!c.doc.empty()) os << "\nmore: " << c.doc << "\n";
  return os.str();
}

std::string overview() {
  std::ostringstream os;
  os << "rlx " << version()
     << " — tensor compiler and runtime\n\nusage: rlx COMMAND [ARGS] [FLAGS]\n\ncommands:\n";
  for (auto& c : commands()) wrapped(os, c.name, c.summary, 15);
  os << "\n`rlx COMMAND --help` lists a command's arguments and flags; `rlx --version` prints the version.\n"
        "Usage errors exit 2, failures 1. env: RLX_DISPATCH_REPORT=1 prints the dispatch table, "
        "RLX_PROFILE=1 "
        "kernel times.\n";
  return os.str();
}

std::string markdown_table() {
  auto esc = [](const std::string& s) {
    std::string r;
    for (char ch : s) r += ch == '|' ? std::string("\\|") : std::string(1, ch);
    return r;
  };
  std::ostringstream os;
  os << "| command | what it does |\n|---|---|\n";
  for (auto& c : commands()) {
    os << "| `" << esc(c.usage) << "` | " << esc(c.summary);
    if (!c.doc.empty()) os << " ([" << c.doc << "](" << c.doc << "))";
    os << " |\n";
  }
  return os.str();
}

}  // namespace rlx::cli
