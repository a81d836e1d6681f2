// cli/check_command.cc: `megascale check DIR|FILE... --golden FILE
// [--tolerance 2%] [--update] [--fidelity event|analytical] [--json]`: a CI gate
// over a team's own scenarios (calibrate/golden.h holds the comparison).
//
// Exit codes: 0 every scenario matches its stored figures (or --update wrote
// them), 1 a regression (or a new / removed scenario), 2 bad input.
#include <cmath>
#include <filesystem>
#include <map>

#include "base/text_file.h"
#include "calibrate/golden.h"
#include "cli/commands.h"
#include "report/estimate_report.h"
#include "report/golden_report.h"

namespace megascale::cli {
namespace {

namespace fs = std::filesystem;

// Default --tolerance: 2% (issue 13's example). The event simulation is
// deterministic for a given build, so any tolerance above zero only absorbs
// intended model changes below it.
constexpr double kDefaultTolerance = 0.02;

int check(const ParsedArgs& p, std::ostream& out, std::ostream& err) {
  if (p.positional.empty()) throw UsageError("check expects scenario DIRs or FILEs");
  if (!p.has("--golden")) throw UsageError("check needs --golden FILE (create it with --update)");
  if (p.has("--set")) throw UsageError("check compares the scenarios as stored; --set would gate a what-if");
  const std::string golden_path = p.text("--golden");
  const double tolerance = p.number("--tolerance", kDefaultTolerance);
  const fs::path golden_dir = fs::absolute(golden_path).parent_path();

  // calibrate/golden.h: the stored figures and the fidelity to run at
  const auto [golden, fidelity] = calibrate::open_golden(golden_path, p.text("--fidelity", ""), p.on("--update"));

  const std::map<std::string, base::Json> now = calibrate::scenario_metrics(
      calibrate::scenario_files(p.positional), golden_dir.string(), fidelity,
      [&](size_t i, size_t n, const std::string& f) { err << "check: " << i + 1 << "/" << n << " " << f << "\n" << std::flush; });
  auto exists = [&](const std::string& key) { return fs::exists(golden_dir / key); };

  if (p.on("--update")) {
    const base::Json updated = calibrate::updated_golden(golden, now, fidelity, exists);
    base::write_text_or_throw(golden_path, updated.dump(2) + "\n");
    err << "check: stored " << now.size() << " scenario(s) at " << fidelity << " fidelity in " << golden_path
        << " (" << updated["scenarios"].size() << " in all)\n";
    if (p.on("--json")) out << report::report_json({{"updated", true}, {"golden", golden_path}, {"stored", now.size()}}) << "\n";
    return 0;
  }

  const calibrate::GateResult r = calibrate::compare_with_golden(golden, golden_path, now, tolerance, exists);
  out << (p.on("--json") ? report::report_json(report::gate_json(r, golden_path, fidelity, tolerance)) + "\n"
                         : report::gate_text(r, golden_path, fidelity, tolerance));
  return r.pass() ? 0 : 1;
}

}  // namespace

CommandEntry check_command() {
  return {{"check", "DIR|FILE... --golden FILE [options]",
           "a CI gate: run each scenario (every *.toml under a DIR) and compare with the\n"
           "stored results key by key; exit 1 on a change beyond the tolerance, a new or a\n"
           "removed scenario",
           {{"--golden", Kind::kText, "FILE", "the stored results (JSON)"},
            {"--tolerance", Kind::kFraction, "2%", "largest relative change that passes (default 2%)", 0,
             std::nextafter(1.0, 0.0), "a share such as 2% or 0.02 (0 to under 100%)"},
            {"--update", Kind::kFlag, "", "record the results in the golden file"},
            fidelity_option("default: the golden file's, else event"), json_flag(),
            {"--set", Kind::kRepeated, "KEY=VALUE", "refused: the gate compares the scenarios as stored"}}},
          check};
}

}  // namespace megascale::cli
