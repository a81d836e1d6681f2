// cli/args.cc: option parsing shared by the subcommands.
#include "cli/args.h"

namespace megascale::cli {

ParsedArgs parse_args(const std::vector<std::string>& args, const std::set<std::string>& switches,
                      const std::set<std::string>& valued) {
  ParsedArgs p;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) {
      p.positional.push_back(a);
      continue;
    }
    std::string name = a, value;
    const size_t eq = a.find('=');
    if (eq != std::string::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
    }
    if (switches.count(name)) {
      if (eq != std::string::npos) throw UsageError(name + " takes no value");
      p.switches.insert(name);
    } else if (valued.count(name)) {
      if (eq == std::string::npos) {
        if (i + 1 >= args.size()) throw UsageError(name + " needs a value");
        value = args[++i];
      }
      p.values[name] = value;
      p.repeated[name].push_back(value);
    } else {
      throw UsageError("unknown option '" + a + "'");
    }
  }
  return p;
}

}  // namespace megascale::cli
