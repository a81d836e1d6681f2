// base/options.h: a program's (or subcommand's) options as one table, from which
// both the checked parse of its arguments and its usage text are made (so the
// two cannot drift). `megascale` (cli/), megascale-train and megascale-micro
// (engine/tools/) all parse their arguments this way.
//
// parse_args() (on CLI11) splits the arguments into positionals, flags
// (`--json`) and options taking a value (`--gpus 8` or `--gpus=8`; given twice,
// the last counts, and a kRepeated one keeps every value: `--set a=1 --set b=2`);
// anything else starting with `-` is a UsageError naming it (a negative number
// such as `--fail-at -1` is a value). Then every value is checked against its
// row: a kOutFile path must be writable (else OutputOptionError); numbers are
// read by our own strict readers (CLI11's would read "010" as
// octal), whole-string, finite, in range; a rejected one is the UsageError
// "NAME expects WHAT, got 'VALUE'" (WHAT the row's `expects`, or made from its
// kind and range). The caller turns a UsageError into exit status 2 and the
// usage (run_cli in cli/commands.h).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace megascale::base {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A kOutFile option whose path cannot be written: "--write /x/r.md: cannot write
// (No such file or directory)". The command line is right, the path is not:
// the CLI says it without the usage (exit 2, as every bad input).
class OutputOptionError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

enum class Kind {
  kFlag,      // --json: given or not
  kText,      // --scenario FILE: a string
  kOutFile,   // --write FILE: a file the command writes; checked before the command
              // runs (base::check_output_path: its folder exists and takes files, it
              // is not a folder; OutputOptionError), so that a bad path does not lose
              // the work done before the write. "-" (stdout, where a command takes
              // it) is not checked.
  kRepeated,  // --set KEY=VALUE: every value given, in order
  kChoice,    // --fidelity event|analytical: one of the words of `value`
  kInt,       // --gpus N: a decimal integer in [min, max]
  kNumber,    // --jitter SIGMA: a finite number in [min, max]
  kFraction,  // --tolerance 2%: a share, "0.02" or "2%", in [min, max]
};

constexpr double kNoLimit = std::numeric_limits<double>::infinity();
constexpr double kAboveZero = std::numeric_limits<double>::denorm_min();  // min of "positive"
constexpr double kMaxInt = static_cast<double>(std::numeric_limits<int32_t>::max());

// One row of a command's table.
struct Option {
  std::string name;   // "--gpus"
  Kind kind;
  std::string value;  // its placeholder in the usage ("N", "FILE.svg"); kChoice: "event|analytical"
  std::string help;   // the usage's description ('\n' starts another line)
  double min = -kNoLimit, max = kNoLimit;  // kInt, kNumber, kFraction
  std::string expects = "";                // rejection text in place of the one made from the range
};

// A program or command (`megascale-train`, `simulate`, `net collective`): the
// usage line, what it does and its options.
struct Command {
  std::string name;      // "simulate", "net collective" (after "megascale ")
  std::string synopsis;  // the words after the name in the usage line: "FILE [--json] ..."
  std::string summary;   // what it does ('\n' between lines)
  std::vector<Option> options;
};

struct ParsedArgs {
  std::vector<std::string> args;  // as given
  std::vector<std::string> positional;

  bool on(const std::string& flag) const { return flags.count(flag) > 0; }
  bool has(const std::string& name) const { return values.count(name) > 0; }
  // The (last) value of an option; REQUIRES has(name).
  const std::string& text(const std::string& name) const { return values.at(name); }
  std::string text(const std::string& name, const std::string& fallback) const {
    return has(name) ? values.at(name) : fallback;
  }
  // A kInt option's value, checked against its range.
  int64_t integer(const std::string& name, int64_t fallback) const {
    return has(name) ? integers.at(name) : fallback;
  }
  // A kNumber or kFraction option's value, checked against its range.
  double number(const std::string& name, double fallback) const { return has(name) ? numbers.at(name) : fallback; }
  // Every value of a kRepeated option such as --set (empty if none).
  std::vector<std::string> all(const std::string& name) const {
    auto it = repeated.find(name);
    return it == repeated.end() ? std::vector<std::string>{} : it->second;
  }

  std::set<std::string> flags;
  std::map<std::string, std::string> values;
  std::map<std::string, std::vector<std::string>> repeated;
  std::map<std::string, int64_t> integers;
  std::map<std::string, double> numbers;
};

ParsedArgs parse_args(const Command& command, const std::vector<std::string>& args);

// "usage: PROGRAM NAME SYNOPSIS", the summary, and a line per option.
std::string usage_text(const Command& command, const std::string& program = "megascale");

// read(): a library's reader of an option's text (model::parse_layout_constraints
// for --fix); its std::invalid_argument becomes the UsageError "NAME: reason".
template <typename F>
auto read_option(const std::string& name, F read) {
  try {
    return read();
  } catch (const std::invalid_argument& e) {
    throw UsageError(name + ": " + e.what());
  }
}

// "3,17,250" -> {3, 17, 250}: distinct integers >= 0; a UsageError naming
// `name` otherwise (a rank given twice would be slowed once, silently).
std::vector<int> int_list(const std::string& name, const std::string& text);
// "a,,b" -> {"a", "b"}.
std::vector<std::string> split_list(const std::string& text);

}  // namespace megascale::base
