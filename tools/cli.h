// The `rlx` command table and its parser. Each command lists its arguments and flags (type,
// default, range or choices, repeatable, help); parsing (through CLI11), `rlx --help`,
// `rlx CMD --help` and the README's command table are all generated from it.
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rlx/error.h"

namespace rlx::cli {

// A bad command line: printed as "rlx: [cli] ..." with a pointer to the command's help, exit 2
// (runtime failures exit 1).
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& msg) : Error(msg) {}
};

template <class... A>
[[noreturn]] void usage_fail(const A&... a) {
  std::ostringstream os;
  os << "[cli] ";
  detail::cat(os, a...);
  throw UsageError(os.str());
}

enum class Type { Bool, Int, Float, String, Path, List };
// The shape of a List's items (comma-separated, the flag possibly repeated) or of a Path value.
enum class Item { Plain, Int, NameInt, NamePath };

// Allowed values of an Int or Float (or of a List's Int / NameInt items).
struct Range {
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;
  std::string str() const;  // ">= 1", "in (0, 1]"
};
inline Range at_least(double lo) { return {lo}; }
inline Range above(double lo) { return {lo, std::numeric_limits<double>::infinity(), true, false}; }

struct Flag {
  std::string name;  // without the leading "--"
  Type type = Type::Bool;
  std::string value;  // the value's placeholder in help: "N", "FILE", "SYM=N,..."
  std::string help;
  std::string def;                   // the value when the flag is absent ("": none)
  std::string implicit;              // the value of a bare --flag; when set, the value is optional
  std::vector<std::string> choices;  // the allowed values (of each item, for a List)
  std::optional<Range> range;
  Item item = Item::Plain;
  bool repeatable = false;
  bool required = false;
  bool must_exist = false;  // a Path read by the command: it must exist
  bool output = false;      // a file written: its folder must exist and be writable before work starts
  std::vector<std::string> extensions;  // an output's allowed endings (".npy")
  std::string off;                      // a value that turns the output off ("none")
  std::string noun;                     // what a choice names, for "unknown device 'x'" (default "value")

  Flag& rep() { return repeatable = true, *this; }
  Flag& req() { return required = true, *this; }
  Flag& exists() { return must_exist = true, *this; }
  Flag& out(std::vector<std::string> ext = {}, std::string off_value = "") {
    output = true, extensions = std::move(ext), off = std::move(off_value);
    return *this;
  }
  Flag& bare(std::string v) { return implicit = std::move(v), *this; }
  Flag& items(Item i) { return item = i, *this; }
  Flag& in(Range r) { return range = r, *this; }
  Flag& named(std::string n) { return noun = std::move(n), *this; }
};

Flag flag(std::string name, std::string help);  // a Bool
Flag integer(std::string name, std::string value, std::string help, std::string def, Range r = {});
Flag real(std::string name, std::string value, std::string help, std::string def, Range r = {});
Flag text(std::string name, std::string value, std::string help, std::string def = "");
Flag choice(std::string name, std::string help, std::string def, std::vector<std::string> choices);
Flag path(std::string name, std::string value, std::string help, std::string def = "");
Flag list(std::string name, std::string value, std::string help, Item item = Item::Plain,
          std::string def = "");
Flag device_flag(std::string help = "the device (`rlx devices` lists them)");

struct Positional {
  std::string name, help;
  int min = 1, max = 1;  // how many; max -1: any number
};

struct Args;
struct Command {
  std::string name;
  std::string summary;  // one line, for `rlx --help` and the README
  std::string usage;    // "rlx compile MODEL [--device D] ..."
  std::vector<Positional> args;
  std::vector<Flag> flags;
  std::string notes;  // further lines for `rlx CMD --help`
  std::string doc;    // where it is documented in depth (a repository path), or ""
  int (*run)(const Args&) = nullptr;
  const Flag* find(const std::string& name) const;
};

// Every command, in the order `rlx --help` lists them (tools/cli_table.cpp).
const std::vector<Command>& commands();
const Command* find_command(const std::string& name);

// A parsed command line: the values as given (each checked against the table) and the table's
// defaults for the rest.
struct Args {
  const Command* cmd = nullptr;
  bool help = false;
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> flags;  // given flags; a Bool has one "" value

  bool has(const std::string& k) const;         // given on the command line
  std::string get(const std::string& k) const;  // the last given value, else the default
  int64_t integer(const std::string& k) const;
  double number(const std::string& k) const;
  std::vector<std::string> all(const std::string& k) const;    // every given value, in order
  std::vector<std::string> items(const std::string& k) const;  // ... split at commas
  const Flag& spec(const std::string& k) const;  // throws for a flag the command does not declare
};

// Parses argv[first..] for `cmd`; throws UsageError naming the bad flag or value. Given output
// paths are checked (folder exists and is writable) here, before any work.
Args parse_args(const Command& cmd, int argc, char** argv, int first);
// Checks an output flag's folder (the given value, else its default); UsageError if unusable.
void check_output(const Args& a, const std::string& flag);

// The integer / number forms the parser accepts; nullopt when `s` is not one.
std::optional<int64_t> to_int(const std::string& s);
std::optional<double> to_number(const std::string& s);
// " (did you mean 'x'?)": the closest of `names` to `s`, or "" when none is close.
std::string closest(const std::string& s, const std::vector<std::string>& names);

std::string overview();                    // `rlx --help`
std::string command_help(const Command&);  // `rlx CMD --help`
std::string markdown_table();              // README.md's command table
const char* version();                     // the CMake project version

}  // namespace rlx::cli
