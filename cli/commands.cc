// cli/commands.cc: the dispatch of `megascale COMMAND`, the usage made from the
// commands' tables, and compare and validate (parse -> call -> print).
#include "cli/commands.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "base/json.h"
#include "base/text_file.h"
#include "calibrate/nccl_tests.h"
#include "calibrate/validation.h"
#include "model/breakdown_chart.h"
#include "model/scenario.h"
#include "network/topology.h"
#include "report/estimate_report.h"
#include "report/validation_report.h"
#include "sim/system_comparison.h"

namespace megascale::cli {

Option json_flag(const std::string& help) { return {"--json", Kind::kFlag, "", help}; }

Option fidelity_option(const std::string& help) {
  return {"--fidelity", Kind::kChoice, "event|analytical", help};
}

Option set_option() {
  return {"--set", Kind::kRepeated, "KEY=VALUE",
          "override one scenario key before it is checked (repeatable;\n"
          "a TOML value, a bare word is a string): --set parallel.dp=96"};
}

namespace {

std::string source_dir() {
  if (const char* env = std::getenv("MEGASCALE_ROOT")) return env;
  return MEGASCALE_SOURCE_DIR;
}

int compare(const ParsedArgs& p, std::ostream& out, std::ostream& err) {
  if (p.positional.size() > 1) throw UsageError("compare expects at most one scenario FILE");
  if (p.positional.empty() && p.has("--set")) throw UsageError("--set needs a scenario FILE");
  const std::string fidelity = p.text("--fidelity", "event");
  std::optional<model::Scenario> job;
  if (!p.positional.empty()) job = model::load_scenario(p.positional[0], p.all("--set"));
  const sim::SystemComparison c = sim::compare_systems(job, fidelity);
  const model::Estimate &ea = c.megatron_estimate, &eb = c.megascale_estimate;
  if (p.has("--chart")) {
    const std::string& path = p.text("--chart");
    const std::string title = c.megatron.model.name + " on " + std::to_string(c.megatron.parallel.gpus()) + " x " +
                              c.megatron.hardware.gpu + ": Megatron-LM vs MegaScale (" + fidelity + ")";
    base::write_text_or_throw(path, model::breakdown_svg(title, {{"Megatron-LM", ea.breakdown, ea.iteration_time_s},
                                                                 {"MegaScale", eb.breakdown, eb.iteration_time_s}}));
    err << "wrote " << path << "\n";
  }
  out << (p.on("--json") ? report::report_json(report::compare_json(c.megatron, ea, c.megascale, eb, fidelity)) + "\n"
                         : report::compare_text(c.megatron, ea, c.megascale, eb, fidelity));
  return 0;
}

int validate(const ParsedArgs& p, std::ostream& out, std::ostream& err) {
  if (!p.positional.empty()) throw UsageError("validate takes no positional arguments");
  if (p.on("--write") && p.has("--set"))
    throw UsageError("--write regenerates the reference report from the unchanged scenarios; drop --set");
  if (p.on("--write") && p.has("--dir"))
    throw UsageError("--write regenerates results/validation.md from scenarios/paper/ only; drop --dir");
  const std::string dir = p.text("--dir", source_dir() + "/scenarios/paper");
  const calibrate::ValidationReport r = calibrate::run_validation(dir, p.text("--fidelity", "event"), p.all("--set"));
  if (p.on("--write")) {
    const std::string path = source_dir() + "/results/validation.md";
    base::write_text_or_throw(path, calibrate::validation_markdown(r));
    err << "wrote " << path << "\n";
  }
  out << (p.on("--json") ? report::report_json(report::validation_json(r)) + "\n" : calibrate::validation_markdown(r));
  // A CI gate: 1 when the report's fidelity misses a bound (the report says which).
  return calibrate::meets(r.summary, calibrate::AccuracyBounds{}) ? 0 : 1;
}

CommandEntry compare_command() {
  return {{"compare", "[FILE] [options]",
           "Megatron-LM vs MegaScale on the same job, side by side (default: the built-in\n"
           "175B on 12,288 A100s; the file's own switches are replaced)",
           {json_flag(), fidelity_option("event (SimGrid, the default) or analytical (closed form)"),
            {"--chart", Kind::kOutFile, "FILE.svg", "both breakdowns as stacked bars on one axis from 0 s"},
            set_option()}},
          compare};
}

CommandEntry validate_command() {
  return {{"validate", "[options]", "predicted vs published MegaScale figures (scenarios/paper/)",
           {json_flag(), {"--write", Kind::kFlag, "", "regenerate results/validation.md"},
            {"--dir", Kind::kText, "DIR", "the scenarios to validate (default scenarios/paper)"},
            fidelity_option("event (the default) or analytical"),
            {"--set", Kind::kRepeated, "KEY=VALUE", "a what-if applied to every scenario (repeatable)"}}},
          validate};
}

// In usage order.
std::vector<CommandEntry> all_commands() {
  std::vector<CommandEntry> all = {compare_command(), simulate_command(), search_command(), validate_command(),
                                   check_command()};
  for (const CommandEntry& e : net_commands()) all.push_back(e);
  for (const CommandEntry& e : {train_command(), run_command(), plan_command()}) all.push_back(e);
  for (const CommandEntry& e : calibrate_commands()) all.push_back(e);
  return all;
}

bool asks_for_help(const Args& args) {
  return std::find(args.begin(), args.end(), "--help") != args.end() ||
         std::find(args.begin(), args.end(), "-h") != args.end();
}

// The values of every `--set K=V` in `args`.
std::vector<std::string> set_overrides(const Args& args) {
  std::vector<std::string> sets;
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--set") sets.push_back(args[++i]);
  }
  return sets;
}

// Runs a command, turning the kinds of error into exit codes and messages.
int run_command(const CommandEntry& e, const Args& args, std::ostream& out, std::ostream& err) {
  const std::string where = "megascale " + e.command.name + ": ";
  try {
    return e.run(parse_args(e.command, args), out, err);
  } catch (const UsageError& x) {
    err << where << x.what() << "\n\n" << usage_text(e.command) << "(megascale --help: every command and option)\n";
    return 2;
  } catch (const network::FabricError& x) {
    err << where << "cannot build the fabric: parameter " << x.parameter() << ": " << x.reason() << "\n";
    return 2;
  } catch (const model::ScenarioError& x) {
    err << where << x.what() << "\n" << model::overrides_note(x, set_overrides(args));
    return 2;
  } catch (const calibrate::ImportError& x) {  // a measurement file that cannot be read
    err << where << x.what() << "\n";
    return 2;
  } catch (const std::invalid_argument& x) {
    err << where << x.what() << "\n";
    return 2;
  } catch (const std::exception& x) {
    if (!e.other_errors_exit_1) throw;
    err << where << x.what() << "\n";
    return 1;
  }
}

}  // namespace

std::string usage() {
  std::string text = "usage: megascale <command> [options]   (megascale <command> --help: one command)\n";
  for (const CommandEntry& e : all_commands()) text.append("\n").append(usage_text(e.command));
  return text +
         "\nScenario format: scenarios/README.md. Exit codes: 0 ok, 1 no answer (nothing fits),\n"
         "2 bad input.\n";
}

int run_cli(const Args& argv, std::ostream& out, std::ostream& err) {
  if (argv.empty() || argv[0] == "--help" || argv[0] == "-h" || argv[0] == "help") {
    (argv.empty() ? err : out) << usage();
    return argv.empty() ? 2 : 0;
  }
  if (argv[0] == "--version" || argv[0] == "version") {
    out << base::tool_version() << "\n";
    return 0;
  }
  // `net` and `calibrate` are groups: `megascale net collective ...`.
  const std::vector<CommandEntry> all = all_commands();
  std::string group_usage, subcommands;
  for (const CommandEntry& e : all) {
    if (e.command.name.rfind(argv[0] + " ", 0) != 0) continue;
    group_usage.append(group_usage.empty() ? "" : "\n").append(usage_text(e.command));
    subcommands.append(subcommands.empty() ? "" : ", ").append(e.command.name.substr(argv[0].size() + 1));
  }
  const bool group = !group_usage.empty();
  if (group && argv.size() < 2) {
    err << "megascale " << argv[0] << ": missing subcommand\n\n" << group_usage;
    return 2;
  }
  if (group && (argv[1] == "--help" || argv[1] == "-h" || argv[1] == "help")) {
    out << group_usage;
    return 0;
  }
  const std::string name = group ? argv[0] + " " + argv[1] : argv[0];
  const auto e = std::find_if(all.begin(), all.end(), [&](const CommandEntry& c) { return c.command.name == name; });
  if (e == all.end() && group) {
    err << "megascale " << argv[0] << ": unknown subcommand '" << argv[1] << "' (" << subcommands << ")\n\n"
        << group_usage;
    return 2;
  }
  if (e == all.end()) {
    err << "megascale: unknown command '" << name << "'\n\n" << usage();
    return 2;
  }
  const Args rest(argv.begin() + (group ? 2 : 1), argv.end());
  if (asks_for_help(rest)) {
    out << usage_text(e->command);
    return 0;
  }
  return run_command(*e, rest, out, err);
}

}  // namespace megascale::cli
