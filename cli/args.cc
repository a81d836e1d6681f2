// cli/args.cc: option parsing shared by the subcommands, on CLI11.
//
// One CLI::App per call: a flag per switch, an option per valued name taking one
// string each time it is given (TakeAll keeps every occurrence, in order), and a
// catch-all positional. CLI11 reads a value that looks like a negative number
// (`--fail-at -1`, `--jitter -0.1`) as the value, not as an option. Its errors
// become UsageErrors naming the option.
#include "cli/args.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <utility>

namespace megascale::cli {

namespace {

// CLI11's ArgumentMismatch names the option but not in our words: "--gpus: 1
// required TEXT missing" (no value) or "json was given a disallowed flag
// override" (`--json=1`).
UsageError usage_error(const CLI::Error& e, const std::set<std::string>& switches,
                       const std::set<std::string>& valued) {
  const std::string what = e.what();
  for (const std::string& name : valued)
    if (what.rfind(name + ":", 0) == 0) return UsageError(name + " needs a value");
  for (const std::string& name : switches)
    if (what.rfind(name.substr(2) + " ", 0) == 0 && what.find("flag override") != std::string::npos)
      return UsageError(name + " takes no value");
  return UsageError(what);
}

}  // namespace

ParsedArgs parse_args(const std::vector<std::string>& args, const std::set<std::string>& switches,
                      const std::set<std::string>& valued) {
  CLI::App app;
  app.set_help_flag();     // --help is handled by the commands (usage text)
  app.allow_extras(true);  // unknown options are reported below, in our words
  std::vector<std::pair<std::string, CLI::Option*>> flags, options;
  for (const std::string& name : switches) flags.emplace_back(name, app.add_flag(name)->disable_flag_override());
  for (const std::string& name : valued)
    options.emplace_back(name, app.add_option(name)->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll));
  ParsedArgs p;
  app.add_option("positional", p.positional);

  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses from the back
  try {
    app.parse(reversed);
  } catch (const CLI::Error& e) {
    throw usage_error(e, switches, valued);
  }
  const std::vector<std::string> extra = app.remaining();
  if (!extra.empty()) throw UsageError("unknown option '" + extra.front() + "'");

  for (const auto& [name, flag] : flags)
    if (flag->count() > 0) p.switches.insert(name);
  for (const auto& [name, option] : options) {
    if (option->count() == 0) continue;
    p.repeated[name] = option->results();
    p.values[name] = p.repeated[name].back();
  }
  return p;
}

}  // namespace megascale::cli
