// cli/args.h: command-line options of one subcommand.
//
// parse_args() (on CLI11) splits arguments into positionals, boolean switches
// (`--json`) and options taking a value (`--gpus 8` or `--gpus=8`; given twice,
// `values` keeps the last and `repeated` all, e.g. `--set a=1 --set b=2`); anything
// else starting with `-` is a UsageError naming it (a negative number such as
// `--fail-at -1` is a value). Commands turn a UsageError into exit status 2 and
// the usage text.
#pragma once

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace megascale::cli {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ParsedArgs {
  std::vector<std::string> positional;
  std::set<std::string> switches;
  std::map<std::string, std::string> values;       // the last value of each option
  std::map<std::string, std::vector<std::string>> repeated;  // every value, in order

  // Every value given to a repeatable option such as --set (empty if none).
  std::vector<std::string> all(const std::string& name) const {
    auto it = repeated.find(name);
    return it == repeated.end() ? std::vector<std::string>{} : it->second;
  }

  bool has(const std::string& name) const { return values.count(name) > 0; }
  bool on(const std::string& name) const { return switches.count(name) > 0; }
};

ParsedArgs parse_args(const std::vector<std::string>& args, const std::set<std::string>& switches,
                      const std::set<std::string>& valued);

}  // namespace megascale::cli
